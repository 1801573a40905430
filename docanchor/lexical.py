"""BM25 lexical search per namespace: an on-disk index kept current at every write, never rebuilt.

The engine is tantivy (:mod:`docanchor.lexical_engine`): incremental adds and deletes, segments
memory-mapped from ``<own_dir>/lexical/<collection>/`` (the data dir, or
``process_dir`` for a worker of ``docanchor serve --workers``), background merges. A write costs time in
proportion to the document; opening a namespace reads the index's metadata and checks it against
the document records (:meth:`LexicalIndex._verify`: chunks per document, one aggregation), so a
missing, damaged or diverged index is rebuilt or repaired from the store -- and logged -- before it
answers; nothing answers with BM25 silently switched off. Chunks are stored in the index too and
read from disk by id (:meth:`LexicalIndex.get_chunks`), so retrieval need not ask Chroma for the
text of a lexical hit. A chunk's BM25 terms come from :func:`docanchor.types.embedding_input` (its
embedding context, if any, then its text), the same string its vector was computed from.

With a Chroma server (``chroma_host``) several DocAnchor processes write the same collections and
each keeps its own index in its own data dir (or ``process_dir``). Each catches up incrementally: the store keeps a
change log per namespace (:meth:`docanchor.store.ChromaStore.changes_since`), and before a search
a process reads only the entries since its cursor and re-checks just those documents
(:meth:`LexicalIndex._catch_up`). The cursor lives in memory: a process that starts checks every
document once (the verification above), then follows the log.

Tokenisation (:func:`tokenize`) applies the same normalisation to chunks and queries: Unicode
NFKC and case folding; words of alphabetic scripts, English stop words (:func:`_stopwords`)
dropped and Snowball-stemmed (PyStemmer); runs of CJK characters become character unigrams plus
bigrams, because all-MiniLM-L6-v2 maps most Chinese characters to ``[UNK]`` and dense search cannot carry CJK
queries. The engine indexes these terms as they are.
"""
from __future__ import annotations

import itertools
import logging
import shutil
import threading
import time
import unicodedata
from collections import OrderedDict
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, Sequence

from docanchor.errors import StoreUnavailable
from docanchor.lexical_engine import Engine, LockBusy, OtherFormat, Row, chunk_json, writer_busy
from docanchor.settings import Settings
from docanchor.store import collection_name
from docanchor.text import ASCII_TERM_RUN as _ASCII_TOKEN, CJK_CHAR as _CJK_CHAR, TERM_RUN as _TOKEN
from docanchor.types import Chunk, DocumentRecord


def _stopwords() -> frozenset[str]:
    """bm25s's ``STOPWORDS_EN_PLUS``: 179 English function words (NLTK's list), question words
    ("what", "does", "about") included. Against bm25s's 33-word ``STOPWORDS_EN`` on
    bench/budget_recall.py: recall at 250/500/1000/2000 tokens 72.7/84.3/92.1/95.7 % ->
    71.6/84.6/92.8/96.2 %."""
    from bm25s.stopwords import STOPWORDS_EN_PLUS

    return frozenset(STOPWORDS_EN_PLUS)


STEM_CACHE_WORDS = 200_000
"""Distinct words whose stems :func:`tokenize` keeps in a plain dict (emptied when full): looking a
stem up there costs a fraction of a call into the stemmer per word (whose own cache is behind that
call), and chunks are tokenised again at every query that reads them (coverage, novelty, trimming).
Source: a bound on memory (about 200 bytes a word, so at most about 40 MB), not tuned."""


class _Stem:
    _lock = threading.Lock()
    _stemmer = None
    _stop: frozenset[str] = frozenset()
    _memo: dict[str, str] = {}

    @classmethod
    def stems(cls, stemmer, words: list[str]) -> list[str]:
        """``stemmer.stemWords(words)``, from :attr:`_memo` when it holds every word."""
        try:
            return list(map(cls._memo.__getitem__, words))
        except KeyError:
            stems = stemmer.stemWords(words)
            if len(cls._memo) > STEM_CACHE_WORDS:
                cls._memo = {}
            cls._memo.update(zip(words, stems))
            return stems

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
    if text.isascii():  # NFKC keeps ASCII as it is and case-folds it to lower case
        return _Stem.stems(stemmer, [run for run in _ASCII_TOKEN.findall(text.lower()) if run not in stop])
    text = unicodedata.normalize("NFKC", text).casefold()
    if _CJK_CHAR.search(text) is None:  # every run a word: stems of the non-stop words, in order
        return _Stem.stems(stemmer, [run for run in _TOKEN.findall(text) if run not in stop])
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
        stems = iter(_Stem.stems(stemmer, words))
        out = [next(stems) if t == "\0" else t for t in out]
    return out


def _is_cjk(ch: str) -> bool:
    return _CJK_CHAR.match(ch) is not None


log = logging.getLogger("docanchor.lexical")

CATCH_UP_MARGIN_S = 120.0
"""How far back (seconds) each catch-up re-reads the change log: an entry stamped up to this long
before the newest one seen, because its writer's clock ran behind or its write landed late, is
still found (entries already applied are skipped by id). The clocks of the hosts sharing a Chroma
server must agree to within this."""


CHUNK_CACHE_CHUNKS = 10_000
"""Chunks read by id that :class:`LexicalIndex` keeps decoded (least recently used go first),
until the next change of the index: retrieval reads the same chunks for query after query, and a
read costs an index search plus a JSON decode per chunk. Source: a bound on memory (about 1-2 kB
a chunk of the default 100 tokens, so 10-20 MB), not tuned."""


class _ChunkCache:
    """Decoded chunks by ``(namespace, chunk_id)``, valid for one :attr:`LexicalIndex.generation`."""

    def __init__(self, size: int = CHUNK_CACHE_CHUNKS) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._chunks: OrderedDict[tuple[str, str], Chunk] = OrderedDict()
        self._generation = -1

    def get(self, generation: int, namespace: str, ids: Sequence[str]) -> dict[str, Chunk]:
        """The cached chunks among ``ids``; everything is forgotten when ``generation`` moved on."""
        with self._lock:
            self._follow(generation)
            found = {}
            for cid in ids:
                chunk = self._chunks.get((namespace, cid))
                if chunk is not None:
                    self._chunks.move_to_end((namespace, cid))
                    found[cid] = chunk
            return found

    def put(self, generation: int, namespace: str, chunks: dict[str, Chunk]) -> None:
        """Keep ``chunks``, read while the index was at ``generation`` (dropped if it moved on)."""
        with self._lock:
            if not self._follow(generation):
                return
            for cid, chunk in chunks.items():
                self._chunks[(namespace, cid)] = chunk
            while len(self._chunks) > self.size:
                self._chunks.popitem(last=False)

    def _follow(self, generation: int) -> bool:
        """Forget everything when the index moved on to ``generation``; False for an older one."""
        if generation < self._generation:
            return False
        if generation > self._generation:
            self._chunks.clear()
            self._generation = generation
        return True


class _Cursor:
    """How far this process has followed one namespace's change log."""

    def __init__(self, since_ns: int) -> None:
        self.since_ns = since_ns
        self.seen: dict[str, int] = {}  # entry id -> stamp, for entries inside the margin


class LexicalIndex:
    """BM25 search over each namespace's chunks.

    Args:
        settings: ``own_dir`` says where the indexes live; ``chroma_host`` turns catch-up on.
        store: the chunk store: the document records are the truth the index is checked against,
            and chunks are read from it to repair or rebuild the index.

    Thread-safe. Every method raises :class:`StoreUnavailable` when the index cannot be read or
    written, or when it needs a repair that another process (holding its writer) must make.
    """

    def __init__(self, settings: Settings, store) -> None:
        self.settings = settings
        self.store = store
        self._lock = threading.RLock()
        self._engines: dict[str, Engine] = {}
        self._cursors: dict[str, _Cursor] = {}
        self.generation = 0
        """Bumped whenever the index changes (a write here, or another process's seen by catch-up),
        so callers can cache what depends on the namespace's documents."""
        self.memo: dict = {}
        """Callers' caches tied to this index (and to ``generation``; see retrieval.search)."""
        self._read = _ChunkCache()
        self._tickets = itertools.count()
        """Orders calls of :meth:`refresh` and the change-log reads they make (see there)."""
        self._caught_up: dict[str, int] = {}
        """The ticket each namespace's last completed catch-up took when it began reading the log."""

    def close(self) -> None:
        """Forget the open namespaces (an index's writer closes when no user in this process is left)."""
        with self._lock:
            self._engines.clear()
            self._cursors.clear()
            self._caught_up.clear()

    def path(self, namespace: str) -> Path:
        """The namespace's index directory."""
        return self.settings.own_dir / "lexical" / collection_name(namespace, "chunks")

    # ------------------------------------------------------------------ opening and checking
    def _engine(self, namespace: str, create: bool, leaving: Sequence[str] = ()) -> Engine | None:
        """The namespace's index, opened and checked against the records on first use.

        ``None`` when it has no index and no documents and ``create`` is False: reading a
        namespace that does not exist creates nothing. ``leaving``: documents whose records the
        caller has just deleted (see :meth:`_verify`).

        An index already opened and checked is returned without taking :attr:`_lock`, which a
        catch-up holds while it reads the change log from the Chroma server (:meth:`refresh`):
        reads of the index never wait for that round trip. Only checked indexes are in
        :attr:`_engines`, and only holders of the lock change it.
        """
        engine = self._engines.get(namespace)
        if engine is not None:
            return engine
        with self._lock:
            engine = self._engines.get(namespace)
            if engine is not None:
                return engine
            path = self.path(namespace)
            started_ns = time.time_ns()
            records = self.store.list_documents(namespace)
            try:
                engine = Engine.open(path, create=create or bool(records))
            except StoreUnavailable as exc:
                engine = self._discard(namespace, path, exc)
            if engine is None:
                return None
            self._cursors[namespace] = _Cursor(started_ns - int(CATCH_UP_MARGIN_S * 1e9))
            self._verify(namespace, engine, records, leaving)
            self._engines[namespace] = engine
            self._forget_old_file(namespace)
            return engine

    def _discard(self, namespace: str, path: Path, exc: StoreUnavailable) -> Engine:
        """Replace an index that cannot be opened with an empty one (filled by :meth:`_verify`),
        unless another process holds its writer (then that one keeps it: ``exc`` is raised)."""
        if writer_busy(path):
            raise exc
        if isinstance(exc, OtherFormat):
            log.warning("%s Rebuilding the index of namespace %r from the store (once).", exc, namespace)
        else:
            log.warning("the lexical index of namespace %r at %s cannot be opened (%s); rebuilding it from the store",
                        namespace, path, exc)
        Engine.forget(path)
        shutil.rmtree(path, ignore_errors=True)
        return Engine.open(path, create=True)

    def _verify(self, namespace: str, engine: Engine, records: list[DocumentRecord],
                leaving: Sequence[str] = ()) -> None:
        """Make the index hold exactly the recorded documents' chunks, counted per document.

        Documents indexed without a record (an ingest that failed or was killed) are removed;
        documents whose count differs from their record's ``n_chunks`` (missing or partial rows)
        are indexed again from the store. A process that cannot take the writer (another one
        holds it and keeps the index) leaves the repair to that one. Documents in ``leaving``
        are being deleted (their record goes first, see :meth:`delete`): removing their rows is
        that delete, not a repair, and is not logged as one.
        """
        try:
            counts = engine.doc_counts()
        except StoreUnavailable as exc:
            log.warning("the lexical index of namespace %r cannot be read (%s); rebuilding it from the store",
                        namespace, exc.__cause__ or exc)
            self._rebuild(namespace, engine, records)
            return
        expected = {r.doc_id: r.n_chunks for r in records}
        extra = sorted(d for d in counts if d not in expected)
        wrong = sorted(d for d, n in expected.items() if counts.get(d, 0) != n)
        if not extra and not wrong:
            return
        try:
            self._reindex_documents(namespace, engine, drop=extra, again=wrong)
        except LockBusy:
            log.info("lexical index of namespace %r differs from the records; its writer is in another process",
                     namespace)
            return
        stray = [d for d in extra if d not in leaving]
        if stray or wrong:
            log.warning("lexical index of namespace %r repaired: %d document(s) without a record removed, "
                        "%d re-indexed from the store", namespace, len(stray), len(wrong))

    def _rebuild(self, namespace: str, engine: Engine, records: list[DocumentRecord]) -> None:
        engine.write(self._stored_rows(namespace, [r.doc_id for r in records]), delete_all=True)
        self.generation += 1
        log.warning("lexical index of namespace %r rebuilt from the store: %d documents, %d chunks",
                    namespace, len(records), engine.num_chunks())

    def _reindex_documents(self, namespace: str, engine: Engine, drop: Sequence[str], again: Sequence[str]) -> None:
        engine.write(self._stored_rows(namespace, again), delete_docs=[*drop, *again])
        self.generation += 1

    def _stored_rows(self, namespace: str, doc_ids: Sequence[str]) -> Iterator[Row]:
        """The documents' chunks read from the store, one document at a time (memory stays flat)."""
        for doc_id in doc_ids:
            yield from _rows(self.store.get_chunks(namespace, doc_id))

    def _forget_old_file(self, namespace: str) -> None:
        """Remove the SQLite file earlier versions kept their BM25 rows in (now rebuilt here)."""
        old = self.settings.own_dir / "bm25" / f"{collection_name(namespace, 'chunks')}.sqlite"
        if old.exists():
            old.unlink(missing_ok=True)
            log.info("removed the old BM25 file %s (the lexical index now lives in %s)", old, self.path(namespace))

    def verify(self, namespace: str) -> None:
        """Check the namespace's index against the records now, and mend it (start-up does this;
        opening a namespace the first time does it anyway)."""
        with self._lock:
            opened = namespace in self._engines
            engine = self._engine(namespace, create=False)
            if engine is not None and opened:
                self._verify(namespace, engine, self.store.list_documents(namespace))

    def rebuild(self, namespace: str) -> None:
        """Rebuild the namespace's index from the store's records and chunks."""
        with self._lock:
            engine = self._engine(namespace, create=True)
            self._rebuild(namespace, engine, self.store.list_documents(namespace))

    # ------------------------------------------------------------------ catching up (Chroma server)
    def refresh(self, namespace: str) -> int:
        """Catch up with other processes' writes (Chroma server only); returns :attr:`generation`.

        Every write that was complete when this call began is seen. Concurrent calls share a
        read of the change log: one that waited for the lock while another thread caught up skips
        its own read when a catch-up began after it was called (that read saw all it must see).
        """
        asked = next(self._tickets)
        with self._lock:
            engine = self._engine(namespace, create=False)
            if engine is not None and self.settings.chroma_host and self._caught_up.get(namespace, -1) < asked:
                began = next(self._tickets)
                self._catch_up(namespace, engine)
                self._caught_up[namespace] = began
            return self.generation

    def _catch_up(self, namespace: str, engine: Engine) -> None:
        """Apply the change-log entries this process has not seen: each names a document whose
        record was written or deleted; the document is made to match its record (indexed again
        when the counts differ, dropped when the record is gone)."""
        cursor = self._cursors[namespace]
        entries = self.store.changes_since(namespace, cursor.since_ns)
        new = [(eid, ts, doc_id) for eid, ts, doc_id in entries if eid not in cursor.seen]
        if not new:
            return
        touched = sorted({doc_id for _, _, doc_id in new})
        counts = {d: engine.count(d) for d in touched}

        def recorded(doc_id: str) -> int | None:
            record = self.store.get_document(namespace, doc_id)
            return None if record is None else record.n_chunks

        drop, again = catch_up_plan(touched, counts, recorded)
        if drop or again:
            self._reindex_documents(namespace, engine, drop=drop, again=again)
        newest = max(ts for _, ts, _ in new)
        cursor.seen.update((eid, ts) for eid, ts, _ in new)
        cursor.since_ns = max(cursor.since_ns, newest - int(CATCH_UP_MARGIN_S * 1e9))
        cursor.seen = {e: ts for e, ts in cursor.seen.items() if ts >= cursor.since_ns}

    # ------------------------------------------------------------------ writes
    def add(self, namespace: str, chunks: Sequence[Chunk]) -> None:
        """Index (or re-index: same chunk ids replace) chunks; one commit.

        Raises:
            StoreUnavailable: the index cannot be written.
        """
        if not chunks:
            return
        rows = _rows(chunks)
        with self._lock:
            engine = self._engine(namespace, create=True)
            engine.write(rows, delete_chunks=[r[0] for r in rows])
            self.generation += 1

    def delete(self, namespace: str, doc_id: str) -> None:
        """Remove every chunk of ``doc_id`` from the namespace's index (no error if absent).

        Called after the document's record was deleted (the records are the truth; see
        :mod:`docanchor.integrity`). When this is the namespace's first use in the process (a
        ``docanchor delete``), opening checks the index against the records, which no longer
        name ``doc_id``: its rows are removed then, as this delete, not reported as a repair.
        """
        with self._lock:
            engine = self._engine(namespace, create=False, leaving=(doc_id,))
            if engine is None:
                return
            engine.write(delete_docs=[doc_id])
            self.generation += 1

    # ------------------------------------------------------------------ reads
    def get_chunks(self, namespace: str, chunk_ids: Iterable[str]) -> dict[str, Chunk]:
        """The indexed chunks with these ids, by id, read from disk (ids not indexed are left out),
        or from the chunks read since the index last changed (:data:`CHUNK_CACHE_CHUNKS`)."""
        ids = list(dict.fromkeys(chunk_ids))
        engine = self._engine(namespace, create=False) if ids else None
        if engine is None:
            return {}
        generation = self.generation
        found = self._read.get(generation, namespace, ids)
        missing = [cid for cid in ids if cid not in found]
        if missing:
            read = engine.chunks(missing)
            self._read.put(generation, namespace, read)
            found.update(read)
        return found

    def doc_freqs(self, namespace: str, terms: Iterable[str],
                  doc_ids: Iterable[str] | None = None) -> tuple[int, dict[str, int]]:
        """BM25's document frequencies in the namespace: ``(indexed chunks, {term: chunks holding
        it})`` for ``terms`` (as made by :func:`tokenize`); ``(0, {})`` without an index. With
        ``doc_ids``, counted over the chunks of those documents only.

        Raises:
            StoreUnavailable: the index cannot be read.
        """
        wanted = list(dict.fromkeys(terms))
        engine = self._engine(namespace, create=False) if wanted else None
        if engine is None:
            return 0, {}
        return engine.doc_freqs(wanted, None if doc_ids is None else list(dict.fromkeys(doc_ids)))

    def doc_counts(self, namespace: str) -> dict[str, int]:
        """Indexed chunks per document (for audits; no repair is made)."""
        engine = Engine.open(self.path(namespace), create=False)
        return engine.doc_counts() if engine is not None else {}

    def search(
        self, namespace: str, query: str, k: int, doc_ids: Iterable[str] | None = None, catch_up: bool = True,
    ) -> list[tuple[str, float]]:
        """The ``k`` best chunks for ``query`` by BM25.

        Args:
            doc_ids: when given, only chunks of these documents are scored.
            catch_up: ``False`` when the caller has just called :meth:`refresh` for this request
                (retrieval does, to read the document records): no second read of the change log.

        Returns:
            ``(chunk_id, score)`` pairs, best first, scores > 0 only; ties broken by chunk id
            so equal requests give equal answers.

        Raises:
            StoreUnavailable: the index cannot be read, and rebuilding it from the store failed.
        """
        terms = list(dict.fromkeys(tokenize(query)))
        wanted = None if doc_ids is None else list(dict.fromkeys(doc_ids))
        if not terms or k <= 0 or wanted == []:
            return []
        if catch_up:
            self.refresh(namespace)
        engine = self._engine(namespace, create=False)
        if engine is None:
            return []
        generation, read = self.generation, {}
        try:
            hits = engine.top(terms, k, wanted, read)
            self._read.put(generation, namespace, read)  # gather reads the hits' chunks next
            return hits
        except LockBusy:
            raise
        except StoreUnavailable as exc:  # damaged since it was opened: rebuild, then answer
            log.error("the lexical index of namespace %r failed a search (%s); rebuilding it from the store",
                      namespace, exc.__cause__ or exc)
            self._replace(namespace)
            engine = self._engine(namespace, create=True)
            return engine.top(terms, k, wanted)

    def _replace(self, namespace: str) -> None:
        """Throw the namespace's index away; the next open builds it from the store.

        Raises:
            StoreUnavailable: another process holds the index's writer (it must do this).
        """
        with self._lock:
            engine = self._engines.pop(namespace, None)
            if engine is not None:
                engine.close()
            if writer_busy(self.path(namespace)):
                raise StoreUnavailable(
                    f"The lexical index of namespace {namespace!r} is damaged and another process holds it; "
                    "restart that process (it rebuilds the index when it opens it).")
            Engine.forget(self.path(namespace))
            shutil.rmtree(self.path(namespace), ignore_errors=True)
            self.generation += 1


def catch_up_plan(touched: Iterable[str], counts: Mapping[str, int],
                  recorded: Callable[[str], int | None]) -> tuple[list[str], list[str]]:
    """What catching up with the change log does to the documents its new entries name (``touched``):
    ``(drop, again)``, the documents to remove from the index (no record, but indexed chunks) and
    those to index again from the store (a record whose ``n_chunks`` differs from the indexed count).

    Args:
        counts: indexed chunks per document (a document left out has none).
        recorded: a document's ``n_chunks`` in its record, ``None`` without a record.
    """
    drop, again = [], []
    for doc_id in touched:
        n_chunks, indexed = recorded(doc_id), counts.get(doc_id, 0)
        if n_chunks is None and indexed:
            drop.append(doc_id)
        elif n_chunks is not None and indexed != n_chunks:
            again.append(doc_id)
    return drop, again


def _rows(chunks: Iterable[Chunk]) -> list[Row]:
    rows = []
    for c in chunks:
        terms = tokenize(c.embedding_text)
        rows.append((c.chunk_id, c.doc_id, " ".join(terms), chunk_json(c, terms)))
    return rows
