"""Bulk ingest with the stages overlapped: the next files parse while the current ones embed.

:func:`ingest_stream` takes any number of sources and yields one :class:`Outcome` per source, in
the sources' order. Inside:

- **Parse ahead.** Up to :data:`PARSE_AHEAD` sources are read, parsed (binary formats and OCR in
  the sandbox's worker processes, :mod:`ingest.sandbox`) and chunked on :data:`PARSE_THREADS`
  background threads while the caller's thread embeds, so the embedder, the bottleneck, does not
  wait for parsing. A source is embedded as soon as it is parsed, whatever its place: a slow parse
  (the OCR of a scan) holds up only its own outcome, not the files after it (their outcomes wait
  for its turn; at most :data:`MAX_UNYIELDED` sources are taken past the oldest one not yielded).
- **Batches span documents.** Chunks of consecutive documents are embedded together,
  :data:`EMBED_WINDOW_BATCHES` times ``embedder.batch_size`` per ``embed()`` call (a call is
  topped up from the next parsed document before it runs; a partial one runs rather than waiting
  for a parse). The embedder sorts a call's texts by length before cutting them into batches, so
  a wider call pads less.
- **Writes are batched.** Embedded documents are written together: their chunks in steps of
  :data:`WRITE_STEP_CHUNKS` (one ``store.add_chunks`` and one ``lexical.add`` each, the stage
  ``storing`` reported after each), then each document's record (the record last, so a
  document is visible only once all of its chunks are stored). A batch is written once it holds
  :data:`STORE_BATCH_CHUNKS` chunks, once its oldest document has waited :data:`STORE_DELAY_S`
  since its last chunk was embedded (so a file's outcome, a CLI line, comes within that delay of
  its embedding), or whenever nothing else is ready to do, under the
  context's ``write_lock`` (held around the writes only, never while parsing or embedding). A
  document is not written while a source before it is still being prepared: that one may hold
  the same bytes, and of two sources with the same bytes the earlier one stores them (the later is
  its duplicate), in whichever order they were parsed. A write that fails leaves none of its
  documents' chunks behind (:func:`docanchor.integrity.discard_unrecorded`; a process killed
  mid-write leaves pending marks that start-up clean-up follows) -- except on a full disk, where the store is not touched again.
- **Disk space.** With a :class:`~docanchor.disk.DiskGuard`, a document's chunks must fit on the
  disk (:func:`docanchor.disk.chunk_store_bytes`) before it is embedded, and a write that fails for
  space is ``disk_full``.
- **Stopping.** An exception raised by the ``progress`` callback (a cancelled job) stops the whole
  stream at that step (a write between two of its steps) and is re-raised to the caller; a parse or
  chunking under way stops at its next progress report, and chunks written without their record
  are removed.

Memory stays bounded: at most :data:`PARSE_AHEAD` parsed documents wait, one embedding batch is
being filled, one write batch is being gathered, and at most :data:`MAX_UNYIELDED` outcomes wait
for their turn.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import partial
from time import monotonic
from typing import Any, Callable, ContextManager, Iterable, Iterator, Sequence

import numpy as np

from docanchor.context import Context
from docanchor.disk import DiskGuard, chunk_store_bytes
from docanchor.errors import DocAnchorError
from docanchor.integrity import discard_unrecorded
from docanchor.types import Chunk, DocumentRecord, ParsedDocument
from ingest.pipeline import IngestResult, Prepared, Progress, Source, make_record, prepare

log = logging.getLogger(__name__)

PARSE_THREADS = 2
"""Sources prepared (read, parsed, chunked) at once, beside the embedder. Two, so that one slow
parse (OCR of a scanned PDF: minutes for a few pages) does not starve the embedder: the next
files parse on the other thread and are embedded meanwhile (bench/ingest_bench.py over
../shared/corpus/pdf, whose first file is such a scan, measures it)."""
PARSE_AHEAD = 3
"""Sources being prepared, or prepared and not yet embedding (parsed documents held in memory)."""
MAX_UNYIELDED = 16
"""Most sources taken from the input whose outcomes are not yielded yet (those finished wait for
an earlier, slower one): a bound on the finished documents held for their turn. Source: a bound
on memory, not tuned."""
EMBED_WINDOW_BATCHES = 4
"""Embedding batches handed to the embedder in one call, across documents: it sorts their texts
by length, so each forward pass pads its texts to a closer length (``bench/embed_bench.py``,
configurations ``bf16-call64`` / ``bf16-call256``, measures the gain). A cancelled stream stops
after the call under way."""
STORE_BATCH_CHUNKS = 512
"""Chunks gathered before a write (fewer when nothing else is ready to do)."""
WRITE_STEP_CHUNKS = 1000
"""Chunks written per step of a write (one Chroma upsert and one lexical index commit); between
steps the stage ``storing`` reports its progress and a cancel or a server's stop is seen, so a stop
waits for one step, not for a whole book. Bounds: Chroma's ``get_max_batch_size()`` (a larger step
is split again by :meth:`docanchor.store.ChromaStore.add_chunks`) and the lexical index's commit per
step (fewer, larger steps commit less often); ``bench/store_steps.py`` measures both ways."""
STORE_DELAY_S = 2.0
"""Longest wait, in seconds, of an embedded document for its batch's write (fewer chunks than
:data:`STORE_BATCH_CHUNKS` are written then): a user sees each file stored soon after it is
embedded, and a write (one Chroma and one lexical call) happens at most about once per this delay."""
PROGRESS_POLL_S = 0.25
"""While waiting for a parse, how often its progress (OCR pages) is passed on, in seconds."""

StreamProgress = Callable[[int, str, int, int], None]
"""``progress(index, stage, done, total)``: source ``index`` (its position in the input) reached
``stage`` (parsing, ocr, loading, chunking, embedding, storing, anchoring); ``done``/``total`` count pages
during ocr, characters while chunking, and chunks while embedding and storing. Called on the
thread that iterates :func:`ingest_stream` (a parse thread's OCR and chunking progress is passed
on from there); an exception it raises stops the stream (see :func:`ingest_stream`)."""


class _Abort(Exception):
    """The caller's progress callback raised ``cause``: the stream stops and re-raises it."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(repr(cause))
        self.cause = cause


class _Stopped(Exception):
    """Raised on a parse thread at its next progress report once its stream has stopped."""


@dataclass
class Outcome:
    """What became of one source: ``result`` when it was stored or already stored, else ``error``."""

    index: int
    source: Source
    result: IngestResult | None = None
    error: DocAnchorError | None = None


@dataclass
class _Doc:
    """A parsed and chunked source on its way through embedding and storing."""

    index: int
    source: Source
    doc_id: str
    parsed: ParsedDocument
    chunks: list[Chunk]
    vectors: np.ndarray  # float32 rows, one per chunk, filled up to ``embedded``
    embedded: int = 0
    ready_at: float = 0.0  # when its last chunk was embedded (``monotonic()`` seconds)
    started: bool = False  # its embedding began (disk checked, stage reported)
    first: _Doc | None = None  # the earlier source with the same bytes in this stream
    outcome: Outcome | None = None


def ingest_document(
    ctx: Context,
    data: bytes,
    *,
    namespace: str,
    filename: str | None = None,
    title: str | None = None,
    progress: Progress | None = None,
    source: str | None = None,
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
    disk: DiskGuard | None = None,
    prepared: Prepared | None = None,
) -> IngestResult:
    """Ingest one document's bytes into ``namespace`` (:func:`ingest_stream` of one source).

    Args:
        data: the file's bytes (text given as a string is UTF-8 encoded by the caller).
        filename: the original name, used as a type hint and display title only (never a path).
        title: a display title that wins over the one found in the document.
        progress: called as work advances.
        source: where the bytes came from, recorded in a new document's ``sources`` (see
            :class:`docanchor.types.DocumentRecord`); a duplicate's record is left as it is.
        tags, metadata: stored in a new document's record as given (checked by the caller, see
            :mod:`docanchor.library`); a duplicate keeps its own.
        disk: checks free space before the embedding and names a write that failed for space.
        prepared: these bytes parsed and chunked already (see :class:`~ingest.pipeline.Source`).

    Returns:
        The result; ``duplicate`` is True when these bytes were already stored.

    Raises:
        DocumentError: ``empty_file`` (zero bytes or only whitespace), ``no_text`` or a parser's
            code (see ``ingest.parsers``).
        TooLarge: the bytes exceed ``max_upload_bytes``.
        UnsupportedType: the type is none DocAnchor reads.
        StoreUnavailable: the store could not be written.
        DiskFull: ``disk_full``, before the chunks are embedded or when their write failed for space.
        Whatever ``progress`` raises (nothing of the document stays stored).
    """
    report = (lambda _i, stage, done, total: progress(stage, done, total)) if progress else None
    [outcome] = ingest_stream(ctx, [Source(data=data, filename=filename, title=title, origin=source, tags=tuple(tags),
                                      metadata=metadata, prepared=prepared)], namespace=namespace,
                              progress=report, disk=disk)
    if outcome.error is not None:
        raise outcome.error
    assert outcome.result is not None
    return outcome.result


def ingest_stream(
    ctx: Context,
    sources: Iterable[Source],
    *,
    namespace: str,
    progress: StreamProgress | None = None,
    disk: DiskGuard | None = None,
    check: Callable[[Source], Source] | None = None,
) -> Iterator[Outcome]:
    """Ingest ``sources`` into ``namespace``, yielding one outcome per source in input order.

    Args:
        ctx: the embedder, store and lexical index.
        sources: files or bytes to ingest; read lazily, at most :data:`PARSE_AHEAD` ahead.
        progress: see :data:`StreamProgress`; an exception it raises stops the stream and is
            re-raised from the iteration (chunks written without their record are removed).
        disk: the data dir's free-space guard (see the module docstring); ``None`` checks nothing.
        check: applied to each source when it is taken from ``sources`` (on the iterating thread);
            returns the source to ingest, or raises a :class:`~docanchor.errors.DocAnchorError`
            that becomes that source's outcome (the others go on).

    Yields:
        An :class:`Outcome` per source: the stored document's result (``duplicate`` True when the
        same bytes were stored already, by an earlier source of the stream too), or the
        :class:`~docanchor.errors.DocAnchorError` that refused it (``empty_file``, ``too_large``, a
        parser's code, ``store_unavailable``, ``disk_full`` ...). An unexpected exception is
        logged and reported as the root error (``internal``); one bad source never stops the others.
    """
    _ = ctx.store, ctx.counter, ctx.lexical  # created here, not raced for by the parse threads
    run = _Run(ctx, namespace, progress or (lambda *_: None), disk, check or (lambda source: source))
    pool = ThreadPoolExecutor(max_workers=PARSE_THREADS, thread_name_prefix="docanchor-parse")
    try:
        yield from run.loop(pool, enumerate(sources))
    except _Abort as stop:
        raise stop.cause from None
    finally:  # also when the caller stops early: queued preparations are dropped, not awaited
        run.stopped.set()
        pool.shutdown(wait=False, cancel_futures=True)


class _Run:
    """The state of one :func:`ingest_stream` call (used from the iterating thread only)."""

    def __init__(self, ctx: Context, namespace: str, report: StreamProgress, disk: DiskGuard | None,
                 check: Callable[[Source], Source]) -> None:
        self.ctx, self.namespace, self.caller, self.disk, self.check = ctx, namespace, report, disk, check
        self.lock = ctx.write_lock
        self.dimension = ctx.embedder.dimension
        self.stopped = threading.Event()  # set when the stream ends: parse threads stop at their next report
        self.window: deque[tuple[int, Source, Future]] = deque()  # being prepared, in order
        self.order: deque[int] = deque()  # indexes taken from the input, not yet yielded, in order
        self.taken: dict[int, _Doc | Outcome] = {}  # what became of those already prepared
        self.todo: deque[_Doc] = deque()  # chunks left to embed (the head may be part-done)
        self.ready: list[_Doc] = []  # embedded, not yet written
        self.by_id: dict[str, _Doc] = {}
        self.batch = max(1, int(getattr(ctx.embedder, "batch_size", 64))) * EMBED_WINDOW_BATCHES
        self.events: queue.SimpleQueue = queue.SimpleQueue()  # progress from the parse threads

    def loop(self, pool: ThreadPoolExecutor, sources: Iterator[tuple[int, Source]]) -> Iterator[Outcome]:
        more = True
        while True:
            while more and len(self.window) < PARSE_AHEAD and len(self.order) < MAX_UNYIELDED:
                nxt = next(sources, None)
                if nxt is None:
                    more = False
                    break
                index, source = nxt
                if source.prepared is None:
                    self.report(index, "parsing", 0, 1)
                self.window.append((index, *self._submit(pool, index, source)))
                self.order.append(index)
            self._relay()
            waiting = self._todo_chunks()
            if self._parsed() is not None and waiting < self.batch:
                self._take()
            elif waiting:
                self._embed_batch()
            elif self._writable():
                self._write()
            elif self.window:
                self._take()  # nothing else to do: wait for the parse
            else:
                break
            if self._write_due():
                self._write()
            yield from self._emit()
        yield from self._emit()

    def _submit(self, pool: ThreadPoolExecutor, index: int, source: Source) -> tuple[Source, Future]:
        """``source`` checked, and its preparation queued; a source the check refuses gets a
        future that holds the refusal (so its outcome keeps its place in the order)."""
        try:
            source = self.check(source)
        except DocAnchorError as err:
            refused: Future = Future()
            refused.set_exception(err)
            return source, refused
        return source, pool.submit(prepare, self.ctx, source, self.namespace, partial(self._queue_event, index))

    def _write_due(self) -> bool:
        """Whether the embedded documents are written now: :data:`STORE_BATCH_CHUNKS` of them,
        the oldest waited :data:`STORE_DELAY_S`, or nothing else is ready to do."""
        writable = self._writable()
        if not writable:
            return False
        if (sum(len(d.chunks) for d in writable) >= STORE_BATCH_CHUNKS
                or monotonic() - writable[0].ready_at >= STORE_DELAY_S):
            return True
        return not self._todo_chunks() and self._parsed() is None

    def report(self, index: int, stage: str, done: int, total: int) -> None:
        """Call the caller's progress; what it raises stops the stream (:class:`_Abort`)."""
        try:
            self.caller(index, stage, done, total)
        except BaseException as exc:
            raise _Abort(exc) from exc

    def _todo_chunks(self) -> int:
        return sum(len(d.chunks) - d.embedded for d in self.todo)

    def _writable(self) -> list[_Doc]:
        """The embedded documents that may be written now: those before every source still being
        prepared (one may hold the same bytes, and the earlier source is the one that stores them)."""
        parsing = min((index for index, _, _ in self.window), default=None)
        return [d for d in self.ready if parsing is None or d.index < parsing]

    def _queue_event(self, index: int, stage: str, done: int, total: int) -> None:
        """A parse thread's progress for source ``index``, passed on by :meth:`_relay`.

        Raises:
            _Stopped: the stream has ended (the caller stopped it): the parse stops here.
        """
        if self.stopped.is_set():
            raise _Stopped(index)
        self.events.put((index, stage, done, total))

    def _relay(self) -> None:
        """Pass on the progress the parse threads reported (on this, the iterating thread)."""
        while True:
            try:
                event = self.events.get_nowait()
            except queue.Empty:
                return
            self.report(*event)

    def _parsed(self) -> int | None:
        """The place in :attr:`window` of the oldest source whose preparation has ended, if any."""
        return next((i for i, (_, _, future) in enumerate(self.window) if future.done()), None)

    def _take(self) -> None:
        """Move a prepared source on (the oldest one prepared; when none is, the first to end is
        waited for): an outcome, a duplicate, or chunks to embed."""
        while (at := self._parsed()) is None:  # OCR progress goes on while the parses are awaited
            wait([future for _, _, future in self.window], timeout=PROGRESS_POLL_S, return_when=FIRST_COMPLETED)
            self._relay()
        self._relay()
        index, source, future = self.window[at]
        del self.window[at]
        try:
            got = future.result()
        except DocAnchorError as err:
            got = Outcome(index, source, error=err)
        except Exception:
            log.exception("preparing source %d (%s) failed", index, source.label)
            got = Outcome(index, source, error=DocAnchorError())
        if isinstance(got, IngestResult):  # these bytes are stored already
            got = Outcome(index, source, result=got)
        if isinstance(got, Outcome):
            self.taken[index] = got
            return
        doc = _Doc(index, source, got.doc_id, got.parsed, got.chunks,
                   np.empty((len(got.chunks), self.dimension), dtype=np.float32))
        self.taken[index] = doc
        first = self.by_id.get(doc.doc_id)
        if first is not None and (first.outcome is None or first.outcome.error is None):
            if first.index > doc.index and first.outcome is None:
                self._stand_in(doc, first)  # the earlier source stores them, as when parsed in order
            else:
                doc.first = first  # same bytes in this stream, stored by the first: it answers for both
            return
        self.by_id[doc.doc_id] = doc
        self.todo.append(doc)

    def _stand_in(self, doc: _Doc, later: _Doc) -> None:
        """``doc`` takes the place of ``later``, a source after it with the same bytes that was
        prepared first and is not written yet: its chunks (the same, from the same bytes), the
        vectors embedded so far and its place in the queues pass to ``doc``, which stores them
        under its own source; ``later`` becomes the duplicate."""
        doc.vectors, doc.embedded = later.vectors, later.embedded
        doc.ready_at, doc.started = later.ready_at, later.started
        for waiting in (self.todo, self.ready):
            for i, queued in enumerate(waiting):
                if queued is later:
                    waiting[i] = doc
        later.first = doc
        self.by_id[doc.doc_id] = doc

    def _embed_batch(self) -> None:
        """Embed up to one call's chunks (:data:`EMBED_WINDOW_BATCHES` batches), taken in order across
        the waiting documents."""
        parts: list[tuple[_Doc, int, int]] = []
        room = self.batch
        for doc in list(self.todo):
            if not doc.started and not self._start(doc):
                continue
            start = doc.embedded
            n = min(room, len(doc.chunks) - start)
            parts.append((doc, start, start + n))
            room -= n
            if not room:
                break
        texts = [c.embedding_text for doc, a, b in parts for c in doc.chunks[a:b]]
        try:
            vectors = self.ctx.embedder.embed(texts)
        except Exception as exc:
            for doc, _a, _b in parts:
                self._fail(doc, exc)
                self.todo.remove(doc)
            return
        at = 0
        for doc, a, b in parts:
            doc.vectors[a:b] = vectors[at : at + b - a]
            doc.embedded, at = b, at + b - a
            self.report(doc.index, "embedding", b, len(doc.chunks))
        while self.todo and self.todo[0].embedded == len(self.todo[0].chunks):
            self.todo[0].ready_at = monotonic()
            self.ready.append(self.todo.popleft())

    def _start(self, doc: _Doc) -> bool:
        """Begin ``doc``'s embedding (stage ``embedding`` reported first): its chunks must fit on
        the disk (else it fails with ``disk_full`` and leaves the queue); returns whether it may go on."""
        doc.started = True
        self.report(doc.index, "embedding", 0, len(doc.chunks))
        if self.disk is not None:
            try:
                self.disk.check(chunk_store_bytes(len(doc.chunks), self.dimension))
            except DocAnchorError as err:
                self._fail(doc, err)
                self.todo.remove(doc)
                return False
        return True

    def _write(self) -> None:
        """Store the embedded documents: chunks of all in steps to Chroma and the lexical index
        (:meth:`_write_chunks`), then each record. Documents stored meanwhile by someone else become
        duplicates."""
        docs = self._writable()
        self.ready = [d for d in self.ready if not any(d is w for w in docs)]
        try:
            for doc in docs:
                self.report(doc.index, "storing", 0, len(doc.chunks))
            records = [make_record(self.ctx, d.doc_id, d.source, d.parsed, d.chunks, d.vectors) for d in docs]
            with self._guard(), self.lock:
                fresh = self._not_stored(docs, records)
                self._write_chunks([d for d, _r in fresh])
                for doc, record in fresh:
                    self.report(doc.index, "anchoring", 0, 1)
                    self.ctx.store.put_document(self.namespace, record)
                    doc.outcome = Outcome(doc.index, doc.source, IngestResult(record, False, doc.parsed, doc.chunks))
                    self.report(doc.index, "anchoring", 1, 1)
        except (Exception, KeyboardInterrupt) as exc:
            unwritten = [doc for doc in docs if doc.outcome is None]
            self._discard(unwritten)  # (other BaseExceptions stand for a killed process: start-up cleans up)
            if isinstance(exc, (_Abort, KeyboardInterrupt)):
                raise
            for doc in unwritten:
                self._fail(doc, exc)

    def _write_chunks(self, docs: list[_Doc]) -> None:
        """Write the chunks of ``docs`` to Chroma and the lexical index, :data:`WRITE_STEP_CHUNKS`
        at a time across the documents, reporting each document's chunks stored (stage ``storing``)
        after every step: what the progress callback raises (a cancel, a server's stop) stops the
        write there."""
        chunks = [c for d in docs for c in d.chunks]
        if not chunks:
            return
        vectors = np.concatenate([d.vectors for d in docs])
        ends = np.cumsum([len(d.chunks) for d in docs])  # each document's end in ``chunks``
        for start in range(0, len(chunks), WRITE_STEP_CHUNKS):
            stop = min(start + WRITE_STEP_CHUNKS, len(chunks))
            self.ctx.store.add_chunks(self.namespace, chunks[start:stop], vectors[start:stop])
            self.ctx.lexical.add(self.namespace, chunks[start:stop])
            for doc, end in zip(docs, ends):
                begin = end - len(doc.chunks)
                if begin < stop and end > start:  # this step wrote some of its chunks
                    self.report(doc.index, "storing", int(min(end, stop) - begin), len(doc.chunks))

    def _guard(self) -> ContextManager:
        """Turns a write's error into ``disk_full`` when the disk is its cause."""
        return self.disk.guard() if self.disk is not None else contextlib.nullcontext()

    def _discard(self, docs: list[_Doc]) -> None:
        """Remove the chunks a failed write left of ``docs`` (Chroma and the lexical index) --
        unless the disk is full: Chroma may block on a full disk, and start-up clean-up removes them."""
        if self.disk is not None and self.disk.health() is not None:
            return
        for doc in docs:
            try:
                with self.lock:
                    discard_unrecorded(self.ctx, self.namespace, doc.doc_id)
            except DocAnchorError as err:  # expected (the store busy or gone): its sentence; the traceback with -v
                log.warning("could not remove the chunks of a failed ingest (%s): %s", doc.source.label, err.message)
                log.debug("cause", exc_info=True)
            except Exception:
                log.warning("could not remove the chunks of a failed ingest (%s)", doc.source.label, exc_info=True)

    def _not_stored(self, docs: list[_Doc], records: list[DocumentRecord]) -> list[tuple[_Doc, DocumentRecord]]:
        """The documents still to write; the others (stored meanwhile) get a duplicate outcome.
        A failed earlier attempt may have left chunks of a fresh one behind: they are cleared."""
        fresh = []
        for doc, record in zip(docs, records):
            existing = self.ctx.store.get_document(self.namespace, doc.doc_id)
            if existing is not None:
                doc.outcome = Outcome(doc.index, doc.source, IngestResult(existing, True))
                continue
            self.ctx.store.delete_document(self.namespace, doc.doc_id)
            fresh.append((doc, record))
        return fresh

    def _fail(self, doc: _Doc, exc: Exception) -> None:
        if not isinstance(exc, DocAnchorError):
            log.error("ingest of source %d (%s) failed", doc.index, doc.source.label, exc_info=exc)
            root = DocAnchorError()
            root.__cause__, exc = exc, root
        doc.outcome = Outcome(doc.index, doc.source, error=exc)

    def _emit(self) -> Iterator[Outcome]:
        """Yield the finished outcomes at the head of the input order."""
        while self.order and self.order[0] in self.taken:
            head = self.taken[self.order[0]]
            if isinstance(head, _Doc):
                done = head.first.outcome if head.first is not None else head.outcome
                if done is None:
                    return
                if head.first is not None:
                    result = done.result and IngestResult(done.result.record, True)
                    head.outcome = Outcome(head.index, head.source, result, done.error)
                head = head.outcome
            del self.taken[self.order.popleft()]
            yield head
