"""The Chroma store: one chunk collection and one document-record collection per namespace
(and, with a Chroma server, a change-log collection: :meth:`ChromaStore.changes_since`).

Embedded ``PersistentClient`` under ``<data_dir>/chroma`` by default; ``HttpClient`` when
``chroma_host`` is set. Telemetry is off and embeddings are always passed in (Chroma's default
embedding function would download a model). Writes are batched under the client's
``get_max_batch_size()``. Metadata is reduced to Chroma's types (str, int, float, bool).

Visibility: a document's record is written after all of its chunks and deleted before them, and
every read goes through the records, so a half-written document is never visible; what a crash
leaves is found by :mod:`docanchor.pending` and removed by :mod:`docanchor.integrity`. Reads never
create a collection: a namespace nobody wrote to reads as empty and leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
import urllib.request
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from docanchor.doc_vectors import EXACT_MAX_CHUNKS, FILL_BATCH_CHUNKS, VectorCache, top_k
from docanchor.embedder import interchangeable
from docanchor.errors import Conflict, DocAnchorError, StoreUnavailable
from docanchor.offsets import decode_runs, encode_runs
from docanchor.pending import PendingMarks
from docanchor.settings import Settings
from docanchor.types import Chunk, DocumentRecord, chunk_id


def collection_name(namespace: str, kind: str) -> str:
    """A valid Chroma collection name for any namespace string (spaces, Chinese, ...).

    Chroma allows 3-512 characters of ``[a-zA-Z0-9._-]`` starting and ending alphanumeric; the
    readable slug is kept short and a hash of the exact namespace keeps names distinct.
    """
    slug = re.sub(r"[^a-z0-9]+", "-", namespace.lower()).strip("-")[:32] or "ns"
    digest = hashlib.sha256(namespace.encode("utf-8")).hexdigest()[:10]
    return f"da-{slug}-{digest}-{kind}"


def embedded_path(settings: Settings) -> Path:
    """Where embedded Chroma keeps its files: ``<data_dir>/chroma``."""
    return Path(settings.data_dir) / "chroma"


def index_exists(settings: Settings) -> bool:
    """True when ``settings`` name a Chroma server or their data dir holds an embedded index;
    looks without creating anything (reading commands must not create a data dir)."""
    return bool(settings.chroma_host) or embedded_path(settings).is_dir()


def unreachable(settings: Settings) -> StoreUnavailable:
    """The error of a vector store that does not answer (503 ``store_unavailable``): the one
    sentence for it, naming the Chroma server's host and port when ``settings`` name one (what
    ``GET /v1/status`` shows as ``store`` too) and where that address came from: the data dir's
    ``store.json`` (``settings.chroma_recorded_in``) or ``DOCANCHOR_CHROMA_HOST``/``_PORT``."""
    if not settings.chroma_host:
        return StoreUnavailable()
    at = f"The Chroma server at {settings.chroma_host}:{settings.chroma_server_port}"
    if settings.chroma_recorded_in is not None:
        return StoreUnavailable(
            f"{at} (the address recorded in {settings.chroma_recorded_in}) is not reachable; check that it is running "
            "(`chroma run`), or if it moved, write its host and port into that file, then try again.")
    return StoreUnavailable(
        f"{at} is not reachable; check that it is running (`chroma run`) and that DOCANCHOR_CHROMA_HOST and "
        "DOCANCHOR_CHROMA_PORT name it, then try again.")


_TRANSPORT_WORDS = ("Connect", "Timeout", "Network")
"""Words in the type name of a transport error (httpx's ``ConnectError``, ``ReadTimeout``, ...)."""


def _transport_failure(exc: BaseException) -> bool:
    """True when ``exc`` or an exception it was raised from or during is a transport error: chromadb's
    ``HttpClient`` turns httpx's ``ConnectError`` into a bare ``ValueError`` ("Could not connect to a
    Chroma server") while it is being constructed."""
    seen: BaseException | None = exc
    for _ in range(8):  # a chain is short; a cycle must not loop
        if seen is None:
            return False
        if isinstance(seen, (ConnectionError, TimeoutError)) or any(w in type(seen).__name__ for w in _TRANSPORT_WORDS):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


@contextmanager
def mapped(settings: Settings) -> Iterator[None]:
    """Map Chroma and transport exceptions to DocAnchor's errors: a store that does not answer to
    :func:`unreachable` (``settings`` name it), anything else to "refused the operation"."""
    try:
        yield
    except DocAnchorError:
        raise
    except Exception as exc:  # chromadb raises many private types; none may leak to callers
        if isinstance(exc, OSError) or _transport_failure(exc):
            raise unreachable(settings) from exc
        raise StoreUnavailable(
            f"The vector store refused the operation ({type(exc).__name__}); try again, and report it if it repeats."
        ) from exc


AUDIT_PAGE = 5000
"""Chunks per read when an audit reads every chunk's ``doc_id``."""
HNSW_CONFIG = {"space": "cosine", "max_neighbors": 32, "ef_construction": 200, "ef_search": 400}
"""Chroma's HNSW settings for chunk collections (a collection keeps those it was created with).

Chroma's defaults (16 neighbours, ef_construction 100, ef_search 100) lost recall when chunks
arrive document by document and one document's vectors crowd together (measured on the
chunking_eval bench's 14,807 chunks, 11,334 of them from one Chinese novel whose mostly-[UNK]
vectors are near one another, added 64 at a time: on average 7.9 of the exact top 40 were missing
for the 373 questions, and for some questions all 40). With these settings 0.25 are missing, at
2.2 ms instead of 1.2 ms per query. Measured by adding the bench index's vectors to fresh
collections the same way and comparing each query's top 40 with an exact search. Collections made
by earlier versions keep Chroma's defaults until ``docanchor reindex`` rebuilds them."""


HEARTBEAT_TIMEOUT_S = 2.0
"""How long :meth:`ChromaStore.health` waits for the Chroma server's heartbeat, in seconds: a
server that answers at all answers it at once (it reads no data), and ``GET /healthz`` must
answer a load balancer's probe quickly."""
HEARTBEAT_PATH = "/api/v2/heartbeat"
"""The Chroma server's heartbeat route (chromadb's ``FastAPI.heartbeat``: ``GET /api/v2/heartbeat``)."""


class ChromaStore:
    """Chunks and document records in Chroma.

    Args:
        settings: where the data lives (``data_dir``) or which server to use.
        model_name: the embedding model recorded on every chunk collection.
        dimension: that model's vector length.
        precision: the embedder's precision (``fp32``, ``bf16``, ``q4``), recorded on every chunk
            collection when it is created; a collection without one was made in ``fp32``.

    Raises:
        Conflict: ``embedding_model_mismatch`` when a namespace was built with another model;
            ``embedding_precision_mismatch`` when with a precision whose vectors do not mix with
            the configured one (see :func:`docanchor.embedder.interchangeable`).
        StoreUnavailable: Chroma cannot be reached or refuses an operation.
    """

    def __init__(self, settings: Settings, model_name: str, dimension: int, precision: str = "fp32") -> None:
        self.settings = settings
        self.model_name = model_name
        self.dimension = dimension
        self.precision = precision
        self._client = None
        self._collections: dict[str, Any] = {}
        self._lock = threading.RLock()
        self.vectors = VectorCache()
        """Chunk vectors of recently searched documents (see :mod:`docanchor.doc_vectors`)."""
        self.pending = PendingMarks(settings.own_dir)
        """Documents whose chunks are written and whose record is not yet (:mod:`docanchor.pending`)."""

    # ------------------------------------------------------------------ client & collections
    @property
    def client(self):
        with self._lock:
            if self._client is None:
                self._client = self._connect()
            return self._client

    def _connect(self):
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        chroma_settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
        with mapped(self.settings):
            if self.settings.chroma_host:
                client = chromadb.HttpClient(
                    host=self.settings.chroma_host, port=self.settings.chroma_server_port, settings=chroma_settings
                )
                client.heartbeat()
                return client
            path = embedded_path(self.settings)
            path.mkdir(parents=True, exist_ok=True)
            return chromadb.PersistentClient(path=str(path), settings=chroma_settings)

    def health(self, timeout_s: float = HEARTBEAT_TIMEOUT_S) -> dict[str, Any] | None:
        """``{"code": "store_unavailable", "message"}`` (:func:`unreachable`) when the Chroma server
        does not answer its heartbeat within ``timeout_s`` seconds; ``None`` when it does, and with
        embedded Chroma (inside this process). One small request, not a query: for ``GET /healthz``."""
        host = self.settings.chroma_host
        if not host:
            return None
        url = f"http://{f'[{host}]' if ':' in host else host}:{self.settings.chroma_server_port}{HEARTBEAT_PATH}"
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as resp:
                if resp.status == 200:
                    return None
        except (OSError, ValueError):  # refused, timed out, an HTTP error status, a malformed host
            pass
        err = unreachable(self.settings)
        return {"code": err.code, "message": err.message}

    def close(self) -> None:
        """Release the Chroma client (its files and connections); a later call reconnects."""
        with self._lock:
            client, self._client = self._client, None
            self._collections.clear()
        if client is not None:
            with mapped(self.settings):
                client.close()

    @property
    def max_batch_size(self) -> int:
        with mapped(self.settings):
            return int(self.client.get_max_batch_size())

    def _collection(self, namespace: str, kind: str):
        name = collection_name(namespace, kind)
        with self._lock:
            if name in self._collections:
                return self._collections[name]
            metadata: dict[str, Any] = {"docanchor_namespace": namespace[:200], "docanchor_kind": kind}
            options: dict[str, Any] = {}
            if kind == "chunks":
                metadata.update({"embedding_model": self.model_name, "embedding_dimension": self.dimension,
                                 "embedding_precision": self.precision})
                options["configuration"] = {"hnsw": HNSW_CONFIG}
            else:
                metadata["hnsw:space"] = "cosine"
            with mapped(self.settings):
                coll = self.client.get_or_create_collection(
                    name=name, metadata=metadata, embedding_function=None, **options)
            if kind == "chunks":
                self._check_model(coll)
            self._collections[name] = coll
            return coll

    def _existing(self, namespace: str, kind: str):
        """The collection if it exists, else ``None``: reads never create a namespace."""
        name = collection_name(namespace, kind)
        with self._lock:
            if name in self._collections:
                return self._collections[name]
        try:
            with mapped(self.settings):
                coll = self.client.get_collection(name=name, embedding_function=None)
        except StoreUnavailable as exc:
            if type(exc.__cause__).__name__ == "NotFoundError":
                return None
            raise
        if kind == "chunks":
            self._check_model(coll)
        with self._lock:
            return self._collections.setdefault(name, coll)

    def forget_collections(self) -> None:
        """Drop cached collection handles and vectors (after :mod:`docanchor.reindex` swapped a collection)."""
        with self._lock:
            self._collections.clear()
            self.vectors.clear()

    def _check_model(self, coll) -> None:
        meta = coll.metadata or {}
        model, dim = meta.get("embedding_model"), meta.get("embedding_dimension")
        if model != self.model_name or dim != self.dimension:
            raise Conflict(
                f"This namespace was indexed with the embedding model {model!r} ({dim} dimensions), "
                f"but DocAnchor is configured with {self.model_name!r} ({self.dimension} dimensions). "
                "Set DOCANCHOR_EMBEDDING_MODEL back, or run 'docanchor reindex' to rebuild.",
                code="embedding_model_mismatch",
                stored_model=model,
                configured_model=self.model_name,
            )
        stored = meta.get("embedding_precision", "fp32")
        if not interchangeable(stored, self.precision):
            raise Conflict(
                f"This namespace's vectors were computed in {stored!r} precision, which does not mix with the "
                f"configured {self.precision!r}. Set DOCANCHOR_EMBEDDING_PRECISION={stored}, or run "
                "'docanchor reindex' to rebuild the vectors.",
                code="embedding_precision_mismatch",
                stored_precision=stored,
                configured_precision=self.precision,
            )

    def namespaces(self) -> list[str]:
        """Namespaces that have a document or a chunk collection (chunks alone: the namespace's
        first ingest wrote its chunks and stopped before its record)."""
        with mapped(self.settings):
            names = {c if isinstance(c, str) else c.name for c in self.client.list_collections()}
        out = set()
        for name in names:
            if name.endswith("-chunks") and name.removesuffix("-chunks") + "-docs" in names:
                continue  # the same namespace as its records' collection, read once
            if name.startswith("da-") and name.endswith(("-docs", "-chunks")):
                with mapped(self.settings):
                    meta = self.client.get_collection(name, embedding_function=None).metadata or {}
                out.add(meta.get("docanchor_namespace", name))
        return sorted(out)

    # ------------------------------------------------------------------ writes
    def add_chunks(self, namespace: str, chunks: Sequence[Chunk], embeddings: Sequence[Sequence[float]]) -> None:
        """Upsert chunks with their embeddings, batched under the client's maximum batch size.

        Their documents are marked pending (:mod:`docanchor.pending`) until their records are
        written, so a crash before that can be cleaned up at start-up.
        """
        if len(chunks) != len(embeddings):
            raise ValueError("one embedding per chunk")
        for doc_id in dict.fromkeys(c.doc_id for c in chunks):
            self.pending.mark(namespace, doc_id)
        coll = self._collection(namespace, "chunks")
        step = max(1, min(self.max_batch_size, 1000))
        for i in range(0, len(chunks), step):
            part = chunks[i : i + step]
            with mapped(self.settings):
                coll.upsert(
                    ids=[c.chunk_id for c in part],
                    embeddings=[list(map(float, e)) for e in embeddings[i : i + step]],
                    documents=[c.text for c in part],
                    metadatas=[_chunk_metadata(c) for c in part],
                )

    def put_document(self, namespace: str, record: DocumentRecord) -> None:
        """Write a document's record: from here on it is visible to every read."""
        coll = self._collection(namespace, "docs")
        with mapped(self.settings):
            coll.upsert(
                ids=[record.doc_id],
                embeddings=[[1.0]],
                documents=[record.anchor],
                metadatas=[{"record": json.dumps(record.to_dict(), ensure_ascii=False, sort_keys=True)}],
            )
        self.pending.clear(namespace, record.doc_id)
        self._log_change(namespace, record.doc_id)

    def delete_document(self, namespace: str, doc_id: str) -> int:
        """Remove a document's record, then its chunks. Returns the number of chunks deleted."""
        docs, chunks = self._existing(namespace, "docs"), self._existing(namespace, "chunks")
        ids: list[str] = []
        with mapped(self.settings):
            if docs is not None:
                docs.delete(ids=[doc_id])
            if chunks is not None:
                ids = chunks.get(where={"doc_id": doc_id}, include=[])["ids"]
                for i in range(0, len(ids), 1000):
                    chunks.delete(ids=ids[i : i + 1000])
        self.vectors.evict(namespace, doc_id)
        self.pending.clear(namespace, doc_id)
        if docs is not None:
            self._log_change(namespace, doc_id)
        return len(ids)

    def remove_orphans(self, namespace: str) -> int:
        """Delete chunks whose document has no record (left by a crash). Returns how many.

        Reads every chunk's ``doc_id`` (paged): use it with no ingest running in any process.
        """
        known = {r.doc_id for r in self.list_documents(namespace)}
        by_doc = self.chunk_ids_by_document(namespace)
        orphans = [cid for doc_id, ids in by_doc.items() if doc_id not in known for cid in ids]
        chunks = self._existing(namespace, "chunks")
        with mapped(self.settings):
            for i in range(0, len(orphans), 1000):
                chunks.delete(ids=orphans[i : i + 1000])
        return len(orphans)

    # ------------------------------------------------------------------ change log (Chroma server)
    def _log_change(self, namespace: str, doc_id: str) -> None:
        """Note that ``doc_id``'s record was written or deleted, for other processes' lexical
        indexes (:meth:`changes_since`). Only with a Chroma server: embedded Chroma has one process."""
        if not self.settings.chroma_host:
            return
        stamp = time.time_ns()
        with mapped(self.settings):
            self._collection(namespace, "changes").add(
                ids=[f"{stamp:020d}-{uuid.uuid4().hex[:12]}"], embeddings=[[1.0]],
                metadatas=[{"ts": stamp, "doc_id": doc_id}],
            )

    def changes_since(self, namespace: str, since_ns: int) -> list[tuple[str, int, str]]:
        """Change-log entries stamped at or after ``since_ns`` (ns since the epoch, writer's clock):
        ``(entry id, stamp, doc_id)`` in stamp order. One indexed read of the recent entries."""
        coll = self._existing(namespace, "changes")
        if coll is None:
            return []
        with mapped(self.settings):
            got = coll.get(where={"ts": {"$gte": int(since_ns)}}, include=["metadatas"])
        return sorted((i, int(m["ts"]), str(m["doc_id"])) for i, m in zip(got["ids"], got["metadatas"]) if m)

    # ------------------------------------------------------------------ reads
    def get_document(self, namespace: str, doc_id: str) -> DocumentRecord | None:
        docs = self._existing(namespace, "docs")
        if docs is None:
            return None
        with mapped(self.settings):
            got = docs.get(ids=[doc_id], include=["metadatas"])
        if not got["ids"]:
            return None
        return _record(got["metadatas"][0])

    def get_documents(self, namespace: str, doc_ids: Sequence[str]) -> dict[str, DocumentRecord]:
        """The records of those ``doc_ids`` that exist, by id (one read)."""
        docs = self._existing(namespace, "docs") if doc_ids else None
        if docs is None:
            return {}
        with mapped(self.settings):
            got = docs.get(ids=list(dict.fromkeys(doc_ids)), include=["metadatas"])
        return {i: _record(m) for i, m in zip(got["ids"], got["metadatas"])}

    def document_ids(self, namespace: str) -> set[str]:
        """Ids of every visible document (one cheap read: ids only)."""
        docs = self._existing(namespace, "docs")
        if docs is None:
            return set()
        with mapped(self.settings):
            return set(docs.get(include=[])["ids"])

    def list_documents(self, namespace: str) -> list[DocumentRecord]:
        """Every visible document, ordered by title then id."""
        docs = self._existing(namespace, "docs")
        if docs is None:
            return []
        with mapped(self.settings):
            got = docs.get(include=["metadatas"])
        records = [_record(m) for m in got["metadatas"]]
        return sorted(records, key=lambda r: (r.title.lower(), r.doc_id))

    def count_documents(self, namespace: str) -> int:
        """Documents stored in ``namespace`` (as :meth:`list_documents` would list them)."""
        docs = self._existing(namespace, "docs")
        if docs is None:
            return 0
        with mapped(self.settings):
            return int(docs.count())

    def count_chunks(self, namespace: str) -> int:
        chunks = self._existing(namespace, "chunks")
        if chunks is None:
            return 0
        with mapped(self.settings):
            return int(chunks.count())

    def chunk_ids_by_document(self, namespace: str) -> dict[str, list[str]]:
        """Every chunk id in Chroma, grouped by ``doc_id`` (read in pages; for audits)."""
        chunks = self._existing(namespace, "chunks")
        out: dict[str, list[str]] = {}
        if chunks is None:
            return out
        offset = 0
        while True:
            with mapped(self.settings):
                got = chunks.get(include=["metadatas"], limit=AUDIT_PAGE, offset=offset)
            for cid, meta in zip(got["ids"], got["metadatas"]):
                out.setdefault(str((meta or {}).get("doc_id")), []).append(cid)
            if len(got["ids"]) < AUDIT_PAGE:
                return out
            offset += AUDIT_PAGE

    def get_chunks(self, namespace: str, doc_id: str) -> list[Chunk]:
        """All chunks of one document in ordinal order."""
        coll = self._existing(namespace, "chunks")
        if coll is None:
            return []
        with mapped(self.settings):
            got = coll.get(where={"doc_id": doc_id}, include=["documents", "metadatas"])
        chunks = [_chunk(t, m) for t, m in zip(got["documents"], got["metadatas"]) if _present(t, m)]
        return sorted(chunks, key=lambda c: c.ordinal)

    def get_chunks_by_id(self, namespace: str, chunk_ids: Sequence[str]) -> dict[str, Chunk]:
        """The chunks with these ids that exist, by id (one read, for retrieval)."""
        coll = self._existing(namespace, "chunks") if chunk_ids else None
        if coll is None:
            return {}
        with mapped(self.settings):
            got = coll.get(ids=list(chunk_ids), include=["documents", "metadatas"])
        return {i: _chunk(t, m) for i, t, m in zip(got["ids"], got["documents"], got["metadatas"]) if _present(t, m)}

    def get_chunk_embeddings(self, namespace: str, doc_id: str) -> list[list[float]]:
        """Embeddings of one document's chunks in ordinal order."""
        coll = self._existing(namespace, "chunks")
        if coll is None:
            return []
        with mapped(self.settings):
            got = coll.get(where={"doc_id": doc_id}, include=["embeddings", "metadatas"])
        pairs = sorted(zip(got["metadatas"], got["embeddings"]), key=lambda p: p[0]["ordinal"])
        return [list(map(float, e)) for _, e in pairs]

    def query(
        self, namespace: str, embedding: Sequence[float], k: int, doc_ids: Sequence[str] | None = None
    ) -> list[tuple[Chunk, float]]:
        """Top-``k`` chunks by cosine similarity (score = 1 - cosine distance), best first.

        Restricted to ``doc_ids`` holding at most :data:`docanchor.doc_vectors.EXACT_MAX_CHUNKS`
        chunks, the search is exact over their cached vectors (:mod:`docanchor.doc_vectors`);
        otherwise it is Chroma's HNSW search (with a ``where`` filter for ``doc_ids``).
        """
        coll = self._existing(namespace, "chunks")
        if coll is None or k <= 0:
            return []
        if doc_ids:
            exact = self._query_documents(namespace, coll, embedding, k, doc_ids)
            if exact is not None:
                return exact
        got = _hnsw(self.settings, coll, embedding, k, doc_ids, ["documents", "metadatas", "distances"])
        return [
            (_chunk(t, m), 1.0 - float(d))
            for t, m, d in zip(got["documents"][0], got["metadatas"][0], got["distances"][0])
            if _present(t, m)
        ]

    def nearest(self, namespace: str, embedding: Sequence[float], k: int,
                doc_ids: Sequence[str] | None = None) -> list[tuple[str, float]]:
        """Top-``k`` ``(chunk_id, cosine similarity)`` as :meth:`query` ranks them, without the
        chunks: Chroma returns ids and distances only, so the caller reads the chunks it needs in
        one batch (retrieval reads them with the BM25 hits', mostly from memory)."""
        coll = self._existing(namespace, "chunks")
        if coll is None or k <= 0:
            return []
        if doc_ids:
            sizes = {d: r.n_chunks for d, r in self.get_documents(namespace, doc_ids).items()}
            exact = self._nearest(namespace, coll, embedding, k, sizes)
            if exact is not None:
                return exact
        got = _hnsw(self.settings, coll, embedding, k, doc_ids, ["distances"])
        return [(cid, 1.0 - float(d)) for cid, d in zip(got["ids"][0], got["distances"][0])]

    def nearest_in_documents(self, namespace: str, embedding: Sequence[float], k: int,
                             sizes: Mapping[str, int]) -> list[tuple[str, float]] | None:
        """Exact top-``k`` ``(chunk_id, cosine similarity)`` among the documents of ``sizes``
        (``doc_id -> n_chunks``, as their records give it), best first, ties by chunk id; ``None``
        when they hold more than :data:`docanchor.doc_vectors.EXACT_MAX_CHUNKS` chunks. Their
        vectors come from :attr:`vectors`; the documents not cached are read in one ``get``."""
        coll = self._existing(namespace, "chunks")
        if coll is None or k <= 0:
            return []
        return self._nearest(namespace, coll, embedding, k, sizes)

    def _nearest(self, namespace: str, coll, embedding: Sequence[float], k: int,
                 sizes: Mapping[str, int]) -> list[tuple[str, float]] | None:
        if sum(sizes.values()) > EXACT_MAX_CHUNKS:
            return None
        load = _vector_loader(self.settings, coll, sizes)
        return top_k(embedding, self.vectors.get_many(namespace, dict(sorted(sizes.items())), load), k)

    def warm_vectors(self, namespace: str, sizes: Mapping[str, int], batch_chunks: int = FILL_BATCH_CHUNKS,
                     stop: Callable[[], bool] | None = None) -> int:
        """Read the vectors of the documents of ``sizes`` (``doc_id -> n_chunks``) into
        :attr:`vectors` ahead of searches filtered to them, ``batch_chunks`` chunks per Chroma
        ``get``, while they fit in the cache without evicting (see
        :meth:`docanchor.doc_vectors.VectorCache.fill`). Documents over
        :data:`docanchor.doc_vectors.EXACT_MAX_CHUNKS` chunks are skipped (their searches are
        Chroma's). ``stop`` is asked before each read. Returns how many documents were read.

        Raises:
            StoreUnavailable: Chroma cannot be read.
        """
        coll = self._existing(namespace, "chunks")
        if coll is None:
            return 0
        sizes = {d: n for d, n in sizes.items() if 0 < n <= EXACT_MAX_CHUNKS}
        return self.vectors.fill(namespace, sizes, _vector_loader(self.settings, coll, sizes), 4 * self.dimension,
                                 batch_chunks, stop or (lambda: False))

    def _query_documents(self, namespace: str, coll, embedding: Sequence[float], k: int,
                         doc_ids: Sequence[str]) -> list[tuple[Chunk, float]] | None:
        """Exact search over the documents' cached vectors; ``None`` when they hold too many chunks."""
        sizes = {d: r.n_chunks for d, r in self.get_documents(namespace, doc_ids).items()}
        ranked = self._nearest(namespace, coll, embedding, k, sizes)
        if ranked is None:
            return None
        chunks = self.get_chunks_by_id(namespace, [cid for cid, _ in ranked])
        return [(chunks[cid], score) for cid, score in ranked if cid in chunks]


def _hnsw(settings: Settings, coll, embedding: Sequence[float], k: int, doc_ids: Sequence[str] | None,
          include: list[str]) -> dict:
    """Chroma's HNSW search of ``coll`` for the top ``k`` (what it has when that is fewer), with a
    ``where`` filter for ``doc_ids``; ``include`` names the fields returned besides the ids."""
    where = None
    if doc_ids:
        where = {"doc_id": doc_ids[0]} if len(doc_ids) == 1 else {"doc_id": {"$in": list(doc_ids)}}
    with mapped(settings):
        return coll.query(query_embeddings=[list(map(float, embedding))], n_results=k, where=where, include=include)


def _vector_loader(settings: Settings, coll, sizes: Mapping[str, int]):
    """``load(doc_ids) -> (chunk ids, vectors)`` for :class:`docanchor.doc_vectors.VectorCache`:
    one Chroma ``get`` by the chunks' derived ids (a ``where`` on doc_id scans metadata rows)."""

    def load(doc_ids: Sequence[str]):
        with mapped(settings):
            part = coll.get(ids=[chunk_id(d, i) for d in doc_ids for i in range(sizes[d])], include=["embeddings"])
        return part["ids"], part["embeddings"]

    return load


def _present(text: str | None, meta: dict[str, Any] | None) -> bool:
    """False for a result row whose chunk was deleted while the read ran (no text or metadata)."""
    return text is not None and bool(meta) and "doc_id" in meta


def _chunk_metadata(c: Chunk) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "doc_id": c.doc_id,
        "ordinal": c.ordinal,
        "start_char": c.start_char,
        "end_char": c.end_char,
        "heading_path": json.dumps(list(c.heading_path), ensure_ascii=False),
        "n_tokens": c.n_tokens,
        "kind": c.kind,
        "ends_line": c.ends_line,
    }
    if c.context:  # only pieces of split CSV rows have one; absent reads as ""
        meta["context"] = c.context
    if c.gap_after is not None:  # absent (chunks stored before it existed) reads as None
        meta["gap_after"] = c.gap_after
    if not c.joins_next:
        meta["joins_next"] = False
    if c.source_runs:
        meta["source_runs"] = encode_runs(c.source_runs)
    if c.page_start is not None:
        meta["page_start"] = c.page_start
    if c.page_end is not None:
        meta["page_end"] = c.page_end
    return meta


def _chunk(text: str, meta: dict[str, Any]) -> Chunk:
    return Chunk(
        doc_id=meta["doc_id"],
        ordinal=int(meta["ordinal"]),
        text=text,
        start_char=int(meta["start_char"]),
        end_char=int(meta["end_char"]),
        page_start=meta.get("page_start"),
        page_end=meta.get("page_end"),
        heading_path=tuple(json.loads(meta.get("heading_path") or "[]")),
        n_tokens=int(meta.get("n_tokens", 0)),
        kind=meta.get("kind", "paragraph"),
        ends_line=bool(meta.get("ends_line", True)),
        context=str(meta.get("context") or ""),
        gap_after=meta.get("gap_after"),
        joins_next=bool(meta.get("joins_next", True)),
        source_runs=decode_runs(meta.get("source_runs")),
    )


def _record(meta: dict[str, Any]) -> DocumentRecord:
    return DocumentRecord(**json.loads(meta["record"]))
