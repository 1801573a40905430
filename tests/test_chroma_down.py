"""A Chroma server that stops and comes back: what ``/healthz``, the API and the command line say.

A real ``chroma run`` of this test's own (it is stopped and started again on the same port, so not
the session's shared one), DocAnchor served by the real waitress server on loopback (fake
embedder), and the real ``docanchor`` command in a subprocess with DOCANCHOR_CHROMA_HOST/PORT set.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from docanchor.settings import Settings
from tests.chroma_server import running_chroma
from tests.live_server import REPO, serving_fake
from tests.test_lobechat_contract import node_deps, run_node  # noqa: F401 (node_deps: a fixture, LobeChat's gateway)
from tests.waiting import BACKSTOP_S, wait_until


def _get(url: str, body: dict | None = None) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=BACKSTOP_S) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _cli(tmp_path: Path, host: str, port: int, *args: str) -> subprocess.CompletedProcess:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("DOCANCHOR_")}, "HF_HUB_OFFLINE": "1",
           "DOCANCHOR_CHROMA_HOST": host, "DOCANCHOR_CHROMA_PORT": str(port)}
    return subprocess.run([sys.executable, "-m", "plugin.cli", "--data-dir", str(tmp_path / "cli-data"), *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=BACKSTOP_S)


def test_the_sentence_names_store_json_when_the_address_came_from_it(tmp_path: Path) -> None:
    """Before (the trial of 3df9211, its defect 5): a command that took the Chroma server's address
    from the data dir's store.json was told to check DOCANCHOR_CHROMA_HOST and _PORT, which it
    never set. Now the one sentence says where the address came from: that file, and what to write
    there if the server moved; with the variables set it names them as before."""
    from tests.live_server import free_port

    data, port = tmp_path / "data", free_port()  # nothing listens there
    data.mkdir()
    record = data / "store.json"
    record.write_text(json.dumps({"store": "chroma server", "chroma_host": "127.0.0.1", "chroma_port": port}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCANCHOR_")} | {"HF_HUB_OFFLINE": "1"}
    for args in (("status",), ("list",)):
        done = subprocess.run([sys.executable, "-m", "plugin.cli", "--data-dir", str(data), *args], cwd=REPO,
                              env=env, capture_output=True, text=True, timeout=BACKSTOP_S)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert done.stderr == (
            f"error store_unavailable: The Chroma server at 127.0.0.1:{port} (the address recorded in {record}) is "
            "not reachable; check that it is running (`chroma run`), or if it moved, write its host and port into "
            "that file, then try again.\n"), (args, done.stderr)
    named = _cli(tmp_path, "127.0.0.1", port, "status")
    assert "DOCANCHOR_CHROMA_HOST and DOCANCHOR_CHROMA_PORT name it" in named.stderr, named.stderr


def test_healthz_the_api_and_the_cli_say_the_chroma_server_is_down_and_healthz_recovers(tmp_path: Path,
                                                                                       caplog) -> None:
    """Before: with the Chroma server stopped, /healthz said ``ok`` while retrieve answered 503, and
    ``docanchor status`` / ``search`` (no DocAnchor server) said "The vector store refused the
    operation (ValueError)" -- chromadb's HttpClient raises a bare ValueError when it cannot
    connect. Now /healthz is degraded with ``store_unavailable`` (ok again once Chroma is back), and
    every door gives the one not-reachable sentence, naming the server's host and port.

    Before (the trial of e07bdd7): /healthz answered 200 while degraded, so a load balancer kept the
    worker; each request of the outage logged a ~60-line traceback at ERROR. Now /healthz answers
    503 with the same body while the store is down, and each request logs one WARNING line with the
    code and host:port, the traceback at most once."""
    chroma_path = tmp_path / "db"
    with running_chroma(chroma_path) as chroma:
        host, port = chroma.host, chroma.port
        address = f"The Chroma server at {host}:{port} is not reachable"
        settings = Settings(data_dir=tmp_path / "data", chroma_host=host, chroma_port=port, sync_wait_s=BACKSTOP_S)
        with serving_fake(settings) as (base, da):
            da.ingest_text("# Tides\n\nThe harbour floods at the spring tide.", title="Tides")
            assert _get(base + "/healthz") == (200, {"status": "ok"})
            chroma.stop()

            status, health = _get(base + "/healthz")
            assert status == 503 and health["status"] == "degraded", health
            assert [p["code"] for p in health["problems"]] == ["store_unavailable"], health
            assert health["problems"][0]["message"].startswith(address), health
            caplog.clear()
            caplog.set_level("INFO", logger="docanchor")
            for _ in range(3):
                status, err = _get(base + "/v1/retrieve", {"query": "spring tide", "budget_tokens": 300})
                assert status == 503 and err["error"]["code"] == "store_unavailable", err
            failed = [r for r in caplog.records if "POST /v1/retrieve failed" in r.getMessage()]
            assert len(failed) == 3, [r.getMessage() for r in caplog.records]
            assert all(r.levelname == "WARNING" and f"store_unavailable ({address}" in r.getMessage()
                       for r in failed), [(r.levelname, r.getMessage()) for r in failed]
            traced = [r for r in caplog.records if r.exc_info and r.levelno >= 20]
            assert len(traced) <= 1, [r.getMessage() for r in traced]
            assert not [r for r in caplog.records if r.levelname == "ERROR"], [r.getMessage() for r in caplog.records]
            for args in (("status",), ("search", "spring tide")):
                done = _cli(tmp_path, host, port, *args)
                assert done.returncode == 1, (args, done.stdout, done.stderr)
                assert f"error store_unavailable: {address}" in done.stderr, (args, done.stderr)
                assert "ValueError" not in done.stderr and "Traceback" not in done.stderr, done.stderr

            with running_chroma(chroma_path, port=port):
                wait_until(lambda: _get(base + "/healthz") == (200, {"status": "ok"}), "/healthz to say ok again")
                status, found = _get(base + "/v1/retrieve", {"query": "spring tide", "budget_tokens": 300})
                assert status == 200 and found["sections"], found


def test_lobechat_and_mcp_give_the_model_the_sentence_while_the_chroma_server_is_down(tmp_path: Path,
                                                                                      node_deps) -> None:
    """Before (trial of c4dec4b, defect 7): with the Chroma server stopped, every LobeChat route
    answered 503 ``{"errorType": "PluginServerError", ...}``; LobeChat's gateway turns any non-2xx into
    an error card (its ``callApi``: ``createErrorResponse(response.status, ...)``) and the model never
    learns why, and MCP's tools said "DocAnchor hit an internal error". Now the model gets the
    not-reachable sentence the HTTP API and the command line give (the server's host and port),
    through LobeChat's own gateway as a 200, and over MCP as a refusal ending ``(store_unavailable)``."""
    import base64

    from plugin.mcp_server import call_tool

    with running_chroma(tmp_path / "db") as chroma:
        address = f"The Chroma server at {chroma.host}:{chroma.port} is not reachable"
        settings = Settings(data_dir=tmp_path / "data", chroma_host=chroma.host, chroma_port=chroma.port,
                            sync_wait_s=BACKSTOP_S)
        with serving_fake(settings) as (base, da):
            doc_id = da.ingest_text("# Tides\n\nThe harbour floods at the spring tide.", title="Tides").record.doc_id
            with urllib.request.urlopen(base + "/manifest.json", timeout=BACKSTOP_S) as resp:
                manifest = json.loads(resp.read())
            for api in manifest["api"]:  # LobeChat posts to api[].url: this server's own address
                api["url"] = base + urllib.parse.urlsplit(api["url"]).path
            chroma.stop()

            calls = {"searchDocuments": {"query": "spring tide"}, "readDocument": {"doc_id": doc_id},
                     "getDocumentAnchor": {"doc_id": doc_id}}
            src, dst = tmp_path / "calls.json", tmp_path / "answers.json"
            src.write_text(json.dumps({
                "manifestUrl": "data:application/json;base64," + base64.b64encode(json.dumps(manifest).encode()).decode(),
                "calls": [{"id": name, "apiName": name, "arguments": json.dumps(args)} for name, args in calls.items()]}))
            run_node("gateway_calls.mjs", str(src), str(dst))
            for row in json.loads(dst.read_text())["results"]:
                assert row["status"] == 200, row
                assert row["body"].startswith(address) and "Tell the user" in row["body"], row
                assert "errorType" not in row["body"] and "(store_unavailable)" not in row["body"], row

            for name, args in calls.items():
                text, is_error, _ = call_tool(da, name, args, settings.namespace)
                assert is_error and text.startswith(address) and text.endswith("(store_unavailable)"), (name, text)


def test_a_job_that_fails_because_chroma_stopped_leaves_nothing_once_chroma_is_back(tmp_path: Path,
                                                                                    monkeypatch) -> None:
    """Before (trial of 3d88e0c, defect 2): a job whose Chroma server stopped while it was storing
    failed with store_unavailable, and the chunks it had written (its first storing steps) could not
    be removed then: they stayed in Chroma and in the BM25 index until the DocAnchor server restarted
    (``docanchor check`` called them an ingest killed midway; ``check --repair`` is refused while the
    server runs). Now the running server removes them once Chroma answers again; the document stored
    before stays whole."""
    from tests.test_job_control import LEDGER_STEP_CHUNKS, StepRecorder, _ledger, _upload_in_background

    monkeypatch.setattr("ingest.stream.WRITE_STEP_CHUNKS", LEDGER_STEP_CHUNKS)
    chroma_path = tmp_path / "db"
    with running_chroma(chroma_path) as chroma:
        settings = Settings(data_dir=tmp_path / "data", chroma_host=chroma.host, chroma_port=chroma.port,
                            sync_wait_s=BACKSTOP_S)
        with serving_fake(settings) as (base, da):
            ns = settings.namespace
            kept = da.ingest_text("# Tides\n\nThe harbour floods at the spring tide.", title="Tides").record
            first_stored, stopped = threading.Event(), threading.Event()

            def hold(_stored: int) -> None:  # the job's thread, after its first step: Chroma stops now
                if not first_stored.is_set():
                    first_stored.set()
                    assert stopped.wait(BACKSTOP_S)

            monkeypatch.setattr(da.ctx.store, "add_chunks", StepRecorder(da.ctx.store, after=hold))
            job = _upload_in_background(base, _ledger(), "ledger.md")
            assert first_stored.wait(BACKSTOP_S)
            chroma.stop()
            stopped.set()
            failed = wait_until(lambda: (j := _get(f"{base}/v1/jobs/{job['job_id']}")[1])["status"] != "running"
                                and j["status"] != "queued" and j, "the job to end")
            assert (failed["status"], failed["error_code"]) == ("failed", "store_unavailable"), failed
            assert da.ctx.lexical.doc_counts(ns).get(job["doc_id"]) == LEDGER_STEP_CHUNKS  # left behind for now

            with running_chroma(chroma_path, port=chroma.port):
                chunks = da.ctx.store._collection(ns, "chunks")

                def tidied() -> bool:
                    left = chunks.get(where={"doc_id": job["doc_id"]}, include=[])["ids"]
                    return not left and job["doc_id"] not in da.ctx.lexical.doc_counts(ns)

                wait_until(tidied, "the failed job's chunks to be removed, the server still running")
                assert da.ctx.store.pending.all() == []
                assert [d.doc_id for d in da.list_documents()] == [kept.doc_id]
                assert len(chunks.get(where={"doc_id": kept.doc_id}, include=[])["ids"]) == kept.n_chunks
                assert da.ctx.lexical.doc_counts(ns) == {kept.doc_id: kept.n_chunks}
