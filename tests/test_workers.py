"""``docanchor serve --workers``: several serving processes on one port (plugin/workers.py).

A real ``docanchor serve`` with 2 workers against a real ``chroma run`` on loopback: a document sent
through one request to one worker is polled as a job, read and found by the other worker; with
embedded Chroma more than one worker is refused with a clear error.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.live_server import REPO, LiveServer
from tests.waiting import BACKSTOP_S, job_ended, wait_until

TEXT = ("# Zephyrite mining\n\n"
        + "Zephyrite is mined in the northern valleys, where the ore lies close to the surface. " * 20
        + "\n\n# Smelting\n\n"
        + "Smelting zephyrite needs a slow fire of birch charcoal and a clay crucible. " * 20)


class Workers:
    """Requests to a chosen worker of a ``docanchor serve --workers`` on loopback."""

    def __init__(self, server: LiveServer) -> None:
        self.server = server

    def connection(self, worker: int) -> http.client.HTTPConnection:
        """A kept-alive connection that worker ``worker`` answers (new connections go to any worker;
        ``/healthz`` says which one a connection reached)."""
        found: list[http.client.HTTPConnection] = []

        def reached() -> bool:
            conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=BACKSTOP_S)
            status, body = _send(conn, "GET", "/healthz")
            if status == 200 and body.get("worker") == worker:
                found.append(conn)
                return True
            conn.close()
            return False

        wait_until(reached, f"a connection that worker {worker} answers", interval_s=0.05)
        return found[0]

    def call(self, worker: int, method: str, path: str, payload: dict | None = None) -> tuple[int, dict]:
        conn = self.connection(worker)
        try:
            return _send(conn, method, path, payload)
        finally:
            conn.close()


def _send(conn: http.client.HTTPConnection, method: str, path: str, payload: dict | None = None) -> tuple[int, dict]:
    body = None if payload is None else json.dumps(payload).encode()
    conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    return resp.status, json.loads(resp.read() or b"{}")


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory, chroma_server):
    """Two workers on the session's shared ``chroma run``, which holds other tests' namespaces of the
    fake embedder: a worker with the real model skips them at start-up and serves its own."""
    tmp_path = tmp_path_factory.mktemp("workers")
    server = LiveServer(tmp_path / "data", env={
        "DOCANCHOR_SERVER_WORKERS": "2", "DOCANCHOR_CHROMA_HOST": chroma_server.host,
        "DOCANCHOR_CHROMA_PORT": str(chroma_server.port), "DOCANCHOR_NAMESPACE": f"workers {tmp_path.name}"})
    try:
        server.wait_ready()
        yield Workers(server)
    finally:
        server.stop()


def test_a_document_sent_to_one_worker_is_polled_read_and_found_on_the_other(two_workers: Workers) -> None:
    status, job = two_workers.call(0, "POST", "/v1/documents", {"text": TEXT, "title": "Zephyrite", "wait_s": 0})
    assert status in (201, 202), job
    job_id = job["job_id"]

    done = job_ended(lambda: two_workers.call(1, "GET", f"/v1/jobs/{job_id}")[1], "the job, polled on worker 1")
    assert done["status"] == "done", done
    doc_id = done["doc_id"]

    status, doc = two_workers.call(1, "GET", f"/v1/documents/{doc_id}")
    assert status == 200 and doc["title"] == "Zephyrite", doc
    for worker in (1, 0):  # worker 1's BM25 index caught up through the store's change log
        status, found = two_workers.call(worker, "POST", "/v1/retrieve",
                                         {"query": "smelting zephyrite in a clay crucible", "budget_tokens": 300})
        assert status == 200, found
        assert doc_id in {s["doc_id"] for s in found["sections"]}, (worker, found)
    assert (two_workers.server.data_dir / "workers" / "1" / "lexical").is_dir()  # worker 1's own BM25 index


def test_a_job_running_on_one_worker_is_cancelled_through_the_other(two_workers: Workers) -> None:
    text = "\n\n".join(f"# Part {i}\n\n" + f"Ledger entry {i} records the harvest of field {i % 97}. " * 40
                       for i in range(1500))
    status, job = two_workers.call(0, "POST", "/v1/documents", {"text": text, "title": "Ledger", "wait_s": 0})
    assert status == 202, job

    def embedding() -> bool:  # seen from worker 1, which does not run the job
        seen = two_workers.call(1, "GET", f"/v1/jobs/{job['job_id']}")[1]
        assert seen["status"] in ("queued", "running"), seen
        return seen["stage"] == "embedding"

    wait_until(embedding, "the job to be embedding", interval_s=0.1)
    status, asked = two_workers.call(1, "DELETE", f"/v1/jobs/{job['job_id']}")
    assert status in (200, 202), asked
    for worker in (0, 1):
        ended = job_ended(lambda: two_workers.call(worker, "GET", f"/v1/jobs/{job['job_id']}")[1])
        assert ended["status"] == "cancelled", ended
    status, listed = two_workers.call(0, "GET", "/v1/documents")
    assert "Ledger" not in {d["title"] for d in listed["documents"]}, listed


def test_more_than_one_worker_with_embedded_chroma_is_refused(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "plugin.cli", "--data-dir", str(tmp_path / "data"), "serve",
                           "--workers", "2", "--port", "0"], cwd=REPO, capture_output=True, text=True,
                          timeout=BACKSTOP_S, env={**{k: v for k, v in os.environ.items() if not k.startswith("DOCANCHOR_")},
                                                   "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 1
    assert proc.stderr.startswith("error config_error: 2 server workers need a Chroma server (DOCANCHOR_CHROMA_HOST)")
    assert not (tmp_path / "data" / "chroma").exists()  # refused before anything was opened


def test_the_cli_on_the_data_dir_goes_through_the_workers(two_workers: Workers, chroma_server, tmp_path: Path) -> None:
    """The supervisor says its address in the data dir's lock as a single server does: ``status`` sees
    it and ``ingest`` goes through its API (in its own process, the CLI would find worker 0's BM25
    index in use). Its model setting names no model, so opening the index here would fail."""
    server = two_workers.server
    note = tmp_path / "quarry.md"
    note.write_text("# Quarry note\n\nThe quarry foreman logs each zephyrite cart in a green ledger.\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCANCHOR_")}
    env.update({"HF_HUB_OFFLINE": "1", "DOCANCHOR_EMBEDDING_MODEL": str(tmp_path / "no-model-here"),
                "DOCANCHOR_CHROMA_HOST": chroma_server.host, "DOCANCHOR_CHROMA_PORT": str(chroma_server.port),
                "DOCANCHOR_NAMESPACE": f"workers {server.data_dir.parent.name}"})

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "plugin.cli", "--data-dir", str(server.data_dir), *args],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=BACKSTOP_S)

    status = cli("status")
    assert f"running (pid {server.proc.pid}) at {server.base}" in status.stdout, (status.stdout, status.stderr)
    ingested = cli("ingest", str(note))
    assert ingested.returncode == 0 and ingested.stdout.startswith("ok doc_"), (ingested.stdout, ingested.stderr)
    assert "Traceback" not in ingested.stderr
    doc_id = ingested.stdout.split()[1]
    status, listed = two_workers.call(1, "GET", "/v1/documents")
    assert doc_id in {d["doc_id"] for d in listed["documents"]}, listed
    # the Chroma client's httpx logs a line per call at INFO: only with -v (it buried the server's own lines)
    assert "HTTP Request:" not in server.read_log(), server.read_log()[-1000:]
