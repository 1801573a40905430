"""The LobeChat plugin routes as LobeChat's server calls them (raw text/plain bodies, the
settings header), and the manifest as LobeChat's browser fetches it (../shared/LOBECHAT.md)."""

from __future__ import annotations

import json
import re

import pytest

from docanchor import formats
from docanchor.errors import StoreUnavailable
from docanchor.settings import Settings
from docanchor.types import DocumentRecord
from plugin import answers
from plugin.api import EMPTY_QUERY, DocAnchor
from plugin.app import create_app
from plugin.lobechat import (APIS, DEFAULT_BUDGET_TOKENS, MANIFEST_PATH, MAX_BUDGET_TOKENS, MIN_BUDGET_TOKENS,
                             required_arguments)
from plugin.schemas.tools import tool_fields
from tests.conftest import CORPUS
from tests.fakes import HashEmbedder
from tests.waiting import BACKSTOP_S

LIMIT_CHARS = 8000
SETTINGS = "X-Lobe-Plugin-Settings"


@pytest.fixture
def doc_id(da) -> str:
    return da.ingest_file(CORPUS / "md" / "ch04-01-what-is-ownership.md").record.doc_id


def call(client, api: str, body: str | bytes = "", settings: object = None, **headers) -> str:
    """POST like LobeChat's gateway: the raw argument string as text/plain, plus the settings header."""
    if settings is not None:
        headers[SETTINGS] = settings if isinstance(settings, str) else json.dumps(settings)
    resp = client.post(f"/lobechat/{api}", data=body, content_type="text/plain;charset=UTF-8", headers=headers)
    text = resp.get_data(as_text=True)
    assert resp.status_code == 200, text
    assert text.strip(), f"{api} answered an empty body"
    assert len(text) < LIMIT_CHARS, f"{api} answered {len(text)} characters"
    return text


def test_search_with_text_plain_body(client, doc_id):
    text = call(client, "searchDocuments", json.dumps({"query": "What are the ownership rules?", "doc_id": doc_id}))
    assert re.search(rf"\*\*\[1\] .+ — {doc_id}\*\*\n", text), text[:300]  # passage under its citation line
    assert "More:" in text.splitlines()[-1] and "readDocument" in text


def test_search_without_doc_id_and_unknown_keys_ignored(client, doc_id):
    text = call(client, "searchDocuments", '{"query": "ownership", "colour": "blue", "budget_tokens": "200"}')
    assert doc_id in text and "of 200 tokens" in text


@pytest.mark.parametrize("body", ["", "   ", "{}", "not json {", "[1, 2]", '"ownership"', "null"])
def test_search_with_empty_or_garbage_body_says_what_is_needed(client, doc_id, body):
    """Before (hlo): a missing query said EMPTY_QUERY, where every other missing argument of a tool
    says "<tool> needs a `<name>`" in the words of its schema. Now one form for all of them."""
    text = call(client, "searchDocuments", body)
    assert "searchDocuments needs a `query`: call it again" in text and EMPTY_QUERY not in text, text
    assert 'call it again with {"query": "…"} (what to look for: a specific question or key phrase)' in text, text


@pytest.mark.parametrize(("query", "state"), [("", "empty"), ("   ", "blank"), ("\u200b\x01", "blank")])
def test_a_blank_query_is_refused_in_the_form_of_every_missing_argument(client, doc_id, query, state):
    """Before (hlo): '{"query": ""}' said EMPTY_QUERY ("'query' must be a non-empty string ...")
    while '{"doc_id": ""}' said "readDocument needs a `doc_id` (it was empty): ...". One rule now
    (lobechat.check_arguments); a query of only format and control characters is blank."""
    text = call(client, "searchDocuments", json.dumps({"query": query}))
    assert text.startswith(f"searchDocuments needs a `query` (it was {state}): call it again with "), text
    if query.isspace() or not query:
        doc = call(client, "readDocument", json.dumps({"doc_id": query}))
        assert doc.startswith(f"readDocument needs a `doc_id` (it was {state}): call it again with "), doc


@pytest.mark.parametrize("api", ["addDocument", "searchDocuments", "readDocument", "getDocumentAnchor"])
def test_a_missing_argument_is_said_in_the_words_of_its_schema(client, api):
    """The refusal says what the argument is as its schema (plugin.schemas.tools) describes it, not in
    a copy of those words that can drift (before: addDocument's "a public http or https link to a … file"
    beside the schema's "… to the document"), plus what the schema does not say."""
    for name in required_arguments(api):
        description = tool_fields(api)[name].description
        text = call(client, api, "{}")
        assert f'{{"{name}": "…"}}' in text and description.rstrip(".")[1:] in text, text
        if name == "doc_id":
            assert "listDocuments shows the ids" in text, text
        if name == "url":
            assert formats.supported_sentence() in text, text


def test_garbage_body_is_named(client):
    assert "not valid JSON" in call(client, "searchDocuments", "{oops")
    assert "must be a JSON object" in call(client, "getDocumentAnchor", "[]")


def test_every_api_answers_empty_body(client, doc_id):
    for api in APIS:
        call(client, api, "")


@pytest.mark.parametrize("api", ["getDocumentAnchor", "readDocument"])
def test_unknown_doc_id_is_a_200_sentence(client, doc_id, api):
    text = call(client, api, '{"doc_id": "doc_0000000000000000"}')
    assert "doc_0000000000000000" in text and "listDocuments" in text


@pytest.mark.parametrize("start", ["chunk:99999", "page:2"])
def test_a_refused_from_fits_the_answer_budget(client, da, tmp_path, start):
    """New-user trial: readDocument from "chunk:99999" on the novel at 200 tokens answered 321
    tokens (eight long chapter headings named as examples)."""
    from tests.test_read import CHAPTERS
    (tmp_path / "chapters.md").write_text(CHAPTERS, encoding="utf-8")
    doc = da.ingest_file(tmp_path / "chapters.md").record.doc_id
    for budget in (MIN_BUDGET_TOKENS, 200):
        text = call(client, "readDocument", json.dumps({"doc_id": doc, "from": start, "budget_tokens": budget}))
        assert "chunk:0" in text and "call again" in text, text
        assert da.ctx.counter.count(text) <= budget, (budget, da.ctx.counter.count(text), text)


def test_search_in_unknown_doc_is_a_200_sentence(client, doc_id):
    text = call(client, "searchDocuments", '{"query": "rules", "doc_id": "doc_nope"}')
    assert "listDocuments" in text


def test_settings_header_budget_and_defensive_parsing(client, doc_id):
    body = '{"query": "ownership rules"}'
    assert "of 320 tokens" in call(client, "searchDocuments", body, settings={"defaultBudgetTokens": 320})
    assert "of 290 tokens" in call(client, "searchDocuments", body, settings={"defaultBudgetTokens": "290"})
    default = f"of {DEFAULT_BUDGET_TOKENS} tokens"  # the manifest's defaultBudgetTokens default
    for unusable in ("[1,2]", '"x"', "null"):  # JSON: LOBECHAT.md's "non-object → {}"
        assert default in call(client, "searchDocuments", body, settings=unusable)
    # an explicit budget wins over the setting, and is capped
    assert "of 300 tokens" in call(client, "searchDocuments", '{"query": "ownership", "budget_tokens": 300}',
                                   settings={"defaultBudgetTokens": 320})
    capped = call(client, "searchDocuments", '{"query": "ownership", "budget_tokens": 1e9}')
    assert f"of {MAX_BUDGET_TOKENS} tokens" in capped


def test_a_default_budget_setting_that_is_not_a_number_is_refused_not_replaced(client, doc_id):
    """Before (the trial of 3d88e0c, its defect 8e): defaultBudgetTokens "abc" was silently read as
    800, which nothing documented. It is refused with a sentence asking the user to correct it, as
    an unreadable namespace or key is; an empty or null setting is unset (800), and a number outside
    150 to 1,500 is used as the nearest end, as the README says (0 was 800 too)."""
    body = '{"query": "ownership rules"}'
    for bad, shown in (("abc", '"abc"'), (True, "true"), ([300], "[300]"), ({"tokens": 300}, '{"tokens": 300}')):
        text = call(client, "searchDocuments", body, settings={"defaultBudgetTokens": bad})
        assert text == (
            f"The plugin setting defaultBudgetTokens is {shown}, not a number of tokens; it takes a whole number from "
            f"{MIN_BUDGET_TOKENS} to {MAX_BUDGET_TOKENS} (empty: {DEFAULT_BUDGET_TOKENS}). Ask the user to correct "
            "it in the plugin's settings, then try again."), text
    for unset in ("", "  ", None):
        assert f"of {DEFAULT_BUDGET_TOKENS} tokens" in call(client, "searchDocuments", body,
                                                            settings={"defaultBudgetTokens": unset})
    for low in (0, -5):
        assert f"of {MIN_BUDGET_TOKENS} tokens" in call(client, "searchDocuments", body,
                                                        settings={"defaultBudgetTokens": low})
    assert "of 300 tokens" in call(client, "searchDocuments", '{"query": "ownership", "budget_tokens": 300}',
                                   settings={"defaultBudgetTokens": "abc"})  # a budget in the call needs no setting


def test_budget_too_small_is_a_sentence(client, doc_id):
    text = call(client, "searchDocuments", '{"query": "ownership rules", "budget_tokens": 3}')
    assert "budget_tokens" in text and "[1]" not in text


def test_an_empty_namespace_setting_means_not_set(client, da, doc_id):
    """An empty settings field is "unset" by convention: {"namespace": ""} (or blanks) acts in the
    server's default namespace, as no setting does, where "" elsewhere (a body field, --namespace,
    an MCP argument) is invalid_namespace (README, "LobeChat plugin"); a set one acts there."""
    da.ingest_text("Crane 3 moved container MSCU1003.", title="cranes.txt", namespace="team")
    for unset in ({"namespace": ""}, {"namespace": "  "}, {}):
        listing = call(client, "listDocuments", "", settings=unset)
        assert doc_id in listing and "cranes.txt" not in listing, (unset, listing)
    assert "cranes.txt" in call(client, "listDocuments", "", settings={"namespace": "team"})


def test_nothing_found_is_a_sentence(client):
    text = call(client, "searchDocuments", '{"query": "ownership"}')  # nothing stored: say how to add some
    assert text.startswith("No passages returned:") and "holds no documents yet" in text and "addDocument" in text


def test_anchor_list_and_read(client, da, doc_id):
    anchor = call(client, "getDocumentAnchor", json.dumps({"doc_id": doc_id}))
    assert da.anchor(doc_id) in anchor and "searchDocuments" in anchor
    listing = call(client, "listDocuments", "")
    assert doc_id in listing and "1 document" in listing
    first = call(client, "readDocument", json.dumps({"doc_id": doc_id, "budget_tokens": 200}))
    cursor = re.search(r'from="([^"]+)"\) continues', first).group(1)
    second = call(client, "readDocument", json.dumps({"doc_id": doc_id, "from": cursor, "budget_tokens": 200}))
    assert second != first and doc_id in second
    by_number = call(client, "readDocument", json.dumps({"doc_id": doc_id, "from": 2}))
    assert doc_id in by_number


def test_list_documents_of_an_unknown_type_names_the_types(client, doc_id):
    """A model asking for ``type: "text"`` got "no documents" as if the library were empty; the
    answer now names the types there are (the format registry's), and a real type still lists."""
    from docanchor import formats

    text = call(client, "listDocuments", json.dumps({"type": "text"}))
    assert "'type' must be one of" in text and all(f'"{name}"' in text for name in formats.names())
    assert doc_id in call(client, "listDocuments", json.dumps({"type": "md"}))


def test_answers_stay_under_8000_characters(client, da):
    big = da.ingest_file(CORPUS / "txt" / "norwich-city.txt").record.doc_id
    text = call(client, "searchDocuments", json.dumps({"query": "Norwich City history", "budget_tokens": 100000}))
    assert big in text
    text = call(client, "readDocument", json.dumps({"doc_id": big, "budget_tokens": 100000}))
    assert "continues from here" in text


def test_long_lists_are_cut_and_say_so():
    records = [DocumentRecord(doc_id=f"doc_{i:016d}", title="A long title " * 8, doc_type="pdf", n_chunks=3,
                              n_tokens=1000, n_chars=4000, n_pages=3) for i in range(400)]
    text = answers.list_answer(records, "default")
    assert len(text) <= answers.MAX_ANSWER_CHARS and "more documents not shown" in text
    assert text.rstrip().endswith("finds passages in it.")


def test_api_key_from_plugin_settings(settings, da, doc_id):
    client = create_app(settings.with_(api_keys=("secret-key=default",)), da).test_client()
    missing = call(client, "listDocuments", "")
    assert "API key" in missing and "settings" in missing
    wrong = call(client, "listDocuments", "", settings={"apiKey": "nope"})
    assert "not valid" in wrong
    right = call(client, "listDocuments", "", settings={"apiKey": "secret-key"})
    assert doc_id in right and "API key" not in right
    bearer = call(client, "listDocuments", "", Authorization="Bearer secret-key")
    assert doc_id in bearer


class Broken(DocAnchor):
    def list_documents(self, namespace=None):
        raise RuntimeError("secret /srv/path")

    def get_document(self, doc_id, namespace=None):
        raise StoreUnavailable()


def test_real_faults_are_5xx_in_the_sdk_shape(settings):
    client = create_app(settings, Broken(settings, embedder=HashEmbedder())).test_client()
    resp = client.post("/lobechat/listDocuments", data="", content_type="text/plain")
    assert resp.status_code == 500
    body = resp.get_json()
    assert body["errorType"] == "PluginServerError" and body["body"]["code"] == "internal"
    assert "secret" not in resp.get_data(as_text=True)
    resp = client.post("/lobechat/getDocumentAnchor", data='{"doc_id": "x"}', content_type="text/plain")
    assert resp.status_code == 200 and resp.mimetype == "text/plain"  # the model tells the user (test_chroma_down)
    assert resp.get_data(as_text=True).startswith(StoreUnavailable().message), resp.get_data(as_text=True)


def test_plugin_routes_take_post_only(client):
    resp = client.get("/lobechat/searchDocuments")
    assert resp.status_code == 405 and resp.get_json()["error"]["code"] == "method_not_allowed"


# ---------------------------------------------------------------------------- manifest
def test_manifest_served_with_cors_and_base_url(tmp_path):
    settings = Settings(data_dir=tmp_path / "d", public_base_url="https://docs.example.org/anchor/")
    client = create_app(settings, DocAnchor(settings, embedder=HashEmbedder())).test_client()
    resp = client.get("/manifest.json", headers={"Origin": "http://localhost:3210"})
    assert resp.status_code == 200 and resp.mimetype == "application/json"
    assert resp.headers["Access-Control-Allow-Origin"] == "*"
    served = resp.get_json()
    assert [a["url"] for a in served["api"]] == [
        f"https://docs.example.org/anchor/lobechat/{a['name']}" for a in served["api"]]
    assert "required" not in served["settings"]
    pre = client.options("/manifest.json", headers={"Origin": "http://localhost:3210",
                                                   "Access-Control-Request-Method": "GET"})
    assert pre.status_code in (200, 204) and pre.headers["Access-Control-Allow-Origin"] == "*"
    assert "GET" in pre.headers["Access-Control-Allow-Methods"]


def test_manifest_requires_api_key_setting_when_keys_are_on(settings, da):
    client = create_app(settings.with_(api_keys=("k",)), da).test_client()
    served = client.get("/manifest.json").get_json()
    assert served["settings"]["required"] == ["apiKey"]
    assert served["settings"]["properties"]["apiKey"]["format"] == "password"


def test_manifest_file_passes_lobechat_rules():
    """The checks of ../shared/hooks/before-stop, plus the rest of LOBECHAT.md."""
    m = json.loads(MANIFEST_PATH.read_text(encoding="utf-8"))
    assert re.fullmatch(r"[a-z0-9-]{1,32}", m["identifier"])
    assert {"avatar", "title", "description", "tags"} <= set(m["meta"])
    assert m["version"] == "1" and m["type"] == "default"
    assert "gateway" not in m and "openapi" not in m
    assert 0 < len(m["systemRole"]) < 800
    names = [a["name"] for a in m["api"]]
    assert len(names) == len(set(names)) and set(names) == set(APIS)
    for a in m["api"]:
        assert re.fullmatch(r"[A-Za-z0-9_]+", a["name"])
        assert len(m["identifier"]) + 4 + len(a["name"]) < 64
        assert 0 < len(a["description"]) <= 1024
        p = a["parameters"]
        assert p["type"] == "object" and isinstance(p["properties"], dict)
        assert "additionalProperties" not in p and "required" not in p  # forgiving: the gateway validates
        assert all(prop["type"] in ("string", "number", "array", "object") for prop in p["properties"].values())
        assert all(prop["items"] == {"type": "string"} for prop in p["properties"].values() if prop["type"] == "array")
        assert a["url"].startswith("http") and a["url"].endswith(f"/lobechat/{a['name']}")
    props = m["settings"]["properties"]
    assert props["apiKey"]["format"] == "password" and props["defaultBudgetTokens"]["type"] == "number"


def test_every_manifest_api_is_answered(client):
    m = json.loads(MANIFEST_PATH.read_text(encoding="utf-8"))
    for a in m["api"]:
        path = "/" + a["url"].split("/", 3)[3]
        resp = client.post(path, data="", content_type="text/plain")
        assert resp.status_code == 200 and resp.get_data(as_text=True).strip()


@pytest.mark.parametrize("api,budget", [("searchDocuments", 150), ("searchDocuments", 400),
                                        ("searchDocuments", 1500), ("readDocument", 150), ("readDocument", 600)])
def test_whole_answer_fits_the_budget(client, da, api, budget):
    """Not only the passages: the header, citation lines and "More:" line count too."""
    doc = da.ingest_file(CORPUS / "md" / "ch04-01-what-is-ownership.md").record
    args = {"query": "ownership rules and scope", "doc_id": doc.doc_id, "budget_tokens": budget}
    text = client.post(f"/lobechat/{api}", data=json.dumps(args), content_type="text/plain").get_data(as_text=True)
    assert "[1]" in text or "ownership" in text.lower()
    assert da.ctx.counter.count(text) <= budget, text


@pytest.mark.parametrize("api", ["searchDocuments", "readDocument"])
def test_budgets_the_plugin_cannot_honour_get_a_sentence_never_an_oversized_answer(client, da, api):
    doc = da.ingest_file(CORPUS / "txt" / "norwich-city.txt").record
    for bad in (0, -1, 1, 40, 60, 100, MIN_BUDGET_TOKENS - 1, "lots"):
        args = {"query": "Carrow Road stadium", "doc_id": doc.doc_id, "budget_tokens": bad}
        text = client.post(f"/lobechat/{api}", data=json.dumps(args), content_type="text/plain").get_data(as_text=True)
        assert f"at least {MIN_BUDGET_TOKENS}" in text and json.dumps(bad) in text and "[1]" not in text, text
    for budget in range(MIN_BUDGET_TOKENS, 400, 25):
        args = {"query": "Carrow Road stadium", "doc_id": doc.doc_id, "budget_tokens": budget}
        text = client.post(f"/lobechat/{api}", data=json.dumps(args), content_type="text/plain").get_data(as_text=True)
        assert da.ctx.counter.count(text) <= budget, (budget, text)
        quoted = [int(n) for n in re.findall(r"budget of (\d+) tokens|of (\d+) tokens\)", text) for n in n if n]
        assert all(n == budget for n in quoted), (budget, text)
        assert "too small" not in text, (budget, text)


def test_arguments_an_api_does_not_take_are_named_not_silently_dropped(client, da):
    doc = da.ingest_file(CORPUS / "txt" / "norwich-city.txt").record
    search = client.post("/lobechat/searchDocuments", data=json.dumps({"query": "Carrow Road", "budget": 300}),
                         content_type="text/plain").get_data(as_text=True)
    assert search.startswith("(Ignored `budget`: searchDocuments takes query, doc_id, budget_tokens, tags, where.)\n"), search[:200]
    assert "[1]" in search and da.ctx.counter.count(search) <= DEFAULT_BUDGET_TOKENS
    args = {"doc_id": doc.doc_id, "start": "History", "budget_tokens": 200}
    read = client.post("/lobechat/readDocument", data=json.dumps(args), content_type="text/plain").get_data(as_text=True)
    assert read.startswith("(Ignored `start`: readDocument takes doc_id, from, budget_tokens.)\n"), read[:200]
    assert da.ctx.counter.count(read) <= 200
    plain = client.post("/lobechat/searchDocuments", data=json.dumps({"query": "Carrow Road"}),
                        content_type="text/plain").get_data(as_text=True)
    assert not plain.startswith("(Ignored")
    # Before: getDocumentAnchor and addDocument dropped unknown arguments without a word (the trial's
    # "LobeChat ignores unknown arguments while /v1 refuses them"); now all five tools name them.
    anchor = client.post("/lobechat/getDocumentAnchor", data=json.dumps({"doc_id": doc.doc_id, "budget_tokens": 300}),
                         content_type="text/plain").get_data(as_text=True)
    assert anchor.startswith("(Ignored `budget_tokens`: getDocumentAnchor takes doc_id.)\n"), anchor[:200]
    assert doc.doc_id in anchor


ANCHOR_FILES = [
    CORPUS / "md" / "ch04-01-what-is-ownership.md",  # long outline: anchor 295 tokens, was answered in 340
    CORPUS / "txt" / "norwich-city.txt",
    CORPUS / "pdf" / "dmca.pdf",
    CORPUS / "docx" / "docx-tables.docx",
]


def test_anchor_answer_keeps_the_anchors_one_more_line_and_its_token_limit(client, da):
    """getDocumentAnchor answers the anchor as built: one "More:" line (the anchor's own), never
    more than the 300 tokens the manifest and README promise, counted with the budget tokenizer."""
    from docanchor.tokens import get_counter

    counter = get_counter()
    for path in ANCHOR_FILES:
        doc_id = da.ingest_file(path).record.doc_id
        text = call(client, "getDocumentAnchor", json.dumps({"doc_id": doc_id}))
        assert text.count("More:") == 1, (path.name, text[-400:])
        assert counter.count(text) <= 300, (path.name, counter.count(text))
        assert text.strip() == da.anchor(doc_id).strip(), path.name


def test_added_document_answer_keeps_one_more_line_within_the_anchor_limit(da):
    """addDocument's answer (the job's anchor, "already stored" for the same bytes) obeys the same rule."""
    from docanchor.tokens import get_counter

    counter = get_counter()
    data = ANCHOR_FILES[0].read_bytes()
    for _ in range(2):  # the second submit is the duplicate
        job = da.submit(data, filename=ANCHOR_FILES[0].name, wait_s=BACKSTOP_S)
        text = answers.job_answer(job, counter=counter, max_tokens=300)
        assert job.status == "done" and text.count("More:") == 1, text[-400:]
        assert counter.count(text) <= 300
    assert job.result["duplicate"]


def test_budget_clamping_is_what_the_manifest_and_readme_say(client, doc_id):
    """A budget over the range is used as its top end, a defaultBudgetTokens under it as its
    bottom end, and both documents (the model reads the manifest, the operator the README) say so."""
    body = {"query": "ownership rules"}
    assert f"of {MAX_BUDGET_TOKENS} tokens" in call(client, "searchDocuments",
                                                    json.dumps({**body, "budget_tokens": MAX_BUDGET_TOKENS + 1}))
    assert f"of {MIN_BUDGET_TOKENS} tokens" in call(client, "searchDocuments", json.dumps(body),
                                                    settings={"defaultBudgetTokens": 50})
    manifest = json.loads(MANIFEST_PATH.read_text(encoding="utf-8"))
    for api in manifest["api"]:
        budget = api["parameters"]["properties"].get("budget_tokens")
        if budget:
            assert f"larger value is used as {MAX_BUDGET_TOKENS}" in budget["description"], api["name"]
    setting = manifest["settings"]["properties"]["defaultBudgetTokens"]["description"]
    assert f"smaller value is used as {MIN_BUDGET_TOKENS}" in setting
    assert f"larger one as {MAX_BUDGET_TOKENS}" in setting
    readme = " ".join((MANIFEST_PATH.parent / "README.md").read_text(encoding="utf-8").split())
    assert f"a larger one is used as {MAX_BUDGET_TOKENS:,}" in readme
    assert f"a value outside {MIN_BUDGET_TOKENS} to {MAX_BUDGET_TOKENS:,} is used as the nearest end" in readme


@pytest.mark.parametrize("budget", [150, 300, 800, 1500])
def test_search_header_counts_the_whole_answer(client, da, doc_id, budget):
    """A trial read "(41 of 150 tokens)" over an answer of 112 tokens: the figure counted the
    passages only. It is now the whole answer's tokens (framing and any ignored-argument note
    included), and still within the budget."""
    for body in ({"query": "What are the ownership rules?", "budget_tokens": budget},
                 {"query": "What are the ownership rules?", "budget_tokens": budget, "lang": "en"}):
        text = call(client, "searchDocuments", json.dumps(body))
        used, of = map(int, re.search(r"\((\d+) of (\d+) tokens\)", text).groups())
        assert of == budget and used == da.ctx.counter.count(text) <= budget, (used, text)


def test_the_manifest_file_holds_the_parameters_the_tool_models_give():
    """One schema: manifest.json's parameters are what plugin.schemas.tools derives (the served
    manifest and MCP use the models; the file must not drift from them)."""
    from plugin.schemas.tools import manifest_parameters

    on_disk = json.loads(MANIFEST_PATH.read_text(encoding="utf-8"))
    for api in on_disk["api"]:
        assert api["parameters"] == manifest_parameters(api["name"]), api["name"]


def test_every_doc_id_argument_says_the_form_of_an_id():
    """Before (hlo): plugin.schemas.tools.DocIdArg was defined and never used; only searchDocuments'
    doc_id showed the form of an id, readDocument's said "The document to read." and
    getDocumentAnchor's "The document's id.". Now each is typed by doc_id_arg (one place)."""
    from plugin.schemas.tools import DOC_ID_EXAMPLE, TOOL_ARGS, input_schema

    with_doc_id = sorted(n for n in TOOL_ARGS if "doc_id" in input_schema(n)["properties"])
    assert with_doc_id == ["getDocumentAnchor", "readDocument", "searchDocuments"]
    for name in with_doc_id:
        prop = input_schema(name)["properties"]["doc_id"]
        assert prop["type"] == "string" and prop["minLength"] == 1, (name, prop)
        assert prop["description"].endswith(f": its doc id, such as {DOC_ID_EXAMPLE}."), (name, prop)


def test_list_documents_pages_and_filters(da):
    client = create_app(da.settings, da).test_client()
    for i in range(7):
        da.ingest_text(f"# Memo {i}\n\nText {i}.", title=f"memo {i}.md", tags=["memo"] if i % 2 else None)
    first = call(client, "listDocuments", json.dumps({"limit": 3}))
    assert first.startswith("7 documents, 3 shown:")
    cursor = re.search(r'listDocuments\(cursor="([^"]+)"\)', first).group(1)
    second = call(client, "listDocuments", json.dumps({"limit": 3, "cursor": cursor}))
    assert "memo 3.md" in second and "memo 0.md" not in second
    tagged = call(client, "listDocuments", json.dumps({"tag": "memo"}))
    assert tagged.startswith("3 documents:") and "#memo" in tagged
    none = call(client, "listDocuments", json.dumps({"tag": "nope"}))
    assert none.startswith("No document matches tags nope")


def test_list_documents_fits_the_default_budget_and_the_settings_budget(da):
    """Before: 45 documents listed in 1,562 tokens, over the 1,500 the README promises (default 800)."""
    client = create_app(da.settings, da).test_client()
    for i in range(45):
        da.ingest_text(f"# Memo {i}\n\nText {i}.", title=f"A quarterly finance memo, number {i:02d}.md",
                       tags=["memo", "finance"])
    for settings, budget in ((None, DEFAULT_BUDGET_TOKENS), ({"defaultBudgetTokens": 300}, 300)):
        text = call(client, "listDocuments", "", settings=settings)
        shown = text.count("\n- **")
        assert da.ctx.counter.count(text) <= budget and text.startswith(f"45 documents, {shown} shown:"), text
        assert f"{45 - shown} more documents not shown: listDocuments(cursor=" in text, text
    everything = call(client, "listDocuments", json.dumps({"budget_tokens": 1500, "tag": "nope"}))
    assert everything.startswith("No document matches tags nope")
    refused = call(client, "listDocuments", json.dumps({"budget_tokens": 20}))
    assert f"at least {MIN_BUDGET_TOKENS}" in refused and "listDocuments" in refused


TAOYUAN = (
    "# 第二十八回 斩蔡阳兄弟释疑 会古城主臣聚义\n\n"
    "却说孙乾同关公、二夫人行至古城，只见张飞圆睁环眼，倒竖虎须，吼声如雷，挥矛向关公便搠。"
    "关公大惊，连忙闪过，便叫：“贤弟何故如此？岂忘了桃园结义耶？”飞喝曰：“你既无义，有何面目来与我相见！”"
    "关公曰：“我如何无义？”飞曰：“你背了兄长，降了曹操，封侯赐爵。今又来赚我！我今与你拚个死活！”\n\n"
    "关公曰：“你原来不知！我也难说。现放着二位嫂嫂在此，贤弟请自问。”二夫人听得，揭帘而呼曰："
    "“三叔何故如此？”飞曰：“嫂嫂住着。且看我杀了负义的人，然后请嫂嫂入城。”\n"
)


@pytest.mark.parametrize("budget", range(150, 260, 10))
def test_a_small_search_answer_is_the_best_passages_best_sentence_never_a_word_cut(client, da, budget):
    """The new-user check over the Chinese novel: searchDocuments {"query": "桃园结义", "budget_tokens": 150}
    answered the fragment "顾雍等曰:" of another passage, and at 180 the passage stopped mid-word
    ("…桃园结义耶?”飞喝") with no "…" (the context had it; the answer dropped it). A generated
    chapter (its fullwidth ？！ become ?! under NFKC, so they end sentences before a CJK letter) and
    a short notice with a short citation line, through the LobeChat route."""
    da.ingest_text(TAOYUAN, title="三国演义.md")
    da.ingest_text("# 公告\n\n顾雍等曰:\n\n注册流程见网址", title="公告.md")
    args = {"query": "桃园结义", "budget_tokens": budget}
    text = client.post("/lobechat/searchDocuments", data=json.dumps(args, ensure_ascii=False).encode(),
                       content_type="text/plain;charset=UTF-8").get_data(as_text=True)
    assert da.ctx.counter.count(text) <= budget, text
    passages = text.split("\n\nMore:")[0].split("**\n")[1:]
    assert passages, text
    best = passages[0].split("\n\n**")[0].strip()
    assert "桃园结义" in best, text  # the best passage's best sentence, not a fragment of another
    assert re.search(r"([。!?][”」』]?|…)$", best), text  # a sentence end, else an ellipsis: never a bare cut


@pytest.mark.parametrize("tags", [True, 5, {"a": 1}])
def test_add_document_with_tags_that_are_not_a_list_says_so(client, tags):
    """Before: ``"tags": true`` reached ``list(tags)`` and the gateway got a 500 ``internal``
    (schemathesis, negative mode, in the fresh-clone CI run of d09728d)."""
    text = call(client, "addDocument", json.dumps({"url": "https://example.org/a.pdf", "tags": tags}))
    assert "'tags' must be a list of short strings" in text, text


def test_plugin_settings_that_are_not_json_get_a_sentence_on_a_real_server(settings):
    """Before (new-user trial): an X-Lobe-Plugin-Settings header that is not JSON (or is over its
    limit) was silently taken for no settings, so a call answered from the server's default
    namespace, without the user's namespace and API key. Now it is the 200 sentence LobeChat's
    contract asks for (../shared/LOBECHAT.md: a problem the model can relay is a 200 with a short
    plain sentence), naming the header and what to do, never quoting it (it may hold the API key)."""
    import httpx2

    from plugin.lobechat import MAX_SETTINGS_HEADER_CHARS
    from tests.live_server import serving_fake

    with serving_fake(settings) as (base, da):
        da.ingest_file(CORPUS / "md" / "ch04-01-what-is-ownership.md")
        for bad in ('{"namespace": "team", "apiKey": "sk-secret"', "not json", "{" * 5000,
                    json.dumps({"namespace": "n" * MAX_SETTINGS_HEADER_CHARS})):
            answer = httpx2.post(f"{base}/lobechat/searchDocuments", content=b'{"query": "ownership"}',
                                 headers={"Content-Type": "text/plain", SETTINGS: bad}, timeout=BACKSTOP_S)
            assert answer.status_code == 200, answer.text
            text = answer.text
            assert text.startswith("DocAnchor could not read the plugin settings") and SETTINGS in text, text
            assert "plugin's settings" in text and "sk-secret" not in text and "[1]" not in text, text


def test_read_document_is_compacted_as_search_answers_are_on_a_real_server(settings):
    """Before (new-user trial): readDocument answered the window as stored -- runs of blank lines,
    East-Asian paragraph indents, lines hard-wrapped inside CJK text -- where searchDocuments
    compacts the same text (plugin.answers.compact_passage, issue 15): tokens that say nothing, in
    every later turn of the chat. Now both answers go through that one function; a heading line
    inside the window (chapter 2 here, not the window's first heading) keeps its line break, and
    the JSON door (/v1/read) still gives the text as stored."""
    import httpx2

    from plugin.answers import compact_passage
    from tests.live_server import serving_fake

    para = "　　曹操引兵至城下，见城上旌旗整齐，\n乃令军士四面攻打。玄德在城中与关张商议守城之策。"  # indent, hard wrap
    text = ("第一回　宴桃园豪杰三结义\n\n\n" + "\n\n\n\n".join(f"    {para}{i}" for i in range(3))
            + "\n\n\n第二回　张翼德怒鞭督邮\n" + "\n\n\n".join(f"{para}{i}" for i in range(3, 5)) + "\n")
    with serving_fake(settings) as (base, da):
        doc_id = da.ingest_bytes(text.encode(), filename="novel.txt").record.doc_id

        def plugin(api: str, args: dict) -> str:
            answer = httpx2.post(f"{base}/lobechat/{api}", content=json.dumps(args).encode(),
                                 headers={"Content-Type": "text/plain"}, timeout=BACKSTOP_S)
            assert answer.status_code == 200, answer.text
            return answer.text

        read = plugin("readDocument", {"doc_id": doc_id})
        stored = httpx2.post(f"{base}/v1/read", json={"doc_id": doc_id}, timeout=BACKSTOP_S).json()
        search = plugin("searchDocuments", {"query": "曹操", "doc_id": doc_id})
    assert "\n\n\n" in stored["text"] and "\n    " in stored["text"], stored["text"]  # as stored
    assert "\n\n\n" not in read and not any(line[:1].isspace() for line in read.splitlines()), read
    assert "旌旗整齐,乃令军士" in read and "旌旗整齐,乃令军士" in search, (read, search)  # the wrap joined, as in search
    assert "第二回 张翼德怒鞭督邮\n曹操" in read, read  # a heading line inside the window stays a line
    assert compact_passage(stored["text"], ("第一回 宴桃园豪杰三结义", "第二回 张翼德怒鞭督邮")) in read, read


def test_list_limit_refusals_show_the_value_as_sent_and_booleans_are_refused_at_every_door(client, doc_id):
    """Before: listDocuments' limit errors said "got 0.0" for 0, "got 1000.0" for 1000 and "got True"
    for true (the door had turned the number into a float before the check). Now the value shows as
    the caller sent it, and a boolean is refused as not a whole number by LobeChat and GET /v1/documents
    (MCP: tests/test_mcp.py)."""
    for sent, shown in ((0, "0"), (1000, "1000"), (True, "true"), ("0", '"0"'), (2.5, "2.5")):
        text = call(client, "listDocuments", json.dumps({"limit": sent}))
        assert text.startswith(f"'limit' must be a whole number from 1 to 50; got {shown}. "), (sent, text)
    assert doc_id in call(client, "listDocuments", json.dumps({"limit": "10"}))  # a model may send text
    # Before (the trial of e07bdd7): JSON's 1e3 arrives as the float 1000.0 and was shown as "1000.0"
    for raw in ('{"limit": 1e3}', '{"limit": 1000.0}'):
        text = call(client, "listDocuments", raw)
        assert text.startswith("'limit' must be a whole number from 1 to 50; got 1000. "), (raw, text)
    for sent, shown in (("true", '"true"'), ("0", "0"), ("1000", "1000")):
        err = client.get(f"/v1/documents?limit={sent}").get_json()["error"]
        assert err["code"] == "invalid_argument" and err["message"].endswith(f"from 1 to 200; got {shown}."), err


def test_a_bad_cursor_sentence_names_the_field_the_caller_sends(client, doc_id):
    """Before (the trial of e07bdd7): listDocuments' bad-cursor sentence said the cursor "comes from
    next_cursor of the previous page", a /v1 response field a tool caller never sees. Now one
    sentence names only ``cursor``, at every door (GET /v1/documents, LobeChat, MCP)."""
    text = call(client, "listDocuments", json.dumps({"cursor": "bogus"}))
    assert text.startswith("'cursor' is not one this server gave out; send the cursor the previous page gave, "
                           "exactly, or start again without it."), text
    assert "next_cursor" not in text, text
    err = client.get("/v1/documents?cursor=bogus").get_json()["error"]
    assert err["code"] == "invalid_cursor" and "next_cursor" not in err["message"], err


def test_a_budget_refusal_gives_the_reason_of_the_tool_it_comes_from(client, doc_id):
    """Before: listDocuments with budget_tokens 1.5 answered the search tool's sentence ("its
    citation lines and the line on how to read on ..."), which a list has none of. Now each tool's
    refusal gives its own reason, from one table."""
    listed = call(client, "listDocuments", json.dumps({"budget_tokens": 1.5}))
    assert listed.startswith("budget_tokens 1.5 cannot be used: listDocuments needs"), listed
    assert "citation" not in listed and "cursor" in listed, listed
    from plugin.lobechat import BUDGET_FRAMING

    for api, args in (("listDocuments", {}), ("searchDocuments", {"query": "ownership"}),
                      ("readDocument", {"doc_id": doc_id})):
        text = call(client, api, json.dumps({**args, "budget_tokens": 1.5}))
        assert text.startswith(f"budget_tokens 1.5 cannot be used: {api} needs a whole number of tokens from "
                               f"{MIN_BUDGET_TOKENS} to {MAX_BUDGET_TOKENS} ({BUDGET_FRAMING[api]}). Call {api} "
                               "again"), text


NOVEL_CHAPTER = re.compile(r"^\s*(第[一二三四五六七八九十百]+回)\s", re.MULTILINE)


def test_a_small_read_from_a_chapter_heading_carries_text_after_it(client, da):
    """Before (trial D2, the novel): readDocument {"from": "第九十四回", "budget_tokens": 150} (and
    第二回, 第一百回, about 5 of 25 sampled chapters) answered the chapter's heading line alone: the
    window's header line named the same heading (about 25 tokens), so the clause that /v1/read and
    the CLI fit at 150 did not fit in the answer. Now a header leaves out a heading the window's text
    starts with, and every chapter sampled here (the three named and every fifth, through the
    LobeChat route, the whole novel stored) carries text after its heading at 150 and 160 tokens,
    within the budget."""
    raw = (CORPUS / "txt" / "sanguo_yanyi_gbk.txt").read_bytes()
    doc_id = da.ingest_bytes(raw, filename="sanguo_yanyi_gbk.txt").record.doc_id
    chapters = list(dict.fromkeys(NOVEL_CHAPTER.findall(raw.decode("gb18030"))))
    assert len(chapters) >= 100, len(chapters)
    sample = list(dict.fromkeys(["第二回", "第九十四回", "第一百回", *chapters[::5]]))
    heading_only = []
    for chapter in sample:
        for budget in (150, 160):
            text = call(client, "readDocument", json.dumps({"doc_id": doc_id, "from": chapter, "budget_tokens": budget},
                                                           ensure_ascii=False))
            assert da.ctx.counter.count(text) <= budget, (chapter, budget, text)
            passage = text.split("**\n", 1)[1].split("\n\nMore:")[0]
            heading, _, after = passage.partition("\n")
            assert heading.startswith(chapter), (chapter, budget, text)
            if not re.search(r"[^\W\d_]", after):
                heading_only.append((chapter, budget))
    assert not heading_only, heading_only
