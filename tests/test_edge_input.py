"""Hostile and careless input at the HTTP edge (issue 18's attack run, issue 17's rough edges):
lone UTF-16 surrogates through every door, control-character queries and titles, namespace
conflicts, several files in one upload, an upload one byte over the limit, and what the log says
about a user's mistake. Flask's test client over a real DocAnchor (fake embedder, real Chroma on
disk); the MCP endpoint through the same app."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import sqlite3

import pytest

from docanchor.settings import Settings
from plugin.api import DocAnchor
from plugin.app import create_app
from tests.fakes import HashEmbedder
from tests.test_http import GUIDE, assert_error, upload_text

LONE = "\\ud800"
"""A lone high surrogate as JSON writes it (the escape, not the character)."""


def _jobs(da: DocAnchor) -> int:
    path = da.settings.data_dir / "jobs.sqlite3"
    if not path.exists():
        return 0
    with sqlite3.connect(path) as db:
        if not db.execute("SELECT name FROM sqlite_master WHERE name = 'jobs'").fetchone():
            return 0
        return db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]


def _nothing_stored(da: DocAnchor) -> None:
    """No document, chunk, ingest job or spooled upload exists."""
    assert da.list_documents() == [] and da.ctx.store.count_chunks(da.settings.namespace) == 0
    assert _jobs(da) == 0
    spool = da.settings.data_dir / "uploads"
    assert not spool.exists() or not any(spool.iterdir())


# ---------------------------------------------------------------------------- lone surrogates
@pytest.mark.parametrize("path, body, field", [
    ("/v1/retrieve", f'{{"query": "{LONE}"}}', "query"),
    ("/v1/retrieve", f'{{"query": "tea{LONE}pot"}}', "query"),
    ("/v1/retrieve", f'{{"query": "budget", "namespace": "{LONE}"}}', "namespace"),
    ("/v1/retrieve", f'{{"query": "budget", "doc_id": "{LONE}"}}', "doc_id"),
    ("/v1/retrieve", f'{{"query": "budget", "doc_ids": ["doc_1", "{LONE}"]}}', "doc_ids[1]"),
    ("/v1/retrieve", f'{{"query": "budget", "model": "{LONE}", "used_tokens": 5}}', "model"),
    ("/v1/read", f'{{"doc_id": "{LONE}"}}', "doc_id"),
    ("/v1/read", f'{{"doc_id": "doc_1", "from": "{LONE}"}}', "from"),
    ("/v1/context/snapshot", f'{{"model": "gpt-4o", "messages": [{{"role": "user", "content": "{LONE}"}}]}}',
     "messages[0].content"),
    ("/v1/documents", f'{{"text": "{LONE} teapot", "title": "t.md"}}', "text"),
    ("/v1/documents", f'{{"text": "A note on teapots.", "title": "{LONE}"}}', "title"),
    ("/v1/documents", f'{{"url": "https://{LONE}.example/x.pdf"}}', "url"),
])
def test_a_lone_surrogate_is_a_400_naming_the_field_and_nothing_is_stored(client, da, path, body, field):
    """Before: 500 internal (query, text, model), 503 store_unavailable (namespace, doc_id), and
    a bad title failed its job after the chunks were written."""
    resp = client.post(path, data=body, content_type="application/json")
    err = assert_error(resp, 400, "invalid_argument")
    assert err["details"]["field"] == field and f"'{field}'" in err["message"] and "surrogate" in err["message"]
    _nothing_stored(da)
    assert client.get("/healthz").status_code == 200


def test_a_lone_surrogate_in_a_field_name_is_refused_too(client):
    err = assert_error(client.post("/v1/retrieve", data=f'{{"query": "x", "{LONE}": 1}}',
                                   content_type="application/json"), 400, "invalid_argument")
    assert "field name" in err["message"]


def test_lobechat_arguments_and_settings_with_a_lone_surrogate_get_a_sentence(client, da):
    """Before: a 500 for the argument, and a 503 PluginServerError card for the namespace setting."""
    upload_text(client)
    resp = client.post("/lobechat/searchDocuments", data=f'{{"query": "{LONE}"}}', content_type="text/plain")
    assert resp.status_code == 200
    text = resp.get_data(as_text=True)
    assert "'query'" in text and "surrogate" in text and "call again" in text
    resp = client.post("/lobechat/searchDocuments", data='{"query": "budget"}', content_type="text/plain",
                       headers={"X-Lobe-Plugin-Settings": f'{{"namespace": "{LONE}"}}'})
    assert resp.status_code == 200
    text = resp.get_data(as_text=True)
    assert "setting 'namespace'" in text and "plugin's settings" in text
    assert "Budgets" not in text  # not answered from the default namespace instead


def test_multipart_fields_and_headers_never_carry_a_surrogate(client, da):
    """Bytes that would decode to a surrogate (ED A0 80, CESU-8) are invalid UTF-8: werkzeug
    reads form fields with U+FFFD in their place and WSGI hands headers over as latin-1, so these
    doors cannot carry a lone surrogate; this pins that they answer without a 5xx."""
    body = (b'--B\r\nContent-Disposition: form-data; name="title"\r\n\r\nT\xed\xa0\x80\r\n'
            b"--B\r\nContent-Disposition: form-data; name=\"file\"; filename*=UTF-8''n%ED%A0%80.txt\r\n\r\n"
            b"A short note about teapots.\r\n--B--\r\n")
    resp = client.post("/v1/documents", data=body, content_type="multipart/form-data; boundary=B")
    assert resp.status_code == 201, resp.get_data(as_text=True)
    doc = resp.get_json()
    assert doc["title"] == "T\ufffd\ufffd\ufffd"
    resp = client.get("/v1/documents", headers={"X-DocAnchor-Namespace": "ns\xed\xa0\x80"})
    # read as latin-1, the header holds U+0080, a C1 control character: no namespace name
    assert assert_error(resp, 400, "invalid_namespace")["details"] == {"field": "namespace"}


def test_mcp_refuses_a_lone_surrogate_naming_the_argument(settings):
    """Before: the SDK's JSON-RPC parse error 'unexpected end of hex escape', naming nothing."""
    client = create_app(settings, DocAnchor(settings, embedder=HashEmbedder())).test_client()
    message = ('{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "searchDocuments", '
               f'"arguments": {{"query": "{LONE}"}}}}}}')
    resp = client.post("/mcp", data=message, content_type="application/json",
                       headers={"Accept": "application/json, text/event-stream"})
    err = assert_error(resp, 400, "invalid_argument")
    assert err["details"]["field"] == "params.arguments.query"


def test_mcp_body_over_its_limit_is_the_json_413(settings):
    """Before: 413 with the plain-text body 'Request body too large'."""
    from plugin.mcp_http import MAX_MCP_BODY_BYTES

    client = create_app(settings, DocAnchor(settings, embedder=HashEmbedder())).test_client()
    big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"x": "a" * MAX_MCP_BODY_BYTES}})
    resp = client.post("/mcp", data=big, content_type="application/json",
                       headers={"Accept": "application/json, text/event-stream"})
    err = assert_error(resp, 413, "too_large")
    assert f"{MAX_MCP_BODY_BYTES:,} bytes" in err["message"]
    ok = client.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
                     headers={"Accept": "application/json, text/event-stream"})
    assert ok.status_code == 200 and ok.get_json()["result"]["tools"]  # the body was handed on whole


# ---------------------------------------------------------------------------- queries, ids, namespaces
@pytest.mark.parametrize("query", ["\u0001\u0002", "\u200b\u202e", "\x1b\x7f \t"])
def test_a_query_of_only_control_characters_is_an_empty_query(client, query):
    """Before: 200 with sections, as if nothing had been asked."""
    upload_text(client)
    err = assert_error(client.post("/v1/retrieve", json={"query": query}), 400, "invalid_argument")
    assert "'query' must be a non-empty string" in err["message"]
    text = client.post("/lobechat/searchDocuments", data=json.dumps({"query": query}),
                       content_type="text/plain").get_data(as_text=True)
    assert "searchDocuments needs a `query` (it was blank)" in text and "Budgets" not in text


@pytest.mark.parametrize("query", ["", "   "])
def test_an_empty_query_gets_one_sentence_at_every_door(client, da, query):
    """Before (new-user trial, issue 15): the CLI said "'query' must be a non-empty string of words to
    search for." and POST /v1/retrieve with "" said "'query' must be a non-empty string (at most
    4,000 characters); got \"\"."; MCP's searchDocuments said "searchDocuments needs a `query`".
    Now the CLI, HTTP and Python say EMPTY_QUERY; the two tool doors say the same sentence as each
    other, the form of every missing tool argument (since hlo: "searchDocuments needs a `query`
    (it was empty): ...", in the words of the tool's schema)."""
    import anyio
    from click.testing import CliRunner
    from mcp import Client

    from docanchor.errors import InvalidRequest
    from plugin.api import EMPTY_QUERY
    from plugin.cli import main
    from plugin.mcp_server import build_server

    upload_text(client)
    cli = CliRunner().invoke(main, ["search", query], obj=da)
    assert (cli.exit_code, cli.stderr) == (2, f"error invalid_argument: {EMPTY_QUERY}\n")
    cli_json = CliRunner().invoke(main, ["search", query, "--json"], obj=da)
    assert json.loads(cli_json.stderr)["error"]["message"] == EMPTY_QUERY
    http = assert_error(client.post("/v1/retrieve", json={"query": query}), 400, "invalid_argument")
    assert http["message"] == EMPTY_QUERY
    with pytest.raises(InvalidRequest) as raised:
        da.retrieve(query)
    assert raised.value.message == EMPTY_QUERY
    lobechat = client.post("/lobechat/searchDocuments", data=json.dumps({"query": query}),
                           content_type="text/plain").get_data(as_text=True)
    tool_sentence = f"searchDocuments needs a `query` (it was {'empty' if not query else 'blank'}): call it again with "
    assert lobechat.startswith(tool_sentence), lobechat
    answers = []

    async def ask_mcp():
        async with Client(build_server(da, lambda ctx: "default"), mode="legacy") as mcp:
            result = await mcp.call_tool("searchDocuments", {"query": query})
            answers.append(result.content[0].text)

    anyio.run(ask_mcp)
    assert answers[0].startswith(lobechat.removesuffix("\n")), (answers, lobechat)


def test_an_empty_doc_id_is_named_as_doc_id(client):
    """Before: "'doc_ids' must be a list of document id strings." for a field never sent."""
    for bad in ("", "  ", 7):
        err = assert_error(client.post("/v1/retrieve", json={"query": "x", "doc_id": bad}), 400, "invalid_argument")
        assert err["message"].startswith("'doc_id' must be") and "doc_ids" not in err["message"], err


def test_header_and_query_parameter_naming_different_namespaces_conflict(client):
    """Before: the query parameter was silently ignored and the header's namespace used."""
    client.post("/v1/documents", json={"text": GUIDE, "title": "g.md"}, headers={"X-DocAnchor-Namespace": "a"})
    resp = client.get("/v1/documents?namespace=b", headers={"X-DocAnchor-Namespace": "a"})
    err = assert_error(resp, 400, "invalid_namespace")
    assert "X-DocAnchor-Namespace header" in err["message"] and "?namespace=" in err["message"]
    assert client.get("/v1/documents?namespace=a", headers={"X-DocAnchor-Namespace": "a"}).get_json()["count"] == 1
    assert client.get("/v1/documents?namespace=a").get_json()["count"] == 1
    err = assert_error(client.post("/v1/retrieve?namespace=b", json={"query": "budget", "namespace": "a"}),
                       400, "invalid_namespace")
    assert "?namespace=" in err["message"] and "'namespace' field" in err["message"]


# ---------------------------------------------------------------------------- titles shown on a line
def test_titles_lose_escape_sequences_control_and_bidi_characters(client, da):
    """Before: the title was stored and answered as sent, ESC [31m, U+202E and BEL included."""
    resp = client.post("/v1/documents", json={"text": "A note on teapots.",
                                              "title": "\x1b[31mRed\x1b[0m\u202e note\x07\nsecond line"})
    assert resp.status_code == 201
    doc = resp.get_json()
    assert doc["title"] == "Red note second line"
    assert doc["anchor"].startswith("Document: Red note second line\n")
    listed = client.get("/v1/documents").get_json()["documents"][0]["title"]
    assert listed == "Red note second line"
    answer = client.post("/lobechat/listDocuments", data="", content_type="text/plain").get_data(as_text=True)
    assert "**Red note second line**" in answer and "\x1b" not in answer


@pytest.mark.parametrize("raw, shown", [
    ("\x1b]0;owned\x07Report", "Report"),        # OSC: a terminal title
    ("a\u202eb\u2066c\u200bd", "abcd"),          # bidi override, isolate, zero-width space
    ("Tab\there\r\nand\u2028there", "Tab here and there"),
    ("क्\u200dष", "क्\u200dष"),                  # a joiner that words need stays
    ("\x00\x01", ""),
    (None, ""),
])
def test_display_line(raw, shown):
    from docanchor.display import display_line

    assert display_line(raw) == shown


# ---------------------------------------------------------------------------- uploads
def test_several_file_parts_are_each_ingested_as_their_own_job(client, da):
    """Before: the second file part was silently dropped."""
    files = [(io.BytesIO(b"First note: teapots hold tea."), "first.txt"),
             (io.BytesIO(b"Second note: kettles boil water."), "second.txt"),
             (io.BytesIO(b""), "empty.txt")]
    resp = client.post("/v1/documents", data={"file": files}, content_type="multipart/form-data")
    assert resp.status_code == 200, resp.get_data(as_text=True)
    body = resp.get_json()
    assert body["count"] == 3 and [j["filename"] for j in body["jobs"]] == ["first.txt", "second.txt", "empty.txt"]
    first, second, empty = body["jobs"]
    assert first["status"] == second["status"] == "done" and first["result"]["doc_id"] != second["result"]["doc_id"]
    assert empty["status"] == "failed" and empty["error_code"] == "empty_file" and empty["job_id"] is None
    assert sorted(d.source_name for d in da.list_documents()) == ["first.txt", "second.txt"]
    for job in (first, second):
        assert client.get(f"/v1/jobs/{job['job_id']}").get_json()["status"] == "done"


def test_several_file_parts_with_one_title_are_refused(client, da):
    files = [(io.BytesIO(b"One."), "a.txt"), (io.BytesIO(b"Two."), "b.txt")]
    err = assert_error(client.post("/v1/documents", data={"file": files, "title": "T"},
                                   content_type="multipart/form-data"), 400, "invalid_argument")
    assert "'title' names one document" in err["message"]
    _nothing_stored(da)


@pytest.mark.parametrize("form", [{}, {"wait_s": "0"}])
def test_an_upload_one_byte_over_the_limit_is_refused_at_once(tmp_path, form):
    """Before: with wait_s=0 (as the upload page sends) it was accepted as 202, spooled to disk,
    and failed later in its job."""
    small = Settings(data_dir=tmp_path / "d", max_upload_bytes=5000)
    da = DocAnchor(small, embedder=HashEmbedder())
    client = create_app(small, da).test_client()
    resp = client.post("/v1/documents", data={"file": (io.BytesIO(b"a" * 5001), "a.txt"), **form},
                       content_type="multipart/form-data")
    err = assert_error(resp, 413, "too_large")
    assert err["details"] == {"limit_bytes": 5000, "size_bytes": 5001} and "DOCANCHOR_MAX_UPLOAD_BYTES" in err["message"]
    _nothing_stored(da)
    ok = client.post("/v1/documents", data={"file": (io.BytesIO(b"teapot " * 714 + b"te"), "a.txt")},
                     content_type="multipart/form-data")
    assert ok.status_code == 201  # exactly the limit is accepted


# ---------------------------------------------------------------------------- the log
def test_a_users_unresolvable_url_is_one_warning_line_not_an_error_traceback(client, caplog):
    """Before: ERROR with the full traceback of the resolver's exception."""
    with caplog.at_level(logging.INFO):
        resp = client.post("/v1/documents", json={"url": "https://no-such-host.invalid/x.pdf"})
    assert_error(resp, 502, "url_fetch_failed")
    records = [r for r in caplog.records if r.name.startswith("docanchor")]
    assert [r.levelname for r in records] == ["WARNING"], [(r.levelname, r.getMessage()) for r in records]
    assert records[0].exc_info is None and "url_fetch_failed" in records[0].getMessage()


# ---------------------------------------------------------------------------- an empty namespace
def test_searching_an_empty_namespace_says_it_is_empty_and_how_to_add_documents(client, da):
    """Before: "Call searchDocuments again with other words or a larger budget_tokens" -- neither helps."""
    from click.testing import CliRunner

    from plugin.cli import main
    from plugin.mcp_server import call_sentence

    upload_text(client)  # the default namespace has a document; "team" has none
    text = client.post("/lobechat/searchDocuments", data='{"query": "budget"}', content_type="text/plain",
                       headers={"X-Lobe-Plugin-Settings": '{"namespace": "team"}'}).get_data(as_text=True)
    assert "holds no documents yet in namespace “team”" in text and "addDocument" in text, text
    assert "other words" not in text and "larger budget" not in text
    mcp, is_error = call_sentence(da, "searchDocuments", {"query": "budget"}, "team")
    assert "holds no documents yet" in mcp and "addDocument" in mcp and "other words" not in mcp and not is_error
    assert "Budgets" in client.post("/lobechat/searchDocuments", data='{"query": "budget"}',
                                    content_type="text/plain").get_data(as_text=True)  # not said elsewhere
    cli = CliRunner().invoke(main, ["--namespace", "team", "search", "budget"], obj=da, catch_exceptions=False)
    assert "docanchor ingest PATH" in cli.stderr and "upload" not in cli.stderr, cli.stderr


def test_plurals_are_spelled_in_one_place():
    """Words beside a count go through docanchor.display.plural (counted uses it). Before:
    plugin/bodies.py spelt "Unknown field{'s' if ...}" by hand, summarize/notes.py "page"/"pages"
    and docanchor.formats.Unit.count its own pair."""
    from docanchor.display import counted, plural
    from tests.conftest import REPO

    assert (plural("field", 1), plural("field", 2), plural("field", 0)) == ("field", "fields", "fields")
    assert plural("match", 3, "matches") == "matches" and counted(1204, "chunk") == "1,204 chunks"
    by_hand = re.compile(r"""['"]s['"] if |['"][a-z]+['"] if [^\n]*== 1 else ['"][a-z]+s['"]|\[0\] if n == 1 else""")
    found = [f"{path.relative_to(REPO)}:{n}" for package in ("docanchor", "ingest", "plugin", "retrieval", "summarize")
             for path in sorted((REPO / package).rglob("*.py"))
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if by_hand.search(line)]
    assert found == [], found


# ---------------------------------------------------------------------------- byte-order marks
@pytest.mark.parametrize("name, data, encoding", [
    ("bom32.md", b"\xff\xfe\x00\x00garbage", "UTF-32"),
    ("bom16.txt", b"\xfe\xff\xd8\x00", "UTF-16"),  # a lone high surrogate
    ("bom8.md", b"\xef\xbb\xbfcaf\xe9", "UTF-8"),
])
def test_a_file_whose_byte_order_mark_lies_is_refused_and_nothing_is_stored(da, tmp_path, name, data, encoding):
    """Before: a .md of FF FE 00 00 "garbage" (a UTF-32-LE byte-order mark, then bytes that are
    not UTF-32) was stored as the text "ÿþgarbage" (read as cp1252) with no warning (new-user
    trial, issue 15). Now a file whose mark declares an encoding it is not valid in is refused."""
    from docanchor.errors import DocumentError

    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(DocumentError) as caught:
        da.ingest_file(path)
    assert caught.value.code == "malformed" and caught.value.http_status == 422
    assert f"{encoding} byte-order mark" in caught.value.message and "UTF-8" in caught.value.message
    _nothing_stored(da)


def test_a_utf16_file_with_its_byte_order_mark_is_still_read(da, tmp_path):
    path = tmp_path / "utf16.txt"
    path.write_bytes("Tea kettles and teapots.".encode("utf-16"))
    assert da.ingest_file(path).record.n_chunks >= 1


# ---------------------------------------------------------------------------- namespaces are names
HIDDEN_IN_NAMESPACES = ("team\u202eevil", "team\u2066x", "team\u200bx", "team\x1b[31mx", "team\x85x", "team\u2028x")
"""A bidi override (U+202E) and isolate (U+2066), a zero-width space (Cf), ESC (Cc), a C1 control
(NEL, Cc) and a line separator (Zl), each inside a name (a trimmed end would hide nothing)."""


def _refused_namespace(error: dict, namespace: str) -> None:
    """The one refusal: invalid_namespace naming its field, the character by its code point, never
    the character itself (an echoed U+202E reverses what the client prints after it)."""
    assert error["code"] == "invalid_namespace" and error["details"] == {"field": "namespace"}, error
    hidden = next(ch for ch in namespace[4:] if not ch.isalnum())
    assert f"U+{ord(hidden):04X}" in error["message"] and hidden not in error["message"], error


def test_a_namespace_with_control_format_or_bidi_characters_is_refused_at_every_door(tmp_path):
    """Before (new-user trial): POST /v1/documents with namespace "team\\u202eevil" stored the document
    there (201), LobeChat's namespace setting and MCP's `namespace` argument took such names too, and
    the answers echoed them back (an anchor's More line, MCP's read-on calls) with the override in
    it. A namespace is an identifier: every door refuses control, format and bidi characters with
    invalid_namespace (docanchor.access.check_namespace, the one rule), and nothing is stored.
    Real doors: a waitress server on a loopback port, the MCP SDK's client, the real CLI."""
    import subprocess
    import sys
    import urllib.error
    import urllib.parse
    import urllib.request

    import anyio
    from mcp import Client

    from plugin.mcp_server import build_server
    from tests.live_server import REPO, serving_fake
    from tests.waiting import BACKSTOP_S

    def send(url: str, body: bytes | None, headers: dict[str, str]) -> tuple[int, bytes]:
        req = urllib.request.Request(url, data=body, headers=headers, method="POST" if body is not None else "GET")
        try:
            with urllib.request.urlopen(req, timeout=BACKSTOP_S) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    mcp_answers: list[tuple[bool, str]] = []
    with serving_fake(Settings(data_dir=tmp_path / "data", sync_wait_s=BACKSTOP_S)) as (base, da):
        for namespace in HIDDEN_IN_NAMESPACES:
            for path, payload in (("/v1/documents", {"text": "A note on teapots.", "title": "t.md"}),
                                  ("/v1/retrieve", {"query": "teapots"})):
                status, raw = send(base + path, json.dumps({**payload, "namespace": namespace}).encode(),
                                   {"Content-Type": "application/json"})
                assert status == 400, (namespace, path, raw)
                _refused_namespace(json.loads(raw)["error"], namespace)
            status, raw = send(f"{base}/v1/documents?{urllib.parse.urlencode({'namespace': namespace})}", None, {})
            assert status == 400, (namespace, raw)
            _refused_namespace(json.loads(raw)["error"], namespace)
            # LobeChat: the namespace setting, as its gateway sends it (JSON, non-ASCII escaped)
            # and the standalone manifest's call (before: its success sentence, whatever the settings held)
            for plugin_path in ("/lobechat/listDocuments", "/ui/upload"):
                status, raw = send(base + plugin_path, b"", {
                    "Content-Type": "text/plain", "X-Lobe-Plugin-Settings": json.dumps({"namespace": namespace})})
                answer = raw.decode()
                assert status == 200 and "plugin's settings" in answer and namespace not in answer, (namespace, answer)
                assert f"U+{ord(next(ch for ch in namespace[4:] if not ch.isalnum())):04X}" in answer, answer

        async def ask_mcp() -> None:
            async with Client(build_server(da, lambda ctx: "default"), mode="legacy") as mcp:
                for namespace in HIDDEN_IN_NAMESPACES:
                    result = await mcp.call_tool("listDocuments", {"namespace": namespace})
                    mcp_answers.append((result.is_error, result.content[0].text))

        anyio.run(ask_mcp)
        _nothing_stored(da)
        assert set(da.ctx.store.namespaces()) <= {"default"}, da.ctx.store.namespaces()
    for namespace, (is_error, text) in zip(HIDDEN_IN_NAMESPACES, mcp_answers):
        assert is_error and text.endswith("(invalid_namespace)") and namespace not in text, (namespace, text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCANCHOR_")}
    out = subprocess.run([sys.executable, "-m", "plugin.cli", "--data-dir", str(tmp_path / "data"),
                          "--namespace", "team\u202eevil", "list", "--json"], cwd=REPO, env={**env, "HF_HUB_OFFLINE": "1"},
                         capture_output=True, text=True, timeout=BACKSTOP_S)
    # a bad --namespace is a usage error: exit status 2, as --budget 0 (tests/test_cli_edges.py)
    assert out.returncode == 2 and out.stdout == "", (out.returncode, out.stdout, out.stderr)
    _refused_namespace(json.loads(out.stderr)["error"], "team\u202eevil")


def test_the_namespace_header_is_read_as_the_utf8_its_sender_wrote(tmp_path):
    """Before: WSGI hands header bytes over as latin-1, so X-DocAnchor-Namespace: 团队 (UTF-8, as
    curl sends it) named the namespace "å\\x9b¢é\\x98\\x9f", not the one a body's
    "namespace": "团队" names; with control characters refused (check_namespace) it would have
    been refused for a U+009B it never held. The header is read as UTF-8 now
    (plugin.bodies.header_text), and its bidi override is named as U+202E. A real server."""
    import urllib.error
    import urllib.parse
    import urllib.request

    from tests.live_server import serving_fake
    from tests.waiting import BACKSTOP_S

    def utf8(text: str) -> str:  # what http.client sends as these bytes
        return text.encode("utf-8").decode("latin-1")

    with serving_fake(Settings(data_dir=tmp_path / "data", sync_wait_s=BACKSTOP_S)) as (base, da):
        da.ingest_text("A note on teapots.", title="t.md", namespace="团队")
        req = urllib.request.Request(f"{base}/v1/documents", headers={"X-DocAnchor-Namespace": utf8("团队")})
        with urllib.request.urlopen(req, timeout=BACKSTOP_S) as resp:
            assert json.load(resp)["count"] == 1
        req = urllib.request.Request(f"{base}/v1/documents?{urllib.parse.urlencode({'namespace': '团队'})}",
                                     headers={"X-DocAnchor-Namespace": utf8("团队")})
        with urllib.request.urlopen(req, timeout=BACKSTOP_S) as resp:  # the two places agree
            assert json.load(resp)["count"] == 1
        req = urllib.request.Request(f"{base}/v1/documents", headers={"X-DocAnchor-Namespace": utf8("team\u202eevil")})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=BACKSTOP_S)
        _refused_namespace(json.loads(refused.value.read())["error"], "team\u202eevil")


def _multipart(fields: dict[str, str], file_name: str, data: bytes) -> tuple[bytes, str]:
    """A multipart/form-data body as browsers and curl send it: ``fields`` then one ``file`` part."""
    boundary = "----docanchor-test-boundary"
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode() for k, v in fields.items()]
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{file_name}"\r\n'
                 "Content-Type: text/plain\r\n\r\n".encode() + data + b"\r\n")
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def test_the_pages_namespace_query_parameter_reaches_every_route_they_call(tmp_path):
    """The upload and library pages send the namespace as ``?namespace=`` percent-encoded (UTF-8):
    browsers refuse a header value beyond Latin-1, such as 财务 (tests/test_upload_page.py and
    tests/test_library_page.py drive the pages). Here the routes they call, on a real server, with
    the query string the pages send: upload (multipart), job, list, document, read, delete."""
    import urllib.parse
    import urllib.request

    from tests.live_server import serving_fake
    from tests.waiting import BACKSTOP_S, job_ended

    ns = urllib.parse.quote("财务")
    assert ns == "%E8%B4%A2%E5%8A%A1"  # what the pages' URLSearchParams writes

    def call(method: str, path: str, body: bytes | None = None, content_type: str | None = None) -> dict:
        req = urllib.request.Request(f"{base}{path}{'&' if '?' in path else '?'}namespace={ns}", data=body,
                                     method=method, headers={"Content-Type": content_type} if content_type else {})
        with urllib.request.urlopen(req, timeout=BACKSTOP_S) as resp:
            return json.load(resp)

    with serving_fake(Settings(data_dir=tmp_path / "data")) as (base, da):
        body, kind = _multipart({"wait_s": "0"}, "notes.txt", "Quarterly figures of the finance team.".encode())
        queued = call("POST", "/v1/documents", body, kind)
        job = job_ended(lambda: call("GET", f"/v1/jobs/{queued['job_id']}"))  # polled as the pages poll it
        assert job["status"] == "done", job
        doc_id = job["result"]["doc_id"]
        assert [d.doc_id for d in da.list_documents("财务")] == [doc_id] and da.list_documents() == []
        listed = call("GET", "/v1/documents?limit=25&sort=title&order=asc")
        assert listed["namespace"] == "财务" and listed["count"] == 1
        assert call("GET", f"/v1/documents/{doc_id}")["doc_id"] == doc_id
        read = call("POST", "/v1/read", json.dumps({"doc_id": doc_id, "budget_tokens": 200}).encode(), "application/json")
        assert "Quarterly figures" in read["text"]
        call("DELETE", f"/v1/documents/{doc_id}")
        assert da.list_documents("财务") == []


@pytest.mark.parametrize("sent", ["", "  "])
def test_a_blank_namespace_in_a_multipart_upload_is_told_blank(tmp_path, sent):
    """Before: `curl -F 'namespace=  ' -F file=@notes.txt` was told "The namespace is empty" (curl sends
    the field empty), where every other door tells "  " it is blank. One sentence for both now
    (docanchor.access.check_namespace); nothing is stored. A real server."""
    import urllib.error
    import urllib.request

    from tests.live_server import serving_fake
    from tests.waiting import BACKSTOP_S

    with serving_fake(Settings(data_dir=tmp_path / "data")) as (base, da):
        body, kind = _multipart({"namespace": sent}, "notes.txt", b"Quarterly figures.")
        req = urllib.request.Request(f"{base}/v1/documents", data=body, method="POST", headers={"Content-Type": kind})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=BACKSTOP_S)
        error = json.loads(refused.value.read())["error"]
        assert refused.value.code == 400 and error["code"] == "invalid_namespace", error
        assert error["message"].startswith("The namespace is blank"), error
        assert error["details"] == {"field": "namespace"} and da.list_documents() == []
