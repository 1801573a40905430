"""The ingest job runner behind :meth:`plugin.api.DocAnchor.submit`: queues, URL fetches, cancelling.

- **Two lanes, by work.** A job starts in the ``small`` or the ``large`` lane by its bytes and moves
  from ``small`` to ``large`` once its chunk count is known, before it embeds any (:func:`job_lane`);
  each lane runs one job at a time, so a small upload never waits behind a big one (only for the
  parse and chunking of another small-lane job, and briefly for store writes: ``Context.write_lock``).
  A job that moves takes its chunks along (at most :data:`KEPT_FOR_LARGE_LANE` jobs' at a time): it
  is parsed and chunked once, and its progress never goes back.
- **URL jobs** are fetched by a pool of :data:`FETCH_WORKERS` threads (stage ``fetching``), never by
  a request thread; the fetched bytes then join a lane like an upload.
- **Waiting is bounded.** A request waits for its job (``wait_s``) only while fewer than half of the
  server's threads are already waiting; otherwise it answers ``202`` at once, so slow jobs or
  fetches can never take every request thread (``/healthz`` and reads keep answering).
- **Cancelling.** :meth:`JobRunner.cancel` ends a queued job at once and stops a running one at its
  next step (a chunking window, an embedding batch, a storing step...); what it had stored is removed
  (:func:`ingest.stream.ingest_stream`, through :meth:`plugin.api.DocAnchor.ingest_bytes`). The request
  is kept on the job, so a restart does not run a cancelled job again.
- **Stopping the server** (SIGTERM, Ctrl+C): :meth:`JobRunner.interrupt` starts no more jobs and stops
  the running ones at their next step the same way, but leaves them ``queued`` with their upload, so
  the next start resumes them (:meth:`JobRunner.resume`); requests waiting for a job answer at once.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator

from docanchor.errors import Conflict, DiskFull, DocAnchorError, job_finished, restored
from docanchor.jobs import Job
from docanchor.memory import TRIM_EVERY_CHUNKS, release_freed
from docanchor.types import make_doc_id
from ingest.fetch import check_url

if TYPE_CHECKING:
    from docanchor.settings import Settings
    from ingest.pipeline import Prepared
    from plugin.api import DocAnchor

log = logging.getLogger("docanchor.jobs")

FETCH_WORKERS = 2
"""URL fetches at once; more URL jobs wait in stage ``fetching`` (each fetch ends by its deadline)."""
CANCEL_WAIT_S = 10.0
"""How long :meth:`JobRunner.cancel` waits for a running job to stop before answering, in seconds."""


class Cancelled(Exception):
    """Raised inside a running job (from its progress callback) when it was cancelled."""


class Interrupted(Exception):
    """Raised inside a running job (from its progress callback) when the server stops (:meth:`JobRunner.interrupt`)."""


TIDY_RETRY_S = 5.0
"""How often, in seconds, the runner tries again to remove what a failed job left in the store when
its own removal failed (the Chroma server stopped during the write), until the store answers
(:func:`docanchor.integrity.discard_left_behind`). Source: one cheap request per try, not tuned."""
INTERRUPT_WAIT_S = 30.0
"""Longest wait, in seconds, for running jobs to reach their next step when the server stops; a
backstop (a step is a chunking window, an embedding batch or a storing step,
``ingest.stream.WRITE_STEP_CHUNKS``), not a figure anything is tuned to."""


class MoveToLargeLane(Exception):
    """Raised inside a small-lane job whose chunks make it a large job."""


KEPT_FOR_LARGE_LANE = 2
"""Jobs moved to the large lane whose chunks are kept in memory until that lane runs them (each
under ``settings.small_job_bytes`` of upload); a job moved beyond them is parsed and chunked again
there. Source: a bound on memory, not tuned."""


def job_lane(settings: "Settings", *, size_bytes: int, n_chunks: int | None = None) -> str:
    """The lane an ingest job belongs in: ``"small"`` or ``"large"``.

    A job is large when its upload is over ``settings.small_job_bytes`` (known at once; bounds the
    parse of a small-lane job) or, once chunked, it has over ``settings.small_job_chunks`` chunks
    (``n_chunks``; ``None`` before chunking).

    Source: a job's time is mostly embedding, one embedding per chunk, so chunks measure its work;
    bytes do not (a 1.2 MB GBK novel under the byte limit is 11,334 chunks, issue 17's trial, where
    a 70-byte upload then waited ~15 minutes behind it in the small lane). The 500-chunk default
    keeps a small-lane job to about 50,000 tokens (``chunk_tokens`` 100).
    """
    if size_bytes > settings.small_job_bytes:
        return "large"
    if n_chunks is not None and n_chunks > settings.small_job_chunks:
        return "large"
    return "small"


class JobRunner:
    """Runs the ingest jobs of one :class:`~plugin.api.DocAnchor`.

    Args:
        da: the instance whose ``jobs``, ``ingest_bytes``, ``fetch`` and store the jobs use.
    """

    def __init__(self, da: "DocAnchor") -> None:
        self.da = da
        self._lanes: dict[str, ThreadPoolExecutor] = {}
        self._fetchers: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        """Guards lane and pool creation, the start of a job, and cancelling it."""
        self._submit_lock = threading.Lock()
        """Makes 'is this document already being replaced?' and queuing the replacement one step."""
        self._cancel: dict[str, threading.Event] = {}
        self._prepared: dict[str, Prepared] = {}
        """Chunks of jobs that moved to the large lane, by job id, until it runs them (:meth:`_prepare`)."""
        self._sync_replacing: set[tuple[str, str]] = set()
        """(namespace, doc_id) of documents a synchronous :meth:`~plugin.api.DocAnchor.replace` is replacing."""
        self._loading: set[str] = set()
        """Jobs loading the embedding model (stage ``loading``); a job queued meanwhile waits for the load too."""
        self._waiters = threading.BoundedSemaphore(max(1, da.settings.server_threads // 2))
        self._stopping = threading.Event()
        """Set by :meth:`interrupt`: no job starts, running ones stop at their next step, waits end."""
        self._quit_tidying = threading.Event()
        self._tidier: threading.Thread | None = None
        """Removes what failed jobs left in the store once it answers again (:meth:`_tidy_later`)."""

    # ----------------------------------------------------------------- submitting
    def submit(self, data: bytes, *, filename: str, title: str | None, namespace: str, wait_s: float,
               replace: str | None, source: str | None, tags: list[str] | None = None,
               metadata: dict | None = None) -> Job:
        """Queue an upload; see :meth:`plugin.api.DocAnchor.submit` (``tags`` and ``metadata`` checked
        by the caller). What is refused without parsing (:func:`ingest.pipeline.refuse_at_upload`:
        empty, no supported type, a zip bomb) is refused here, before a job exists; what needs a
        parse (an encrypted PDF, a damaged file, a PDF decompression bomb) fails in the job."""
        from ingest.pipeline import refuse_at_upload

        refuse_at_upload(data, filename)  # cheap refusals at once, not after the queue
        doc_id = make_doc_id(data)
        options = _options(title, replace, source, tags, metadata)
        job = self._create(namespace, replace, lambda: self.da.jobs.create(
            namespace, filename, data, options, doc_id=doc_id, replaces=replace))
        try:
            if not self._finish_duplicate(job, replace, options):
                self._enqueue(job, len(data))
        except Exception as exc:  # the job must end; the caller hears why
            self._end_failed(job, exc)
            raise
        return self.wait(job.job_id, wait_s)

    def submit_url(self, url: str, *, title: str | None, namespace: str, wait_s: float,
                   replace: str | None, source: str | None, tags: list[str] | None = None,
                   metadata: dict | None = None) -> Job:
        """Queue a URL job; see :meth:`plugin.api.DocAnchor.submit_url`."""
        parts = check_url(url)
        name = parts.path.rstrip("/").rsplit("/", 1)[-1] or parts.hostname or "download"
        options = _options(title, replace, source, tags, metadata)
        job = self._create(namespace, replace, lambda: self.da.jobs.create(
            namespace, name[:300], None, options, replaces=replace, url=url.strip()))
        self._queue_fetch(job.job_id)
        return self.wait(job.job_id, wait_s)

    def _create(self, namespace: str, replace: str | None, create: Callable[[], Job]) -> Job:
        """``create()`` the job; a replacement only after :meth:`_check_replace`, in one step with it."""
        if replace is None:
            return create()
        with self._submit_lock:
            self._check_replace(namespace, replace)
            return create()

    @contextmanager
    def replacing(self, namespace: str, doc_id: str) -> Iterator[None]:
        """Hold ``doc_id`` as being replaced for a synchronous replacement (see :meth:`_check_replace`)."""
        with self._submit_lock:
            self._check_replace(namespace, doc_id)
            self._sync_replacing.add((namespace, doc_id))
        try:
            yield
        finally:
            with self._submit_lock:
                self._sync_replacing.discard((namespace, doc_id))

    def _check_replace(self, namespace: str, replace: str | None) -> None:
        """Raises: NotFound / Conflict from ``get_document``; Conflict ``replace_in_progress`` while
        another job (or a synchronous replace) replaces the same document: replacements of one
        document are serialised, else both would keep their new version and fork it."""
        if replace is None:
            return
        self.da.get_document(replace, namespace)
        other = self.da.jobs.replacing(namespace, replace)
        if other is None and (namespace, replace) not in self._sync_replacing:
            return
        by = f"job {other.job_id}" if other else "another request"
        poll = f" (GET /v1/jobs/{other.job_id})" if other else ""
        raise Conflict(
            f"Document {replace} is already being replaced by {by}; wait until that ends{poll}, then replace the "
            "document it produced.", code="replace_in_progress", doc_id=replace,
            **({"job_id": other.job_id} if other else {}),
        )

    def _finish_duplicate(self, job: Job, replace: str | None, options: dict) -> bool:
        """End ``job`` at once when its bytes are stored already (its ``source`` added to the
        document's sources, its ``tags`` and ``metadata`` applied as by
        :meth:`plugin.api.DocAnchor.update_document`); returns whether it did -- not when the document
        was deleted since it was looked up (``document_deleted``): the job then stores the bytes, whole."""
        from plugin.api import ingest_answer

        existing = self.da.ctx.store.get_document(job.namespace, job.doc_id) if job.doc_id else None
        if existing is None:
            return False
        try:
            existing = self.da.remember_source(job.namespace, existing, options.get("source"))
            existing = self.da.label(job.namespace, existing, options.get("tags"), options.get("metadata"))
        except Conflict as err:  # deleted since it was looked up: the job stores the bytes again, whole
            if err.code != "document_deleted":
                raise
            return False
        result = ingest_answer(existing, duplicate=True)
        if replace is not None:
            result.update(self.da.drop_replaced(job.namespace, replace, existing.doc_id))
        n = existing.n_chunks
        self.da.jobs.update(job, status="done", stage="done", done=n, total=n, doc_id=existing.doc_id, result=result)
        return True

    def _enqueue(self, job: Job, size_bytes: int, lane: str | None = None) -> None:
        """Queue ``job`` in ``lane`` (default: by its bytes, :func:`job_lane`)."""
        lane = lane or job_lane(self.da.settings, size_bytes=size_bytes)
        with self._lock:
            if self._stopping.is_set():  # the server stops: the job stays queued for the next start
                return
            pool = self._lanes.get(lane)
            if pool is None:
                pool = self._lanes[lane] = ThreadPoolExecutor(1, thread_name_prefix=f"docanchor-ingest-{lane}")
            pool.submit(self._run, job.job_id, lane)

    def _queue_fetch(self, job_id: str) -> None:
        """Give a URL job to the fetch threads (none while the server stops: it stays queued for the next start)."""
        with self._lock:
            if self._stopping.is_set():
                return
            if self._fetchers is None:
                self._fetchers = ThreadPoolExecutor(FETCH_WORKERS, thread_name_prefix="docanchor-fetch")
            self._fetchers.submit(self._fetch_job, job_id)

    # ----------------------------------------------------------------- waiting
    def wait(self, job_id: str, wait_s: float) -> Job:
        """The job once it ends, or as it stands after ``wait_s`` seconds -- or at once when half
        the server's threads are already waiting for jobs, and as soon as the job loads the
        embedding model (stage ``loading``: the first ingest of a process, which takes seconds
        before any chunk is embedded; the caller polls instead) or is queued while another job
        loads it (it waits for that load too)."""
        if wait_s <= 0 or not self._waiters.acquire(blocking=False):
            return self.da.get_job(job_id)
        try:
            deadline = time.monotonic() + wait_s
            while True:
                job = self.da.get_job(job_id)
                behind_load = job.status == "queued" and bool(self._loading)
                if (job.finished or job.stage == "loading" or behind_load or time.monotonic() >= deadline
                        or self._stopping.is_set()):
                    return job
                time.sleep(0.05)
        finally:
            self._waiters.release()

    # ----------------------------------------------------------------- running
    def _fetch_job(self, job_id: str) -> None:
        from ingest.pipeline import refuse_at_upload

        job = self._start(job_id, stage="fetching")
        if job is None:
            return
        try:
            fetched = self.da.fetch(job.url or "")
            refuse_at_upload(fetched.data, fetched.filename)  # as an upload is, before the job joins a lane
            from plugin.v1 import display_name  # the one rule for names shown to users

            job = self.da.jobs.attach(job, fetched.data, filename=display_name(fetched.filename) or "",
                                      doc_id=make_doc_id(fetched.data))
            with self._lock:  # from here a cancel finds it queued
                self._stop_if_cancelled(job)
                self._cancel.pop(job.job_id, None)
                job = self.da.jobs.update(job, status="queued", stage="queued")
            _data, options = self.da.jobs.payload(job.job_id)
            if not self._finish_duplicate(job, job.replaces, options):
                self._enqueue(job, len(fetched.data))
        except Cancelled:
            self._end_cancelled(job)
        except Interrupted:
            self._end_interrupted(job)
        except Exception as exc:  # noqa: BLE001 - a job must always end
            self._end_failed(job, exc)
        finally:
            with self._lock:
                self._cancel.pop(job.job_id, None)

    def _run(self, job_id: str, lane: str = "small") -> None:
        from plugin.api import ingest_answer

        with self._lock:
            prepared = self._prepared.pop(job_id, None)  # chunked in the small lane before it moved here
        job = self._start(job_id, stage=None if prepared is not None else "parsing")
        if job is None:
            return
        moved = False
        try:
            data, options = self.da.jobs.payload(job.job_id)
            meter = self.da.embedding_meter.watch()
            trimmed = [0]  # chunks embedded at the last trim (docanchor.memory)

            def progress(stage: str, done: int, total: int) -> None:
                if stage == "embedding" and done - trimmed[0] >= TRIM_EVERY_CHUNKS:
                    trimmed[0] = done
                    release_freed(collect=False)
                if stage == "loading":
                    self._loading.add(job.job_id)
                else:
                    self._loading.discard(job.job_id)
                meter(stage, done, total)
                if stage != "anchoring" or done == 0:  # past the record write a job is done, not cancelled
                    self._stop_if_cancelled(job)
                self.da.jobs.progress(job, stage, done, total)

            if prepared is None and lane == "small":
                prepared = self._prepare(job, data or b"", options, progress)
            res = self.da.ingest_bytes(data or b"", filename=job.filename or None, title=options.get("title"),
                                       namespace=job.namespace, progress=progress, source=options.get("source") or "",
                                       tags=options.get("tags"), metadata=options.get("metadata"), prepared=prepared)
            result = ingest_answer(res.record, duplicate=res.duplicate)
            if job.replaces:
                result.update(self.da.drop_replaced(job.namespace, job.replaces, res.record.doc_id))
            n = res.record.n_chunks
            self.da.jobs.update(job, status="done", stage="done", done=n, total=n, doc_id=res.record.doc_id,
                                result=result)
        except MoveToLargeLane:  # nothing embedded or stored yet: it starts again in the large lane
            moved = True
        except Exception as exc:  # noqa: BLE001 - a job must always end; ingest_bytes removed what it stored
            if isinstance(exc, Cancelled):
                self._end_cancelled(job)
            elif isinstance(exc, Interrupted):
                self._end_interrupted(job)
            else:
                self._end_failed(job, exc)
        finally:
            self._loading.discard(job.job_id)
            if not moved:
                with self._lock:
                    self._cancel.pop(job.job_id, None)
                release_freed()  # the job's embedding buffers back to the system (docanchor.memory)
                if self._left_behind():  # its chunks could not be removed: the store did not answer
                    self._tidy_later()
        if moved:  # after its small-lane run has let go of the job
            self._move_to_large_lane(job)

    def _prepare(self, job: Job, data: bytes, options: dict,
                 progress: Callable[[str, int, int], None]) -> Prepared | None:
        """Parse and chunk a small-lane job's bytes here (:func:`ingest.pipeline.prepare`), so its
        lane is known before it embeds: returns the chunks for the rest of its ingest, ``None`` when
        the bytes are stored already. A job of more chunks than a small one keeps them for the large
        lane (:data:`KEPT_FOR_LARGE_LANE`) and moves there.

        Raises:
            MoveToLargeLane: the job is a large one.
            What :func:`ingest.pipeline.prepare` and ``progress`` raise.
        """
        from ingest.pipeline import Prepared, Source, prepare

        got = prepare(self.da.ctx, Source(data=data, filename=job.filename or None, title=options.get("title")),
                      job.namespace, progress)
        if not isinstance(got, Prepared):  # stored already: ingest_bytes answers the duplicate
            return None
        if job_lane(self.da.settings, size_bytes=len(data), n_chunks=len(got.chunks)) == "small":
            return got
        with self._lock:
            if len(self._prepared) < KEPT_FOR_LARGE_LANE:
                self._prepared[job.job_id] = got
        raise MoveToLargeLane(job.job_id)

    def _move_to_large_lane(self, job: Job) -> None:
        """Queue a small-lane job again in the large lane (:func:`job_lane`), unless it was cancelled;
        with its chunks kept, it stays at the stage it reached, else it starts over."""
        with self._lock:
            event = self._cancel.pop(job.job_id, None)  # from here a cancel finds it queued
            if event is not None and event.is_set():
                self._prepared.pop(job.job_id, None)
                self._end_cancelled(job)
                return
            if job.job_id in self._prepared:
                job = self.da.jobs.update(job, status="queued")
            else:
                job = self.da.jobs.update(job, status="queued", stage="queued", done=0, total=0)
        log.info("ingest job %s moves to the large lane (more than %d chunks)", job.job_id,
                 self.da.settings.small_job_chunks)
        self._enqueue(job, 0, lane="large")

    def _start(self, job_id: str, stage: str | None) -> Job | None:
        """Mark the job running at ``stage`` (``None``: the stage it reached before it changed lanes),
        unless it ended or was cancelled while queued (then ``None``)."""
        with self._lock:
            job = self.da.jobs.get(job_id)
            if job is None or job.finished or self._stopping.is_set():  # stopping: it stays queued for the next start
                return None
            if job.cancel_requested:
                self._end_cancelled(job)
                return None
            self._cancel[job_id] = threading.Event()
            at = {} if stage is None else {"stage": stage, "done": 0, "total": 0}
            job = self.da.jobs.update(job, status="running", **at)
            if job.finished:  # another worker sharing the job log cancelled it meanwhile
                self._cancel.pop(job_id, None)
                return None
            return job

    def _stop_if_cancelled(self, job: Job) -> None:
        """Raise Cancelled when this process was asked to cancel ``job``, or another process
        sharing the job log was (seen by the job log's writes, :meth:`docanchor.jobs.JobStore._save`)."""
        event = self._cancel.get(job.job_id)
        if (event is not None and event.is_set()) or job.cancel_requested:
            job.cancel_requested = True
            raise Cancelled(job.job_id)
        if self._stopping.is_set():
            raise Interrupted(job.job_id)

    def _end_cancelled(self, job: Job) -> None:
        self.da.jobs.update(job, status="cancelled", cancel_requested=True, error_code="cancelled",
                            error_message="This ingest job was cancelled; nothing of it was stored.", error_status=409)

    def _end_interrupted(self, job: Job) -> None:
        """Leave a job the server's stop interrupted ``queued`` with its upload, for the next start."""
        log.info("ingest job %s interrupted by the server's stop; the next start resumes it", job.job_id)
        self.da.jobs.update(job, status="queued", stage="queued", done=0, total=0, restarts=job.restarts + 1)

    def _end_failed(self, job: Job, exc: Exception) -> None:
        if not isinstance(exc, DocAnchorError):
            log.error("ingest job %s failed", job.job_id, exc_info=exc)
            exc = DocAnchorError()
        elif isinstance(exc, DiskFull):
            log.warning("ingest job %s stopped: %s", job.job_id, exc.message)
        self.da.jobs.update(job, status="failed", error_code=exc.code, error_message=exc.message,
                            error_status=exc.http_status)

    def _left_behind(self) -> bool:
        """Whether this process's writes left chunks without a record (pending marks, :mod:`docanchor.pending`)."""
        try:
            return bool(self.da.ctx.store.pending.all())
        except DocAnchorError:  # the store could not even be opened: nothing was written
            return False

    def _tidy_later(self) -> None:
        """Start the thread that removes what failed jobs left in the store, unless it runs."""
        with self._lock:
            if self._quit_tidying.is_set() or (self._tidier is not None and self._tidier.is_alive()):
                return
            self._tidier = threading.Thread(target=self._tidy, name="docanchor-tidy", daemon=True)
            self._tidier.start()

    def _tidy(self) -> None:
        """Every :data:`TIDY_RETRY_S` seconds, remove the chunks failed jobs left without a record
        (not while the disk is full: Chroma may block then), until none is left or the runner stops."""
        from docanchor.integrity import discard_left_behind

        while not self._quit_tidying.wait(TIDY_RETRY_S):
            if self.da.disk.health() is not None:
                continue
            try:
                discard_left_behind(self.da.ctx)
            except DocAnchorError as err:  # the store still does not answer: next time
                log.debug("chunks of a failed ingest not removed yet: %s", err.message)
                continue
            except Exception:  # noqa: BLE001 - the thread goes on trying; the cause is logged
                log.warning("could not remove the chunks of a failed ingest", exc_info=True)
                continue
            if not self._left_behind():
                return

    # ----------------------------------------------------------------- cancelling
    def cancel(self, job_id: str, namespace: str | None = None) -> Job:
        """Cancel a queued or running job; see :meth:`plugin.api.DocAnchor.cancel_job`."""
        with self._lock:
            job = self.da.get_job(job_id, namespace)
            if job.finished:  # cancelled ones too: a second cancel is not a second success
                raise job_finished(job_id, job.status, job.doc_id)
            event = self._cancel.get(job_id)
            if event is None and job.status != "running":  # queued (in a lane or waiting for a fetcher): it ends here
                self._end_cancelled(job)
                return job
            # running here, or in another process sharing the job log (a worker of docanchor serve
            # --workers), which sees the request at its next write of the job's progress
            self.da.jobs.update(job, cancel_requested=True)
            if event is not None:
                event.set()
        deadline = time.monotonic() + CANCEL_WAIT_S
        while time.monotonic() < deadline:
            job = self.da.get_job(job_id)
            if job.finished:
                break
            time.sleep(0.05)
        return job

    # ----------------------------------------------------------------- restart and shutdown
    def resume(self) -> list[str]:
        """Re-queue the jobs a previous process left unfinished; see :meth:`plugin.api.DocAnchor.resume_jobs`."""
        resumed = []
        for job in self.da.jobs.unfinished():
            if job.cancel_requested:
                self._end_cancelled(job)
                continue
            try:
                data, _options = self.da.jobs.payload(job.job_id)
            except (OSError, ValueError):
                data = None
            if data is None and not job.url:
                self.da.jobs.update(job, status="failed", error_code="interrupted", error_status=500,
                                    error_message="The server stopped during this ingest and its upload was lost; "
                                                  "upload the file again.")
                continue
            # running: its process was killed mid-job (a stopped one left it queued, counted then)
            restarts = job.restarts + (job.status == "running")
            if data is None and job.url:
                self.da.jobs.update(job, status="queued", stage="fetching", done=0, total=0, restarts=restarts)
                self._queue_fetch(job.job_id)
            else:
                self.da.jobs.update(job, status="queued", stage="queued", done=0, total=0, restarts=restarts)
                self._enqueue(job, len(data or b""))
            resumed.append(job.job_id)
        for stray in self.da.jobs.stray_uploads():
            stray.unlink(missing_ok=True)
        return resumed

    def stop_soon(self) -> None:
        """The first step of :meth:`interrupt`, safe in a signal handler (it only sets flags): no
        job or fetch starts, running jobs stop at their next step, waits for jobs end at once;
        :meth:`interrupt` then leaves the jobs queued for the next start."""
        self._stopping.set()
        self._quit_tidying.set()

    def interrupt(self, wait_s: float = INTERRUPT_WAIT_S) -> None:
        """Stop for a server's stop: start no more jobs or fetches, stop the running ones at their
        next step (what they stored is removed, as for a cancel) and leave every unfinished job
        ``queued`` with its upload, so the next start resumes it; requests waiting for a job answer
        at once. Waits at most ``wait_s`` seconds for the running jobs to stop."""
        self.stop_soon()
        with self._lock:
            pools = [p for p in (self._fetchers, *self._lanes.values()) if p is not None]
        for pool in pools:
            pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            with self._lock:
                if not self._cancel:  # a running job's entry goes when it ends
                    return
            time.sleep(0.05)
        log.warning("ingest jobs still running after %.0f s of the server's stop: %s", wait_s, ", ".join(self._cancel))

    def close(self) -> None:
        """Finish queued fetches and jobs, then stop the threads."""
        with self._lock:
            fetchers, self._fetchers = self._fetchers, None
        if fetchers is not None:
            fetchers.shutdown(wait=True)
        while True:  # a small-lane job may move to the large lane (a new pool) while the small one stops
            with self._lock:
                lanes, self._lanes = dict(self._lanes), {}
            if not lanes:
                break
            for name in sorted(lanes, key=lambda lane: lane != "small"):
                lanes[name].shutdown(wait=True)
        self._quit_tidying.set()
        if self._tidier is not None:
            self._tidier.join(INTERRUPT_WAIT_S)  # a try under way ends with its request to the store


def _options(title: str | None, replace: str | None, source: str | None, tags: list[str] | None,
             metadata: dict | None) -> dict:
    """What a job keeps beside its bytes until it runs (``None``: not given)."""
    return {"title": title, "replace": replace, "source": source, "tags": tags, "metadata": metadata}


def job_error(job: Job) -> DocAnchorError | None:
    """A failed or cancelled job's error, as the class that raised it (see :func:`docanchor.errors.restored`)."""
    if job.status not in ("failed", "cancelled"):
        return None
    return restored(job.error_code, job.error_message, job.error_status, job_id=job.job_id)
