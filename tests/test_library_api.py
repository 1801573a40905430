"""Tags, metadata, paging and filters through the HTTP API (Flask's client over real Chroma on
disk, the fake embedder): uploads with tags and metadata, PATCH without re-embedding, GET
/v1/documents paged by cursor with filters, and retrieval filtered inside the search."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from docanchor.library import MAX_METADATA_BYTES, MAX_TAGS, Filter, check_where, page
from docanchor.settings import Settings
from docanchor.types import DocumentRecord
from tests.test_http import assert_error

README = Path(__file__).resolve().parent.parent / "README.md"


def _text(client, text: str, title: str, **fields):
    resp = client.post("/v1/documents", json={"text": text, "title": title, **fields})
    assert resp.status_code in (200, 201), resp.get_data(as_text=True)
    return resp.get_json()


def test_upload_with_tags_and_metadata_then_patch_without_reembedding(client, da):
    doc = _text(client, "# Lease\n\nThe tenant pays rent monthly.", "lease.md", tags=["Contracts", " legal "],
                metadata={"year": 2024, "signed": True, "party": "ACME"})
    assert doc["tags"] == ["contracts", "legal"] and doc["metadata"] == {"year": 2024, "signed": True, "party": "ACME"}
    stored = client.get(f"/v1/documents/{doc['doc_id']}").get_json()
    assert stored["tags"] == ["contracts", "legal"] and stored["added_at"].endswith("Z")

    calls, chunks = da.ctx.embedder.calls, da.ctx.store.count_chunks(da.settings.namespace)
    resp = client.patch(f"/v1/documents/{doc['doc_id']}", json={"tags": ["archive"], "metadata": {"signed": None,
                                                                                                 "year": 2025}})
    assert resp.status_code == 200, resp.get_data(as_text=True)
    assert resp.get_json()["tags"] == ["archive"]
    assert resp.get_json()["metadata"] == {"year": 2025, "party": "ACME"}  # merge patch: null removes
    assert da.ctx.embedder.calls == calls and da.ctx.store.count_chunks(da.settings.namespace) == chunks
    assert client.get(f"/v1/documents/{doc['doc_id']}").get_json()["tags"] == ["archive"]
    # the document is still found, under its new labels
    found = client.post("/v1/retrieve", json={"query": "rent", "tags": ["archive"]}).get_json()
    assert [s["doc_id"] for s in found["sections"]] == [doc["doc_id"]]


def test_multipart_tags_and_metadata_and_a_duplicate_takes_new_tags(client):
    data = {"file": (io.BytesIO(b"Minutes of the board meeting."), "minutes.txt"), "tags": "board, 2026",
            "metadata": json.dumps({"quarter": 2})}
    first = client.post("/v1/documents", data=data, content_type="multipart/form-data").get_json()
    assert first["tags"] == ["board", "2026"] and first["metadata"] == {"quarter": 2}
    again = client.post("/v1/documents", data={"file": (io.BytesIO(b"Minutes of the board meeting."), "m.txt"),
                                               "tags": ["minutes"]}, content_type="multipart/form-data")
    assert again.status_code == 200 and again.get_json()["duplicate"] is True
    assert again.get_json()["tags"] == ["minutes"] and again.get_json()["metadata"] == {"quarter": 2}


def test_a_duplicate_keeps_its_title_and_anchor_and_the_api_description_says_so(client):
    """Bytes stored already keep their title: it is the anchor's first line, and the anchor stays
    byte-identical (chats and prompt caches hold it) and cannot be rebuilt without the parse. Tags
    and metadata, which no anchor holds, are applied. The upload's description says so."""
    data = b"Minutes of the finance committee."
    first = client.post("/v1/documents", data={"file": (io.BytesIO(data), "fc.txt"), "title": "Committee minutes"},
                        content_type="multipart/form-data").get_json()
    again = client.post("/v1/documents", data={"file": (io.BytesIO(data), "fc.txt"), "title": "Renamed",
                                               "tags": "finance"}, content_type="multipart/form-data")
    assert again.status_code == 200, again.get_data(as_text=True)
    body = again.get_json()
    assert body["duplicate"] is True and body["tags"] == ["finance"]
    assert body["title"] == "Committee minutes" and body["anchor"] == first["anchor"]
    assert client.get(f"/v1/documents/{first['doc_id']}").get_json()["title"] == "Committee minutes"
    spec = client.get("/openapi.json").get_json()
    upload = spec["paths"]["/v1/documents"]["post"]["requestBody"]["content"]
    for kind in ("multipart/form-data", "application/json"):
        schema = upload[kind]["schema"]
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]] if "$ref" in schema else schema
        assert "stored already keep their title" in schema["properties"]["title"]["description"], kind


@pytest.mark.parametrize(("fields", "fragment"), [
    ({"tags": "legal"}, "'tags' must be a list"),
    ({"tags": ["x" * 41]}, "1 to 40 printable characters"),
    ({"tags": ["a,b"]}, "without commas"),
    ({"tags": [f"t{i}" for i in range(MAX_TAGS + 1)]}, f"at most {MAX_TAGS}"),
    ({"metadata": {"nested": {"a": 1}}}, "metadata is flat"),
    ({"metadata": {"$where": 1}}, "not starting with '$'"),
    ({"metadata": {f"k{i}": "v" * 400 for i in range(12)}}, f"limit is {MAX_METADATA_BYTES:,}"),
    ({"metadata": [1]}, "'metadata' must be"),
])
def test_bad_tags_and_metadata_are_refused_naming_the_field(client, fields, fragment):
    err = assert_error(client.post("/v1/documents", json={"text": "Some text.", **fields}), 400, "invalid_argument")
    assert fragment in err["message"], err["message"]
    assert client.get("/v1/documents").get_json()["total"] == 0  # nothing stored


def test_a_form_metadata_that_is_not_an_object_is_refused(client):
    data = {"file": (io.BytesIO(b"Some text."), "a.txt"), "metadata": "year=2024"}
    err = assert_error(client.post("/v1/documents", data=data, content_type="multipart/form-data"), 400)
    assert "'metadata' must be a JSON object" in err["message"]


@pytest.fixture
def library(client):
    """25 documents: titles 'Report 00'..'Report 24', tags by residue, metadata year and a team."""
    ids = {}
    for i in range(25):
        tags = ["even" if i % 2 == 0 else "odd"] + (["fives"] if i % 5 == 0 else [])
        doc = _text(client, f"# Report {i:02d}\n\nQuarterly numbers for unit {i}.", f"Report {i:02d}.md", tags=tags,
                    metadata={"year": 2000 + i, "team": "blue" if i < 10 else "green"})
        ids[i] = doc["doc_id"]
    return ids


def _all_pages(client, query: str) -> tuple[list[str], list[int]]:
    seen, totals, cursor = [], [], None
    while True:
        url = f"/v1/documents?{query}" + (f"&cursor={cursor}" if cursor else "")
        body = client.get(url).get_json()
        assert body["count"] == len(body["documents"])
        seen += [d["title"].removesuffix(".md") for d in body["documents"]]
        totals.append(body["total"])
        cursor = body["next_cursor"]
        if cursor is None:
            return seen, totals


def test_pages_cover_every_document_once_in_order(client, library):
    titles, totals = _all_pages(client, "limit=7")
    assert titles == [f"Report {i:02d}" for i in range(25)] and set(totals) == {25} and len(totals) == 4
    newest_first, _ = _all_pages(client, "limit=10&sort=added&order=desc")
    assert sorted(newest_first) == titles and len(newest_first) == 25


def test_filters_by_tag_type_and_title(client, library):
    fives, totals = _all_pages(client, "limit=2&tag=fives")
    assert fives == ["Report 00", "Report 05", "Report 10", "Report 15", "Report 20"] and set(totals) == {5}
    either, _ = _all_pages(client, "tag=fives&tag=odd")
    assert len(either) == 12 + 3  # 12 odd, and 00, 10, 20
    assert _all_pages(client, "title=report 1")[0] == [f"Report {i}" for i in range(10, 20)]
    assert client.get("/v1/documents?type=pdf").get_json()["total"] == 0
    assert client.get("/v1/documents?type=md").get_json()["total"] == 25


def test_a_page_is_not_shifted_by_a_document_added_between_requests(client, library):
    first = client.get("/v1/documents?limit=5").get_json()
    _text(client, "An early entry.", "A first report.md")  # sorts before every page already given
    rest, _ = _all_pages(client, f"limit=50&cursor={first['next_cursor']}")
    assert rest[0] == "Report 05" and len(rest) == 20


@pytest.mark.parametrize(("query", "code"), [
    ("limit=0", "invalid_argument"), ("limit=500", "invalid_argument"), ("limit=ten", "invalid_argument"),
    ("sort=size", "invalid_argument"), ("order=up", "invalid_argument"), ("cursor=not-ours", "invalid_cursor"),
    ("colour=blue", "invalid_argument"),
])
def test_bad_list_parameters_are_refused(client, query, code):
    err = assert_error(client.get(f"/v1/documents?{query}"), 400, code)
    assert err["message"]


def test_a_cursor_for_another_sort_is_refused(client, library):
    cursor = client.get("/v1/documents?limit=3").get_json()["next_cursor"]
    err = assert_error(client.get(f"/v1/documents?limit=3&sort=added&cursor={cursor}"), 400, "invalid_cursor")
    assert "sort=title" in err["message"]


def test_a_cursor_from_another_namespace_is_refused_at_every_door(client, da):
    """Before (trials, fixed in hlo): a cursor carried its sort and order, not its namespace, so one
    listed in namespace 'a' was taken in 'b' and started there at the same offset. Now it carries a
    short mark of its namespace, and every door that takes a list cursor (GET /v1/documents, the
    Python page_documents, LobeChat's and MCP's listDocuments, MCP resources/list) refuses it with
    ``invalid_cursor`` and one sentence, through the one rule of docanchor.library.page."""
    import anyio
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    from docanchor.errors import InvalidRequest
    from plugin.mcp_server import build_server
    from tests.test_lobechat import call

    for ns in ("a", "b"):
        for i in range(3):
            da.ingest_text(f"Note {i} of namespace {ns}.", title=f"{ns} note {i}.txt", namespace=ns)
    cursor = client.get("/v1/documents?namespace=a&limit=2").get_json()["next_cursor"]
    assert len(cursor) <= 46, cursor  # still a few tokens (22 by cl100k_base: its check added 3)
    sentence = ("'cursor' was made for another namespace than 'b'; send it with the namespace whose list gave it, "
                "or start again without a cursor.")
    err = assert_error(client.get(f"/v1/documents?namespace=b&limit=2&cursor={cursor}"), 400, "invalid_cursor")
    assert err["message"] == sentence, err
    same = client.get(f"/v1/documents?namespace=a&limit=2&cursor={cursor}").get_json()
    assert [d["title"] for d in same["documents"]] == ["a note 2.txt"]
    with pytest.raises(InvalidRequest, match="another namespace than 'b'") as refused:
        da.page_documents(namespace="b", limit=2, cursor=cursor)
    assert refused.value.code == "invalid_cursor"
    assert [r.title for r in da.page_documents(namespace="a", limit=2, cursor=cursor).documents] == ["a note 2.txt"]
    text = call(client, "listDocuments", json.dumps({"cursor": cursor}), settings={"namespace": "b"})
    assert text.startswith(sentence), text
    assert "a note 2.txt" in call(client, "listDocuments", json.dumps({"cursor": cursor}), settings={"namespace": "a"})

    async def mcp_doors():
        async with Client(build_server(da, lambda ctx: "b"), mode="legacy") as mcp:
            tool = await mcp.call_tool("listDocuments", {"cursor": cursor})
            assert tool.is_error and tool.content[0].text.startswith(sentence), tool.content
            named = await mcp.call_tool("listDocuments", {"cursor": cursor, "namespace": "a"})
            assert not named.is_error and "a note 2.txt" in named.content[0].text, named.content
            with pytest.raises(MCPError, match="another namespace than 'b'"):
                await mcp.list_resources(cursor=cursor)

    anyio.run(mcp_doors)


def test_retrieve_filtered_by_tags_and_where(client, library):
    hit = client.post("/v1/retrieve", json={"query": "quarterly numbers", "tags": ["fives"], "budget_tokens": 2000})
    docs = {s["doc_id"] for s in hit.get_json()["sections"]}
    assert docs and docs <= {library[i] for i in (0, 5, 10, 15, 20)}
    where = {"year": {"$gte": 2020}, "team": "green"}
    got = client.post("/v1/retrieve", json={"query": "quarterly numbers", "where": where, "budget_tokens": 2000})
    assert {s["doc_id"] for s in got.get_json()["sections"]} == {library[i] for i in range(20, 25)}
    none = client.post("/v1/retrieve", json={"query": "numbers", "where": {"team": "red"}}).get_json()
    assert none["sections"] == [] and "No document matches the filter (metadata team eq \"red\")" in none["message"]
    err = assert_error(client.post("/v1/retrieve", json={"query": "x", "where": {"year": {"$like": 1}}}), 400)
    assert "operators are $eq" in err["message"]


def test_a_filter_searches_inside_the_top_k_not_after_it(client):
    """50 documents match the query better than the one tagged document; the dense and BM25 lists
    (top 40 each) of the whole namespace hold none of it, so filtering their results afterwards
    would answer nothing. Filtered inside the search, the tagged document is found."""
    for i in range(50):
        _text(client, f"Teapots and teapot spouts, teapot number {i}: teapots everywhere.", f"teapots {i}.md")
    tagged = _text(client, "A kettle manual that mentions a teapot once.", "kettle.md", tags=["kitchen"])
    plain = client.post("/v1/retrieve", json={"query": "teapot spouts", "explain": True}).get_json()
    assert tagged["doc_id"] not in {c["chunk_id"].split(":")[0] for c in plain["trace"]["candidates"]}
    got = client.post("/v1/retrieve", json={"query": "teapot spouts", "tags": ["kitchen"]}).get_json()
    assert [s["doc_id"] for s in got["sections"]] == [tagged["doc_id"]]


def _record(doc_id: str, **kw) -> DocumentRecord:
    return DocumentRecord(doc_id=doc_id, title=kw.pop("title", doc_id), doc_type="md", n_chunks=1, n_tokens=1,
                          n_chars=1, **kw)


def test_where_follows_chromas_rules():
    records = [_record("a", metadata={"n": 3, "flag": True}), _record("b", metadata={"n": "3"}), _record("c")]

    def ids(where):
        return [r.doc_id for r in page(records, Filter(where=check_where(where)), namespace="default", limit=10).documents]

    assert ids({"n": 3}) == ["a"]  # no string/number coercion
    assert ids({"n": {"$ne": 3}}) == ["b", "c"]  # a document without the key matches $ne
    assert ids({"n": {"$gt": 2}}) == ["a"]  # order comparisons only between numbers
    assert ids({"flag": 1}) == []  # true is not 1
    assert ids({"n": {"$in": [3, "3"]}}) == ["a", "b"]
    assert ids({"n": {"$nin": [3]}}) == ["b", "c"]


def _long_manual(n_sections: int) -> str:
    """Markdown with ``n_sections`` second-level headings under one title: ``n_sections + 1``
    headings in all."""
    return "# Manual\n\n" + "\n\n".join(f"## Step {i}\n\nDo step {i} with care." for i in range(1, n_sections + 1))


def test_a_long_outline_says_how_many_headings_it_leaves_out(client):
    """GET /v1/documents/<doc_id> keeps the first 50 headings and says how many there are in all
    (``outline_total``), so a client can say "+N more headings" instead of cutting silently."""
    from summarize.outline import OUTLINE_LIMIT

    doc = _text(client, _long_manual(59), "manual.md")
    got = client.get(f"/v1/documents/{doc['doc_id']}").get_json()
    assert len(got["outline"]) == OUTLINE_LIMIT == 50
    assert got["outline_total"] == 60
    short = _text(client, "# Notes\n\n## One\n\nFirst.\n\n## Two\n\nSecond.", "notes.md")
    assert client.get(f"/v1/documents/{short['doc_id']}").get_json()["outline_total"] == 3


def test_a_record_stored_before_outline_total_counts_its_outline():
    """Records stored before ``outline_total`` existed load with their outline's length."""
    old = json.loads(json.dumps(_record("doc_old", outline=["A", "B"]).to_dict()))
    del old["outline_total"]
    assert DocumentRecord(**old).outline_total == 2


@pytest.mark.parametrize("value", ["text", "PDF", "markdown", "docm"])
def test_a_type_filter_outside_the_format_registry_is_refused_naming_the_types(client, value):
    """A trial asked ``GET /v1/documents?type=text`` and got an empty page, as if nothing matched;
    a type that no format is called is now ``400 invalid_argument`` naming the registry's types."""
    from docanchor import formats

    _text(client, "# Notes\n\nPlain notes.", "notes.md")
    err = assert_error(client.get(f"/v1/documents?type={value}"), 400, "invalid_argument")
    assert err["details"]["field"] == "type" and f"got \"{value}\"" in err["message"]
    assert all(f'"{name}"' in err["message"] for name in formats.names())
    assert client.get("/v1/documents?type=md").get_json()["total"] == 1  # every registered name is taken


def test_the_type_filter_lists_the_registry_types_in_openapi_and_the_tools():
    """One source for the types a filter takes: the format registry (the tools' description named
    six of the twelve)."""
    from docanchor import formats
    from plugin.openapi import openapi_document
    from plugin.schemas.tools import input_schema

    ops = openapi_document(Settings())["paths"]["/v1/documents"]["get"]["parameters"]
    [param] = [p for p in ops if p["name"] == "type"]
    assert param["schema"]["type"] == "array" and param["schema"]["items"]["enum"] == list(formats.names())
    assert input_schema("listDocuments")["properties"]["type"]["enum"] == list(formats.names())
    rows = README.read_text(encoding="utf-8").splitlines()
    row = next(line for line in rows if line.startswith("| `GET /v1/documents`"))
    named = re.search(r"`type=` \(a `doc_type`: ([a-z, ]+) or ([a-z]+);", row)
    assert named and named.group(1).split(", ") + [named.group(2)] == list(formats.names())


def test_a_repeated_type_lists_every_type_named(settings):
    """Before: GET /v1/documents?type=md&type=txt listed the txt documents alone (the last `type`
    won, silently). Now the union; every value is checked against the format registry."""
    import httpx2

    from tests.live_server import serving_fake
    from tests.waiting import BACKSTOP_S

    with serving_fake(settings, threads=2) as (base, da):
        da.ingest_text("# Berths\n\nVessel 1 uses berth 12 on Tuesday mornings.", title="berths.md")
        da.ingest_text("Crane 3 moved container MSCU1003 to stack 11 at dawn.", title="cranes.txt")
        da.ingest_bytes(b"<html><head><title>Quay</title></head><body><p>Quay forty-one is closed.</p></body></html>",
                        filename="quay.html")

        def listed(query: str) -> httpx2.Response:
            return httpx2.get(f"{base}/v1/documents?{query}", timeout=BACKSTOP_S)

        both = listed("type=md&type=txt").json()
        assert both["total"] == 2 and sorted(d["doc_type"] for d in both["documents"]) == ["md", "txt"], both
        assert listed("type=md,html").json()["total"] == 2
        assert listed("type=txt").json()["total"] == 1
        refused = listed("type=md&type=text")
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_argument"
        assert '"txt"' in refused.json()["error"]["message"] and "text" in refused.json()["error"]["message"]


def test_an_anchor_read_in_a_long_namespace_stays_within_anchor_tokens(settings):
    """Before: GET /v1/documents/<id>/anchor?namespace=... wrote the namespace into the More line
    without fitting the anchor again: docs/guide.md's anchor in a 190-character namespace came to
    358 of the 300 anchor tokens (MCP's getDocumentAnchor dropped a passage line instead)."""
    from pathlib import Path

    import httpx2

    from docanchor.tool_calls import how_to_line
    from tests.live_server import serving_fake
    from tests.waiting import BACKSTOP_S

    namespace = "ops-" + "n" * 186
    guide = Path(__file__).resolve().parents[1] / "docs" / "guide.md"
    with serving_fake(settings, threads=2) as (base, da):
        doc_id = da.ingest_file(guide, namespace=namespace).record.doc_id
        stored = da.get_document(doc_id, namespace).anchor
        answer = httpx2.get(f"{base}/v1/documents/{doc_id}/anchor", params={"namespace": namespace},
                            timeout=BACKSTOP_S).json()
    assert da.ctx.counter.count(stored) > settings.anchor_tokens - 60  # the long line would not fit beside it
    assert answer["anchor_tokens"] == da.ctx.counter.count(answer["anchor"]) <= settings.anchor_tokens, answer
    assert how_to_line(doc_id, namespace) in answer["anchor"].splitlines()


def _more_line_call(anchor: str) -> dict:
    """The arguments of the searchDocuments call in an anchor's "More:" line, as a model reads them."""
    more = next(line for line in anchor.splitlines() if line.startswith("More:"))
    call = re.search(r"searchDocuments\(query, (.*?)\)", more).group(1)
    return {key: json.loads(value) for key, value in re.findall(r'(\w+)=("(?:[^"\\]|\\.)*")', call)}


def test_an_anchor_read_in_a_named_namespace_names_it_at_every_door(settings):
    """Before: only MCP's ``namespace`` argument and GET .../anchor?namespace= named the namespace in
    the anchor's "More:" line; ``docanchor --namespace X anchor``, the Python API's ``namespace=``,
    the X-DocAnchor-Namespace header and GET /v1/documents/<id>?namespace= gave the stored line,
    which sends a model to its own namespace, where the document is not (new-user trial). Every
    door names it, within anchor_tokens, and the call it names finds the document over MCP."""
    import anyio
    import httpx2
    from click.testing import CliRunner
    from mcp import Client

    from docanchor.tool_calls import how_to_line
    from plugin.cli import main
    from plugin.mcp_server import build_server
    from tests.live_server import serving_fake
    from tests.waiting import BACKSTOP_S

    namespace = "ops-" + "n" * 186  # long: the named line would take a full anchor over its limit
    guide = Path(__file__).resolve().parents[1] / "docs" / "guide.md"
    with serving_fake(settings, threads=2) as (base, da):
        doc_id = da.ingest_file(guide, namespace=namespace).record.doc_id
        header = {"X-DocAnchor-Namespace": namespace}
        cli = CliRunner().invoke(main, ["--namespace", namespace, "anchor", doc_id], obj=da)
        doors = {
            "python": da.anchor(doc_id, namespace),
            "cli": cli.stdout.rstrip("\n"),
            "header": httpx2.get(f"{base}/v1/documents/{doc_id}/anchor", headers=header,
                                 timeout=BACKSTOP_S).json()["anchor"],
            "GET document": httpx2.get(f"{base}/v1/documents/{doc_id}", params={"namespace": namespace},
                                       timeout=BACKSTOP_S).json()["anchor"],
        }
        found = []

        async def follow() -> None:
            async with Client(build_server(da, lambda ctx: "default"), mode="legacy") as client:
                result = await client.call_tool("searchDocuments", {"query": "namespace", **_more_line_call(doors["cli"])})
                found.append(result.content[0].text)

        anyio.run(follow)
    for door, anchor in doors.items():
        assert how_to_line(doc_id, namespace) in anchor.splitlines(), (door, anchor)
        assert da.ctx.counter.count(anchor) <= settings.anchor_tokens, door
    assert _more_line_call(doors["cli"]) == {"doc_id": doc_id, "namespace": namespace}
    assert doc_id in found[0] and "not found" not in found[0].lower(), found[0]


def test_ingesting_a_file_that_cannot_be_read_is_a_docanchor_error(da, tmp_path):
    """Before: DocAnchor().ingest_file("/nonexistent.pdf") raised FileNotFoundError (and a folder
    IsADirectoryError), not a DocAnchorError with a code, as the CLI and a bulk ingest answer.
    Before (the trial of 3d88e0c, its defect 8d): the message did not name the path, which a
    program catching the error has no other way to tell; ingest_many's outcomes name it too."""
    from docanchor.errors import DocAnchorError

    for path, reason in ((tmp_path / "nonexistent.pdf", "No such file or directory"), (tmp_path, "Is a directory")):
        with pytest.raises(DocAnchorError) as refused:
            da.ingest_file(path)
        assert refused.value.code == "unreadable_file", refused.value
        assert refused.value.message == (
            f"The file {path} cannot be read ({reason}); check the path and its permissions.")
    [outcome] = da.ingest_many([tmp_path / "nonexistent.pdf"])
    assert outcome.error is not None and outcome.error.message.startswith(
        f"The file {tmp_path / 'nonexistent.pdf'} cannot be read (No such file or directory)"), outcome.error
    assert da.list_documents() == []


def test_a_cursor_with_a_control_character_or_space_is_refused(client, library):
    """Before (trial of 3df9211): a cursor with a NUL after its doc id was taken as a deleted
    document's and answered an overlapping page. A doc id holds no control character or space."""
    cursor = client.get("/v1/documents?limit=3").get_json()["next_cursor"]
    for bad in (cursor + "%00", cursor + "%20", cursor + "%0A"):
        assert_error(client.get(f"/v1/documents?limit=3&cursor={bad}"), 400, "invalid_cursor")
    assert client.get(f"/v1/documents?limit=3&cursor={cursor}").status_code == 200
    # before (hlo): a superscript count passed str.isdigit() and int() raised: 500
    sort, order, mark, _, last = cursor.split(".", 4)
    assert_error(client.get(f"/v1/documents?limit=3&cursor={sort}.{order}.{mark}.%C2%B3.{last}"), 400, "invalid_cursor")
