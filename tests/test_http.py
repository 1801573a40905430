"""The HTTP API through Flask's test client (fake embedder, real Chroma on disk), plus one run
through a real waitress server on a loopback port."""

from __future__ import annotations

import io
import json
import os
import urllib.error
import urllib.request

import pytest

from docanchor.errors import StoreUnavailable
from docanchor.settings import Settings
from plugin.api import DocAnchor
from plugin.app import create_app
from plugin.bodies import MAX_JSON_DEPTH
from plugin.openapi import openapi_document
from tests.conftest import CASES
from tests.fakes import HashEmbedder
from tests.waiting import BACKSTOP_S

GUIDE = """# Budgets

DocAnchor keeps every answer under the caller's token budget. It packs whole sections in rank
order and counts the rendered context, citation lines included, with the budget tokenizer.

## Anchors

An anchor is a short summary of at most three hundred tokens that stays in the chat.

## Reading on

A read returns a window of the document and a cursor to continue from.
"""


def assert_error(resp, status: int, code: str | None = None) -> dict:
    """The one JSON error body, with the expected status and code."""
    assert resp.status_code == status, resp.get_data(as_text=True)
    assert resp.mimetype == "application/json"
    err = resp.get_json()["error"]
    assert set(err) == {"code", "message", "status", "details"}
    assert err["status"] == status and err["message"].endswith(".")
    if code:
        assert err["code"] == code, err
    return err


def upload_text(client, text: str = GUIDE, title: str = "guide.md", **kw):
    return client.post("/v1/documents", json={"text": text, "title": title}, **kw)


def test_healthz(client):
    resp = client.get("/healthz")
    assert resp.status_code == 200 and resp.get_json() == {"status": "ok"}


def test_json_text_document_then_duplicate(client):
    first = upload_text(client)
    assert first.status_code == 201
    body = first.get_json()
    assert body["doc_id"].startswith("doc_") and body["duplicate"] is False
    assert body["n_chunks"] >= 1 and body["n_tokens"] > 0 and body["anchor"]
    assert first.headers["Location"] == f"/v1/documents/{body['doc_id']}"
    again = upload_text(client)
    assert again.status_code == 200
    assert again.get_json()["doc_id"] == body["doc_id"] and again.get_json()["duplicate"] is True


def test_multipart_upload_uses_filename_as_hint_only(client):
    data = {"file": (io.BytesIO(GUIDE.encode()), "../../etc/notes.md")}
    resp = client.post("/v1/documents", data=data, content_type="multipart/form-data")
    assert resp.status_code == 201, resp.get_json()
    doc = client.get(f"/v1/documents/{resp.get_json()['doc_id']}").get_json()
    assert doc["doc_type"] == "md"
    assert doc["source_name"] == "notes.md"  # path parts dropped, never used as a path


def test_list_get_anchor_delete(client):
    doc_id = upload_text(client).get_json()["doc_id"]
    listing = client.get("/v1/documents").get_json()
    assert listing["count"] == 1 and listing["documents"][0]["doc_id"] == doc_id
    assert listing["namespace"] == "default"
    doc = client.get(f"/v1/documents/{doc_id}").get_json()
    assert doc["doc_id"] == doc_id and doc["anchor"] and isinstance(doc["outline"], list)
    anchor = client.get(f"/v1/documents/{doc_id}/anchor").get_json()
    assert anchor["anchor"] == doc["anchor"] and 0 < anchor["anchor_tokens"] <= 300
    deleted = client.delete(f"/v1/documents/{doc_id}")
    assert deleted.status_code == 200 and deleted.get_json()["chunks_removed"] == doc["n_chunks"]
    assert_error(client.get(f"/v1/documents/{doc_id}"), 404, "document_not_found")
    assert_error(client.delete(f"/v1/documents/{doc_id}"), 404, "document_not_found")
    assert client.get("/v1/documents").get_json()["count"] == 0


def test_retrieve_under_budget(client, da):
    doc_id = upload_text(client).get_json()["doc_id"]
    resp = client.post("/v1/retrieve", json={"query": "token budget citation lines", "budget_tokens": 60,
                                             "doc_id": doc_id})
    assert resp.status_code == 200
    res = resp.get_json()
    assert res["sections"] and all(s["doc_id"] == doc_id for s in res["sections"])
    assert res["context_tokens_used"] <= 60
    assert res["context_tokens_used"] == da.ctx.counter.count(res["context"])
    explained = client.post("/v1/retrieve", json={"query": "anchor", "explain": True}).get_json()
    assert "trace" in explained
    assert_error(client.post("/v1/retrieve", json={"query": "x", "doc_ids": ["doc_missing"]}), 404,
                 "document_not_found")


def test_retrieve_budget_from_model(client):
    upload_text(client)
    res = client.post("/v1/retrieve", json={"query": "anchor", "model": "gpt-4o", "used_tokens": 1000,
                                            "budget_tokens": 80}).get_json()
    assert res["budget"]["model"] == "gpt-4o" and res["budget_tokens"] == 80
    assert res["context_tokens_used"] <= 80
    full = client.post("/v1/retrieve", json={"query": "anchor", "model": "gpt-4o", "used_tokens": 10_000_000})
    assert full.status_code == 200
    assert full.get_json()["sections"] == [] and full.get_json()["message"]
    assert_error(client.post("/v1/retrieve", json={"query": "anchor", "used_tokens": 5}), 400, "invalid_argument")


def test_an_unknown_model_warning_reaches_the_top_level_message(client):
    """The fallback warning was only under ``budget.message``; a caller reading ``message`` missed it."""
    upload_text(client)
    res = client.post("/v1/retrieve", json={"query": "anchor", "model": "acme-brainstorm-7",
                                            "used_tokens": 1000}).get_json()
    assert res["sections"] and "'acme-brainstorm-7' is not in DocAnchor's context-limit table" in res["message"]
    assert res["message"].startswith(res["budget"]["message"]) and "128,000" in res["message"]
    known = client.post("/v1/retrieve", json={"query": "anchor", "model": "gpt-4o", "used_tokens": 1000}).get_json()
    assert known["sections"] and "context-limit table" not in known["message"] and known["budget"]["message"] is None


def test_context_snapshot(client):
    resp = client.post("/v1/context/snapshot", json={"model": "gpt-4o",
                                                     "messages": [{"role": "user", "content": "hello"}]})
    assert resp.status_code == 200
    assert resp.get_json()["severity"] == "normal" and resp.get_json()["input_tokens"] > 0
    assert_error(client.post("/v1/context/snapshot", json={"model": "gpt-4o"}), 400, "invalid_argument")


def test_read_with_cursor(client):
    doc_id = upload_text(client).get_json()["doc_id"]
    first = client.post("/v1/read", json={"doc_id": doc_id, "budget_tokens": 40}).get_json()
    assert first["text"] and first["context_tokens_used"] <= 40 and first["next_cursor"]
    second = client.post("/v1/read", json={"doc_id": doc_id, "from": first["next_cursor"], "budget_tokens": 400})
    assert second.status_code == 200 and second.get_json()["start_char"] >= first["end_char"] - 1
    assert_error(client.post("/v1/read", json={"doc_id": "doc_nope"}), 404, "document_not_found")
    assert_error(client.post("/v1/read", json={"from": 3}), 400, "invalid_argument")


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b"", b"\xff\xfe", b'"text"'])
def test_bad_json_is_400(client, body):
    resp = client.post("/v1/retrieve", data=body, content_type="application/json")
    assert_error(resp, 400)


def test_json_depth_is_bounded(client):
    deep = "[" * (MAX_JSON_DEPTH + 5) + "]" * (MAX_JSON_DEPTH + 5)
    err = assert_error(client.post("/v1/retrieve", data=f'{{"query": "x", "d": {deep}}}',
                                   content_type="application/json"), 400, "invalid_json")
    assert "nested" in err["message"]
    assert_error(client.post("/v1/retrieve", data="[" * 100_000, content_type="application/json"), 400, "invalid_json")


def test_bad_arguments_are_400(client):
    assert_error(client.post("/v1/retrieve", json={"query": ""}), 400, "invalid_argument")
    assert_error(client.post("/v1/retrieve", json={"query": "x", "budget_tokens": 0}), 400, "invalid_argument")
    assert_error(client.post("/v1/retrieve", json={"query": "x", "explain": "yes"}), 400, "invalid_argument")
    assert_error(client.post("/v1/retrieve", json={"query": "x", "doc_id": "a", "doc_ids": ["b"]}), 400)
    assert_error(client.post("/v1/documents", json={"title": "no text"}), 400, "invalid_argument")
    assert_error(client.post("/v1/documents", data={}, content_type="multipart/form-data"), 400, "missing_file")


def test_a_misspelt_upload_field_is_refused_not_ignored(client, da):
    """Before (trial of 3df9211): ``curl -F file=@x -F titel=Hello -F replce=doc_x`` stored the
    file with its own title and replaced nothing (201), so a typo in ``replace`` kept the old
    version beside a second document. A multipart upload's fields are now checked as a JSON
    body's are: 400 invalid_argument naming the unknown ones and the accepted ones, nothing stored."""
    from plugin.v1 import UPLOAD_FORM_FIELDS

    before = len(da.list_documents())
    resp = client.post("/v1/documents", data={"file": (io.BytesIO(b"A note about tides."), "n.txt"),
                                              "titel": "Hello", "replce": "doc_x"},
                       content_type="multipart/form-data")
    err = assert_error(resp, 400, "invalid_argument")
    assert err["details"]["unknown"] == ["titel", "replce"] and "replace" in err["details"]["accepted"]
    assert "'titel'" in err["message"] and "POST /v1/documents" in err["message"]
    assert len(da.list_documents()) == before
    b = b"b0undary"  # a part whose name werkzeug cannot read (the key is None): refused too, never a 500
    body = (b"--" + b + b'\r\nContent-Disposition: form-data; name="x\x14R\\"\r\n\r\n1\r\n--' + b +
            b'\r\nContent-Disposition: form-data; name="file"; filename="n.txt"\r\n\r\nA note.\r\n--' + b + b"--\r\n")
    assert_error(client.post("/v1/documents", data=body, content_type="multipart/form-data; boundary=b0undary"),
                 400, "invalid_argument")
    form = openapi_document(Settings(data_dir=da.settings.data_dir))["paths"]["/v1/documents"]["post"]
    props = form["requestBody"]["content"]["multipart/form-data"]["schema"]["properties"]
    assert set(props) == set(UPLOAD_FORM_FIELDS)  # the refusal and the documented fields are one list


def test_routing_errors_have_the_json_body(client):
    assert_error(client.get("/nowhere"), 404, "not_found")
    err = assert_error(client.put("/v1/retrieve", json={}), 405, "method_not_allowed")
    assert "POST" in err["details"]["allowed"]
    assert "POST" in client.put("/v1/retrieve", json={}).headers["Allow"]


def test_too_large_is_413(tmp_path):
    small = Settings(data_dir=tmp_path / "d", max_upload_bytes=2000)
    client = create_app(small, DocAnchor(small, embedder=HashEmbedder())).test_client()
    big = {"file": (io.BytesIO(b"word " * 100_000), "big.txt")}
    assert_error(client.post("/v1/documents", data=big, content_type="multipart/form-data"), 413, "too_large")
    assert_error(client.post("/v1/read", json={"doc_id": "x" * 2_000_000}), 413, "too_large")
    # a body under the HTTP cap but over max_upload_bytes is refused by the pipeline, same code
    text = {"text": "word " * 1000, "title": "t.txt"}
    assert_error(client.post("/v1/documents", json=text), 413, "too_large")


def test_a_zip_bomb_is_refused_when_it_arrives_not_in_its_job(client, da):
    """Before: case a12 (a DOCX whose image part expands 1,028:1 by its ZIP directory) was queued
    (202 with ``wait_s`` 0) and failed too_large in its job seconds later (the trial: 19-28 s).
    Now the upload is refused with 413 too_large and the zip-bomb sentence before any job exists,
    by the check ``ingest --dry-run`` makes (:func:`ingest.pipeline.refuse_at_upload`)."""
    bomb = (CASES / "a12_docx_zip_bomb_media.docx").read_bytes()
    resp = client.post("/v1/documents", data={"file": (io.BytesIO(bomb), "a12.docx"), "wait_s": "0"},
                       content_type="multipart/form-data")
    err = assert_error(resp, 413, "too_large")
    assert "expands 1,028:1" in err["message"] and "It may be a zip bomb" in err["message"], err
    assert da.jobs.count_by_status() == {}  # no job was queued


def test_unsupported_media_type_is_415(client):
    assert_error(client.post("/v1/documents", data="a,b\n1,2", content_type="text/csv"), 415, "unsupported_media_type")
    assert_error(client.post("/v1/retrieve", data={"query": "x"}), 415, "unsupported_media_type")


def test_unreadable_document_is_422(client):
    empty = {"file": (io.BytesIO(b""), "empty.pdf")}
    assert_error(client.post("/v1/documents", data=empty, content_type="multipart/form-data"), 422, "empty_file")


class Broken(DocAnchor):
    def list_documents(self, namespace=None):
        raise RuntimeError("secret internal path /srv/keys")

    def get_document(self, doc_id, namespace=None):
        raise StoreUnavailable() from ConnectionError("chroma at 10.0.0.5 refused")


def test_crash_is_500_without_internals(settings):
    client = create_app(settings, Broken(settings, embedder=HashEmbedder())).test_client()
    resp = client.get("/v1/documents")
    assert_error(resp, 500, "internal")
    assert "secret" not in resp.get_data(as_text=True)
    resp = client.get("/v1/documents/doc_x")
    assert_error(resp, 503, "store_unavailable")
    assert "10.0.0.5" not in resp.get_data(as_text=True)


def test_api_keys(settings, da):
    client = create_app(settings.with_(api_keys=("k1", "k2")), da).test_client()
    resp = client.get("/v1/documents")
    assert_error(resp, 401, "unauthorized")
    assert resp.headers["WWW-Authenticate"].startswith("Bearer")
    assert_error(client.get("/v1/documents", headers={"Authorization": "Bearer nope"}), 401, "invalid_api_key")
    assert_error(client.post("/v1/retrieve", data="{bad", headers={"Authorization": "Basic k1"}), 401)
    ok = client.get("/v1/documents", headers={"Authorization": "Bearer k2"})
    assert ok.status_code == 200
    assert client.get("/healthz").status_code == 200
    assert client.get("/manifest.json").status_code == 200
    assert client.get("/openapi.json").get_json()["security"] == [{"bearer": []}]


def test_no_keys_means_open(client):
    assert client.get("/v1/documents").status_code == 200
    assert client.get("/openapi.json").get_json()["security"] == []


def test_namespaces_are_separate(client):
    doc_id = client.post("/v1/documents", json={"text": GUIDE, "title": "g.md", "namespace": "team a"}).get_json()["doc_id"]
    assert client.get("/v1/documents", headers={"X-DocAnchor-Namespace": "team a"}).get_json()["count"] == 1
    assert client.get("/v1/documents").get_json()["count"] == 0
    assert_error(client.get(f"/v1/documents/{doc_id}"), 404, "document_not_found")
    assert client.get(f"/v1/documents/{doc_id}?namespace=team a").status_code == 200
    res = client.post("/v1/retrieve", json={"query": "anchor"}).get_json()
    assert res["sections"] == []
    conflict = client.post("/v1/retrieve", json={"query": "x", "namespace": "b"},
                           headers={"X-DocAnchor-Namespace": "team a"})
    assert_error(conflict, 400, "invalid_namespace")
    assert_error(client.post("/v1/retrieve", json={"query": "x", "namespace": 7}), 400, "invalid_namespace")


@pytest.mark.parametrize("namespace", ["", " ", "n" * 201])
@pytest.mark.parametrize("route, body", [("/v1/retrieve", {"query": "x"}), ("/v1/read", {"doc_id": "doc_0123456789abcdef"})])
def test_a_namespace_in_a_json_body_is_checked_by_the_one_namespace_rule(client, route, body, namespace):
    """Before: pydantic's length check answered invalid_argument for an empty or 201-character
    body namespace, where ?namespace=, the header, the CLI and MCP answer invalid_namespace
    (new-user trial, 2026-12-02)."""
    assert_error(client.post(route, json={**body, "namespace": namespace}), 400, "invalid_namespace")


@pytest.mark.parametrize("namespace", ["n" * 201, " ", 7])
def test_every_invalid_namespace_names_its_field_in_one_shape(client, namespace):
    """Before: a too-long or empty namespace answered ``details: {}`` where a non-string one
    answered ``{"field": "namespace"}`` (new-user trial, issue 15): one error, one shape."""
    err = assert_error(client.post("/v1/retrieve", json={"query": "x", "namespace": namespace}), 400, "invalid_namespace")
    assert err["details"] == {"field": "namespace"}, err
    if namespace == "n" * 201:
        err = assert_error(client.get("/v1/documents", headers={"X-DocAnchor-Namespace": namespace}), 400, "invalid_namespace")
        assert err["details"] == {"field": "namespace"}, err


def test_an_upload_in_a_named_namespace_answers_an_anchor_naming_it(client):
    """Before: POST /v1/documents with a namespace answered the stored anchor, whose More line
    reads the default namespace, where GET .../anchor in that namespace names it (new-user trial,
    issue 15; plugin.api.DocAnchor.reader_record's rule)."""
    resp = client.post("/v1/documents", json={"text": GUIDE, "title": "g.md", "namespace": "team a"})
    assert resp.status_code == 201, resp.get_data(as_text=True)
    body = resp.get_json()
    more = [line for line in body["anchor"].splitlines() if line.startswith("More:")]
    assert more and 'namespace="team a"' in more[0], body["anchor"]
    again = client.get(f"/v1/documents/{body['doc_id']}/anchor", headers={"X-DocAnchor-Namespace": "team a"})
    assert again.get_json()["anchor"] == body["anchor"]
    job = client.get(f"/v1/jobs/{body['job_id']}", headers={"X-DocAnchor-Namespace": "team a"}).get_json()
    assert job["result"]["anchor"] == body["anchor"], job
    plain = client.post("/v1/documents", json={"text": GUIDE + "\nMore text.", "title": "h.md"}).get_json()
    assert "namespace=" not in plain["anchor"], plain["anchor"]


def test_openapi_describes_every_route(client, settings):
    spec = client.get("/openapi.json").get_json()
    assert spec["openapi"].startswith("3.1") and spec["servers"][0]["url"] == settings.public_base_url
    for rule in client.application.url_map.iter_rules():
        if rule.endpoint == "static" or rule.rule.startswith("/lobechat/"):
            continue
        path = rule.rule.replace("<", "{").replace(">", "}")
        methods = {m.lower() for m in rule.methods} - {"head", "options"}
        assert path in spec["paths"], path
        assert methods <= set(spec["paths"][path]), (path, methods)
    json.dumps(openapi_document(settings))  # serialisable


def test_real_waitress_server(da):
    from tests.live_server import in_process

    with in_process(da.settings, da, threads=2) as server:
        _talk_to(f"http://127.0.0.1:{server.effective_port}")


def test_stopping_a_server_whose_wake_up_pipe_is_closed_still_stops_it(da):
    """Before: close_server wrote to waitress's wake-up pipe after it had closed and raised
    OSError [Errno 9] (test_real_waitress_server failed so once in the fresh-clone CI run of d635866)."""
    import threading

    from plugin.serve import close_server, make_server

    server = make_server(da.settings, da, host="127.0.0.1", port=0, threads=2)
    loop = threading.Thread(target=server.run, daemon=True)
    loop.start()
    os.close(server.trigger.trigger)  # the pipe's write end, as when the loop has begun to end
    close_server(server, loop, wait_s=30)
    assert not server._map, "every socket of the server is closed"


def _talk_to(base: str) -> None:
    """Health, an upload, a search, a 404, the manifest and a LobeChat call over real HTTP."""

    def call(method, path, payload=None):
        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=BACKSTOP_S) as resp:
                return resp.status, resp.headers, resp.read()
        except urllib.error.HTTPError as err:
            return err.code, err.headers, err.read()

    status, _, body = call("GET", "/healthz")
    assert status == 200 and json.loads(body) == {"status": "ok"}
    status, _, body = call("POST", "/v1/documents", {"text": GUIDE, "title": "guide.md"})
    assert status == 201
    doc_id = json.loads(body)["doc_id"]
    status, _, body = call("POST", "/v1/retrieve", {"query": "budget", "budget_tokens": 100})
    assert status == 200 and json.loads(body)["sections"][0]["doc_id"] == doc_id
    status, _, body = call("GET", "/v1/documents/doc_nope")
    assert status == 404 and json.loads(body)["error"]["code"] == "document_not_found"
    status, headers, body = call("GET", "/manifest.json")
    assert status == 200 and headers["Access-Control-Allow-Origin"] == "*"
    req = urllib.request.Request(base + "/lobechat/listDocuments", data=b"", method="POST",
                                 headers={"Content-Type": "text/plain"})
    with urllib.request.urlopen(req, timeout=BACKSTOP_S) as resp:
        assert resp.status == 200 and doc_id in resp.read().decode()


def test_explain_trace_says_how_the_budget_was_set(client):
    from tests.conftest import CORPUS

    path = CORPUS / "md" / "ch04-01-what-is-ownership.md"
    up = client.post("/v1/documents", data={"file": (io.BytesIO(path.read_bytes()), path.name)},
                     content_type="multipart/form-data")
    assert up.status_code == 201, up.get_data(as_text=True)
    query = {"query": "What are the ownership rules?", "explain": True}

    def source(**extra) -> tuple[str, dict]:
        resp = client.post("/v1/retrieve", json={**query, **extra})
        assert resp.status_code == 200, resp.get_data(as_text=True)
        return resp.get_json()["trace"]["budget_source"], resp.get_json()

    assert source(budget_tokens=300)[0] == "request"
    derived, body = source(model="nonexistent-model", used_tokens=100)
    assert derived == "model" and body["budget"]["limit_source"] == "fallback"
    assert source(model="gpt-4o", messages=[{"role": "user", "content": "hello"}], budget_tokens=200)[0] == "model"
    assert source()[0] == "default"


def test_replace_as_a_switch_is_refused_saying_it_takes_a_doc_id(client):
    """``-F replace=true`` (a fresh user's guess) is a 400 that says what replace takes, not a 404
    about a document with id 'true'; a real doc_id still replaces."""
    from tests.conftest import CORPUS

    first, second = CORPUS / "txt" / "sample-french-1.txt", CORPUS / "md" / "ch04-01-what-is-ownership.md"
    old = client.post("/v1/documents", data={"file": (io.BytesIO(first.read_bytes()), first.name)},
                      content_type="multipart/form-data")
    assert old.status_code == 201, old.get_data(as_text=True)
    for flag in ("true", "false", "1", "0"):
        resp = client.post("/v1/documents", data={"file": (io.BytesIO(second.read_bytes()), second.name),
                                                  "replace": flag}, content_type="multipart/form-data")
        err = assert_error(resp, 400, "invalid_argument")
        assert "takes the doc_id of the document to replace" in err["message"], err["message"]
    assert_error(client.post("/v1/documents", json={"text": "# N\n\nText.", "replace": "True"}), 400, "invalid_argument")
    new = client.post("/v1/documents", data={"file": (io.BytesIO(second.read_bytes()), second.name),
                                             "replace": old.get_json()["doc_id"]}, content_type="multipart/form-data")
    assert new.status_code == 201 and new.get_json()["replaced"] == old.get_json()["doc_id"]


def test_readme_documents_replace_as_a_doc_id_and_the_read_default_budget():
    from plugin.cli import main as cli_main
    from tests.conftest import REPO

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith("| `POST /v1/documents`"))
    assert "`replace=<doc_id>`" in row
    budget = next(o for o in cli_main.commands["read"].params if o.name == "budget_tokens")
    assert "else 1000" in budget.help and Settings().default_budget_tokens == 1000
    assert "docanchor read DOC_ID [--from HEADING|page:N|chunk:N] [--budget 1000]" in readme


def test_a_derived_budget_with_no_room_still_explains_itself(client):
    """A conversation that fills the model's window derives a budget of 0: nothing is returned,
    the message says why, and ``explain`` still gives the trace (every candidate dropped for budget)."""
    upload_text(client)
    res = client.post("/v1/retrieve", json={"query": "anchor", "model": "gpt-4o", "used_tokens": 10_000_000,
                                            "explain": True}).get_json()
    assert res["budget_tokens"] == 0 and res["sections"] == [] and res["context_tokens_used"] == 0
    assert "no room" in res["message"] and res["budget"]["budget_tokens"] == 0
    trace = res["trace"]
    assert trace["budget_tokens"] == 0 and trace["budget_source"] == "model"
    assert trace["candidates"] and {c["fate"] for c in trace["candidates"]} <= {
        "dropped for budget", "below relevance cut-off", "beyond a section break"}
    assert trace["tokens"]["total"] == 0
    # a caller cannot ask for 0 itself
    assert_error(client.post("/v1/retrieve", json={"query": "anchor", "budget_tokens": 0}), 400, "invalid_argument")


def test_readme_route_table_lists_every_route_and_the_query_limit(client):
    """A trial found ``GET /v1/documents/<doc_id>/anchor`` served but not in the README's table,
    and later ``GET|POST /ui/upload``: every route but the pages' static files has a row."""
    import re

    from plugin.api import MAX_QUERY_CHARS
    from tests.conftest import REPO

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    rows = [line for line in readme.splitlines() if line.startswith("| `")]
    for rule in client.application.url_map.iter_rules():
        if "/static/" in rule.rule:  # the pages' own scripts and style sheets
            continue
        path = re.sub(r"<(?:\w+:)?(\w+)>", r"<\1>", rule.rule)
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            assert any(f"`{method} {path}`" in row or f"{method} {path}`" in row for row in rows), (method, path)
    assert f"at most {MAX_QUERY_CHARS:,} characters" in readme
    assert "document_indexing" in readme and "one at a time" in readme


def test_an_upload_asks_once_where_the_request_named_its_namespace(settings, monkeypatch):
    """Before: plugin.v1._read_upload asked _named_in for ``named`` a second time after _namespace
    had asked it (issue 15, new-user trial's review). One question per upload now, for JSON and
    multipart bodies alike, and the answer's anchor still names the namespace the body named."""
    import httpx2

    from plugin import v1
    from tests.live_server import serving_fake

    asked = []
    named_in = v1._named_in
    monkeypatch.setattr(v1, "_named_in", lambda *a: asked.append(a) or named_in(*a))
    with serving_fake(settings, threads=2) as (base, da):
        uploads = ({"json": {"text": GUIDE, "title": "g.md", "namespace": "team"}},
                   {"files": {"file": ("g2.md", GUIDE.replace("Budgets", "Limits").encode())},
                    "data": {"namespace": "team"}})
        for upload in uploads:
            asked.clear()
            answer = httpx2.post(f"{base}/v1/documents", timeout=BACKSTOP_S, **upload)
            assert answer.status_code == 201, answer.text
            assert len(asked) == 1, asked
            assert 'namespace="team"' in answer.json()["anchor"], answer.json()["anchor"]


def test_retrieve_gives_a_short_sections_heading_path_whole(client):
    """Before (new-user trial): POST /v1/retrieve answered ``"heading_path": []`` for a short
    section whose citation line left its long heading out to save tokens (retrieval.pack rule 6).
    The JSON field carries the heading path; only the citation line is bare."""
    heading = "Emergency access arrangements for the northern gate and the rail siding after dark"
    text = f"# Yard handbook\n\n## {heading}\n\nThe night gate code is 4471.\n\n## Other\n\nNothing else here.\n"
    doc_id = upload_text(client, text, "handbook.md").get_json()["doc_id"]
    res = client.post("/v1/retrieve", json={"query": "night gate code", "budget_tokens": 50,
                                            "doc_id": doc_id}).get_json()
    s = res["sections"][0]
    assert "4471" in s["text"] and heading not in s["citation"], res
    assert s["heading_path"][-1] == heading, s
    assert res["context_tokens_used"] <= 50


def test_parallel_deletes_of_one_document_delete_it_once(settings):
    """Before (new-user trial): eight DELETE /v1/documents/<id> sent at once to a real server mostly
    answered 200 ``deleted: true`` (one with the chunks removed, the others with 0): each looked the
    document up, then deleted, and the look-ups all came before the first delete. The look-up is now
    repeated under the write lock, so exactly one request deletes it and the others answer what a
    DELETE of a missing document answers (README, OpenAPI: 404 document_not_found)."""
    import threading

    import httpx2

    from tests.live_server import serving_fake

    with serving_fake(settings, threads=8) as (base, da):
        doc_id = da.ingest_text(GUIDE, title="g.md").record.doc_id
        n_chunks = da.get_document(doc_id).n_chunks
        start, answers = threading.Barrier(8), []

        def delete() -> None:
            start.wait(timeout=BACKSTOP_S)
            answer = httpx2.delete(f"{base}/v1/documents/{doc_id}", timeout=BACKSTOP_S)
            answers.append((answer.status_code, answer.json()))

        threads = [threading.Thread(target=delete) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=BACKSTOP_S)
        assert sorted(status for status, _ in answers) == [200] + [404] * 7, answers
        deleted = [body for status, body in answers if status == 200]
        assert deleted == [{"doc_id": doc_id, "deleted": True, "chunks_removed": n_chunks}], deleted
        assert all(body["error"]["code"] == "document_not_found" for status, body in answers if status == 404)
        assert da.list_documents() == []


def test_the_favicon_is_no_content_not_an_error(settings):
    """Before: a browser opening /ui/ asked for /favicon.ico and got a 404 JSON error (an error line
    in the log and the metrics for every page opened). Now 204, cached, with keys set too; over the
    real server on loopback."""
    import urllib.request

    from tests.live_server import serving_fake

    with serving_fake(settings.with_(api_keys=("k1",))) as (base, _da):
        with urllib.request.urlopen(base + "/favicon.ico", timeout=60) as resp:
            assert resp.status == 204 and resp.read() == b""
            assert "max-age=" in resp.headers["Cache-Control"]


def _raw_post(base: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict]:
    """POST ``body`` over a plain socket with exactly ``headers`` (a client that sends what it
    likes), the write side then closed; the status and the JSON body of the answer."""
    import socket

    host, port = base.removeprefix("http://").rsplit(":", 1)
    head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    with socket.create_connection((host, int(port)), timeout=BACKSTOP_S) as sock:
        sock.sendall(head.encode("latin-1") + body)
        sock.shutdown(socket.SHUT_WR)
        answer = b"".join(iter(lambda: sock.recv(65536), b""))
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), json.loads(rest.partition(b"\r\n\r\n")[2])


def test_a_multipart_body_cut_short_says_so_not_that_the_file_is_missing(settings):
    """Before (the trial of 3d88e0c, defect 8a): a multipart upload whose body ends before its
    closing boundary line answered 400 missing_file "Send the document in a multipart field named
    'file'" although it had one (werkzeug's parser turned the body into no fields at all). Now
    400 incomplete_body saying the body was cut short; the same body whole is stored. A body
    shorter than its Content-Length (which the in-process client hands the app as it is) says the
    same; a multipart Content-Type without a boundary says that."""
    from tests.live_server import serving_fake

    part = (b'--XyZ\r\nContent-Disposition: form-data; name="file"; filename="quarry.md"\r\n'
            b"Content-Type: text/markdown\r\n\r\n# Quarry\n\nThe foreman logs each zephyrite cart.\n\r\n")
    multipart = {"Content-Type": "multipart/form-data; boundary=XyZ"}
    with serving_fake(settings, threads=2) as (base, da):
        status, body = _raw_post(base, "/v1/documents", {**multipart, "Content-Length": str(len(part))}, part)
        assert (status, body["error"]["code"]) == (400, "incomplete_body"), body
        assert body["error"]["message"] == (
            "The multipart body was cut short: it ends before its closing boundary line (--XyZ--), so the document "
            "in it is incomplete. Send the whole body again (check that Content-Length is the size of what is sent).")
        assert da.list_documents() == []
        whole = part + b"--XyZ--\r\n"
        status, body = _raw_post(base, "/v1/documents", {**multipart, "Content-Length": str(len(whole))}, whole)
        assert status == 201 and body["title"] == "Quarry", body
        status, body = _raw_post(base, "/v1/documents", {"Content-Type": "multipart/form-data",
                                                         "Content-Length": str(len(whole))}, whole)
        assert (status, body["error"]["code"]) == (400, "invalid_argument"), body
        assert "names no boundary" in body["error"]["message"], body

    with DocAnchor(settings, embedder=HashEmbedder()) as da:
        short = create_app(settings, da).test_client().post(
            "/v1/documents", input_stream=io.BytesIO(part), content_length=len(part) + 500,
            content_type=multipart["Content-Type"])
    assert "cut short" in assert_error(short, 400, "incomplete_body")["message"]
