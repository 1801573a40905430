"""Exact nearest-chunk search inside a few documents, from a cache of their chunk vectors.

Why: Chroma answers a ``where``-filtered query by walking its HNSW graph and discarding the
chunks of other documents, which costs about as much as a search of the whole collection and more
(measured in bench/scale_bench.py). A search restricted to a few documents is small enough to be
exact instead: the documents' vectors are read once (one ``get`` per document) and kept, and each
query is a matrix-vector product. A document never changes under its id (the id derives from its
bytes), so a cached document stays valid until it is deleted; an entry whose chunk count differs
from the document's record is read again (same bytes chunked with other settings).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Sequence

import numpy as np

CACHE_BYTES = 256 * 2**20
"""Most bytes of vectors kept (least recently used documents go first): 256 MiB holds about
175,000 chunks of a 384-dimension model, every vector of a 100,000-chunk index. Source: at 128 MiB
(87,000 chunks) searches within random documents of a 100,000-chunk index kept evicting and
re-reading documents from Chroma (bench/scale_bench.py's 10-document rows; the commit that raised
it gives the figures)."""
FILL_BATCH_CHUNKS = 2_000
"""Most chunks whose vectors :meth:`VectorCache.fill` reads in one ``load``. Source: a round value,
not tuned: each read holds the interpreter lock while it converts its rows, so a few thousand keep
the pauses it adds to concurrent requests short."""
EXACT_MAX_CHUNKS = 20_000
"""A filtered search over more chunks than this is left to Chroma's HNSW index."""

Loader = Callable[[Sequence[str]], tuple[list[str], list[Sequence[float]]]]
"""``load(doc_ids) -> (chunk ids, vectors)`` of those documents' chunks, in one read from the store
(rows in any order, each id paired with its vector)."""


class VectorCache:
    """Unit-length chunk vectors per ``(namespace, doc_id)``, least recently used evicted first."""

    def __init__(self, max_bytes: int = CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, str], tuple[list[str], np.ndarray]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get_many(self, namespace: str, sizes: dict[str, int], load: Loader) -> list[tuple[list[str], np.ndarray]]:
        """Each document's ``(chunk ids, matrix)`` in the order of ``sizes`` (``doc_id ->
        n_chunks``); those absent, or cached with another chunk count, are read in one ``load``."""
        found: dict[str, tuple[list[str], np.ndarray]] = {}
        with self._lock:
            for doc_id, n_chunks in sizes.items():
                if self._holds(namespace, doc_id, n_chunks):
                    self._entries.move_to_end((namespace, doc_id))
                    found[doc_id] = self._entries[(namespace, doc_id)]
        missing = [d for d in sizes if d not in found]
        if missing:
            found.update(self._load(namespace, missing, load))
        return [found[d] for d in sizes]

    def fill(self, namespace: str, sizes: dict[str, int], load: Loader, row_bytes: int,
             batch_chunks: int = FILL_BATCH_CHUNKS, stop: Callable[[], bool] = lambda: False) -> int:
        """Read the documents of ``sizes`` (``doc_id -> n_chunks``) not cached yet, in that order,
        at most ``batch_chunks`` chunks per ``load`` (a larger document alone), while they fit in
        :attr:`max_bytes` without evicting anything (``row_bytes``: bytes of one vector). Asks
        ``stop`` before each read. Returns how many documents it read."""
        with self._lock:
            todo = {d: n for d, n in sizes.items() if not self._holds(namespace, d, n)}
            room = (self.max_bytes - self._bytes) // max(row_bytes, 1)  # vectors that still fit
        batches, batch, rows = [], [], 0
        for doc_id, n in todo.items():
            if n > room:
                break
            room -= n
            if batch and rows + n > batch_chunks:
                batches.append(batch)
                batch, rows = [], 0
            batch.append(doc_id)
            rows += n
        read = 0
        for part in [*batches, batch] if batch else batches:
            if stop():
                break
            read += len(self._load(namespace, part, load))
        return read

    def _load(self, namespace: str, doc_ids: list[str], load: Loader) -> dict[str, tuple[list[str], np.ndarray]]:
        """Read ``doc_ids`` in one ``load``, normalise, and keep them (evicting the oldest)."""
        ids, vectors = load(doc_ids)
        rows: dict[str, list[int]] = {d: [] for d in doc_ids}
        for j, cid in enumerate(ids):  # a chunk id is ``{doc_id}:{ordinal}`` (docanchor.types.chunk_id)
            rows.setdefault(cid.rpartition(":")[0], []).append(j)
        every = np.asarray(vectors, dtype=np.float32).reshape(len(ids), -1) if len(ids) else np.empty((0, 0))
        out = {}
        for doc_id in doc_ids:
            idx = rows[doc_id]
            matrix = every[idx]  # a copy, one row per chunk
            norms = np.linalg.norm(matrix, axis=1, keepdims=True)
            matrix /= np.where(norms > 0, norms, 1.0)
            out[doc_id] = ([ids[j] for j in idx], matrix)
        with self._lock:
            for doc_id, entry in out.items():
                key = (namespace, doc_id)
                self._drop(key)
                self._entries[key] = entry
                self._bytes += entry[1].nbytes
            while self._bytes > self.max_bytes and len(self._entries) > len(out):
                self._drop(next(iter(self._entries)))
        return out

    def _holds(self, namespace: str, doc_id: str, n_chunks: int) -> bool:
        """True when the document is cached with ``n_chunks`` vectors (call with the lock held)."""
        hit = self._entries.get((namespace, doc_id))
        return hit is not None and len(hit[0]) == n_chunks

    def evict(self, namespace: str, doc_id: str) -> None:
        with self._lock:
            self._drop((namespace, doc_id))

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def _drop(self, key: tuple[str, str]) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= old[1].nbytes


def top_k(query: Sequence[float], parts: Sequence[tuple[list[str], np.ndarray]], k: int) -> list[tuple[str, float]]:
    """The ``k`` chunks most cosine-similar to ``query``: ``(chunk_id, similarity)``, best first,
    ties by chunk id."""
    q = np.asarray(query, dtype=np.float32)
    norm = float(np.linalg.norm(q))
    if norm == 0 or not parts:
        return []
    q /= norm
    ids = [i for part_ids, _ in parts for i in part_ids]
    scores = np.concatenate([matrix @ q for _, matrix in parts]) if ids else np.empty(0, dtype=np.float32)
    if len(ids) > k:
        keep = np.argpartition(-scores, k - 1)[:k]
        cutoff = scores[keep].min()
        keep = np.flatnonzero(scores >= cutoff)  # every tie with the k-th, for a stable order below
    else:
        keep = np.arange(len(ids))
    ranked = sorted(((ids[j], float(scores[j])) for j in keep), key=lambda p: (-p[1], p[0]))
    return ranked[:k]
