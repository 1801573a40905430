"""BM25 lexical search per namespace, persisted next to Chroma and kept current at ingest.

Scoring is bm25s's (Lucene variant, k1=1.5, b=0.75). bm25s has no incremental add, so the
tokenised chunks are kept in SQLite (``<data_dir>/bm25/<collection>.sqlite``) and the in-memory
bm25s index of a namespace is rebuilt from them on :meth:`LexicalIndex.add` and
:meth:`LexicalIndex.delete` (about 0.1 s per 10^4 chunks) -- never per query. When the SQLite
file is missing (a fresh process pointed at a Chroma server, a deleted data dir) it is rebuilt
from the store's chunks on first use. With a Chroma server (``chroma_host``) other DocAnchor
processes write the same collections, so before each search the index catches up with the
store's visible documents (:meth:`LexicalIndex._catch_up`: one ids-only read, and work only
when a document was added or removed elsewhere).

The chunks themselves are kept too (a JSON column), so retrieval reads the text of a lexical hit
from memory instead of from Chroma; files written before that column existed get it added and
their chunks are read from Chroma as before. A chunk's BM25 terms come from
:func:`docanchor.types.embedding_input` (its embedding context, if any, then its text), the same
string its vector was computed from.

Tokenisation (:func:`tokenize`) applies the same normalisation to chunks and queries: Unicode
NFKC and case folding; words of alphabetic scripts, English stop words (:func:`_stopwords`)
dropped and Snowball-stemmed (PyStemmer); runs of CJK characters become character unigrams plus
bigrams, because all-MiniLM-L6-v2 maps most Chinese characters to ``[UNK]`` and dense search cannot carry CJK
queries.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import unicodedata
from pathlib import Path
from typing import Iterable, Sequence

from docanchor.errors import StoreUnavailable
from docanchor.settings import Settings
from docanchor.store import collection_name
from docanchor.text import CJK as _CJK, TERM_RUN as _TOKEN
from docanchor.types import Chunk

_BM25_K1, _BM25_B = 1.5, 0.75


def _stopwords() -> frozenset[str]:
    """bm25s's ``STOPWORDS_EN_PLUS``: 179 English function words (NLTK's list), question words
    ("what", "does", "about") included. Against bm25s's 33-word ``STOPWORDS_EN`` on
    bench/budget_recall.py: recall at 250/500/1000/2000 tokens 72.7/84.3/92.1/95.7 % ->
    71.6/84.6/92.8/96.2 %."""
    from bm25s.stopwords import STOPWORDS_EN_PLUS

    return frozenset(STOPWORDS_EN_PLUS)


class _Stem:
    _lock = threading.Lock()
    _stemmer = None
    _stop: frozenset[str] = frozenset()

    @classmethod
    def get(cls):
        if cls._stemmer is None:
            with cls._lock:
                if cls._stemmer is None:
                    import Stemmer

                    cls._stop = _stopwords()
                    cls._stemmer = Stemmer.Stemmer("english")
        return cls._stemmer, cls._stop


def tokenize(text: str) -> list[str]:
    """Lexical tokens of ``text`` (chunks and queries alike).

    Alphabetic words are NFKC-normalised, case-folded, stripped of English stop words and
    stemmed; each run of CJK characters yields its characters and its character bigrams.

    Returns:
        Tokens in text order (duplicates kept: BM25 counts term frequency).
    """
    stemmer, stop = _Stem.get()
    text = unicodedata.normalize("NFKC", text).casefold()
    words: list[str] = []
    out: list[str] = []
    for m in _TOKEN.finditer(text):
        run = m.group()
        if "\u3040" <= run[0] and _is_cjk(run[0]):
            out.extend(run)
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
        elif run not in stop:
            words.append(run)
            out.append("\0")  # placeholder keeps order; replaced by the stemmed word below
    if words:
        stems = iter(stemmer.stemWords(words))
        out = [next(stems) if t == "\0" else t for t in out]
    return out


def _is_cjk(ch: str) -> bool:
    return re.match(rf"[{_CJK}]", ch) is not None


class _Namespace:
    """One namespace's BM25 model over its chunk ids (rebuilt whole on change), and the chunks
    themselves so retrieval need not read them back from Chroma."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.doc_of: list[str] = []
        self.model = None
        self.chunks: dict[str, Chunk] = {}


class LexicalIndex:
    """BM25 search over each namespace's chunks.

    Args:
        settings: ``data_dir`` says where the SQLite files live.
        store: the chunk store, read only to rebuild a missing index.

    Thread-safe: one lock guards every namespace's tables and models.
    """

    def __init__(self, settings: Settings, store) -> None:
        self.settings = settings
        self.store = store
        self._lock = threading.RLock()
        self._spaces: dict[str, _Namespace] = {}
        self.generation = 0
        """Bumped on every write, so callers can cache what depends on the namespace's documents."""
        self.memo: dict = {}
        """Callers' caches tied to this index (and to ``generation``; see retrieval.search)."""

    # ------------------------------------------------------------------ persistence
    def _path(self, namespace: str) -> Path:
        return Path(self.settings.data_dir) / "bm25" / f"{collection_name(namespace, 'chunks')}.sqlite"

    def _connect(self, namespace: str) -> sqlite3.Connection:
        path = self._path(namespace)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(path))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS chunks (chunk_id TEXT PRIMARY KEY, doc_id TEXT NOT NULL, "
                "tokens TEXT NOT NULL)"
            )
            conn.execute("CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(doc_id)")
            columns = {row[1] for row in conn.execute("PRAGMA table_info(chunks)")}
            if "chunk" not in columns:  # files written before chunks were kept here
                conn.execute("ALTER TABLE chunks ADD COLUMN chunk TEXT")
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(
                f"The lexical index at {path.parent} cannot be opened ({type(exc).__name__}); "
                "check that the data dir is writable."
            ) from exc
        return conn

    def _space(self, namespace: str) -> _Namespace:
        """The loaded namespace, building it from SQLite (or from the store) on first use."""
        space = self._spaces.get(namespace)
        if space is not None:
            return space
        existed = self._path(namespace).exists()
        if not existed:
            self._rebuild_from_store(namespace)
        space = _Namespace()
        self._spaces[namespace] = space
        self._reload(namespace, space)
        return space

    def _rebuild_from_store(self, namespace: str) -> None:
        rows: list[tuple[str, str, str, str]] = []
        for record in self.store.list_documents(namespace):
            rows.extend(_rows(self.store.get_chunks(namespace, record.doc_id)))
        conn = self._connect(namespace)
        try:
            with conn:
                conn.executemany(_INSERT, rows)
        except sqlite3.Error as exc:
            raise StoreUnavailable("The lexical index could not be written; check the data dir.") from exc
        finally:
            conn.close()

    def _reload(self, namespace: str, space: _Namespace) -> None:
        import bm25s

        conn = self._connect(namespace)
        try:
            rows = conn.execute("SELECT chunk_id, doc_id, tokens, chunk FROM chunks ORDER BY chunk_id").fetchall()
        except sqlite3.Error as exc:
            raise StoreUnavailable("The lexical index could not be read; check the data dir.") from exc
        finally:
            conn.close()
        space.ids = [r[0] for r in rows]
        space.doc_of = [r[1] for r in rows]
        space.chunks = {r[0]: _chunk_of(r[3]) for r in rows if r[3]}
        space.model = None
        if rows:
            model = bm25s.BM25(k1=_BM25_K1, b=_BM25_B)
            model.index([r[2].split(" ") if r[2] else [] for r in rows], show_progress=False)
            space.model = model

    # ------------------------------------------------------------------ writes
    def add(self, namespace: str, chunks: Sequence[Chunk]) -> None:
        """Index (or re-index) chunks; the namespace's BM25 model is rebuilt once.

        Raises:
            StoreUnavailable: the SQLite file cannot be written.
        """
        if not chunks:
            return
        with self._lock:
            space = self._space(namespace)
            conn = self._connect(namespace)
            try:
                with conn:
                    conn.executemany(_INSERT, _rows(chunks))
            except sqlite3.Error as exc:
                raise StoreUnavailable("The lexical index could not be written; check the data dir.") from exc
            finally:
                conn.close()
            self._reload(namespace, space)
            self.generation += 1

    def _catch_up(self, namespace: str, space: _Namespace) -> None:
        """Index documents another process stored, drop those it deleted (server mode only).

        A document counts as stored when its record is visible. An indexed document without a
        record is dropped once its chunks are gone from Chroma too: an ingest in flight has chunks
        and no record yet, and a delete removes the record before the chunks.
        """
        visible = self.store.document_ids(namespace)
        first_chunk: dict[str, str] = {}
        for chunk_id, doc_id in zip(space.ids, space.doc_of):
            first_chunk.setdefault(doc_id, chunk_id)
        missing = set(visible) - set(first_chunk)
        gone = {d for d in set(first_chunk) - visible}
        if gone:
            still = self.store.get_chunks_by_id(namespace, [first_chunk[d] for d in sorted(gone)])
            gone = {d for d in gone if first_chunk[d] not in still}
        if not missing and not gone:
            return
        rows: list[tuple[str, str, str, str]] = []
        for doc_id in sorted(missing):
            rows.extend(_rows(self.store.get_chunks(namespace, doc_id)))
        conn = self._connect(namespace)
        try:
            with conn:
                conn.executemany("DELETE FROM chunks WHERE doc_id = ?", [(d,) for d in sorted(gone)])
                conn.executemany(_INSERT, rows)
        except sqlite3.Error as exc:
            raise StoreUnavailable("The lexical index could not be written; check the data dir.") from exc
        finally:
            conn.close()
        self._reload(namespace, space)
        self.generation += 1

    def delete(self, namespace: str, doc_id: str) -> None:
        """Remove every chunk of ``doc_id`` from the namespace's index (no error if absent)."""
        with self._lock:
            space = self._space(namespace)
            conn = self._connect(namespace)
            try:
                with conn:
                    n = conn.execute("DELETE FROM chunks WHERE doc_id = ?", (doc_id,)).rowcount
            except sqlite3.Error as exc:
                raise StoreUnavailable("The lexical index could not be written; check the data dir.") from exc
            finally:
                conn.close()
            if n:
                self._reload(namespace, space)
            self.generation += 1

    def get_chunks(self, namespace: str, chunk_ids: Iterable[str]) -> dict[str, Chunk]:
        """The indexed chunks with these ids, by id, from memory (ids not indexed are left out)."""
        with self._lock:
            space = self._space(namespace)
        return {cid: space.chunks[cid] for cid in chunk_ids if cid in space.chunks}

    # ------------------------------------------------------------------ reads
    def search(
        self, namespace: str, query: str, k: int, doc_ids: Iterable[str] | None = None
    ) -> list[tuple[str, float]]:
        """The ``k`` best chunks for ``query`` by BM25.

        Args:
            doc_ids: when given, only chunks of these documents are scored.

        Returns:
            ``(chunk_id, score)`` pairs, best first, scores > 0 only; ties broken by chunk id
            so equal requests give equal answers.
        """
        import numpy as np

        terms = tokenize(query)
        with self._lock:
            space = self._space(namespace)
            if self.settings.chroma_host:
                self._catch_up(namespace, space)
            model, ids, doc_of = space.model, space.ids, space.doc_of
        if model is None or not terms or k <= 0:
            return []
        term_ids = sorted({model.vocab_dict[t] for t in terms if t in model.vocab_dict})
        if not term_ids:
            return []
        scores = np.asarray(model.get_scores_from_ids(term_ids), dtype=np.float64)
        if doc_ids is not None:
            wanted = set(doc_ids)
            mask = np.fromiter((d in wanted for d in doc_of), dtype=bool, count=len(doc_of))
            scores = np.where(mask, scores, 0.0)
        hits = np.flatnonzero(scores > 0)
        if hits.size == 0:
            return []
        if hits.size > k:
            top = hits[np.argpartition(-scores[hits], k - 1)[:k]]
            # include every hit tied with the k-th score so the final sort is deterministic
            cutoff = scores[top].min()
            hits = hits[scores[hits] >= cutoff]
        ranked = sorted(((ids[i], float(scores[i])) for i in hits), key=lambda p: (-p[1], p[0]))
        return ranked[:k]


_INSERT = "INSERT OR REPLACE INTO chunks (chunk_id, doc_id, tokens, chunk) VALUES (?, ?, ?, ?)"


def _rows(chunks: Iterable[Chunk]) -> list[tuple[str, str, str, str]]:
    return [(c.chunk_id, c.doc_id, " ".join(tokenize(c.embedding_text)), _chunk_json(c)) for c in chunks]


def _chunk_json(c: Chunk) -> str:
    return json.dumps([c.doc_id, c.ordinal, c.text, c.start_char, c.end_char, c.page_start, c.page_end,
                       list(c.heading_path), c.n_tokens, c.kind, c.ends_line, c.context], ensure_ascii=False)


def _chunk_of(data: str) -> Chunk:
    d = json.loads(data)
    return Chunk(doc_id=d[0], ordinal=d[1], text=d[2], start_char=d[3], end_char=d[4], page_start=d[5],
                 page_end=d[6], heading_path=tuple(d[7]), n_tokens=d[8], kind=d[9],
                 ends_line=bool(d[10]) if len(d) > 10 else True, context=d[11] if len(d) > 11 else "")
