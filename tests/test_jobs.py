"""Ingestion as jobs: 202 and polling, failures with their codes, namespaces, URL ingest, and
"still indexing" in the plugin answers (fake embedder, real Chroma on disk)."""

from __future__ import annotations

import ipaddress
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from docanchor.jobs import JobStore
from ingest.fetch import is_public_address
from plugin.api import DocAnchor
from plugin.app import create_app
from tests.conftest import CORPUS
from tests.fakes import HashEmbedder
from tests.test_http import assert_error
from tests.waiting import BACKSTOP_S, job_ended

MD = CORPUS / "md/ch04-01-what-is-ownership.md"


class GatedEmbedder(HashEmbedder):
    """Blocks in embed() until the test opens the gate, so a job can be seen mid-flight; with a
    ``marker``, only for batches holding a text that contains it (case-insensitive)."""

    def __init__(self, marker: str | None = None) -> None:
        super().__init__()
        self.marker = marker
        self.gate = threading.Event()
        self.entered = threading.Event()

    def embed(self, texts):
        if self.marker is None or any(self.marker in t.lower() for t in texts):
            self.entered.set()
            assert self.gate.wait(BACKSTOP_S), "the test never opened the gate"
        return super().embed(texts)


def poll(client, job_id: str) -> dict:
    return job_ended(lambda: client.get(f"/v1/jobs/{job_id}").get_json())


def test_upload_waits_and_answers_201(client):
    resp = client.post("/v1/documents", data={"file": (MD.open("rb"), MD.name)})
    assert resp.status_code == 201
    body = resp.get_json()
    assert body["doc_id"].startswith("doc_") and body["job_id"].startswith("job_") and body["anchor"]


def test_wait_zero_answers_202_then_the_job_finishes(client):
    resp = client.post("/v1/documents", data={"file": (MD.open("rb"), MD.name), "wait_s": "0"})
    assert resp.status_code in (202, 201)
    job = resp.get_json()
    if resp.status_code == 202:
        assert resp.headers["Location"] == f"/v1/jobs/{job['job_id']}"
        assert job["status"] in ("queued", "running") and 0 <= job["percent"] < 100
        job = poll(client, job["job_id"])
    else:
        job = client.get(f"/v1/jobs/{job['job_id']}").get_json()
    assert job["status"] == "done" and job["percent"] == 100
    assert job["result"]["n_chunks"] > 0
    doc = client.get(f"/v1/documents/{job['doc_id']}").get_json()
    assert doc["n_chunks"] == job["result"]["n_chunks"]


def test_a_finished_job_counts_its_chunks(client):
    """Regression (issue 17): a finished job reported ``done 1 / total 1`` (its last stage's units)
    instead of its chunk counts."""
    created = client.post("/v1/documents", data={"file": (MD.open("rb"), MD.name)}).get_json()
    job = client.get(f"/v1/jobs/{created['job_id']}").get_json()
    assert job["status"] == "done" and job["stage"] == "done"
    assert job["done"] == job["total"] == created["n_chunks"] > 1
    again = client.post("/v1/documents", data={"file": (MD.open("rb"), MD.name)}).get_json()  # a duplicate
    job = client.get(f"/v1/jobs/{again['job_id']}").get_json()
    assert again["duplicate"] and job["done"] == job["total"] == created["n_chunks"]


def test_failed_job_carries_the_error_code(client):
    pdf = CORPUS / "pdf/libreoffice-writer-password.pdf"
    resp = client.post("/v1/documents", data={"file": (pdf.open("rb"), pdf.name)})
    assert resp.status_code == 422
    assert resp.get_json()["error"]["code"] == "pdf_encrypted"
    resp = client.post("/v1/documents", data={"file": (pdf.open("rb"), pdf.name), "wait_s": "0"})
    job = resp.get_json() if resp.status_code == 202 else None
    if job:
        job = poll(client, job["job_id"])
        assert job["status"] == "failed" and job["error_code"] == "pdf_encrypted" and job["error_status"] == 422


def test_empty_upload_is_refused_at_once_while_another_job_runs(client, da, fake_embedder, monkeypatch, tmp_path):
    """Regression: an empty file sent while another ingest ran answered 202 and its job failed
    later. It is now a 422 ``empty_file`` at once, and no job is queued for it."""
    gate, entered, embed = threading.Event(), threading.Event(), fake_embedder.embed

    def gated(texts):
        entered.set()
        assert gate.wait(BACKSTOP_S), "the test never opened the gate"
        return embed(texts)

    monkeypatch.setattr(fake_embedder, "embed", gated)
    running = client.post("/v1/documents", data={"file": (MD.open("rb"), MD.name), "wait_s": "0"})
    try:
        assert running.status_code == 202 and entered.wait(BACKSTOP_S)
        zero = tmp_path / "zero.txt"
        zero.write_bytes(b"")
        blank = tmp_path / "blank.txt"
        blank.write_bytes(b"\xef\xbb\xbf \n\t\r\n  \n")
        for path, wait in ((CORPUS / "pdf/empty.pdf", "0"), (zero, "0"), (blank, "0"), (zero, None)):
            form = {"file": (path.open("rb"), path.name)} | ({"wait_s": wait} if wait else {})
            # at once: refused while the other job is held (queued behind it, it could not end)
            err = assert_error(client.post("/v1/documents", data=form), 422, "empty_file")
            assert "upload a file with content" in err["message"]
        assert [j.job_id for j in da.jobs.unfinished()] == [running.get_json()["job_id"]]
    finally:
        gate.set()
    assert poll(client, running.get_json()["job_id"])["status"] == "done"


def test_bad_wait_value_is_a_400(client):
    resp = client.post("/v1/documents", json={"text": "hello", "wait_s": 999})
    assert resp.status_code == 400 and resp.get_json()["error"]["code"] == "invalid_argument"


def test_jobs_are_private_to_their_namespace(client):
    resp = client.post("/v1/documents", json={"text": "# Team A\n\nsecret plans", "namespace": "team-a"})
    job_id = resp.get_json()["job_id"]
    assert client.get(f"/v1/jobs/{job_id}?namespace=team-a").status_code == 200
    other = client.get(f"/v1/jobs/{job_id}?namespace=team-b")
    assert other.status_code == 404 and other.get_json()["error"]["code"] == "job_not_found"


def test_job_state_survives_a_new_instance(settings, da, client):
    job_id = client.post("/v1/documents", json={"text": "# Kept\n\nsome text"}).get_json()["job_id"]
    again = DocAnchor(settings, embedder=HashEmbedder())
    assert again.get_job(job_id).status == "done"


def test_unfinished_jobs_resume_in_a_new_instance(settings):
    """A job a dead process left 'running' is re-run from its kept bytes by the next one."""
    store = JobStore(settings.data_dir)
    job = store.create("default", MD.name, MD.read_bytes(), {"title": None})
    store.update(job, status="running", stage="embedding", done=3, total=40)
    da = DocAnchor(settings, embedder=HashEmbedder())
    assert da.resume_jobs() == [job.job_id]
    done = da.wait_job(job.job_id, BACKSTOP_S)
    assert done.status == "done"
    assert da.get_document(done.doc_id).n_chunks > 0
    assert not (settings.data_dir / "uploads" / job.job_id).exists()


def test_still_indexing_in_plugin_answers(settings):
    emb = GatedEmbedder()
    da = DocAnchor(settings, embedder=emb)
    client = create_app(settings, da).test_client()
    resp = client.post("/v1/documents", data={"file": (MD.open("rb"), MD.name), "wait_s": "0"})
    assert resp.status_code == 202
    job = resp.get_json()
    assert emb.entered.wait(BACKSTOP_S)
    answer = client.post("/lobechat/getDocumentAnchor", data=f'{{"doc_id": "{job["doc_id"]}"}}',
                         content_type="text/plain").get_data(as_text=True)
    assert "still indexing" in answer and "%" in answer
    search = client.post("/v1/retrieve", json={"query": "ownership", "budget_tokens": 300}).get_json()
    assert search["sections"] == []  # nothing of a half-stored document is visible
    emb.gate.set()
    assert poll(client, job["job_id"])["status"] == "done"
    answer = client.post("/lobechat/getDocumentAnchor", data=f'{{"doc_id": "{job["doc_id"]}"}}',
                         content_type="text/plain").get_data(as_text=True)
    assert "still indexing" not in answer and job["doc_id"] in answer


# ------------------------------------------------------------------------------- URL ingest
class FileHandler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/ownership.md":
            body = MD.read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_response(302)
            self.send_header("Location", "http://10.9.8.7/internal")
            self.send_header("Content-Length", "0")
            self.end_headers()


@pytest.fixture(scope="module")
def file_server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FileHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def relaxed(ip, port):
    return ip == ipaddress.ip_address("127.0.0.1") or is_public_address(ip, port)


def test_url_ingest_over_http(da, client, file_server):
    refused = client.post("/v1/documents", json={"url": file_server + "/ownership.md"})
    assert refused.status_code == 400 and refused.get_json()["error"]["code"] == "url_address_refused"
    da.url_policy = relaxed
    resp = client.post("/v1/documents", json={"url": file_server + "/ownership.md"})
    assert resp.status_code == 201, resp.get_json()
    assert resp.get_json()["title"] == "What Is Ownership?"
    bounced = client.post("/v1/documents", json={"url": file_server + "/elsewhere"})
    assert bounced.status_code == 400 and bounced.get_json()["error"]["code"] == "url_address_refused"


def test_add_document_plugin_api(da, client, file_server):
    blocked = client.post("/lobechat/addDocument", data=f'{{"url": "{file_server}/ownership.md"}}',
                          content_type="text/plain")
    assert blocked.status_code == 200 and "public internet" in blocked.get_data(as_text=True)
    da.url_policy = relaxed
    answer = client.post("/lobechat/addDocument", data=f'{{"url": "{file_server}/ownership.md"}}',
                         content_type="text/plain").get_data(as_text=True)
    assert "What Is Ownership?" in answer and "searchDocuments" in answer
    empty = client.post("/lobechat/addDocument", data="", content_type="text/plain").get_data(as_text=True)
    assert "needs a `url`" in empty


def test_a_job_is_found_at_its_location_whatever_namespace_it_was_made_in(settings, tmp_path):
    """A multipart upload naming ``namespace=ocr`` answers 202 with a Location the client follows as
    given: the job is found without ``?namespace=`` (job ids are unique), by a caller that may use
    its namespace. A request that names another namespace, or a key that may not use ``ocr``, gets
    a 404 that names the namespace searched. Over the real server on loopback."""
    import json
    import urllib.error
    import urllib.request

    from tests.live_server import serving_fake

    keyed = settings.with_(api_keys=("wide=default|ocr", "narrow=team"))
    with serving_fake(keyed) as (base, _da):
        def call(method: str, path: str, key: str, data: bytes | None = None, ctype: str | None = None):
            headers = {"Authorization": f"Bearer {key}"} | ({"Content-Type": ctype} if ctype else {})
            req = urllib.request.Request(base + path, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=BACKSTOP_S) as resp:
                    return resp.status, dict(resp.headers), json.loads(resp.read())
            except urllib.error.HTTPError as err:
                return err.code, dict(err.headers), json.loads(err.read())

        body = (b"--b\r\nContent-Disposition: form-data; name=\"namespace\"\r\n\r\nocr\r\n"
                b"--b\r\nContent-Disposition: form-data; name=\"wait_s\"\r\n\r\n0\r\n"
                b"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"scan.md\"\r\n\r\n"
                b"# Scan\n\nThe scanned ledger lists every barrel in the cellar.\n\r\n--b--\r\n")
        status, headers, job = call("POST", "/v1/documents", "wide", body, "multipart/form-data; boundary=b")
        assert status == 202 and job["namespace"] == "ocr", job
        status, _, polled = call("GET", headers["Location"], "wide")
        assert status == 200 and polled["job_id"] == job["job_id"], polled
        job_ended(lambda: call("GET", headers["Location"], "wide")[2])

        status, _, other = call("GET", f"/v1/jobs/{job['job_id']}?namespace=default", "wide")
        assert status == 404 and other["error"]["code"] == "job_not_found"
        assert "in namespace 'default'" in other["error"]["message"], other
        status, _, narrow = call("GET", f"/v1/jobs/{job['job_id']}", "narrow")
        assert status == 404 and "in namespace 'team'" in narrow["error"]["message"], narrow
