"""``docanchor serve --workers``: several serving processes on one port (plugin/workers.py).

A real ``docanchor serve`` with 2 workers against a real ``chroma run`` on loopback: a document sent
through one request to one worker is polled as a job, read and found by the other worker; with
embedded Chroma more than one worker is refused with a clear error.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
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


def _ended(pid: int) -> bool:
    """Process ``pid`` has exited: gone, or a zombie its new parent has not reaped yet."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def _refused(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=BACKSTOP_S):
            return False
    except ConnectionRefusedError:
        return True


def test_workers_stop_when_their_supervisor_is_killed_and_the_next_start_resumes_their_job(
        tmp_path: Path, chroma_server) -> None:
    """A supervisor killed without its stop path (SIGKILL; a bench's kill after its own wait) leaves
    no worker behind: each sees it gone and stops as SIGTERM stops it (its "stopping" and "stopped"
    lines; the job it was embedding interrupted at its next step), and the port then refuses
    connections (they served on it forever, each holding its model); the next start resumes the job
    to its end. The supervisor's own semaphores are left to the resource tracker, which says so.
    Runs its own servers before the module's (the first test to use ``two_workers`` starts it), so
    two, not four, workers hold a model at a time."""
    env = {"DOCANCHOR_SERVER_WORKERS": "2", "DOCANCHOR_CHROMA_HOST": chroma_server.host,
           "DOCANCHOR_CHROMA_PORT": str(chroma_server.port), "DOCANCHOR_NAMESPACE": f"workers {tmp_path.name}"}
    server = LiveServer(tmp_path / "data", env=env)
    workers = Workers(server)
    pids: list[int] = []
    try:
        server.wait_ready()
        for k in (0, 1):
            status, health = workers.call(k, "GET", "/healthz")
            assert status == 200 and health["worker"] == k, health
            pids.append(health["pid"])
        text = "\n\n".join(f"# Part {i}\n\n" + f"Ledger entry {i} records the yield of orchard {i % 89}. " * 40
                            for i in range(400))
        status, job = workers.call(0, "POST", "/v1/documents", {"text": text, "title": "Orchards", "wait_s": 0})
        assert status == 202, job
        wait_until(lambda: workers.call(1, "GET", f"/v1/jobs/{job['job_id']}")[1]["stage"] == "embedding",
                   "the job to be embedding", interval_s=0.05)
        server.proc.kill()
        server.proc.wait(timeout=BACKSTOP_S)
        wait_until(lambda: all(_ended(pid) for pid in pids), f"workers {pids} to end after their supervisor")
        assert _refused(server.port)
        log = (tmp_path / f"server-{server.port}.log").read_text(errors="replace")
        assert log.count("its supervisor (pid") == 2, log
        assert log.count("stopping: running ingest jobs stop at their next step") == 2, log
        assert f"ingest job {job['job_id']} interrupted by the server's stop" in log, log
        assert log.count('"message": "stopped"') == 2 and "Traceback" not in log, log
    finally:
        for pid in pids:  # on main they serve on: leave none behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        server.stop()
    again = LiveServer(tmp_path / "data", env=env)
    try:
        again.wait_ready()
        done = job_ended(lambda: again.job(job["job_id"]), "the resumed job to end")
        assert done["status"] == "done", done
    finally:
        again.stop()


def test_the_scale_bench_stops_a_server_that_does_not_stop_with_its_whole_process_group(monkeypatch) -> None:
    """bench/scale_bench.py's stop of ``docanchor serve``: SIGINT, a wait as long as the server's own
    stop may last, then SIGKILL to the server's process group, not to the supervisor alone (it
    killed the supervisor after 60 s while the workers' stop may take 90 s, and left them serving).
    Here a stand-in "server" and its "worker" ignore SIGINT; the waits are shortened to none."""
    import plugin.workers
    from bench import scale_bench

    monkeypatch.setattr(plugin.workers, "STOP_WAIT_S", 0.0)
    monkeypatch.setattr(scale_bench, "SUPERVISOR_STOP_S", 0.0)
    stuck = ("import signal, subprocess, sys, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
             "w = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
             "signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(3600)']); print(w.pid, flush=True); "
             "time.sleep(3600)")
    proc = subprocess.Popen([sys.executable, "-c", stuck], stdout=subprocess.PIPE, text=True, start_new_session=True)
    worker = int(proc.stdout.readline())
    try:
        scale_bench.stop_server(proc)
        assert proc.returncode == -signal.SIGKILL
        wait_until(lambda: _ended(worker), f"the stand-in worker {worker} to end with its group")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.stdout.close()


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


def test_a_worker_holding_more_connections_than_the_other_takes_no_more(two_workers: Workers) -> None:
    """Which worker takes a new connection follows what each holds (plugin/balance.py), not which
    worker's ``accept()`` wins: 16 connections opened one after another, each one worker 1 answers
    closed again and worker 0's kept alive. Worker 0 then takes a second only while worker 1's count
    is one step old, never a third; left to the kernel it kept about half of them (a kept-alive
    connection stays with its worker, and the busier worker's interpreter lock capped the rate of
    all of 8 benchmark clients: splits of 6/2)."""
    two_workers.connection(1).close()  # both serve (worker 1 starts once worker 0 answers)
    kept: list[http.client.HTTPConnection] = []
    reached: list[int] = []
    try:
        for _ in range(16):
            conn = http.client.HTTPConnection("127.0.0.1", two_workers.server.port, timeout=BACKSTOP_S)
            status, health = _send(conn, "GET", "/healthz")
            assert status == 200, health
            reached.append(health["worker"])
            if health["worker"] == 0:
                kept.append(conn)
            else:
                conn.close()
        for conn in kept:  # each kept connection stayed with worker 0
            assert _send(conn, "GET", "/healthz")[1]["worker"] == 0
    finally:
        for conn in kept:
            conn.close()
    assert len(kept) <= 2, reached


def test_a_worker_takes_connections_while_it_holds_no_more_than_any_other_serving_worker() -> None:
    """The rule of plugin/balance.py, on its shared array: a worker that is starting, starting again
    or stopped (``retire``) is not waited for, or the others would stop accepting while it loads."""
    from plugin.balance import ConnectionCounts

    counts = ConnectionCounts(3)
    assert counts.may_accept(0, 5)  # no other worker serves yet
    counts.publish(1, 2)
    counts.publish(2, 4)
    assert counts.may_accept(0, 2) and not counts.may_accept(0, 3)
    assert counts.may_accept(2, 2) and not counts.may_accept(2, 4)
    counts.retire(1)  # worker 1 ended; the supervisor starts it again
    assert counts.may_accept(0, 4) and not counts.may_accept(0, 5)


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


def cli_env(server: LiveServer, chroma_server, tmp_path: Path, chroma: bool = True) -> dict[str, str]:
    """The environment of a CLI beside the workers: their namespace and (with ``chroma``) their Chroma
    server; its model setting names no model, so a command that opened the index here would fail."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCANCHOR_")}
    env.update({"HF_HUB_OFFLINE": "1", "DOCANCHOR_EMBEDDING_MODEL": str(tmp_path / "no-model-here"),
                "DOCANCHOR_NAMESPACE": f"workers {server.data_dir.parent.name}"})
    if chroma:
        env.update({"DOCANCHOR_CHROMA_HOST": chroma_server.host, "DOCANCHOR_CHROMA_PORT": str(chroma_server.port)})
    return env


def run_cli(server: LiveServer, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """The real CLI on the workers' data dir (standard input empty)."""
    return subprocess.run([sys.executable, "-m", "plugin.cli", "--data-dir", str(server.data_dir), *args],
                          cwd=REPO, env=env, input="", capture_output=True, text=True, timeout=BACKSTOP_S)


def test_the_cli_on_the_data_dir_goes_through_the_workers(two_workers: Workers, chroma_server, tmp_path: Path) -> None:
    """The supervisor says its address in the data dir's lock as a single server does: ``status`` sees
    it and ``ingest`` goes through its API (in its own process, the CLI would find worker 0's BM25
    index in use). Its model setting names no model, so opening the index here would fail."""
    server = two_workers.server
    note = tmp_path / "quarry.md"
    note.write_text("# Quarry note\n\nThe quarry foreman logs each zephyrite cart in a green ledger.\n")
    env = cli_env(server, chroma_server, tmp_path)

    def cli(*args: str) -> subprocess.CompletedProcess:
        return run_cli(server, env, *args)

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


def test_writers_beside_the_workers_are_refused_as_on_embedded_chroma(two_workers: Workers, chroma_server,
                                                                      tmp_path: Path) -> None:
    """The data dir's BM25 index (worker 0's) and job log belong to the server: ``mcp`` over stdio,
    ``reindex`` and ``check --repair`` are refused with ``store_locked`` before they open anything
    (they ran beside it, and a search over stdio failed on worker 0's index writer), and so is a
    program using the Python API."""
    from docanchor.settings import Settings
    from plugin.api import DocAnchor

    server = two_workers.server
    env = cli_env(server, chroma_server, tmp_path)
    said = f"error store_locked: The data dir is in use by a running server (pid {server.proc.pid}) at {server.base}; "
    for args, instead in ((("mcp",), ("use another data dir, or stop the server. An MCP client can use the running "
                                      "server at its /mcp endpoint")),
                          (("reindex",), "reindex needs the data dir to itself: stop the server."),
                          (("check", "--repair"), "use another data dir, or stop the server.")):
        done = run_cli(server, env, *args)
        assert done.returncode == 1 and done.stdout == "", (args, done.stdout, done.stderr)
        assert done.stderr.startswith(said + instead), (args, done.stderr)
        assert "Traceback" not in done.stderr
    settings = Settings(data_dir=server.data_dir, chroma_host=chroma_server.host, chroma_port=chroma_server.port)
    with DocAnchor(settings) as da, pytest.raises(Exception) as refused:
        da.hold_data_dir()
    assert getattr(refused.value, "code", None) == "store_locked", refused.value


def test_check_beside_the_workers_catches_up_with_the_change_log(two_workers: Workers, chroma_server,
                                                                  tmp_path: Path) -> None:
    """A document ingested by worker 1 reaches worker 0's BM25 index (the data dir's) only at worker
    0's next search; ``check`` counts the index as caught up, as a search would find it, and finds
    no disagreement (it said "lexical 0" and advised a --repair that changed nothing)."""
    status, job = two_workers.call(1, "POST", "/v1/documents", {"text": TEXT.replace("Zephyrite", "Quarzite"),
                                                                 "title": "Quarzite", "wait_s": 0})
    assert status in (201, 202), job
    done = job_ended(lambda: two_workers.call(1, "GET", f"/v1/jobs/{job['job_id']}")[1])
    assert done["status"] == "done", done
    env = cli_env(two_workers.server, chroma_server, tmp_path)
    del env["DOCANCHOR_EMBEDDING_MODEL"]  # check opens the index here, with the workers' model
    # the workers' namespace (cli_env): `--all` would also audit the namespaces other test files
    # leave on the session's shared Chroma server, indexed with other models
    checked = run_cli(two_workers.server, env, "check")
    assert checked.returncode == 0, (checked.stdout, checked.stderr)
    assert "disagree" not in checked.stdout and "--repair" not in checked.stderr, (checked.stdout, checked.stderr)
    assert f"'workers {two_workers.server.data_dir.parent.name}': " in checked.stdout, checked.stdout


def test_a_cli_without_the_chroma_settings_uses_the_data_dirs_chroma_server(two_workers: Workers, chroma_server,
                                                                            tmp_path: Path) -> None:
    """The workers' data dir records their Chroma server (``store.json``, written when the supervisor
    took the data dir): a CLI whose environment does not name it uses it. ``status`` goes through
    the server (it printed "no index yet" above the server's line), and ``check``, which reads the
    index in its own process, reads it on the recorded server (it said config_error: set
    DOCANCHOR_CHROMA_HOST and DOCANCHOR_CHROMA_PORT)."""
    server = two_workers.server
    env = cli_env(server, chroma_server, tmp_path, chroma=False)
    status = run_cli(server, env, "status")
    assert status.returncode == 0, (status.stdout, status.stderr)
    assert "no index" not in status.stdout and f"running (pid {server.proc.pid}) at {server.base}" in status.stdout
    assert f"chroma server {chroma_server.host}:{chroma_server.port}" in status.stdout, status.stdout
    del env["DOCANCHOR_EMBEDDING_MODEL"]  # check opens the index here, with the workers' model
    checked = run_cli(server, env, "check")
    assert checked.returncode == 0, (checked.stdout, checked.stderr)
    assert f"'workers {server.data_dir.parent.name}': " in checked.stdout, checked.stdout
    assert not (server.data_dir / "chroma").exists()
    assert json.loads((server.data_dir / "store.json").read_text()) == {
        "store": "chroma server", "chroma_host": chroma_server.host, "chroma_port": chroma_server.port}


@contextlib.contextmanager
def written_before_records(data_dir: Path) -> Iterator[None]:
    """``data_dir`` without its store record, as a server of a version before records leaves it;
    put back at the end (the module's server shares the data dir with later tests)."""
    record = data_dir / "store.json"
    kept = record.read_bytes() if record.exists() else None
    record.unlink(missing_ok=True)
    try:
        yield
    finally:
        if kept is not None:
            record.write_bytes(kept)


def test_without_a_record_a_cli_is_told_the_chroma_settings_and_writers_are_refused_first(
        two_workers: Workers, chroma_server, tmp_path: Path) -> None:
    """A data dir without a store record (its server predates them): ``check`` says which settings
    to give it, and ``reindex`` and ``check --repair``, which could not write beside the server
    anyway, are refused with ``store_locked`` at once (they said config_error, and store_locked only
    once the settings were given)."""
    server = two_workers.server
    env = cli_env(server, chroma_server, tmp_path, chroma=False)
    with written_before_records(server.data_dir):
        checked = run_cli(server, env, "check")
        assert checked.returncode == 1 and checked.stdout == "", (checked.stdout, checked.stderr)
        assert checked.stderr == (
            f"error config_error: The server running on this data dir (pid {server.proc.pid}) at {server.base} keeps "
            "its index on a Chroma server that this command is not configured for; set DOCANCHOR_CHROMA_HOST and "
            f"DOCANCHOR_CHROMA_PORT as the server has them ({chroma_server.host} and {chroma_server.port}) and run "
            "it again.\n")
        said = (f"error store_locked: The data dir is in use by a running server (pid {server.proc.pid}) at "
                f"{server.base}; ")
        for args, instead in ((("reindex",), "reindex needs the data dir to itself: stop the server."),
                              (("check", "--repair"), "use another data dir, or stop the server.")):
            done = run_cli(server, env, *args)
            assert done.returncode == 1 and done.stdout == "", (args, done.stdout, done.stderr)
            assert done.stderr == said + instead + "\n", (args, done.stderr)
        assert not (server.data_dir / "store.json").exists() and not (server.data_dir / "chroma").exists()


def test_ctrl_c_of_an_ingest_through_the_workers_cancels_its_job(two_workers: Workers, chroma_server,
                                                                 tmp_path: Path) -> None:
    """As in one process, Ctrl-C stores nothing of the file in progress: its job on the server is
    cancelled (it went on running while the CLI said it was not stored)."""
    from docanchor.jobs import JobStore

    server = two_workers.server
    big = tmp_path / "ledger.md"
    big.write_text("\n\n".join(f"# Part {i}\n\n" + f"Ledger entry {i} records the yield of orchard {i % 89}. " * 40
                                for i in range(400)))
    proc = subprocess.Popen([sys.executable, "-m", "plugin.cli", "--data-dir", str(server.data_dir), "ingest", str(big)],
                            cwd=REPO, env=cli_env(server, chroma_server, tmp_path), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            # a terminal's foreground job takes Ctrl-C (a background shell's children ignore it)
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # noqa: PLW1509
    try:
        jobs = JobStore(server.data_dir)

        def embedding() -> str | None:
            assert proc.poll() is None, proc.communicate()
            return next((j.job_id for j in jobs.unfinished() if j.filename == big.name and j.stage == "embedding"), None)

        job_id = wait_until(embedding, "the CLI's job to be embedding on the server", interval_s=0.05)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the whole process group
        out, err = proc.communicate(timeout=BACKSTOP_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, (out, err)
    assert "interrupted: 0 of 1 file stored, 1 not ingested; the files in progress were not stored" in err, err
    ended = job_ended(lambda: two_workers.call(0, "GET", f"/v1/jobs/{job_id}")[1])
    assert ended["status"] == "cancelled", ended
    _, listed = two_workers.call(1, "GET", "/v1/documents")
    assert "ledger.md" not in {d["title"] for d in listed["documents"]}, listed


def test_zz_the_server_stops_without_a_leaked_semaphore_after_a_worker_died(two_workers: Workers) -> None:
    """A worker killed (a crash, the out-of-memory killer) is started again; SIGTERM then stops the
    server, and its log holds no ``resource_tracker: ... leaked semaphore`` warning (the dead
    worker's progress-bar lock was a semaphore nobody unregistered). Stops the module's server, so
    it runs last (pytest runs a file's tests in order)."""
    server = two_workers.server
    status, health = two_workers.call(1, "GET", "/healthz")
    assert status == 200 and health["worker"] == 1, health
    os.kill(health["pid"], signal.SIGKILL)
    wait_until(lambda: two_workers.call(1, "GET", "/healthz")[1]["pid"] != health["pid"], "worker 1 started again")
    server.proc.terminate()
    assert server.proc.wait(timeout=BACKSTOP_S) == 0, server.read_log()
    log = (server.data_dir.parent / f"server-{server.port}.log").read_text(errors="replace")
    assert f"worker 1 (pid {health['pid']}) ended" in log and "starting it again" in log, log[-3000:]
    assert "leaked" not in log and "Traceback" not in log, log[-3000:]
