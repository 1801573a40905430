"""Ingestion jobs kept on disk (SQLite from the standard library) so a restart knows what ran.

A job moves ``queued -> running -> done | failed``. Its stage is one of ``parsing``, ``ocr``
(pages read by OCR), ``chunking``, ``embedding``, ``storing``, ``anchoring``, with ``done``/``total``
counting that stage's units (chunks while embedding and storing); a finished job's stage is ``done``
and ``done``/``total`` are its document's chunks. ``percent`` weighs the stages by their usual
share of the time (embedding dominates).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

STAGES = ("parsing", "ocr", "chunking", "embedding", "storing", "anchoring")
# Share of a typical ingest spent before and in each stage, in percent (measured on the corpus
# with bench/ingest_bench.py: embedding is most of the time).
_STAGE_START = {"queued": 0, "parsing": 0, "ocr": 2, "chunking": 10, "embedding": 15, "storing": 85, "anchoring": 95}
_STAGE_SHARE = {"parsing": 10, "ocr": 8, "chunking": 5, "embedding": 70, "storing": 10, "anchoring": 5}


@dataclass
class Job:
    """One ingestion job. Times are Unix seconds."""

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

    @property
    def percent(self) -> int:
        if self.status == "done":
            return 100
        start = _STAGE_START.get(self.stage, 0)
        share = _STAGE_SHARE.get(self.stage, 0)
        frac = (self.done / self.total) if self.total else 0.0
        return min(99, int(start + share * frac))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["percent"] = self.percent
        return d


class JobStore:
    """Jobs in ``<data_dir>/jobs.sqlite3``; upload bytes of unfinished jobs in ``<data_dir>/uploads``.

    Thread-safe: one connection per call, writes serialised by a lock.
    """

    def __init__(self, data_dir: Path) -> None:
        self.dir = Path(data_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "jobs.sqlite3"
        self.uploads = self.dir / "uploads"
        self.uploads.mkdir(exist_ok=True)
        self._lock = threading.Lock()
        with self._connect() as db:
            db.execute("CREATE TABLE IF NOT EXISTS jobs (job_id TEXT PRIMARY KEY, body TEXT NOT NULL)")

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30)
        db.execute("PRAGMA journal_mode=WAL")
        return db

    def create(self, namespace: str, filename: str, data: bytes, options: dict[str, Any],
               doc_id: str | None = None) -> Job:
        """A queued job whose bytes and options are kept on disk until it ends."""
        now = time.time()
        job = Job(job_id="job_" + uuid.uuid4().hex[:16], namespace=namespace, filename=filename,
                  doc_id=doc_id, created_s=now, updated_s=now)
        (self.uploads / job.job_id).write_bytes(data)
        (self.uploads / f"{job.job_id}.json").write_text(json.dumps(options))
        self._save(job)
        return job

    def payload(self, job_id: str) -> tuple[bytes, dict[str, Any]]:
        return (self.uploads / job_id).read_bytes(), json.loads((self.uploads / f"{job_id}.json").read_text())

    def update(self, job: Job, **changes: Any) -> Job:
        for k, v in changes.items():
            setattr(job, k, v)
        job.updated_s = time.time()
        self._save(job)
        if job.status in ("done", "failed"):
            for p in (self.uploads / job.job_id, self.uploads / f"{job.job_id}.json"):
                p.unlink(missing_ok=True)
        return job

    def get(self, job_id: str) -> Job | None:
        with self._connect() as db:
            row = db.execute("SELECT body FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
        return Job(**json.loads(row[0])) if row else None

    def active_for_doc(self, namespace: str, doc_id: str) -> Job | None:
        """The newest queued or running job that will produce ``doc_id`` in ``namespace``."""
        jobs = [j for j in self.unfinished() if j.namespace == namespace and j.doc_id == doc_id]
        return jobs[-1] if jobs else None

    def unfinished(self) -> list[Job]:
        """Jobs a previous process left queued or running, oldest first."""
        with self._connect() as db:
            rows = db.execute("SELECT body FROM jobs").fetchall()
        jobs = [Job(**json.loads(r[0])) for r in rows]
        return sorted((j for j in jobs if j.status in ("queued", "running")), key=lambda j: j.created_s)

    def count_by_status(self) -> dict[str, int]:
        """How many jobs are in each status (``queued``, ``running``, ``done``, ``failed``)."""
        with self._connect() as db:
            rows = db.execute("SELECT json_extract(body, '$.status'), count(*) FROM jobs GROUP BY 1").fetchall()
        return {str(status): int(n) for status, n in rows}

    def _save(self, job: Job) -> None:
        body = json.dumps(asdict(job), ensure_ascii=False)
        with self._lock, self._connect() as db:
            db.execute("INSERT OR REPLACE INTO jobs (job_id, body) VALUES (?, ?)", (job.job_id, body))


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
