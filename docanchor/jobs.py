"""Ingestion jobs kept on disk (SQLite from the standard library) so a restart knows what ran.

A job moves ``queued -> running -> done | failed | cancelled``. Its stage is one of ``fetching``
(a URL job before its bytes arrive), ``parsing``, ``ocr`` (pages read by OCR), ``loading`` (the
embedding model, by the first ingest of a process), ``chunking``, ``embedding``, ``storing``,
``anchoring``, with ``done``/``total`` counting that stage's units
(pages while reading by OCR, characters while chunking, chunks while embedding and storing); a
finished job's stage is ``done`` and ``done``/``total`` are its document's chunks. ``percent``
weighs the stages by their usual share of the time (embedding dominates).

The job log survives damage: a ``jobs.sqlite3`` that SQLite cannot read is moved aside (its name
and the reason are logged) and a fresh one started; the documents live in the store and are
untouched. Writes that fail for want of space raise :class:`~docanchor.errors.DiskFull`; the
jobs of this process stay readable from memory meanwhile (a finished job's state is never lost
to a full disk, and its upload is removed first).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Callable, Iterator

from docanchor.disk import DiskGuard
from docanchor.errors import DiskFull, StoreUnavailable

log = logging.getLogger("docanchor.jobs")

STAGES = ("fetching", "parsing", "ocr", "loading", "chunking", "embedding", "storing", "anchoring")
FINISHED = ("done", "failed", "cancelled")
"""Statuses of a job that will not run again."""
PROGRESS_EVERY_S = 0.5
"""Within one stage, a running job's progress is written to the job log at most this often (seconds)."""
# Share of a typical ingest spent before and in each stage, in percent (measured on the corpus
# with bench/ingest_bench.py: embedding is most of the time).
_STAGE_START = {"queued": 0, "fetching": 0, "parsing": 0, "ocr": 2, "loading": 10, "chunking": 10, "embedding": 15,
                "storing": 85, "anchoring": 95}
_STAGE_SHARE = {"fetching": 0, "parsing": 10, "ocr": 8, "loading": 0, "chunking": 5, "embedding": 70, "storing": 10,
                "anchoring": 5}


@dataclass
class Job:
    """One ingestion job. Times are Unix seconds.

    ``replaces`` is the doc_id this job replaces (``PUT``), ``url`` the address a URL job fetches,
    ``cancel_requested`` is set by ``DELETE /v1/jobs/<job_id>`` until the job stops, and
    ``restarts`` counts the times a server's stop (or a killed process) made it start over: each
    time its stage, ``done`` and ``percent`` begin again from the start.
    """

    job_id: str
    namespace: str
    filename: str
    status: str = "queued"
    stage: str = "queued"
    done: int = 0
    total: int = 0
    doc_id: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    error_status: int | None = None
    result: dict[str, Any] | None = None
    created_s: float = 0.0
    updated_s: float = 0.0
    replaces: str | None = None
    url: str | None = None
    cancel_requested: bool = False
    restarts: int = 0

    @property
    def percent(self) -> int:
        if self.status == "done":
            return 100
        start = _STAGE_START.get(self.stage, 0)
        share = _STAGE_SHARE.get(self.stage, 0)
        frac = (self.done / self.total) if self.total else 0.0
        return min(99, int(start + share * frac))

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["percent"] = self.percent
        return d

    @classmethod
    def from_json(cls, body: str) -> "Job":
        """A job from its stored JSON; fields of other versions are ignored, missing ones defaulted."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in json.loads(body).items() if k in known})


class JobStore:
    """Jobs in ``<data_dir>/jobs.sqlite3``; upload bytes of unfinished jobs in ``<data_dir>/uploads``.

    Thread-safe: one connection per call, writes serialised by a lock.

    Args:
        data_dir: where the job log and the uploads live.
        disk: the data dir's free-space guard (a spooled upload must leave its reserve free).

    Raises:
        DiskFull: the job log cannot be created for want of space.
    """

    def __init__(self, data_dir: Path, disk: DiskGuard | None = None) -> None:
        self.dir = Path(data_dir)
        self.disk = disk or DiskGuard(self.dir, 0)
        self.path = self.dir / "jobs.sqlite3"
        self.uploads = self.dir / "uploads"
        self._lock = threading.Lock()
        self._live: dict[str, Job] = {}
        """Jobs of this process whose last state is not in the job log yet (progress between
        writes, or a write that failed)."""
        with self._written():
            self.dir.mkdir(parents=True, exist_ok=True)
            self.uploads.mkdir(exist_ok=True)
            self._open()

    # ------------------------------------------------------------------ the file
    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30)
        db.execute("PRAGMA journal_mode=WAL")
        return db

    def _open(self) -> None:
        """Create the table, moving a job log SQLite cannot read out of the way first."""
        try:
            with self._connect() as db:
                db.execute("CREATE TABLE IF NOT EXISTS jobs (job_id TEXT PRIMARY KEY, body TEXT NOT NULL)")
                db.execute("SELECT count(*) FROM jobs").fetchone()
                check = db.execute("PRAGMA quick_check").fetchone()
            if check and check[0] != "ok":
                raise sqlite3.DatabaseError(f"quick_check: {check[0]}")
        except sqlite3.DatabaseError as exc:
            if type(exc) is not sqlite3.DatabaseError:  # locked, cannot open, disk full...: not damage
                raise
            self._move_aside(exc)
            with self._connect() as db:
                db.execute("CREATE TABLE IF NOT EXISTS jobs (job_id TEXT PRIMARY KEY, body TEXT NOT NULL)")

    def _move_aside(self, exc: Exception) -> None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        moved = self.path.with_name(f"{self.path.name}.damaged-{stamp}")
        for suffix in ("", "-wal", "-shm"):
            part = Path(str(self.path) + suffix)
            if part.exists():
                part.replace(Path(str(moved) + suffix))
        log.warning(
            "The job log %s could not be read (%s: %s); it was moved to %s and a new one started. Stored documents "
            "are not affected; only the history of earlier ingest jobs (and any job still queued in it) is lost: "
            "upload those files again.", self.path, type(exc).__name__, exc, moved,
        )

    @contextmanager
    def _written(self) -> Iterator[None]:
        """Map a failed write of the job log or an upload to DiskFull or StoreUnavailable."""
        try:
            with self.disk.guard():
                yield
        except (OSError, sqlite3.Error) as exc:
            raise StoreUnavailable(
                f"DocAnchor could not write its job log or upload folder in {self.dir} ({type(exc).__name__}); "
                "check that the data dir is writable."
            ) from exc

    # ------------------------------------------------------------------ jobs
    def create(self, namespace: str, filename: str, data: bytes | None, options: dict[str, Any],
               doc_id: str | None = None, *, replaces: str | None = None, url: str | None = None) -> Job:
        """A queued job whose bytes (``None`` for a URL job until fetched) and options are kept on
        disk until it ends.

        Raises:
            DiskFull: the upload would eat into the disk's reserve, or a write failed for space.
        """
        now = time.time()
        job = Job(job_id="job_" + uuid.uuid4().hex[:16], namespace=namespace, filename=filename,
                  doc_id=doc_id, created_s=now, updated_s=now, replaces=replaces, url=url,
                  stage="fetching" if url else "queued")
        try:
            with self._written():
                self.disk.check(len(data or b"") + 4096)
                (self.uploads / f"{job.job_id}.json").write_text(json.dumps(options))
                if data is not None:
                    (self.uploads / job.job_id).write_bytes(data)
                self._save(job)
        except Exception:
            self._forget(job.job_id)  # no half-written upload stays behind
            raise
        return job

    def attach(self, job: Job, data: bytes, *, filename: str, doc_id: str) -> Job:
        """Keep a URL job's fetched bytes until it ends.

        Raises:
            DiskFull: as :meth:`create`.
        """
        try:
            with self._written():
                self.disk.check(len(data) + 4096)
                (self.uploads / job.job_id).write_bytes(data)
        except Exception:
            (self.uploads / job.job_id).unlink(missing_ok=True)
            raise
        return self.update(job, filename=filename, doc_id=doc_id)

    def payload(self, job_id: str) -> tuple[bytes | None, dict[str, Any]]:
        """A job's kept bytes (``None`` for a URL job not fetched yet) and options.

        Raises:
            OSError: the options are gone (the upload was lost).
        """
        options = json.loads((self.uploads / f"{job_id}.json").read_text())
        data_path = self.uploads / job_id
        return (data_path.read_bytes() if data_path.exists() else None), options

    def update(self, job: Job, **changes: Any) -> Job:
        """Change and save ``job``. A finished job's upload is removed first, and its state is kept
        in memory when the disk refuses it (so it still reads as finished).

        Raises:
            DiskFull, StoreUnavailable: an unfinished job's state could not be written.
        """
        for k, v in changes.items():
            setattr(job, k, v)
        job.updated_s = time.time()
        if job.finished:
            self._forget(job.job_id, keep_state=True)
        try:
            with self._written():
                self._save(job)
        except (DiskFull, StoreUnavailable) as exc:
            if not job.finished:
                raise
            log.warning("job %s ended %s, but the job log could not record it (%s); it is kept in memory",
                        job.job_id, job.status, exc.code)
        return job

    def progress(self, job: Job, stage: str, done: int, total: int) -> None:
        """A running job's progress: always seen by :meth:`get` at once, written to the job log on a
        new stage, at a stage's end, or at most every :data:`PROGRESS_EVERY_S` seconds.

        Raises:
            DiskFull, StoreUnavailable: as :meth:`update`.
        """
        if (stage, done, total) == (job.stage, job.done, job.total):
            return
        recent = stage == job.stage and done < total and time.time() - job.updated_s < PROGRESS_EVERY_S
        if not recent:
            self.update(job, stage=stage, done=done, total=total)
            return
        job.stage, job.done, job.total = stage, done, total
        with self._lock:
            self._live[job.job_id] = Job(**asdict(job))

    def _forget(self, job_id: str, keep_state: bool = False) -> None:
        """Remove a job's upload files (and, unless ``keep_state``, its in-memory state)."""
        for p in (self.uploads / job_id, self.uploads / f"{job_id}.json"):
            p.unlink(missing_ok=True)
        if not keep_state:
            with self._lock:
                self._live.pop(job_id, None)

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            live = self._live.get(job_id)
        if live is not None:
            return Job(**asdict(live))
        with self._connect() as db:
            rows = db.execute("SELECT body FROM jobs WHERE job_id = ?", (job_id,)).fetchall()
        jobs = _parsed(rows)
        return jobs[0] if jobs else None

    def active_for_doc(self, namespace: str, doc_id: str) -> Job | None:
        """The newest queued or running job that will produce ``doc_id`` in ``namespace``."""
        jobs = [j for j in self.unfinished() if j.namespace == namespace and j.doc_id == doc_id]
        return jobs[-1] if jobs else None

    def replacing(self, namespace: str, doc_id: str) -> Job | None:
        """The queued or running job that replaces ``doc_id`` in ``namespace``, if any."""
        return next((j for j in self.unfinished() if j.namespace == namespace and j.replaces == doc_id), None)

    def unfinished(self) -> list[Job]:
        """Queued or running jobs (this process's and those a previous one left), oldest first."""
        with self._connect() as db:
            rows = db.execute("SELECT body FROM jobs").fetchall()
        jobs = {j.job_id: j for j in _parsed(rows)}
        with self._lock:
            jobs.update({k: Job(**asdict(v)) for k, v in self._live.items()})
        return sorted((j for j in jobs.values() if not j.finished), key=lambda j: j.created_s)

    def stray_uploads(self) -> list[Path]:
        """Files in ``uploads/`` that belong to no unfinished job (left by a crash or a lost job log)."""
        keep = {j.job_id for j in self.unfinished()}
        return [p for p in self.uploads.iterdir() if p.name.split(".", 1)[0] not in keep]

    def count_by_status(self) -> dict[str, int]:
        """How many jobs are in each status (``queued``, ``running``, ``done``, ``failed``,
        ``cancelled``); damaged rows are not counted."""
        with self._connect() as db:
            rows = db.execute("SELECT json_extract(body, '$.status'), count(*) FROM jobs WHERE json_valid(body) "
                              "GROUP BY 1").fetchall()
        return {str(status): int(n) for status, n in rows}

    def _save(self, job: Job) -> None:
        """Write ``job``, and take in what another process sharing the job log said of it (the
        workers of ``docanchor serve --workers``): a finished row is never written over (``job``
        then becomes that row), and a cancel asked there stays asked (``job.cancel_requested``)."""
        body = json.dumps(asdict(job), ensure_ascii=False)
        with self._lock:
            self._live[job.job_id] = Job(**asdict(job))
            with self._connect() as db:
                db.execute(_UPSERT, (job.job_id, body))
                stored = _parsed(db.execute("SELECT body FROM jobs WHERE job_id = ?", (job.job_id,)).fetchall())
            if stored and stored[0].finished and not job.finished:
                for f in fields(Job):
                    setattr(job, f.name, getattr(stored[0], f.name))
            elif stored and stored[0].cancel_requested:
                job.cancel_requested = True
            del self._live[job.job_id]  # written: the job log holds it, also for another process's job


_UPSERT = f"""
INSERT INTO jobs (job_id, body) VALUES (?, ?)
ON CONFLICT (job_id) DO UPDATE SET body = CASE
    WHEN json_valid(jobs.body) AND json_extract(jobs.body, '$.cancel_requested')
    THEN json_set(excluded.body, '$.cancel_requested', json('true')) ELSE excluded.body END
WHERE NOT json_valid(jobs.body) OR coalesce(json_extract(jobs.body, '$.status'), '') NOT IN {FINISHED!r}
"""
"""One job's write: a finished job's row stays as it is, and a ``cancel_requested`` already in the
row is kept (another process asked; see :meth:`JobStore._save`)."""


def _parsed(rows: list[tuple[str]]) -> list[Job]:
    """The jobs of ``rows``; a row that is not a job (damaged) is skipped and logged."""
    jobs = []
    for (body,) in rows:
        try:
            jobs.append(Job.from_json(body))
        except (ValueError, TypeError, AttributeError) as exc:
            log.warning("skipped a damaged row of the job log (%s: %s)", type(exc).__name__, exc)
    return jobs


class EmbeddingMeter:
    """Chunks embedded and seconds spent embedding, summed over the jobs of one process (read by
    ``/metrics``: their ratio is chunks embedded per second). Fed by the jobs' progress calls:
    time counts from a job's first ``embedding`` report to the first report of a later stage, and
    that stage's ``total`` chunks count as embedded."""

    def __init__(self) -> None:
        self.chunks = 0
        self.seconds = 0.0
        self._lock = threading.Lock()

    def watch(self) -> Callable[[str, int, int], None]:
        """A progress callback for one job (``stage``, ``done``, ``total``)."""
        state: dict[str, Any] = {"since": None, "total": 0}

        def report(stage: str, done: int, total: int) -> None:
            if stage == "embedding":
                if state["since"] is None:
                    state["since"] = time.monotonic()
                state["total"] = total
            elif state["since"] is not None:
                with self._lock:
                    self.seconds += time.monotonic() - state["since"]
                    self.chunks += state["total"]
                state["since"] = None

        return report
