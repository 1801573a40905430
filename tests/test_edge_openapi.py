"""/openapi.json against what the server does: every route described (the LobeChat routes and
/mcp too), and each JSON request schema's fields and limits the ones the validation enforces.
(tests/test_schemathesis.py fuzzes a real server from the same document.)"""

from __future__ import annotations

import re

import pytest

from docanchor.access import MAX_NAMESPACE_CHARS
from plugin.api import MAX_QUERY_CHARS
from plugin.lobechat import APIS
from plugin.schemas.common import sent_fields
from plugin.schemas.requests import MAX_DOC_IDS, REQUESTS
from tests.test_http import assert_error, upload_text

CONVERSATION = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Hi"}]}
BASE_BODIES = {
    # component -> (route, a body the route accepts apart from the field under test)
    "TextDocument": ("/v1/documents", {"text": "A note on teapots.", "title": "n.md"}),
    "RetrieveRequest": ("/v1/retrieve", {"query": "budget"}),
    "ReadRequest": ("/v1/read", {"doc_id": "DOC"}),
    "SnapshotRequest": ("/v1/context/snapshot", {"model": "gpt-4o", "messages": []}),
    "ContextAssembleRequest": ("/v1/context/assemble", CONVERSATION),
    "ContextCompactRequest": ("/v1/context/compact", CONVERSATION),
}


def _spec(client) -> dict:
    return client.get("/openapi.json").get_json()


def test_the_lobechat_routes_and_mcp_are_described(client):
    """Before: /openapi.json listed neither /lobechat/<api> nor /mcp."""
    spec = _spec(client)
    for name in APIS:
        op = spec["paths"][f"/lobechat/{name}"]["post"]
        assert set(op["requestBody"]["content"]) == {"text/plain", "application/json"}
        assert op["responses"]["200"]["content"] == {"text/plain": {"schema": {"type": "string"}}}
        assert op["parameters"][0]["name"] == "X-Lobe-Plugin-Settings"
    search = spec["paths"]["/lobechat/searchDocuments"]["post"]["requestBody"]["content"]["application/json"]
    assert "query" in search["schema"]["properties"]  # the manifest's own argument schema
    mcp = spec["paths"]["/mcp"]["post"]
    assert mcp["requestBody"]["content"]["application/json"]["schema"]["required"] == ["jsonrpc", "method"]
    assert {"401", "413", "421"} <= set(mcp["responses"])
    for rule in client.application.url_map.iter_rules():  # and every Flask route, as before
        path = rule.rule.replace("<", "{").replace(">", "}")
        if rule.endpoint != "static":
            assert path in spec["paths"], path


def test_ids_and_model_may_not_be_empty_in_the_spec_either(client):
    """Before: the spec allowed "" for the snapshot's model and the read's doc_id, which the
    server refuses."""
    schemas = _spec(client)["components"]["schemas"]
    assert schemas["SnapshotRequest"]["properties"]["model"]["minLength"] == 1
    assert schemas["ReadRequest"]["properties"]["doc_id"]["minLength"] == 1
    assert schemas["RetrieveRequest"]["properties"]["doc_id"]["minLength"] == 1
    assert schemas["RetrieveRequest"]["properties"]["model"]["minLength"] == 1


@pytest.mark.parametrize("component", sorted(BASE_BODIES))
def test_every_string_the_spec_says_is_non_empty_is_refused_when_empty(client, component):
    doc_id = upload_text(client).get_json()["doc_id"]
    route, base = BASE_BODIES[component]
    base = {k: (doc_id if v == "DOC" else v) for k, v in base.items()}
    assert client.post(route, json=base).status_code in (200, 201)
    properties = _spec(client)["components"]["schemas"][component]["properties"]
    checked = []
    for field, schema in properties.items():
        if schema.get("type") == "string" and schema.get("minLength", 0) >= 1:
            body = {**{k: v for k, v in base.items() if not (field == "url" and k == "text")}, field: ""}
        elif schema.get("type") == "array" and schema.get("items", {}).get("minLength", 0) >= 1:
            body = {**base, field: [""]}
        else:
            continue
        err = assert_error(client.post(route, json=body), 400)
        assert field in err["message"] or field in err["code"], (field, err)
        checked.append(field)
    assert checked  # every schema has such a field


def test_the_specs_limits_are_the_ones_enforced(client):
    schemas = _spec(client)["components"]["schemas"]
    retrieve = schemas["RetrieveRequest"]["properties"]
    assert retrieve["query"]["maxLength"] == MAX_QUERY_CHARS
    assert retrieve["doc_ids"]["maxItems"] == MAX_DOC_IDS
    assert retrieve["namespace"]["maxLength"] == MAX_NAMESPACE_CHARS
    assert_error(client.post("/v1/retrieve", json={"query": "x" * (MAX_QUERY_CHARS + 1)}), 400, "invalid_argument")
    assert_error(client.post("/v1/retrieve", json={"query": "x", "doc_ids": ["d"] * (MAX_DOC_IDS + 1)}), 400)
    assert_error(client.post("/v1/retrieve", json={"query": "x", "namespace": "n" * (MAX_NAMESPACE_CHARS + 1)}), 400)
    for component, model in REQUESTS.items():  # the fields a body may carry are the ones the spec shows
        assert tuple(schemas[component]["properties"]) == tuple(sent_fields(model)), component


def test_every_path_the_spec_describes_is_served(client):
    """The other direction: no operation without a route (before this, /metrics and /ui/ were
    described and answered 404)."""
    rules = {re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", r.rule) for r in client.application.url_map.iter_rules()}
    for path in _spec(client)["paths"]:
        if path == "/mcp" or path.startswith("/lobechat/"):  # mounted in front of Flask / one rule <api>
            continue
        assert path in rules, path
