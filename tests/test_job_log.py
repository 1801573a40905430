"""A damaged job log (``jobs.sqlite3``) never stops DocAnchor: it is moved aside, named in the log,
and a fresh one is started; the documents are untouched (fake embedder in process, then the real
``docanchor serve``)."""

from __future__ import annotations

import logging

import pytest

from docanchor.jobs import JobStore
from plugin.api import DocAnchor
from tests.conftest import CORPUS
from tests.fakes import HashEmbedder
from tests.live_server import LiveServer
from tests.waiting import BACKSTOP_S

MD = CORPUS / "md/ch04-01-what-is-ownership.md"


def _damage(path) -> None:
    path.write_bytes(b"this is not an SQLite database, it was overwritten " * 100)
    for suffix in ("-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)


def test_a_damaged_job_log_is_moved_aside_and_documents_stay(settings, caplog):
    """Regression: a corrupt jobs.sqlite3 stopped the server from starting with "internal error"."""
    with DocAnchor(settings, embedder=HashEmbedder()) as da:
        doc = da.ingest_file(MD).record
        da.submit(b"# Kept\n\nA second document.", filename="kept.md", wait_s=BACKSTOP_S)
    log_path = settings.data_dir / "jobs.sqlite3"
    _damage(log_path)
    (settings.data_dir / "uploads" / "job_deadbeefdeadbeef").write_bytes(b"an upload of a lost job")
    with caplog.at_level(logging.WARNING), DocAnchor(settings, embedder=HashEmbedder()) as da:
        assert da.resume_jobs() == []
        assert {d.doc_id for d in da.list_documents()} >= {doc.doc_id}
        assert da.get_document(doc.doc_id).n_chunks == doc.n_chunks
        job = da.submit(b"# New\n\nAfter the damage.", filename="new.md", wait_s=BACKSTOP_S)
        assert job.status == "done"
    moved = list(settings.data_dir.glob("jobs.sqlite3.damaged-*"))
    assert len(moved) == 1 and moved[0].read_bytes().startswith(b"this is not an SQLite database")
    warning = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert str(log_path) in warning and str(moved[0]) in warning and "not affected" in warning
    assert not (settings.data_dir / "uploads" / "job_deadbeefdeadbeef").exists()  # the lost job's upload


def test_a_damaged_row_is_skipped(settings):
    store = JobStore(settings.data_dir)
    job = store.create("default", "a.md", b"# A\n\ntext", {"title": None})
    with store._connect() as db:
        db.execute("INSERT INTO jobs (job_id, body) VALUES ('job_broken', '{not json')")
    assert [j.job_id for j in store.unfinished()] == [job.job_id]
    assert store.get("job_broken") is None


@pytest.mark.e2e
@pytest.mark.server
def test_the_server_starts_on_a_damaged_job_log(tmp_path):
    data = tmp_path / "data"
    first = LiveServer(data)
    try:
        first.wait_ready(timeout_s=BACKSTOP_S)
        status, doc = first.upload(MD)
        assert status == 201
    finally:
        first.stop()
    _damage(data / "jobs.sqlite3")
    second = LiveServer(data)
    try:
        second.wait_ready(timeout_s=BACKSTOP_S)
        status, listed = second.json("GET", "/v1/documents")
        assert status == 200 and [d["doc_id"] for d in listed["documents"]] == [doc["doc_id"]]
        assert "jobs.sqlite3" in second.read_log() and "moved to" in second.read_log()
    finally:
        second.stop()


def test_a_job_log_shared_by_two_processes_keeps_a_cancel_and_a_finished_job(tmp_path):
    """Two JobStores on one data dir, as two workers of ``docanchor serve --workers`` hold it: what
    one says of a job (cancel it, or end it) is not written over by the other's next write."""
    running_here, elsewhere = JobStore(tmp_path), JobStore(tmp_path)
    job = running_here.create("default", "a.txt", b"text", {})
    running_here.update(job, status="running", stage="embedding", done=0, total=10)

    asked = elsewhere.get(job.job_id)
    elsewhere.update(asked, cancel_requested=True)
    running_here.update(job, done=5)  # its next progress write
    assert job.cancel_requested
    seen = elsewhere.get(job.job_id)  # what the other process wrote, not its own copy
    assert (seen.cancel_requested, seen.done) == (True, 5)

    queued = running_here.create("default", "b.txt", b"text", {})
    elsewhere.update(elsewhere.get(queued.job_id), status="cancelled", error_code="cancelled")
    started = running_here.update(running_here.get(queued.job_id), status="running", stage="parsing")
    assert started.status == "cancelled" and elsewhere.get(queued.job_id).status == "cancelled"
