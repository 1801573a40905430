"""Controlling ingest jobs: cancelling, two lanes (a small upload never waits behind a big one),
one replacement per document at a time, and URL fetches that can neither hang a job nor take
every request thread (fake embedder, real Chroma on disk, real HTTP servers on loopback)."""

from __future__ import annotations

import contextlib
import io
import ipaddress
import json
import threading
import urllib.error
import urllib.request
from typing import Callable

import pytest

from docanchor.jobs import JobStore
from docanchor.settings import Settings
from ingest.fetch import is_public_address
from plugin.api import DocAnchor
from plugin.app import create_app
from tests.conftest import CORPUS
from tests.drip_server import DripServer
from tests.fakes import HashEmbedder
from tests.live_server import in_process
from tests.test_jobs import GatedEmbedder, poll
from tests.waiting import BACKSTOP_S, ENDED, job_ended, wait_until

MD = CORPUS / "md/ch04-01-what-is-ownership.md"


@pytest.fixture
def gated(tmp_path):
    emb = GatedEmbedder(marker="ownership")
    da = DocAnchor(Settings(data_dir=tmp_path / "data", small_job_bytes=20_000, sync_wait_s=BACKSTOP_S), embedder=emb)
    yield da, emb, create_app(da.settings, da).test_client()
    emb.gate.set()
    da.close()


def _upload(client, data: bytes, name: str, wait_s: str | None = "0", **form):
    """POST ``data`` as a file; ``wait_s=None`` waits for the job up to the backstop (``sync_wait_s``)."""
    waiting = {} if wait_s is None else {"wait_s": wait_s}
    return client.post("/v1/documents", data={"file": (io.BytesIO(data), name), **waiting, **form})


def _chunk_ids(da: DocAnchor, doc_id: str) -> list[str]:
    chunks = da.ctx.store._collection(da.settings.namespace, "chunks")
    return chunks.get(where={"doc_id": doc_id}, include=[])["ids"]


# ------------------------------------------------------------------------------- cancelling
def test_cancel_a_running_job_stops_it_and_removes_what_it_stored(gated, monkeypatch):
    """Regression: nothing could cancel an ingest job (DELETE /v1/jobs/<id> was a 405)."""
    da, emb, client = gated
    monkeypatch.setattr("plugin.runner.CANCEL_WAIT_S", 0.0)  # answer at once; the job stops when the gate opens
    job = _upload(client, MD.read_bytes(), MD.name).get_json()
    assert emb.entered.wait(BACKSTOP_S)
    resp = client.delete(f"/v1/jobs/{job['job_id']}")
    assert resp.status_code == 202 and resp.get_json()["cancel_requested"] is True
    emb.gate.set()
    ended = poll(client, job["job_id"])
    assert ended["status"] == "cancelled" and ended["error_code"] == "cancelled"
    assert client.get(f"/v1/documents/{job['doc_id']}").status_code == 404
    assert _chunk_ids(da, job["doc_id"]) == [] and not da.ctx.lexical.search(da.settings.namespace, "ownership", 5)
    again = client.delete(f"/v1/jobs/{job['job_id']}")  # regression: a second cancel answered 200
    assert again.status_code == 409 and again.get_json()["error"]["code"] == "job_finished"
    assert "cancelled" in again.get_json()["error"]["message"]
    assert not list((da.settings.data_dir / "uploads").iterdir())


def test_cancel_a_queued_job_and_a_finished_one(gated):
    da, emb, client = gated
    running = _upload(client, MD.read_bytes(), MD.name).get_json()
    assert emb.entered.wait(BACKSTOP_S)
    queued = _upload(client, MD.read_bytes() + b"\n\nA second version about ownership.", "v2.md").get_json()
    assert queued["status"] == "queued"
    resp = client.delete(f"/v1/jobs/{queued['job_id']}")
    assert resp.status_code == 200 and resp.get_json()["status"] == "cancelled"
    emb.gate.set()
    assert poll(client, running["job_id"])["status"] == "done"
    assert client.get(f"/v1/jobs/{queued['job_id']}").get_json()["status"] == "cancelled"  # never ran
    twice = client.delete(f"/v1/jobs/{queued['job_id']}")
    assert twice.status_code == 409 and twice.get_json()["error"]["details"]["status"] == "cancelled"
    finished = client.delete(f"/v1/jobs/{running['job_id']}")
    assert finished.status_code == 409 and finished.get_json()["error"]["code"] == "job_finished"
    assert f"DELETE /v1/documents/{running['doc_id']}" in finished.get_json()["error"]["message"]
    other_ns = client.delete(f"/v1/jobs/{queued['job_id']}?namespace=elsewhere")
    assert other_ns.status_code == 404 and other_ns.get_json()["error"]["code"] == "job_not_found"


def test_a_restart_does_not_run_a_cancelled_job_again(settings):
    """A job whose cancel was requested when the server died ends as cancelled at the restart."""
    store = JobStore(settings.data_dir)
    job = store.create("default", MD.name, MD.read_bytes(), {"title": None})
    store.update(job, status="running", stage="embedding", cancel_requested=True)
    other = store.create("default", "other.md", b"# Other\n\nanother document", {"title": None})
    da = DocAnchor(settings, embedder=HashEmbedder())
    try:
        assert da.resume_jobs() == [other.job_id]
        assert da.get_job(job.job_id).status == "cancelled"
        assert da.wait_job(other.job_id, BACKSTOP_S).status == "done"
        assert [d.source_name for d in da.list_documents()] == ["other.md"]
    finally:
        da.close()


def test_a_job_a_killed_server_was_running_says_it_started_over(settings):
    """Before (trial defect 4): a poller saw a job resumed after a restart drop from 30 % to
    "parsing 0 %" with nothing to say why. Now its ``restarts`` counts the start-over; a job the
    killed process had only queued did not start over and counts none."""
    store = JobStore(settings.data_dir)
    running = store.create("default", MD.name, MD.read_bytes(), {"title": None})
    store.update(running, status="running", stage="embedding", done=3, total=10)  # what a kill leaves
    assert store.get(running.job_id).percent == 36
    queued = store.create("default", "other.md", b"# Other\n\nanother document", {"title": None})
    da = DocAnchor(settings, embedder=HashEmbedder())
    try:
        assert da.resume_jobs() == [running.job_id, queued.job_id]
        client = create_app(settings, da).test_client()
        for job_id, restarts in ((running.job_id, 1), (queued.job_id, 0)):
            assert da.wait_job(job_id, BACKSTOP_S).status == "done"
            answered = client.get(f"/v1/jobs/{job_id}").get_json()
            assert answered["restarts"] == restarts, answered
    finally:
        da.close()


# ------------------------------------------------------------------------------- stopping while storing
LEDGER_STEP_CHUNKS = 40
"""The storing step in these tests (``ingest.stream.WRITE_STEP_CHUNKS``, made small so that a
document of a few hundred chunks is written in several steps)."""


def _ledger() -> bytes:
    """A Markdown document of a few hundred chunks (over five storing steps of :data:`LEDGER_STEP_CHUNKS`)."""
    words = [f"ledger{i} harbour{i % 7} tide{i % 13} cargo{i % 17}" for i in range(600)]
    body = "\n\n".join(" ".join(words[i:i + 12]) + "." for i in range(0, 600, 2))
    return ("# Harbour ledger\n\n" + body).encode()


def _http(base: str, method: str, path: str, body: bytes | None = None,
          headers: dict | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(base + path, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=BACKSTOP_S) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _upload_in_background(base: str, data: bytes, name: str) -> dict:
    """POST ``data`` to /v1/documents with ``wait_s`` 0: the job (202) of an ingest going on."""
    boundary = "b0undary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"wait_s\"\r\n\r\n0\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
            "Content-Type: text/markdown\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    status, job = _http(base, "POST", "/v1/documents", body,
                        {"Content-Type": f"multipart/form-data; boundary={boundary}"})
    assert status == 202, job
    return job


class StepRecorder:
    """Wraps a store's ``add_chunks`` (one call per storing step) and records the chunks of each
    step. ``before(stored)`` runs before each step after the first, ``after(stored)`` after each
    step's write (before the job reports it), with the chunks stored so far; either may block the
    job there (on the job's thread) until the test has acted."""

    def __init__(self, store, before: Callable[[int], None] = lambda _n: None,
                 after: Callable[[int], None] = lambda _n: None) -> None:
        self.real, self.before, self.after = store.add_chunks, before, after
        self.steps: list[int] = []

    def __call__(self, namespace, chunks, embeddings) -> None:
        if self.steps:
            self.before(sum(self.steps))
        self.real(namespace, chunks, embeddings)
        self.steps.append(len(chunks))
        self.after(sum(self.steps))


def test_storing_reports_progress_step_by_step_over_the_job_api(settings, monkeypatch):
    """Before (trial defect 3): a job's storing showed done 0 for ~25 s for the 11,241-chunk novel
    (one write of all its chunks), then the total. Now the job's done moves after each step: the
    test polls the real job API, and each step writes only once the poll has seen the progress of
    the one before (so no value is missed however the threads are scheduled)."""
    from tests.live_server import serving_fake

    monkeypatch.setattr("ingest.stream.WRITE_STEP_CHUNKS", LEDGER_STEP_CHUNKS)
    seen = threading.Condition()
    storing: list[int] = []  # the job's done values seen in stage storing, in order

    def after_poll_saw(stored: int) -> None:
        with seen:
            assert seen.wait_for(lambda: stored in storing, BACKSTOP_S), (stored, storing)

    with serving_fake(settings) as (base, da):
        recorder = StepRecorder(da.ctx.store, before=after_poll_saw)
        monkeypatch.setattr(da.ctx.store, "add_chunks", recorder)
        job = _upload_in_background(base, _ledger(), "ledger.md")

        def ended() -> dict | None:
            _, j = _http(base, "GET", f"/v1/jobs/{job['job_id']}")
            with seen:
                if j["stage"] == "storing" and j["done"] not in storing:
                    storing.append(j["done"])
                    seen.notify_all()
            return j if j["status"] in ENDED else None

        final = wait_until(ended, "the job to end", interval_s=0.01)
    assert final["status"] == "done", final
    n = final["total"]
    assert n > 4 * LEDGER_STEP_CHUNKS and sum(recorder.steps) == n
    between = [d for d in storing if 0 < d < n]
    assert between == sorted(between) and len(between) >= 4, storing



def test_a_cancel_in_chunkings_verify_pass_stops_the_job_there(settings, monkeypatch):
    """Before (trial leftover): chunking called the job's progress callback, where a cancel is
    seen, only when it reached text further than before, so its last passes (the verify pass, the
    start fix, the joins of small chunks, the chunks' making, the full-size split under headings)
    ran to their end after a cancel, and the job stopped only at its next stage. Here the job is
    held as its verify pass begins; the test polls the job API for stage ``chunking``, cancels
    through it and lets the job go on: the verify pass stops (it raised; before, it returned)."""
    from ingest import chunking
    from tests.live_server import serving_fake

    monkeypatch.setattr("plugin.runner.CANCEL_WAIT_S", 0.0)  # answer at once; the job stops when released
    entered, release, returned = threading.Event(), threading.Event(), []
    real = chunking._verify

    def held(*args, **kwargs):
        entered.set()
        assert release.wait(BACKSTOP_S)
        spans = real(*args, **kwargs)
        returned.append(len(spans))
        return spans

    monkeypatch.setattr(chunking, "_verify", held)
    with serving_fake(settings) as (base, da):
        job = _upload_in_background(base, _ledger(), "ledger.md")
        assert entered.wait(BACKSTOP_S)
        wait_until(lambda: _http(base, "GET", f"/v1/jobs/{job['job_id']}")[1]["stage"] == "chunking",
                   "the job to be chunking")
        status, asked = _http(base, "DELETE", f"/v1/jobs/{job['job_id']}")
        assert status == 202 and asked["cancel_requested"] is True, asked
        release.set()
        ended = job_ended(lambda: _http(base, "GET", f"/v1/jobs/{job['job_id']}")[1])
        assert ended["status"] == "cancelled" and ended["stage"] == "chunking", ended
        assert returned == [], f"the verify pass ran to its end ({returned[0]} chunks) after the cancel"
        assert da.ctx.store.get_document(da.settings.namespace, job["doc_id"]) is None


@pytest.mark.parametrize("how", ["cancel", "server stop"])
def test_a_stop_while_storing_takes_effect_between_steps_and_leaves_nothing(settings, monkeypatch, how):
    """Before (trial defect 3): a cancel (DELETE /v1/jobs/<id>) or a server's stop (SIGTERM,
    Ctrl+C: ``interrupt_jobs``) during storing waited for the write of all the document's chunks
    (14.5-15.6 s for the 11,241-chunk novel). Now it takes effect at the end of the step under way:
    of the document's chunks only the first step's were written, and they are removed. A cancelled
    job stays cancelled; an interrupted one is queued again and the next start stores it whole."""
    from tests.live_server import serving_fake

    monkeypatch.setattr("ingest.stream.WRITE_STEP_CHUNKS", LEDGER_STEP_CHUNKS)
    monkeypatch.setattr("plugin.runner.CANCEL_WAIT_S", 0.0)  # answer at once; the job stops when released
    first_stored, stop_asked = threading.Event(), threading.Event()

    def hold(_stored: int) -> None:  # the job's thread, after its first step's write: the stop is asked now
        if not first_stored.is_set():
            first_stored.set()
            assert stop_asked.wait(BACKSTOP_S)

    with serving_fake(settings) as (base, da):
        recorder = StepRecorder(da.ctx.store, after=hold)
        monkeypatch.setattr(da.ctx.store, "add_chunks", recorder)
        job = _upload_in_background(base, _ledger(), "ledger.md")
        assert first_stored.wait(BACKSTOP_S)
        if how == "cancel":
            status, asked = _http(base, "DELETE", f"/v1/jobs/{job['job_id']}")
            assert status == 202 and asked["cancel_requested"] is True, asked
        else:
            da.runner.interrupt(wait_s=0.0)  # what docanchor serve does on SIGTERM or Ctrl+C (without its wait)
        stop_asked.set()
        want = "cancelled" if how == "cancel" else "queued"
        stopped = wait_until(lambda: (j := da.get_job(job["job_id"])).status == want and j, f"the job to be {want}")
        assert stopped.done == 0 if how == "server stop" else stopped.error_code == "cancelled"
        assert stopped.restarts == (1 if how == "server stop" else 0), stopped  # why its percent dropped
        assert recorder.steps == [LEDGER_STEP_CHUNKS]  # the step under way ended; none began after it
        assert _chunk_ids(da, job["doc_id"]) == [] and da.ctx.lexical.doc_counts(da.settings.namespace) == {}
        assert da.ctx.store.get_document(da.settings.namespace, job["doc_id"]) is None
    if how == "cancel":
        return
    again = DocAnchor(settings, embedder=HashEmbedder())  # the next start
    try:
        assert again.resume_jobs() == [job["job_id"]]
        final = again.wait_job(job["job_id"], BACKSTOP_S)
        assert final.status == "done", final
        assert len(_chunk_ids(again, job["doc_id"])) == final.total > 4 * LEDGER_STEP_CHUNKS
        answered = create_app(settings, again).test_client().get(f"/v1/jobs/{job['job_id']}").get_json()
        assert answered["restarts"] == 1, answered  # counted once: at the stop, not again at the resume
    finally:
        again.close()


# ------------------------------------------------------------------------------- a job that changes lanes
@pytest.mark.parametrize("how", ["uploaded", "resumed"])
def test_a_job_that_changes_lanes_is_chunked_once_and_its_progress_never_goes_back(tmp_path, monkeypatch, how):
    """Before (trial defect 7): a job under the byte limit of the small lane with more chunks than a
    small job was parsed and chunked there, moved to the large lane and parsed and chunked again:
    its progress went chunking (10 %), then queued and "parsing 0/1" (0 %), then chunking again
    (~10 s of chunking repeated for the Chinese novel), seen on a job resumed after a restart. Now
    its chunks go with it: chunked once, each stage once and in order, the percent never falling."""
    from docanchor.jobs import STAGES

    settings = Settings(data_dir=tmp_path / "data", small_job_chunks=50)
    data = _ledger()  # a few hundred chunks, far under small_job_bytes
    if how == "resumed":  # what a server stopped while the job ran leaves: queued, with its upload
        left = JobStore(settings.data_dir).create("default", "ledger.md", data, {"title": None})
    chunked = []
    from ingest import pipeline

    real_chunk = pipeline.chunk_document
    monkeypatch.setattr(pipeline, "chunk_document", lambda *a, **k: chunked.append(1) or real_chunk(*a, **k))
    da = DocAnchor(settings, embedder=HashEmbedder())
    seen: list[tuple[str, str, int]] = []  # (status, stage, percent) after every change of the job
    real_update, real_progress = da.jobs.update, da.jobs.progress

    def update(job, **changes):
        job = real_update(job, **changes)
        seen.append((job.status, job.stage, job.percent))
        return job

    def progress(job, stage, done, total):
        real_progress(job, stage, done, total)
        seen.append((job.status, job.stage, job.percent))

    monkeypatch.setattr(da.jobs, "update", update)
    monkeypatch.setattr(da.jobs, "progress", progress)
    try:
        if how == "resumed":
            assert da.resume_jobs() == [left.job_id]
            job_id = left.job_id
        else:
            job_id = da.submit(data, filename="ledger.md").job_id
        final = da.wait_job(job_id, BACKSTOP_S)
    finally:
        da.close()
    assert final.status == "done" and final.total > settings.small_job_chunks, final
    assert len(chunked) == 1, seen
    order = ("queued", *STAGES, "done")
    stages = [order.index(stage) for _status, stage, _percent in seen]
    assert stages == sorted(stages), seen
    percents = [percent for _status, _stage, percent in seen]
    assert percents == sorted(percents), seen
    assert ("running", "embedding", 15) in seen  # it did run on, in the large lane


# ------------------------------------------------------------------------------- the first upload loads the model
class LoadsOnFirstUse(HashEmbedder):
    """Like the real embedder, its model loads on first use (the chunker's token counts, an embedding);
    here the load waits for the test's gate, as a real one takes seconds (importing torch)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self._loaded = False

    @property
    def loaded(self) -> bool:
        return self._loaded

    def load(self) -> None:
        assert self.gate.wait(BACKSTOP_S), "the test never let the model load"
        self._loaded = True

    def count_tokens(self, text: str) -> int:
        self.load()
        return super().count_tokens(text)

    def embed(self, texts):
        self.load()
        return super().embed(texts)


def test_an_upload_that_loads_the_model_answers_202_at_once_and_its_job_says_so(tmp_path):
    """Before (trial of 3d88e0c, hpk): a running server's first upload loads the embedding model
    (torch; searches load only the ONNX query encoder), and the request waited through the load
    for its job (up to ``sync_wait_s``: ~12 s at load 17) to answer 202 anyway. Now the job reports
    stage ``loading`` and the upload answers 202 with it at once; once loaded, uploads wait as before."""
    emb = LoadsOnFirstUse()
    da = DocAnchor(Settings(data_dir=tmp_path / "data", sync_wait_s=BACKSTOP_S / 10), embedder=emb)
    try:
        client = create_app(da.settings, da).test_client()
        resp = _upload(client, MD.read_bytes(), MD.name, wait_s=None)  # the server's wait, sync_wait_s
        job = resp.get_json()
        assert resp.status_code == 202 and (job["status"], job["stage"]) == ("running", "loading"), job
        emb.gate.set()
        assert poll(client, job["job_id"])["status"] == "done"
        resp = _upload(client, b"# Borrowing\n\nA second, short document about borrowing in Rust.", "b.md", wait_s=None)
        assert resp.status_code == 201, resp.get_json()
    finally:
        emb.gate.set()
        da.close()

def _post(base: str, body: bytes, content_type: str) -> tuple[int, dict]:
    """POST /v1/documents; a hang guard of BACKSTOP_S / 5 (two minutes), far below the wait asked for."""
    req = urllib.request.Request(base + "/v1/documents", data=body, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(req, timeout=BACKSTOP_S / 5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_uploads_behind_the_model_load_answer_202_at_once(tmp_path):
    """Before (fresh-user trial, s16): two files in one upload to a fresh server waited the whole
    wait (10 s): the first job's wait ended at ``loading``, then the second, queued behind the
    load, waited out the deadline; a JSON text sent while another upload loaded the model waited
    too. Now both answer 202 at once, the queued jobs ``queued``; here the server's wait
    (``sync_wait_s``) is the backstop, so the old behaviour hangs past the requests' hang guard. A real server on loopback."""
    emb = LoadsOnFirstUse()
    da = DocAnchor(Settings(data_dir=tmp_path / "data", sync_wait_s=BACKSTOP_S), embedder=emb)
    try:
        with in_process(da.settings, da, threads=8) as server:
            base = f"http://127.0.0.1:{server.effective_port}"
            boundary = "b0undary"
            body = b"".join(
                (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
                 "Content-Type: text/plain\r\n\r\n").encode() + data + b"\r\n"
                for name, data in (("a.md", MD.read_bytes()), ("b.txt", "Un texte court sur le café.".encode())))
            status, answer = _post(base, body + f"--{boundary}--\r\n".encode(),
                                   f"multipart/form-data; boundary={boundary}")
            assert status == 202, answer
            assert [(j["status"], j["stage"]) for j in answer["jobs"]] == [("running", "loading"), ("queued", "queued")]
            status, text_job = _post(base, json.dumps({"text": "A note about borrowing."}).encode(),
                                     "application/json")
            assert status == 202 and (text_job["status"], text_job["stage"]) == ("queued", "queued"), text_job
            emb.gate.set()
            for job_id in [j["job_id"] for j in answer["jobs"]] + [text_job["job_id"]]:
                assert job_ended(lambda: _http(base, "GET", f"/v1/jobs/{job_id}")[1])["status"] == "done"
            status, text_job = _post(base, json.dumps({"text": "Loaded: this one waits."}).encode(),
                                     "application/json")
            assert status == 201, text_job
    finally:
        emb.gate.set()
        da.close()


def test_the_upload_and_library_pages_name_every_job_stage():
    """The pages show a job's stage by name ("Working" for one they do not know): every stage of
    :data:`docanchor.jobs.STAGES` has its name in both (the library page lacked fetching and ocr)."""
    from docanchor.jobs import STAGES
    from tests.live_server import REPO

    for page in ("upload.js", "library.js"):
        text = (REPO / "plugin" / "static" / page).read_text()
        names = text[text.index("var STAGES = {"):]
        names = names[:names.index("};")]
        assert [s for s in ("queued", *STAGES) if f"{s}: " not in names] == [], page


# ------------------------------------------------------------------------------- two lanes
def test_a_small_upload_does_not_wait_behind_a_big_one(gated):
    """Regression: one queue per server, so every upload waited behind a huge one."""
    da, emb, client = gated
    big = MD.read_bytes()  # 25 KB: over small_job_bytes (20,000) in this test
    assert len(big) > da.settings.small_job_bytes
    running = _upload(client, big, MD.name).get_json()
    assert emb.entered.wait(BACKSTOP_S)
    small = _upload(client, b"# Small\n\nA short note on borrowing.", "small.md", wait_s=None)
    assert small.status_code == 201, small.get_json()
    assert client.get(f"/v1/jobs/{running['job_id']}").get_json()["status"] == "running"
    emb.gate.set()
    assert poll(client, running["job_id"])["status"] == "done"


# ------------------------------------------------------------------------------- one replacement at a time
def test_two_replacements_of_one_document_do_not_fork_it(gated):
    """Regression: two concurrent PUTs on one document both answered 201; the old version was gone
    and both new versions stayed. The second now gets 409 replace_in_progress."""
    da, emb, client = gated
    emb.gate.set()
    old = _upload(client, b"# Old\n\nThe first version.", "doc.md", wait_s=None).get_json()
    emb.gate.clear()
    first = client.put(f"/v1/documents/{old['doc_id']}",
                       data={"file": (MD.open("rb"), "doc.md"), "wait_s": "0"})
    assert first.status_code == 202 and emb.entered.wait(BACKSTOP_S)
    second = client.put(f"/v1/documents/{old['doc_id']}", json={"text": "# Third\n\nA third version.", "wait_s": 0})
    assert second.status_code == 409, second.get_json()
    err = second.get_json()["error"]
    assert err["code"] == "replace_in_progress" and err["details"]["job_id"] == first.get_json()["job_id"]
    emb.gate.set()
    done = poll(client, first.get_json()["job_id"])
    assert done["status"] == "done" and done["result"]["replaced"] == old["doc_id"]
    assert [d["doc_id"] for d in client.get("/v1/documents").get_json()["documents"]] == [done["doc_id"]]
    again = client.put(f"/v1/documents/{done['doc_id']}", json={"text": "# Third\n\nA third version."})
    assert again.status_code == 201  # replacing the first's result works once it is done


def test_concurrent_replacements_leave_one_version(settings):
    """The attack's shape: two PUTs at once, each waiting; one document remains, never two."""
    da = DocAnchor(settings, embedder=HashEmbedder())
    client = create_app(settings, da).test_client()
    try:
        old = client.post("/v1/documents", json={"text": "# Old\n\nThe first version."}).get_json()
        answers: list = []
        # each thread's app is made here: werkzeug compiles its URL rules with ``ast``, which CPython
        # 3.11 does not allow in two threads at once ("AST constructor recursion depth mismatch")
        apps = [create_app(settings, da).test_client() for _ in (1, 2)]

        def put(app_client, text: str) -> None:
            answers.append(app_client.put(f"/v1/documents/{old['doc_id']}", json={"text": text}))

        threads = [threading.Thread(target=put, args=(apps[i - 1], f"# Version {i}\n\n{MD.read_text()[:4000]} {i}"))
                   for i in (1, 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(BACKSTOP_S)
        codes = sorted(r.status_code for r in answers)
        assert codes in ([201, 409], [201, 404]), [r.get_json() for r in answers]  # 404: the first had finished
        assert len(client.get("/v1/documents").get_json()["documents"]) == 1
    finally:
        da.close()


# ------------------------------------------------------------------------------- URL jobs
def _loopback(ip, port):
    return ip == ipaddress.ip_address("127.0.0.1") or is_public_address(ip, port)


@pytest.fixture
def drip():
    server = DripServer(interval_s=0.2)
    yield server
    server.stop()


def _within_backstop(call):
    """``call()`` in a thread; a call still running after :data:`BACKSTOP_S` fails the test instead of hanging it."""
    outcome: list = []
    thread = threading.Thread(target=lambda: outcome.append(call()), daemon=True)
    thread.start()
    thread.join(BACKSTOP_S)
    assert outcome, f"still running after the {BACKSTOP_S} s backstop"
    return outcome[0]


def test_a_dripping_url_fails_its_job_with_url_timeout(tmp_path, drip):
    """Regression: a URL job against a server dripping one byte at a time never ended (and held
    the request thread that fetched it); it now fails with url_timeout, answering 202 meanwhile."""
    settings = Settings(data_dir=tmp_path / "data", url_fetch_timeout_s=1.0, sync_wait_s=BACKSTOP_S)
    da = DocAnchor(settings, embedder=HashEmbedder())
    da.url_policy = _loopback
    client = create_app(da.settings, da).test_client()
    try:
        resp = _within_backstop(lambda: client.post("/v1/documents", json={"url": drip.base + "/close", "wait_s": 0}))
        assert resp.status_code == 202 and resp.get_json()["stage"] == "fetching"
        job = poll(client, resp.get_json()["job_id"])
        assert job["status"] == "failed" and job["error_code"] == "url_timeout" and job["error_status"] == 504
        waited = _within_backstop(
            lambda: client.post("/v1/documents", json={"url": drip.base + "/chunked"}))
        assert waited.status_code == 504 and waited.get_json()["error"]["code"] == "url_timeout"
        assert client.post("/v1/documents", json={"url": drip.base + "/ok.md"}).status_code == 201
    finally:
        drip.stop()
        da.close()


def test_a_url_job_records_its_url_as_the_source(settings, drip):
    """The URL fetched by the job is the document's source (main's rule for URL ingest, kept when the
    fetch moved into the job); a second URL with the same bytes is added to the one document's sources."""
    da = DocAnchor(settings, embedder=HashEmbedder())
    da.url_policy = _loopback
    client = create_app(settings, da).test_client()
    try:
        first = client.post("/v1/documents", json={"url": drip.base + "/ok.md"})
        assert first.status_code == 201, first.get_json()
        assert first.get_json()["sources"] == [drip.base + "/ok.md"]
        again = client.post("/v1/documents", json={"url": drip.base + "/ok.md?copy"}).get_json()
        assert again["duplicate"] and again["doc_id"] == first.get_json()["doc_id"]
        named = client.post("/v1/documents", json={"url": drip.base + "/ok.md?named", "source": "notes/ok.md"})
        assert named.get_json()["duplicate"]  # a 'source' sent with the URL is recorded instead of the URL
        stored = client.get(f"/v1/documents/{again['doc_id']}").get_json()
        assert stored["sources"] == [drip.base + "/ok.md", drip.base + "/ok.md?copy", "notes/ok.md"]
    finally:
        da.close()


def test_a_url_job_keeps_its_tags_and_metadata(settings, drip):
    """Tags and metadata sent with a URL reach the document the job stores (the job keeps them in
    its options until its fetch ends), and a second URL with the same bytes applies its own to that
    document, as an upload of stored bytes does."""
    da = DocAnchor(settings, embedder=HashEmbedder())
    da.url_policy = _loopback
    client = create_app(settings, da).test_client()
    try:
        first = client.post("/v1/documents", json={"url": drip.base + "/ok.md", "tags": ["Rust"],
                                                    "metadata": {"year": 2024}})
        assert first.status_code == 201, first.get_json()
        assert (first.get_json()["tags"], first.get_json()["metadata"]) == (["rust"], {"year": 2024})
        again = client.post("/v1/documents", json={"url": drip.base + "/ok.md?copy", "tags": ["book"],
                                                    "metadata": {"edition": 2}}).get_json()
        assert again["duplicate"] and again["doc_id"] == first.get_json()["doc_id"]
        stored = client.get(f"/v1/documents/{again['doc_id']}").get_json()
        assert (stored["tags"], stored["metadata"]) == (["book"], {"year": 2024, "edition": 2})
    finally:
        da.close()


def test_health_answers_while_url_fetches_hang(tmp_path, drip):
    """Regression: ten fetches from a dripping server held every request thread, and GET /healthz
    took 36 s. Fetches now run in the job's fetch pool and at most half the threads wait for jobs;
    here the fetches hang for the whole test (a 10-minute deadline) while /healthz answers."""
    settings = Settings(data_dir=tmp_path / "data", url_fetch_timeout_s=600, server_threads=4)
    da = DocAnchor(settings, embedder=HashEmbedder())
    da.url_policy = _loopback
    answers: list[int] = []
    with contextlib.ExitStack() as stack:
        stack.callback(da.close)
        base = f"http://127.0.0.1:{stack.enter_context(in_process(settings, da, threads=4)).effective_port}"

        def post_url(i: int) -> None:
            body = json.dumps({"url": f"{drip.base}/length?{i}", "wait_s": 60}).encode()
            req = urllib.request.Request(base + "/v1/documents", data=body,
                                         headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=BACKSTOP_S) as resp:
                    answers.append(resp.status)
            except urllib.error.HTTPError as err:  # a waiting request sees its fetch fail once the drip stops
                answers.append(err.code)

        posts = [threading.Thread(target=post_url, args=(i,), daemon=True) for i in range(10)]
        try:
            for t in posts:
                t.start()
            wait_until(lambda: drip.dripping >= 2, "two fetches to hang on the dripping server")
            with urllib.request.urlopen(base + "/healthz", timeout=BACKSTOP_S) as resp:
                assert resp.status == 200 and json.loads(resp.read())["status"] == "ok"
            with urllib.request.urlopen(base + "/v1/documents", timeout=BACKSTOP_S) as resp:
                assert resp.status == 200
            assert drip.dripping >= 2  # ... and still hang: /healthz did not wait for them
        finally:
            drip.stop()  # the hanging fetches end (connection closed), their jobs fail
            for t in posts:
                t.join(BACKSTOP_S)
    assert len(answers) == 10 and set(answers) <= {202, 502}, answers  # every request answered


# ------------------------------------------------------------------------------- lanes by work, over real HTTP
SANGUO = CORPUS / "txt/sanguo_yanyi_gbk.txt"  # 1.2 MB of GBK Chinese (under 2 MiB), 11,334 chunks


class _Loopback:
    """A client of the real waitress server in this process (:func:`tests.live_server.in_process`),
    so the test can hand it a gated embedder (a ``docanchor serve`` subprocess would load the real
    model)."""

    def __init__(self, server) -> None:
        self.base = f"http://127.0.0.1:{server.effective_port}"

    def call(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None) -> tuple[int, dict]:
        req = urllib.request.Request(self.base + path, data=body, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=BACKSTOP_S) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    def upload(self, data: bytes, name: str, wait_s: float) -> tuple[int, dict]:
        boundary = "docanchor-test-boundary"
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"wait_s\"\r\n\r\n{wait_s}\r\n"
                f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
                "Content-Type: application/octet-stream\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
        return self.call("POST", "/v1/documents", body, {"Content-Type": f"multipart/form-data; boundary={boundary}"})

    def job(self, job_id: str) -> dict:
        return self.call("GET", f"/v1/jobs/{job_id}")[1]


@pytest.fixture
def busy(tmp_path):
    """A server (default lane settings) whose embedder blocks on batches of the Chinese novel."""
    emb = GatedEmbedder(marker="曹操")
    da = DocAnchor(Settings(data_dir=tmp_path / "data", sync_wait_s=BACKSTOP_S), embedder=emb)
    with in_process(da.settings, da, threads=8) as server:
        yield da, emb, _Loopback(server)
        emb.gate.set()
    da.close()


def test_a_tiny_upload_does_not_wait_behind_a_big_text_under_the_byte_limit(busy):
    """Regression (issue 17 trial): lanes split jobs by bytes, so a 1.2 MB Chinese text (11,334
    chunks, under 2 MiB) ran in the small lane and a 70-byte upload waited ~15 minutes behind it.
    Lanes now follow the work: the novel moves to the large lane once its chunk count is known."""
    da, emb, server = busy
    data = SANGUO.read_bytes()
    assert len(data) <= da.settings.small_job_bytes  # the byte rule alone would call it small
    status, big = server.upload(data, SANGUO.name, wait_s=0)
    assert status == 202, big
    assert emb.entered.wait(BACKSTOP_S)  # the novel is embedding, held by the gate
    status, small = server.upload(b"A short note on borrowing in Rust, seventy bytes or so, nothing more.",
                                  "note.txt", wait_s=0)
    assert status in (201, 202), small
    done = wait_until(lambda: server.job(small["job_id"])["status"] in ENDED and server.job(small["job_id"]),
                      "the tiny upload's job to end")
    assert done["status"] == "done", done
    assert server.job(big["job_id"])["status"] == "running"  # the big one is still held: the tiny one went first
    emb.gate.set()
    assert job_ended(lambda: server.job(big["job_id"]))["status"] == "done"


def test_unsupported_bytes_are_refused_at_once_while_the_queue_is_busy(busy):
    """Regression: a 4-byte binary got 202 behind a busy queue and failed later in its job; the
    type is now detected before queueing: 415 unsupported_type at once, no job."""
    da, emb, server = busy
    status, big = server.upload(SANGUO.read_bytes(), SANGUO.name, wait_s=0)
    assert status == 202 and emb.entered.wait(BACKSTOP_S)
    status, body = server.upload(b"\x00\x01\x02\xff", "blob.bin", wait_s=0)
    assert status == 415 and body["error"]["code"] == "unsupported_type", body
    status, body = server.upload(b"MZ\x90\x00" + bytes(60), "setup.pdf", wait_s=0)
    assert status == 415 and "Windows executable" in body["error"]["message"], body
    assert [j for j in da.jobs.unfinished() if j.job_id != big["job_id"]] == []
    emb.gate.set()


# ------------------------------------------------------------------------------- duplicates racing deletes
def test_a_duplicate_upload_racing_a_delete_leaves_the_document_whole_or_gone(tmp_path, monkeypatch):
    """Before: an upload of bytes already stored read the document's record, a DELETE of the
    document ran, and the upload then wrote its copy of the record back with its file name added
    to the sources (``remember_source``): ``GET /v1/documents/<id>`` answered 200 for a document
    with no chunks in Chroma and none in the BM25 index (new-user trial). Now the record is read
    again under the write lock: the document is gone, so the job stores the bytes again, whole.

    Two real requests to a real server on a loopback port: the upload is held at the moment it has
    read the record (a pause around the real ``remember_source``) until the DELETE has answered."""
    da = DocAnchor(Settings(data_dir=tmp_path / "data", sync_wait_s=BACKSTOP_S), embedder=HashEmbedder())
    with in_process(da.settings, da, threads=8) as server:
        api = _Loopback(server)
        data = MD.read_bytes()
        _status, first = api.upload(data, "first.md", 0)
        doc_id = job_ended(lambda: api.job(first["job_id"]))["doc_id"]
        read_record, deleted = threading.Event(), threading.Event()
        remember = da.remember_source

        def held(namespace, record, source):
            read_record.set()
            assert deleted.wait(BACKSTOP_S)
            return remember(namespace, record, source)

        monkeypatch.setattr(da, "remember_source", held)
        answers: dict = {}
        upload = threading.Thread(target=lambda: answers.update(duplicate=api.upload(data, "second.md", 0)))
        upload.start()
        assert read_record.wait(BACKSTOP_S)
        assert api.call("DELETE", f"/v1/documents/{doc_id}")[0] == 200
        deleted.set()
        upload.join(BACKSTOP_S)
        _status, job = answers["duplicate"]
        job_ended(lambda: api.job(job["job_id"]))
        status, record = api.call("GET", f"/v1/documents/{doc_id}")
        chunks, indexed = _chunk_ids(da, doc_id), da.ctx.lexical.doc_counts(da.settings.namespace).get(doc_id, 0)
        if status == 200:  # stored again: whole
            assert record["n_chunks"] > 0 and len(chunks) == indexed == record["n_chunks"], (record, len(chunks), indexed)
        else:  # or gone: wholly
            assert status == 404 and chunks == [] and indexed == 0, (status, record, len(chunks), indexed)
        assert status == 200  # this race's outcome: the job found the document gone and stored its bytes
