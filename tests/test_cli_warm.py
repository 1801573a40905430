"""Warm answers: while ``docanchor serve`` runs on a data dir, the CLI sends its work to the server's
API (found through the data dir's lock) instead of cold-starting the index; ingest follows the job
API with a bounded number of files in flight."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from docanchor.settings import Settings
from plugin.cli import remote
from plugin.cli.remote import IN_FLIGHT_FILES, Server
from plugin.lock import Holder
from tests.conftest import CORPUS, REPO
from tests.fakes import HashEmbedder
from tests.live_server import LiveServer
from tests.test_assembly import conversation
from tests.waiting import BACKSTOP_S, wait_until

OWNERSHIP = CORPUS / "md" / "ch04-01-what-is-ownership.md"
KEY = "k-warm-cli"


class ScriptedServer(Server):
    """A server's job API as the CLI sees it, played by a script: one job runs at a time, each
    needs two looks before it is done."""

    def __init__(self) -> None:
        super().__init__(Holder("1", "server", "http://127.0.0.1:9"), None, None)
        self.queue: list[str] = []
        self.most_in_flight = 0
        self.looks: Counter[str] = Counter()
        self.posted = 0

    def call(self, method, path, body=None, *, raw=None, content_type=None):
        if method == "POST":
            self.posted += 1
            if b"broken" in raw:
                raise remote.DocAnchorError("The file is empty.", code="empty_file")
            job_id = f"job_{self.posted}"
            self.queue.append(job_id)
            self.most_in_flight = max(self.most_in_flight, len(self.queue))
            return {"status": "queued", "job_id": job_id}
        job_id = path.rsplit("/", 1)[1]
        self.looks[job_id] += 1
        if job_id != self.queue[0]:
            return {"status": "queued", "stage": "queued", "done": 0, "total": 0}
        if self.looks[job_id] < 2:
            return {"status": "running", "stage": "embedding", "done": 64, "total": 128}
        self.queue.pop(0)
        return {"status": "done", "result": {"doc_id": f"doc_{job_id}", "duplicate": False}}


def test_ingest_keeps_a_bounded_number_of_files_in_flight(monkeypatch):
    monkeypatch.setattr(remote, "POLL_S", 0)
    server = ScriptedServer()
    progress, done, failed = [], [], []
    items = [f"f{i}" for i in range(11)] + ["broken"]
    server.ingest(items, read=lambda item: (item.encode(), f"{item}.md", f"/docs/{item}.md"),
                  progress=lambda item, stage, d, t: progress.append((item, stage, d, t)),
                  finished=lambda item, result, err: (failed if err else done).append(item))
    assert server.most_in_flight == IN_FLIGHT_FILES
    assert sorted(done) == sorted(items[:-1]) and failed == ["broken"]
    assert ("f0", "embedding", 64, 128) in progress  # per chunk, from the job API


class InProcessServer(Server):
    """The command line's Server over a Flask test client of a real app (Chroma on disk, the fake
    embedder): the real /v1 routes, without a process."""

    def __init__(self, client) -> None:
        super().__init__(Holder("1", "server", "http://127.0.0.1:9"), None, None)
        self.client = client
        self.paths: list[str] = []

    def call(self, method, path, body=None, *, raw=None, content_type=None):
        self.paths.append(path)
        resp = self.client.open(path, method=method, json=body)
        assert resp.status_code == 200, resp.get_data(as_text=True)
        return resp.get_json()


def test_list_through_a_server_has_every_document_not_its_first_page(client, da, monkeypatch):
    """Before (hlo): Server.list_documents read GET /v1/documents once, its first page (50), so
    `docanchor list` through a server showed 50 of 60 documents, and `ingest` planned against
    them: an edited file whose document was not among the 50 was added again beside its old
    version instead of replacing it, and --sync never removed the others. Now every page is read,
    following next_cursor (three pages of 25 here)."""
    from plugin.cli.local import Local

    monkeypatch.setattr(remote, "LIST_PAGE_SIZE", 25)
    for i in range(60):
        da.ingest_text(f"Note {i} about the harbour.", title=f"note {i:02d}.txt")
    server = InProcessServer(client)
    listed = server.list_documents()
    assert [d["doc_id"] for d in listed] == [d["doc_id"] for d in Local(da, None).list_documents()]
    assert len(listed) == 60 and len(server.paths) == 3 and "cursor=" in server.paths[-1], server.paths


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    root = tmp_path_factory.mktemp("warm")
    server = LiveServer(root / "data", env={"DOCANCHOR_API_KEYS": KEY})
    try:
        server.wait_ready(timeout_s=900)
        yield server, root
    finally:
        server.stop()


def cli(server: LiveServer, *args: str, key: str | None = KEY, env: dict[str, str] | None = None,
        ) -> subprocess.CompletedProcess:
    """The real CLI on the server's data dir, with ``env`` added to its environment. Its model
    setting names no model: if a command opened the index in its own process instead of going
    through the server, it would fail."""
    extra = env or {}
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCANCHOR_")}
    env.update({"HF_HUB_OFFLINE": "1", "DOCANCHOR_EMBEDDING_MODEL": str(server.data_dir / "no-model-here"), **extra})
    if key:
        env["DOCANCHOR_API_KEY"] = key
    return subprocess.run([sys.executable, "-m", "plugin.cli", "--data-dir", str(server.data_dir), *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.e2e
@pytest.mark.server
def test_every_command_goes_through_a_running_server(warm):
    server, root = warm
    folder = root / "docs"
    folder.mkdir()
    shutil.copy(OWNERSHIP, folder / "ownership.md")
    (folder / "note.md").write_text("# Harbour note\n\nThe harbour master keeps the tide tables in a blue binder.\n")
    (folder / "empty.txt").write_bytes(b"")

    ingested = cli(server, "ingest", "--json", str(folder))
    assert ingested.returncode == 1, ingested.stderr  # the empty file
    by_name = {Path(o["path"]).name: o for o in map(json.loads, ingested.stdout.splitlines())}
    assert by_name["ownership.md"]["action"] == "added" and by_name["note.md"]["action"] == "added", by_name
    assert by_name["empty.txt"]["error"]["code"] == "empty_file"
    doc_id = by_name["ownership.md"]["doc_id"]

    listed = cli(server, "list")
    assert listed.returncode == 0 and doc_id in listed.stdout and "ownership.md" in listed.stdout, listed.stderr
    found = json.loads(cli(server, "search", "What are the ownership rules?", "--budget", "300", "--json").stdout)
    assert found["sections"] and found["context_tokens_used"] <= 300
    read = cli(server, "read", doc_id, "--budget", "100")
    assert read.returncode == 0 and read.stdout.strip() and f"docanchor read {doc_id} --from " in read.stderr
    assert "--from" in cli(server, "read", doc_id, "--from", "no such heading anywhere").stderr
    assert doc_id in cli(server, "anchor", doc_id).stdout
    status = cli(server, "status")
    assert f"running (pid {server.proc.pid}) at {server.base}" in status.stdout and "documents:  2" in status.stdout

    (folder / "note.md").write_text("# Harbour note\n\nThe tide tables moved to the red binder.\n")
    old_note = by_name["note.md"]["doc_id"]
    again = cli(server, "ingest", str(folder / "note.md"))
    assert again.returncode == 0 and again.stdout.startswith(f"replaced {old_note} -> "), again.stdout
    assert old_note not in cli(server, "list").stdout

    deleted = cli(server, "delete", doc_id)
    assert deleted.returncode == 0 and deleted.stdout.startswith(f"deleted {doc_id} (")
    assert doc_id not in cli(server, "list").stdout


@pytest.mark.e2e
@pytest.mark.server
def test_a_server_that_needs_a_key_says_how_to_give_one(warm):
    server, _ = warm
    refused = cli(server, "list", key=None)
    assert refused.returncode == 1 and refused.stderr.startswith("error unauthorized: ")
    assert "Set DOCANCHOR_API_KEY" in refused.stderr
    wrong = cli(server, "list", key="not-a-key")
    assert wrong.returncode == 1 and "The key in DOCANCHOR_API_KEY is not one the server accepts" in wrong.stderr


@pytest.mark.e2e
@pytest.mark.server
def test_context_commands_send_the_cli_context_settings_to_the_server(warm):
    """Context settings set for the CLI apply through a running server (DOCANCHOR_SPILL_THRESHOLD_TOKENS
    =5000 was silently the server's 10,000: 0 references instead of 1); the summary endpoint, which a
    request cannot carry, is named in a warning with the server's address."""
    server, root = warm
    path = root / "conversation.json"
    messages = conversation(1, tool_chars=28_000)  # one tool result of 6,000-7,000 tokens
    own = "key-" + hashlib.sha256(KEY.encode()).hexdigest()[:12]  # the namespace the bare key may use
    path.write_text(json.dumps({"model": "gpt-4o", "messages": messages, "conversation_id": own}))

    plain = cli(server, "context", "assemble", str(path))
    assert plain.returncode == 0, plain.stderr
    assert json.loads(plain.stdout)["references"] == []  # under the server's 10,000 tokens
    lowered = cli(server, "context", "assemble", str(path),
                  env={"DOCANCHOR_SPILL_THRESHOLD_TOKENS": "5000", "DOCANCHOR_COMPACTION_THRESHOLD_PERCENT": "60"})
    assert lowered.returncode == 0, lowered.stderr
    result = json.loads(lowered.stdout)
    assert [(r["kind"], r["stored"], r["turns"]) for r in result["references"]] == [("spill", True, [4])]
    tier = next(t for t in result["trace"] if t["action"] == "tier")
    assert "compact 0.6," in tier["reason"], tier
    assert "warning" not in lowered.stderr.lower()

    path.write_text(json.dumps({"model": "gpt-4o", "messages": conversation(6), "conversation_id": own}))
    compact = cli(server, "context", "compact", "--explain-only", str(path),
                  env={"DOCANCHOR_SUMMARY_LLM_URL": "http://127.0.0.1:9/v1", "DOCANCHOR_SUMMARY_TOKENS": "150"})
    assert compact.returncode == 0, compact.stderr
    assert "DOCANCHOR_SUMMARY_LLM_URL" in compact.stderr and server.base in compact.stderr, compact.stderr
    assert json.loads(compact.stdout)["summary_source"] == "extractive"


class GatedEmbedder(HashEmbedder):
    """The fake embedder, holding any batch with the word "hawser" until ``opened`` is set: the
    document that holds it stays in its job while others finish."""

    def __init__(self) -> None:
        super().__init__()
        self.opened = threading.Event()

    def embed(self, texts):
        if any("hawser" in t.lower() for t in texts):
            assert self.opened.wait(BACKSTOP_S), "the gate was never opened"
        return super().embed(texts)


def test_ingest_through_a_running_server_reports_the_files_in_the_order_given(tmp_path):
    """Before (new-user trial): `docanchor ingest a b c` while `docanchor serve` ran on the data dir
    printed b's and c's lines before a's: the server runs a large file's job in its large lane and
    small ones beside it (plugin.runner), and the CLI reported each file as its job finished. Now
    the lines come in the order given (plugin.cli.ingest_cmd.InOrder), while the jobs still run
    side by side. Here a.md (large lane) cannot finish until b.md and c.md are stored, so the order
    of finishing is b, c, a for certain. A waitress server on a loopback port advertised in the data
    dir's lock, as `docanchor serve` does, and the real CLI."""
    from plugin.api import DocAnchor
    from plugin.lock import hold
    from tests.live_server import in_process

    settings = Settings(data_dir=tmp_path / "data", small_job_bytes=4096)
    files = tmp_path / "a.md", tmp_path / "b.md", tmp_path / "c.md"
    files[0].write_text("# Hawser log\n\n" + "".join(f"The hawser of berth {i} was checked at dawn and found sound.\n\n"
                                                      for i in range(120)))
    files[1].write_text("# Tide note\n\nThe harbour master keeps the tide tables in a blue binder.\n")
    files[2].write_text("# Crane note\n\nCrane 3 moved container MSCU1003 to the north quay.\n")
    assert files[0].stat().st_size > settings.small_job_bytes > files[1].stat().st_size
    embedder = GatedEmbedder()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCANCHOR_")}
    env.update({"HF_HUB_OFFLINE": "1", "DOCANCHOR_EMBEDDING_MODEL": str(tmp_path / "no-model-here")})
    with DocAnchor(settings, embedder=embedder) as da, in_process(settings, da) as server:
        lock = hold(settings, "server")
        lock.advertise(f"http://127.0.0.1:{server.effective_port}")
        try:
            proc = subprocess.Popen([sys.executable, "-m", "plugin.cli", "--data-dir", str(settings.data_dir), "ingest",
                                     "--json", *map(str, files)], cwd=REPO, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
            wait_until(lambda: proc.poll() is not None or len(da.list_documents()) == 2, "b.md and c.md to be stored")
            embedder.opened.set()
            out, err = proc.communicate(timeout=BACKSTOP_S)
        finally:
            embedder.opened.set()
            lock.release()
    assert proc.returncode == 0, err
    reported = [json.loads(line) for line in out.splitlines()]
    assert [Path(r["path"]).name for r in reported] == ["a.md", "b.md", "c.md"], reported
    assert all(r["action"] == "added" for r in reported), reported
