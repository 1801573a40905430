"""One namespace's BM25 index on disk: a tantivy index of pre-tokenised chunks.

tantivy (the Rust engine behind Quickwit, through its official Python bindings) keeps the
index in immutable, memory-mapped segments: an add or a delete writes a small new segment (or
a delete bitmap) and commits; a background thread merges segments. So a write costs time in
proportion to what it writes, and opening an index reads only its metadata -- nothing is rebuilt.
Scoring is tantivy's BM25 (Lucene's formula: k1 = 1.2, b = 0.75, idf = ln(1 + (N - n + 0.5) /
(n + 0.5)), statistics over the whole index).

Fields of one chunk (one tantivy document):

- ``chunk_id`` and ``doc_id``: exact strings (the ``raw`` tokenizer); ``doc_id`` is also a fast
  field, so per-document counts are one aggregation.
- ``terms``: the chunk's BM25 terms from :func:`docanchor.lexical.tokenize`, joined by spaces and
  split back by the ``whitespace`` tokenizer (no further change: terms hold no whitespace), with
  term frequencies and no positions.
- ``chunk``: the chunk itself as JSON (stored, compressed on disk), read back by id, with its
  distinct terms (retrieval's coverage, novelty and strong-match tests read them instead of
  tokenising the text again at every query).

One :class:`Engine` per index directory and process, shared by every user of that path (tantivy
allows one writer per directory: a second one in any process gets ``LockBusy``). The writer is
opened on the first write and kept, so merges run in the background.
"""

from __future__ import annotations

import json
import threading
import weakref
from pathlib import Path
from typing import Iterable, Sequence

import orjson

from docanchor.errors import StoreUnavailable
from docanchor.types import Chunk

FORMAT = 2
"""Version of the fields above; an index written with another is rebuilt from the store. 2: the
stored chunk JSON ends with the chunk's distinct BM25 terms (:func:`chunk_json`)."""
_FORMAT_FILE = "docanchor-format"
WRITER_HEAP_BYTES = 20_000_000
"""The writer's indexing buffer (one thread); tantivy flushes a segment when it fills."""
Row = tuple[str, str, str, str]
"""``(chunk_id, doc_id, terms joined by spaces, chunk JSON)``: one chunk as indexed."""


class LockBusy(StoreUnavailable):
    """Another process holds this index's writer."""


class OtherFormat(StoreUnavailable):
    """The index was written in another :data:`FORMAT` (by an earlier version): it is rebuilt."""


def _schema():
    import tantivy

    sb = tantivy.SchemaBuilder()
    sb.add_text_field("chunk_id", stored=True, tokenizer_name="raw", index_option="basic")
    sb.add_text_field("doc_id", tokenizer_name="raw", index_option="basic", fast=True)
    sb.add_text_field("terms", tokenizer_name="whitespace", index_option="freq")
    sb.add_bytes_field("chunk", stored=True)
    return sb.build()


class Engine:
    """A tantivy index of one namespace's chunks. Thread-safe: writes hold :attr:`lock`.

    Raises (every method):
        StoreUnavailable: the index cannot be read or written (``ValueError``/``OSError`` from
            tantivy are mapped; the original is the cause). :class:`LockBusy` when another
            process holds the writer.
    """

    def __init__(self, path: Path, index) -> None:
        self.path = path
        self.index = index
        self.schema = index.schema
        self.lock = threading.RLock()
        self._writer = None

    # ------------------------------------------------------------------ open
    @classmethod
    def open(cls, path: Path, create: bool) -> "Engine | None":
        """The engine for ``path`` (shared in this process), ``None`` when absent and not ``create``.

        Raises:
            StoreUnavailable: the index exists but cannot be opened (corrupt, other format).
        """
        key = str(path.resolve())
        with _REGISTRY_LOCK:
            engine = _REGISTRY.get(key)
            if engine is not None:
                return engine
            if not (path / _FORMAT_FILE).exists():
                if not create:
                    return None
                engine = cls._create(path)
            else:
                engine = cls(path, _mapped_call(lambda: _open_index(path), path))
            _REGISTRY[key] = engine
            return engine

    @classmethod
    def _create(cls, path: Path) -> "Engine":
        import tantivy

        def make():
            path.mkdir(parents=True, exist_ok=True)
            index = tantivy.Index(_schema(), path=str(path), reuse=False)
            (path / _FORMAT_FILE).write_text(str(FORMAT))
            return index

        return cls(path, _mapped_call(make, path))

    @classmethod
    def forget(cls, path: Path) -> None:
        """Drop ``path`` from the registry (after its files were removed)."""
        with _REGISTRY_LOCK:
            _REGISTRY.pop(str(path.resolve()), None)

    def close(self) -> None:
        """Release the writer (and its lock file); pending merges are abandoned, never lost data."""
        with self.lock:
            self._writer = None

    # ------------------------------------------------------------------ writes
    def writer(self):
        with self.lock:
            if self._writer is None:
                try:
                    self._writer = self.index.writer(WRITER_HEAP_BYTES, 1)
                except ValueError as exc:
                    if "LockBusy" in str(exc):
                        raise LockBusy(
                            f"Another process is writing the lexical index at {self.path}; stop it or "
                            "send the request to it."
                        ) from exc
                    raise _unavailable(self.path, exc) from exc
            return self._writer

    def write(self, rows: Iterable[Row] = (), delete_docs: Iterable[str] = (), delete_chunks: Iterable[str] = (),
              delete_all: bool = False) -> None:
        """Delete, then add ``rows`` (read once, as they come), then commit (one commit: readers see
        all of it or none of it)."""
        import tantivy

        with self.lock:
            w = self.writer()

            def run():
                if delete_all:
                    w.delete_all_documents()
                for d in delete_docs:
                    w.delete_documents_by_term("doc_id", d)
                for c in delete_chunks:
                    w.delete_documents_by_term("chunk_id", c)
                for chunk_id, doc_id, terms, chunk in rows:
                    w.add_document(tantivy.Document(chunk_id=chunk_id, doc_id=doc_id, terms=terms,
                                                    chunk=chunk.encode("utf-8")))
                w.commit()
                self.index.reload()

            try:
                _mapped_call(run, self.path)
            except StoreUnavailable:
                self._writer = None  # a failed commit leaves the writer unusable: the next write opens anew
                raise

    # ------------------------------------------------------------------ reads
    def top(self, terms: Sequence[str], k: int, doc_ids: Sequence[str] | None,
            chunks: dict[str, Chunk] | None = None) -> list[tuple[str, float]]:
        """The ``k`` best ``(chunk_id, score)`` by BM25 over ``terms``, best first, ties by chunk id.
        With ``chunks``, the returned hits' chunks are put there too (their stored documents are
        read for the ids anyway, so a caller that reads the hits next need not search again)."""
        import tantivy

        Q, Occur = tantivy.Query, tantivy.Occur
        query = Q.boolean_query([(Occur.Should, Q.term_query(self.schema, "terms", t, "freq")) for t in terms])
        if doc_ids is not None:
            only = Q.const_score_query(_one_of(self.schema, "doc_id", doc_ids), 0.0)
            query = Q.boolean_query([(Occur.Must, only), (Occur.Must, query)])

        def run():
            searcher = self.index.searcher()
            limit = k
            while True:  # widen until the k-th score is not tied past the limit
                hits = searcher.search(query, limit, count=False).hits
                if len(hits) < limit or hits[-1][0] < hits[k - 1][0]:
                    break
                limit *= 2
            docs = {}
            for score, addr in hits:
                doc = searcher.doc(addr)
                docs[doc.get_first("chunk_id")] = (doc, float(score))
            ranked = sorted(((cid, score) for cid, (_, score) in docs.items()), key=lambda p: (-p[1], p[0]))[:k]
            if chunks is not None:
                chunks.update((cid, chunk_of(docs[cid][0].get_first("chunk"))) for cid, _ in ranked)
            return ranked

        return _mapped_call(run, self.path)

    def chunks(self, chunk_ids: Sequence[str]) -> dict[str, Chunk]:
        """The stored chunks with these ids, by id (ids not indexed are left out)."""
        if not chunk_ids:
            return {}
        query = _one_of(self.schema, "chunk_id", chunk_ids)

        def run():
            searcher = self.index.searcher()
            out = {}
            for _, addr in searcher.search(query, len(chunk_ids), count=False).hits:
                doc = searcher.doc(addr)
                out[doc.get_first("chunk_id")] = chunk_of(doc.get_first("chunk"))
            return {cid: out[cid] for cid in chunk_ids if cid in out}

        return _mapped_call(run, self.path)

    def doc_freqs(self, terms: Sequence[str], doc_ids: Sequence[str] | None = None) -> tuple[int, dict[str, int]]:
        """``(indexed chunks, {term: chunks holding it})`` over the whole index: BM25's document
        frequencies (a chunk is a BM25 document here); with ``doc_ids``, over the chunks of those
        documents only (one count per term)."""
        import tantivy

        def run():
            searcher = self.index.searcher()
            if doc_ids is None:
                return searcher.num_docs, {t: int(searcher.doc_freq("terms", t)) for t in dict.fromkeys(terms)}
            Q, Occur = tantivy.Query, tantivy.Occur
            only = _one_of(self.schema, "doc_id", doc_ids)

            def count(query) -> int:
                return int(searcher.search(query, 1, count=True).count)

            return count(only), {t: count(Q.boolean_query([(Occur.Must, only), (Occur.Must, Q.term_query(
                self.schema, "terms", t, "basic"))])) if searcher.doc_freq("terms", t) else 0
                for t in dict.fromkeys(terms)}

        return _mapped_call(run, self.path)

    def doc_counts(self) -> dict[str, int]:
        """Indexed chunks per ``doc_id`` (one aggregation over the ``doc_id`` fast field)."""
        import tantivy

        def run():
            searcher = self.index.searcher()
            if searcher.num_docs == 0:
                return {}
            agg = searcher.aggregate(tantivy.Query.all_query(),
                                     {"n": {"terms": {"field": "doc_id", "size": searcher.num_docs}}})
            return {b["key"]: int(b["doc_count"]) for b in agg["n"]["buckets"]}

        return _mapped_call(run, self.path)

    def count(self, doc_id: str) -> int:
        """Indexed chunks of one document."""
        import tantivy

        query = tantivy.Query.term_query(self.schema, "doc_id", doc_id, "basic")
        return _mapped_call(lambda: self.index.searcher().search(query, 1, count=True).count, self.path)

    def num_chunks(self) -> int:
        return _mapped_call(lambda: self.index.searcher().num_docs, self.path)


ONE_OF_TERM_QUERIES = 256
"""Up to this many values, :func:`_one_of` asks for them as a boolean query of term queries;
above, as one term-set query. Source: timing both on bench/scale_bench.py's 100,000-chunk index
(the commit that added this gives the figures): a term-set query costs a fixed part that term
queries do not, term queries cost more per value, and they cost the same at a few hundred values."""


def _one_of(schema, field: str, values: Sequence[str]):
    """The query matching documents whose ``field`` (a ``raw`` field) is one of ``values``."""
    import tantivy

    Q = tantivy.Query
    values = list(dict.fromkeys(values))
    if len(values) > ONE_OF_TERM_QUERIES:
        return Q.term_set_query(schema, field, values)
    return Q.boolean_query([(tantivy.Occur.Should, Q.term_query(schema, field, v, "basic")) for v in values])


_REGISTRY: "weakref.WeakValueDictionary[str, Engine]" = weakref.WeakValueDictionary()
_REGISTRY_LOCK = threading.Lock()


def writer_busy(path: Path) -> bool:
    """True when a process holds the index's writer (tantivy takes an exclusive ``flock`` on
    ``.tantivy-writer.lock`` for as long as a writer lives)."""
    import fcntl
    import os

    try:
        fd = os.open(path / ".tantivy-writer.lock", os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _open_index(path: Path):
    import tantivy

    written = (path / _FORMAT_FILE).read_text().strip()
    if written != str(FORMAT):
        raise OtherFormat(f"The lexical index at {path} was written in format {written!r}; this version "
                          f"reads format {FORMAT}.")
    index = tantivy.Index.open(str(path))
    index.searcher()  # opens every segment: a damaged one fails here, not in a request
    return index


def _unavailable(path: Path, exc: BaseException) -> StoreUnavailable:
    return StoreUnavailable(
        f"The lexical index at {path} cannot be used ({type(exc).__name__}: {str(exc)[:200]}); "
        "check that the data dir is writable and not full."
    )


def _mapped_call(fn, path: Path):
    """``fn()`` with tantivy's and the file system's errors (and its panics, e.g. on a damaged
    file) mapped to :class:`StoreUnavailable`."""
    try:
        return fn()
    except StoreUnavailable:
        raise
    except (ValueError, OSError, RuntimeError) as exc:
        raise _unavailable(path, exc) from exc
    except BaseException as exc:  # a Rust panic (pyo3's PanicException derives from BaseException)
        if type(exc).__name__ != "PanicException":
            raise
        raise _unavailable(path, exc) from exc


def chunk_json(c: Chunk, terms: Sequence[str]) -> str:
    """A chunk as the JSON array the index stores (field order fixed; read by :func:`chunk_of`),
    its distinct BM25 ``terms`` (:func:`docanchor.lexical.tokenize` of its ``embedding_text``)
    last, joined by spaces (terms hold no whitespace), so a reader gets :attr:`Chunk.terms` without
    tokenising the text again."""
    return json.dumps([c.doc_id, c.ordinal, c.text, c.start_char, c.end_char, c.page_start, c.page_end,
                       list(c.heading_path), c.n_tokens, c.kind, c.ends_line, c.context, c.gap_after,
                       c.joins_next, [list(r) for r in c.source_runs], " ".join(dict.fromkeys(terms))],
                      ensure_ascii=False)


def chunk_of(data: bytes | str) -> Chunk:
    """The inverse of :func:`chunk_json`, from the stored UTF-8 bytes (or the string); arrays
    written before the last four fields existed read with their defaults, and those written before
    the terms with ``terms=None``.

    Decoded with orjson (a dependency of chromadb too), which reads the bytes without a ``str``
    first and gives what ``json.loads`` gives for what :func:`chunk_json` writes: strings, integers,
    booleans, ``null`` and arrays (no floats, no lone surrogates: the stored bytes are UTF-8).
    tests/test_lexical.py checks the round trip.
    """
    d = orjson.loads(data)
    extra = d[12:15] if len(d) >= 15 else [None, True, []]
    return Chunk(doc_id=d[0], ordinal=d[1], text=d[2], start_char=d[3], end_char=d[4], page_start=d[5],
                 page_end=d[6], heading_path=tuple(d[7]), n_tokens=d[8], kind=d[9], ends_line=bool(d[10]),
                 context=d[11], gap_after=extra[0], joins_next=bool(extra[1]),
                 source_runs=tuple(tuple(r) for r in extra[2]),
                 terms=d[15] if len(d) >= 16 else None)
