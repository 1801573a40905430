"""A document whose ingest job is still running: every interface says "still being indexed"
(409 ``document_indexing`` with the job id), not "no such document" (fake embedder held at a
known point mid-embedding, real corpus file, real Chroma on disk)."""

from __future__ import annotations

import json
import threading

import pytest
from click.testing import CliRunner

from docanchor.errors import DocAnchorError
from plugin.api import DocAnchor
from plugin.app import create_app
from plugin.cli import main
from tests.conftest import CORPUS
from tests.fakes import HashEmbedder
from tests.test_jobs import poll
from tests.waiting import BACKSTOP_S

BIG = CORPUS / "txt/norwich-city.txt"  # 48 kB: several embedding batches of 64 chunks


class HeldEmbedder(HashEmbedder):
    """Embeds the first call's texts, then blocks in the second call until the test opens ``gate``.
    Its ``batch_size`` is small so that the file takes several ``embed()`` calls (the ingest stream
    sends :data:`ingest.stream.EMBED_WINDOW_BATCHES` batches per call)."""

    batch_size = 8

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.held = threading.Event()
        self.batches = 0

    def embed(self, texts):
        self.batches += 1
        if self.batches == 2:
            self.held.set()
            assert self.gate.wait(BACKSTOP_S), "the test never opened the gate"
        return super().embed(texts)


@pytest.fixture
def indexing(settings):
    """``(da, client, job)`` with ``job`` held mid-embedding; the gate opens at teardown."""
    emb = HeldEmbedder()
    da = DocAnchor(settings, embedder=emb)
    job = da.submit(BIG.read_bytes(), filename=BIG.name, wait_s=0)
    try:
        assert emb.held.wait(BACKSTOP_S), "the job never reached its second embedding batch"
        job = da.get_job(job.job_id)
        assert job.status == "running" and job.stage == "embedding" and 15 < job.percent < 85
        yield da, create_app(settings, da).test_client(), job, emb
    finally:
        emb.gate.set()
        da.close()


def _assert_indexing(body: dict, status: int, job) -> None:
    assert status == 409, body
    err = body["error"]
    assert err["code"] == "document_indexing" and err["status"] == 409
    assert err["details"]["job_id"] == job.job_id and err["details"]["doc_id"] == job.doc_id
    assert err["details"]["percent"] == job.percent
    assert f"Document {job.doc_id} is still being indexed ({job.percent} %" in err["message"]
    assert f"GET /v1/jobs/{job.job_id}" in err["message"]


def test_http_routes_say_still_indexing_with_the_job(indexing):
    da, client, job, emb = indexing
    doc_id = job.doc_id
    for resp in (
        client.get(f"/v1/documents/{doc_id}"),
        client.get(f"/v1/documents/{doc_id}/anchor"),
        client.post("/v1/retrieve", json={"query": "Carrow Road", "budget_tokens": 300, "doc_id": doc_id}),
        client.post("/v1/retrieve", json={"query": "Carrow Road", "doc_ids": [doc_id]}),
        client.post("/v1/read", json={"doc_id": doc_id}),
    ):
        _assert_indexing(resp.get_json(), resp.status_code, job)
    paths = client.get("/openapi.json").get_json()["paths"]
    for path, method in (("/v1/documents/{doc_id}", "get"), ("/v1/documents/{doc_id}/anchor", "get"),
                         ("/v1/retrieve", "post"), ("/v1/read", "post")):
        assert "409" in paths[path][method]["responses"], path
    missing = client.get("/v1/documents/doc_0000000000000000")
    assert missing.status_code == 404 and missing.get_json()["error"]["code"] == "document_not_found"
    emb.gate.set()
    assert poll(client, job.job_id)["status"] == "done"
    assert client.get(f"/v1/documents/{doc_id}").status_code == 200
    assert client.post("/v1/read", json={"doc_id": doc_id}).status_code == 200


def test_python_api_and_cli_say_still_indexing(indexing):
    da, _client, job, _emb = indexing
    for call in (lambda: da.get_document(job.doc_id), lambda: da.anchor(job.doc_id),
                 lambda: da.retrieve("Carrow Road", 300, doc_ids=[job.doc_id]), lambda: da.read(job.doc_id)):
        with pytest.raises(DocAnchorError) as info:
            call()
        _assert_indexing(info.value.to_body(), info.value.http_status, job)
    runner = CliRunner()
    for args in (["read", job.doc_id], ["anchor", job.doc_id], ["search", "Carrow Road", "--doc", job.doc_id]):
        result = runner.invoke(main, args, obj=da, catch_exceptions=False)
        assert result.exit_code == 1
        assert result.stderr.startswith(f"error document_indexing: Document {job.doc_id} is still being indexed")


def test_plugin_answers_still_say_indexing(indexing):
    _da, client, job, _emb = indexing
    for api, args in (("getDocumentAnchor", {"doc_id": job.doc_id}),
                      ("searchDocuments", {"query": "Carrow Road", "doc_id": job.doc_id}),
                      ("readDocument", {"doc_id": job.doc_id})):
        answer = client.post(f"/lobechat/{api}", data=json.dumps(args), content_type="text/plain")
        text = answer.get_data(as_text=True)
        assert answer.status_code == 200 and f"{job.doc_id} is still indexing, {job.percent} %" in text, text
