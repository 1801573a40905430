"""What the /v1 JSON routes accept in a body, as a fresh user of the HTTP API meets it: field
names as documented (README.md, /openapi.json) and nothing else, budgets in range, the
document's flags in the upload answer (fake embedder, real Chroma on disk), and the README's
command lines that start a server and call it."""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path

import pytest

from plugin.schemas.common import sent_fields
from plugin.schemas.requests import REQUESTS
from plugin.api import MAX_BUDGET_TOKENS
from tests.conftest import CASES
from tests.test_http import assert_error, upload_text
from tests.waiting import job_ended

README = Path(__file__).resolve().parent.parent / "README.md"

# route -> (a body that works apart from the unknown field, the accepted fields in order)
ROUTES = {
    "/v1/retrieve": ({"query": "budget"}, "RetrieveRequest"),
    "/v1/read": ({"doc_id": "DOC"}, "ReadRequest"),
    "/v1/context/snapshot": ({"model": "gpt-4o", "messages": []}, "SnapshotRequest"),
    "/v1/context/assemble": ({"model": "gpt-4o", "messages": [{"role": "user", "content": "Hi"}]},
                             "ContextAssembleRequest"),
    "/v1/context/compact": ({"model": "gpt-4o", "messages": [{"role": "user", "content": "Hi"}]},
                            "ContextCompactRequest"),
    "/v1/documents": ({"text": "# Notes\n\nSome text.", "title": "n.md"}, "TextDocument"),
}


def _accepted(schema: str) -> tuple[str, ...]:
    """The fields the request model named ``schema`` takes, in order (aliases such as ``from``)."""
    return tuple(sent_fields(REQUESTS[schema]))


@pytest.fixture
def doc_id(client) -> str:
    return upload_text(client).get_json()["doc_id"]


def test_read_with_start_instead_of_from_is_refused_naming_both(client, doc_id):
    err = assert_error(client.post("/v1/read", json={"doc_id": doc_id, "start": "page:3"}), 400, "invalid_argument")
    assert err["message"] == ("Unknown field 'start'; POST /v1/read accepts doc_id, from, budget_tokens, "
                              "namespace.")
    assert err["details"] == {"unknown": ["start"], "accepted": ["doc_id", "from", "budget_tokens", "namespace"]}


def test_read_errors_name_from_not_start(client, doc_id):
    for bad in ("No such heading", "page:99", "chunk:999", True, 1.5):
        err = assert_error(client.post("/v1/read", json={"doc_id": doc_id, "from": bad}), 400, "invalid_argument")
        assert "from" in err["message"], err["message"]
        assert "start" not in err["message"], err["message"]
    err = assert_error(client.post("/v1/read", json={"doc_id": doc_id, "from": "No such heading"}), 400)
    assert "matches from='No such heading'" in err["message"] and "'Budgets'" in err["message"]


@pytest.mark.parametrize("path", sorted(ROUTES))
def test_every_json_route_refuses_an_unknown_field(client, doc_id, path):
    good, schema = ROUTES[path]
    accepted = _accepted(schema)
    good = {k: (doc_id if v == "DOC" else v) for k, v in good.items()}
    err = assert_error(client.post(path, json={**good, "colour": "blue", "budgetTokens": 5}), 400, "invalid_argument")
    assert err["message"].startswith("Unknown fields 'colour', 'budgetTokens'; POST " + path + " accepts ")
    assert err["message"].endswith(", ".join(accepted) + ".")
    assert client.post(path, json=good).status_code in (200, 201)  # the same body without them is fine


def test_put_refuses_an_unknown_field_and_names_the_route(client, doc_id):
    err = assert_error(client.put(f"/v1/documents/{doc_id}", json={"txt": "# New\n\nText."}), 400, "invalid_argument")
    assert "'txt'; PUT /v1/documents/<doc_id> accepts text, url, title" in err["message"]


def test_text_and_url_together_are_refused(client):
    err = assert_error(client.post("/v1/documents", json={"text": "a b c", "url": "https://example.org/x.md"}),
                       400, "invalid_argument")
    assert "either 'text' or 'url'" in err["message"]


def test_lobechat_stays_lenient_and_multipart_is_checked_as_json_is(client, doc_id):
    """The LobeChat routes ignore a field a model adds (plugin.schemas.tools.Args says why); a
    multipart upload's unknown field is refused like a JSON body's (a misspelt ``replace`` stored a
    second document: test_http::test_a_misspelt_upload_field_is_refused_not_ignored)."""
    resp = client.post("/v1/documents", data={"file": (__import__("io").BytesIO(b"Plain text body."), "a.txt"),
                                              "colour": "blue"}, content_type="multipart/form-data")
    assert resp.status_code == 400 and "'colour'" in resp.get_json()["error"]["message"], resp.get_data(as_text=True)
    resp = client.post("/lobechat/searchDocuments", data='{"query": "budget", "colour": "blue"}',
                       content_type="text/plain")
    assert resp.status_code == 200 and doc_id in resp.get_data(as_text=True)


@pytest.mark.parametrize("path", sorted(ROUTES))
def test_accepted_fields_are_the_documented_ones(client, path):
    _, schema = ROUTES[path]
    accepted = _accepted(schema)
    spec = client.get("/openapi.json").get_json()
    assert set(spec["components"]["schemas"][schema]["properties"]) == set(accepted)
    row = next(line for line in README.read_text().splitlines() if line.startswith(f"| `POST {path}`"))
    braced = " ".join(re.findall(r"`\{[^}`]*\}`", row))  # the body shapes the row gives
    named = set(re.findall(r"[a-z_]+", braced))
    assert set(accepted) <= named, sorted(set(accepted) - named)


@pytest.mark.parametrize("path", ["/v1/retrieve", "/v1/read"])
@pytest.mark.parametrize("bad", [1.5, "100", True, None, 0, -5, 0.0, 1e23, MAX_BUDGET_TOKENS + 1, [100], {"n": 1}])
def test_budget_outside_whole_1_to_max_is_refused_with_the_range(client, doc_id, path, bad):
    body = {"query": "budget"} if path == "/v1/retrieve" else {"doc_id": doc_id}
    err = assert_error(client.post(path, json={**body, "budget_tokens": bad}), 400, "invalid_argument")
    assert "'budget_tokens' must be a whole number of tokens from 1 to 1,000,000; got " in err["message"]
    # the field and the value, as the other range errors name their field (a trial's 1.5 gave empty details)
    shown = bad if not isinstance(bad, (list, dict)) else json.dumps(bad)
    assert err["details"] == {"field": "budget_tokens", "value": shown}


@pytest.mark.parametrize("path", ["/v1/retrieve", "/v1/read"])
def test_budget_integral_float_and_the_bounds_are_accepted(client, doc_id, path):
    body = {"query": "budget"} if path == "/v1/retrieve" else {"doc_id": doc_id}
    for good, expect in ((500.0, 500), (1, 1), (MAX_BUDGET_TOKENS, MAX_BUDGET_TOKENS)):
        resp = client.post(path, json={**body, "budget_tokens": good})
        assert resp.status_code == 200, resp.get_data(as_text=True)
        if path == "/v1/retrieve":
            assert resp.get_json()["budget_tokens"] == expect
        assert resp.get_json()["context_tokens_used"] <= expect


def test_budget_with_model_is_checked_too_and_the_derived_one_capped(client):
    err = assert_error(client.post("/v1/retrieve", json={"query": "budget", "model": "gpt-4o", "used_tokens": 10,
                                                        "budget_tokens": 2.5}), 400, "invalid_argument")
    assert "from 1 to 1,000,000" in err["message"]
    resp = client.post("/v1/retrieve", json={"query": "budget", "model": "models/gemini-1.5-pro", "used_tokens": 0})
    assert resp.status_code == 200 and resp.get_json()["budget_tokens"] == MAX_BUDGET_TOKENS


def test_budget_maximum_is_documented(client):
    spec = client.get("/openapi.json").get_json()["components"]["schemas"]
    for schema in ("RetrieveRequest", "ReadRequest"):
        assert spec[schema]["properties"]["budget_tokens"]["maximum"] == MAX_BUDGET_TOKENS
    assert "from 1 to 1,000,000" in README.read_text()


def _upload_case(client, name: str, **form):
    with (CASES / name).open("rb") as fh:
        return client.post("/v1/documents", data={"file": (fh, name), **form}, content_type="multipart/form-data")


@pytest.mark.parametrize("name, flag, value", [
    ("a08_pdf_hidden_injection.pdf", "hidden_text", {"count": 2, "pages": [1]}),
    ("a03_pdf_cjk_identity_h_no_tounicode.pdf", "garbled_pages", [1]),
])
def test_upload_answer_and_job_carry_the_documents_flags(client, name, flag, value):
    resp = _upload_case(client, name)
    assert resp.status_code == 201, resp.get_data(as_text=True)
    body = resp.get_json()
    stored = client.get(f"/v1/documents/{body['doc_id']}").get_json()
    assert body["flags"][flag] == value and body["flags"] == stored["flags"]
    assert body["doc_type"] == stored["doc_type"] == "pdf"
    job = client.get(f"/v1/jobs/{body['job_id']}").get_json()
    assert job["status"] == "done" and job["result"]["flags"] == stored["flags"]
    again = _upload_case(client, name)  # the same bytes: answered from the stored record
    assert again.status_code == 200 and again.get_json()["duplicate"] is True
    assert again.get_json()["flags"] == stored["flags"]


def test_polled_job_result_carries_the_flags(client):
    resp = _upload_case(client, "a08_pdf_hidden_injection.pdf", wait_s="0")
    assert resp.status_code in (201, 202), resp.get_data(as_text=True)
    job_id = resp.get_json()["job_id"]
    job = job_ended(lambda: client.get(f"/v1/jobs/{job_id}").get_json())
    assert job["status"] == "done" and job["result"]["flags"]["hidden_text"]["pages"] == [1]


def test_plain_document_flags_match_too(client):
    body = upload_text(client).get_json()
    assert "hidden_text" not in body["flags"] and "garbled_pages" not in body["flags"]
    assert body["flags"] == client.get(f"/v1/documents/{body['doc_id']}").get_json()["flags"]
    spec = client.get("/openapi.json").get_json()["components"]["schemas"]
    assert set(body) <= set(spec["Ingested"]["properties"])


def test_readme_puts_data_dir_before_the_command_as_the_cli_requires(tmp_path):
    from click.testing import CliRunner

    from plugin.cli import main

    after = CliRunner().invoke(main, ["list", "--data-dir", str(tmp_path)])
    assert after.exit_code == 2 and "No such option '--data-dir'" in after.output  # what the README warns of
    before = CliRunner().invoke(main, ["--data-dir", str(tmp_path), "list"])
    assert before.exit_code == 1 and "error no_index: There is no DocAnchor index in " in before.output  # taken
    readme = README.read_text()
    assert "docanchor --data-dir /srv/docanchor serve" in readme and "goes **before** the command" in readme
    assert not re.search(r"docanchor (?:ingest|serve|list|search|read|mcp)\b[^\n`]*--data-dir", readme.replace(
        "`docanchor serve\n--data-dir …` fails", ""))


def test_readme_curl_retrieve_sends_json_content_type():
    readme = README.read_text()
    curl = re.search(r"curl [^\n]*/v1/retrieve[^\n]*(?:\\\n[^\n]*)*", readme)
    assert curl and "-H 'Content-Type: application/json'" in curl.group(0), curl


def test_every_argument_error_has_one_code(client):
    """Regression: a negative provider_tokens answered code invalid_request; other argument errors invalid_argument."""
    for path, body in (("/v1/context/snapshot", {"model": "gpt-4o", "messages": [], "provider_tokens": -3}),
                       ("/v1/context/snapshot", {"model": 5, "messages": []}),
                       ("/v1/retrieve", {"query": "x", "budget_tokens": 0})):
        resp = client.post(path, json=body)
        assert resp.status_code == 400 and resp.get_json()["error"]["code"] == "invalid_argument", (path, resp.get_json())


def test_empty_doc_ids_is_refused_not_read_as_every_document(client):
    """``"doc_ids": []`` names no document; answering it from all of them would be the opposite.
    Leaving doc_ids out searches all; LobeChat's lenient routes keep reading an empty doc_id so."""
    from tests.conftest import CORPUS

    path = CORPUS / "md" / "ch04-01-what-is-ownership.md"
    up = client.post("/v1/documents", data={"file": (io.BytesIO(path.read_bytes()), path.name)}, content_type="multipart/form-data")
    assert up.status_code == 201, up.get_data(as_text=True)
    err = assert_error(client.post("/v1/retrieve", json={"query": "ownership rules", "doc_ids": []}),
                       400, "invalid_argument")
    assert "omit doc_ids to search all documents" in err["message"]
    every = client.post("/v1/retrieve", json={"query": "ownership rules"}).get_json()
    assert every["sections"] and every["sections"][0]["doc_id"] == up.get_json()["doc_id"]
    lenient = client.post("/lobechat/searchDocuments", data='{"query": "ownership rules", "doc_id": ""}',
                          content_type="text/plain")
    assert lenient.status_code == 200 and up.get_json()["doc_id"] in lenient.get_data(as_text=True)


def test_every_validation_error_names_its_field_on_a_real_server(tmp_path):
    """Before (new-user trial): a multipart upload with ``wait_s=soon`` and POST /v1/read with a
    ``from`` the document does not have (``page:99``, a heading it lacks) answered 400 with
    ``details: {}``, where a JSON body's bad wait_s and every other argument error name their field
    (README: "An argument's error names it in details.field at every door"). The reader's refusals
    of its ``start`` now carry ``field`` and each door names it as its caller sent it (HTTP and the
    CLI: ``from``; retrieval.read.start_error); the multipart fields name theirs too.
    A waitress server on a loopback port and the real CLI."""
    import subprocess
    import sys

    import httpx2

    from docanchor.settings import Settings
    from plugin.api import DocAnchor
    from tests.fakes import ModelNamedEmbedder
    from tests.live_server import REPO, serving_fake
    from tests.waiting import BACKSTOP_S

    def error_of(answer) -> dict:
        assert answer.status_code == 400, answer.text
        return answer.json()["error"]

    with serving_fake(Settings(data_dir=tmp_path / "data", sync_wait_s=BACKSTOP_S)) as (base, da):
        doc_id = da.ingest_text("# Notes\n\nSome text about tides.\n", title="n.md").record.doc_id
        form = {"files": {"file": ("n2.md", b"# Other\n\nMore text.\n")}}
        cases = (
            (httpx2.post(f"{base}/v1/documents", data={"wait_s": "soon"}, **form, timeout=BACKSTOP_S), "wait_s"),
            (httpx2.post(f"{base}/v1/documents", data={"wait_s": "99"}, **form, timeout=BACKSTOP_S), "wait_s"),
            (httpx2.post(f"{base}/v1/documents", json={"text": "x", "wait_s": "soon"}, timeout=BACKSTOP_S), "wait_s"),
            (httpx2.post(f"{base}/v1/documents", data={"replace": "yes"}, **form, timeout=BACKSTOP_S), "replace"),
            (httpx2.delete(f"{base}/v1/documents/{doc_id}/sources", timeout=BACKSTOP_S), "source"),
        ) + tuple((httpx2.post(f"{base}/v1/read", json={"doc_id": doc_id, "from": start}, timeout=BACKSTOP_S), "from")
                  for start in ("page:99", "chunk:99", "char:99999", "no such heading", True))
        for answer, field in cases:
            error = error_of(answer)
            assert error["code"] == "invalid_argument" and error["details"].get("field") == field, (field, error)
            assert "'start'" not in error["message"], error  # the reader's own name for it
        same = [error_of(httpx2.post(f"{base}/v1/documents", timeout=BACKSTOP_S, **body))["message"]
                for body in ({"data": {"wait_s": "soon"}, **form}, {"json": {"text": "x", "wait_s": "soon"}})]
        assert same[0] == same[1], same  # one sentence for one mistake, whichever body carries it
        assert da.list_documents() and len(da.list_documents()) == 1  # nothing stored by a refused upload
    with DocAnchor(Settings(data_dir=tmp_path / "cli"), embedder=ModelNamedEmbedder()) as local:
        doc_id = local.ingest_text("# Notes\n\nSome text about tides.\n", title="n.md").record.doc_id
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCANCHOR_")}
    cli = subprocess.run([sys.executable, "-m", "plugin.cli", "--data-dir", str(tmp_path / "cli"), "read", doc_id,
                          "--from", "page:99", "--json"], cwd=REPO, capture_output=True, text=True, timeout=BACKSTOP_S,
                         env={**env, "HF_HUB_OFFLINE": "1"})
    assert cli.returncode == 1 and cli.stdout == "", cli.stderr
    error = json.loads(cli.stderr)["error"]
    assert error["details"] == {"field": "from"} and "--from" in error["message"], error
