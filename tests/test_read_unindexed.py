"""A ``char:N`` read start inside text that was not indexed (a garbled page).

a03 (../shared/cases) is a two-page PDF whose first page is flagged garbled and never chunked:
its characters keep their place in the document's offsets (:func:`docanchor.types.stored_text`
reads them as blank lines), so ``char:0`` to ``char:175`` lie before the first chunk. Before
the fix, ``char:0`` raised ``IndexError`` (a 500 at every door) and ``char:100`` answered an
empty window whose ``next_cursor`` was the cursor sent, so a client following it never ended.
"""

from __future__ import annotations

import json
import re

import pytest

from docanchor.settings import Settings
from docanchor.types import Chunk, DocumentRecord, stored_text
from tests.conftest import CASES
from tests.fakes import HashEmbedder
from tests.waiting import BACKSTOP_S

A03 = CASES / "a03_pdf_cjk_identity_h_no_tounicode.pdf"
BUDGETS = (40, 60, 400)
"""Budget tokens of the walks: one just above a window's header, a small and a whole-document one."""
_WORD = re.compile(r"[^\W_]")
"""A letter or digit: a walk may end on an empty window only when none is left (retrieval.read)."""
MAX_WINDOWS = 400
"""More windows than any walk of a03 (299 characters) can take while each moves forward."""


@pytest.fixture(scope="module")
def a03(tmp_path_factory):
    """``(da, record, full)``: a DocAnchor holding a03, its record and its stored text."""
    from plugin.api import DocAnchor

    tmp = tmp_path_factory.mktemp("unindexed")
    da = DocAnchor(Settings(data_dir=tmp / "data", sync_wait_s=BACKSTOP_S), embedder=HashEmbedder())
    record = da.ingest_file(A03).record
    chunks = da.ctx.store.get_chunks(da.settings.namespace, record.doc_id)
    yield da, record, stored_text(chunks)
    da.close()


def _first_indexed(full: str) -> int:
    return len(full) - len(full.lstrip())


def test_the_case_starts_with_an_unindexed_page(a03):
    """The premise: page 1 is flagged garbled, and its place is blank in the stored text."""
    _, record, full = a03
    assert record.flags.get("garbled_pages")
    assert record.n_chars == len(full)
    assert _first_indexed(full) > 100, full[:200]


def test_a_start_inside_unindexed_text_reads_from_the_next_indexed_text(a03):
    """Before: char:0 raised IndexError; char:100 and char:175 gave empty text and
    next_cursor equal to the cursor sent."""
    da, record, full = a03
    first = _first_indexed(full)
    whole = da.read(record.doc_id, budget_tokens=400)
    for n in (0, 1, 100, first - 1, first):
        r = da.read(record.doc_id, start=f"char:{n}", budget_tokens=400)
        assert (r.start_char, r.text, r.next_cursor) == (whole.start_char, whole.text, whole.next_cursor), n
        assert r.start_char == first and r.text == full[r.start_char:r.end_char] and r.text


def _offset(cursor: str) -> int:
    return int(re.fullmatch(r"char:(\d+)", cursor).group(1))


@pytest.mark.parametrize("budget", BUDGETS)
def test_following_next_cursor_from_every_start_always_ends(a03, budget):
    """Property: from every ``char:N`` of the document (0 to n_chars), each window is the stored
    text between its offsets and holds text unless no letter or digit is left, and its
    ``next_cursor`` lies past its start, so paging on ends (``next_cursor`` None) within a bounded
    number of windows."""
    da, record, full = a03
    for n in range(record.n_chars + 1):
        cursor, windows = f"char:{n}", 0
        while cursor is not None:
            r = da.read(record.doc_id, start=cursor, budget_tokens=budget)
            assert r.text == full[r.start_char:r.end_char], (n, cursor, budget)
            assert r.text or (r.next_cursor is None and not _WORD.search(full, n)), (n, cursor, budget, r.message)
            assert r.next_cursor is None or _offset(r.next_cursor) > max(r.start_char, _offset(cursor)), (n, cursor)
            cursor, windows = r.next_cursor, windows + 1
            assert windows < MAX_WINDOWS, (n, budget)


def test_http_and_lobechat_read_from_unindexed_text_answer_200(a03):
    """Before: POST /v1/read and /lobechat/readDocument from char:0 answered 500 internal."""
    from plugin.app import create_app

    da, record, full = a03
    client = create_app(da.settings, da).test_client()
    first = _first_indexed(full)
    for n in (0, 100, first - 1):
        resp = client.post("/v1/read", json={"doc_id": record.doc_id, "from": f"char:{n}", "budget_tokens": 400})
        assert resp.status_code == 200, resp.get_json()
        body = resp.get_json()
        assert body["start_char"] == first and body["text"] and body["next_cursor"] != f"char:{n}"
        lobe = client.post("/lobechat/readDocument", content_type="text/plain;charset=UTF-8",
                           data=json.dumps({"doc_id": record.doc_id, "from": f"char:{n}", "budget_tokens": 400}))
        assert lobe.status_code == 200, lobe.get_data(as_text=True)
        assert full[first:first + 10] in lobe.get_data(as_text=True)


def test_mcp_read_from_unindexed_text_answers_the_text(a03):
    """Before: MCP readDocument from char:0 answered an internal error."""
    import anyio
    from mcp import Client

    from plugin.mcp_server import build_server

    da, record, full = a03
    first = _first_indexed(full)

    async def main():
        async with Client(build_server(da, lambda ctx: da.settings.namespace), mode="legacy") as client:
            for n in (0, 100, first - 1):
                result = await client.call_tool("readDocument", {"doc_id": record.doc_id, "from": f"char:{n}",
                                                                 "budget_tokens": 400})
                answer = result.content[0].text
                assert not result.is_error and full[first:first + 10] in answer, answer

    anyio.run(main)


def _gapped(ctx) -> tuple[DocumentRecord, str]:
    """A document stored as a03-like chunks: unindexed text before its first chunk and between its
    first and second (``joins_next`` False), as ingest stores a garbled page; its stored text."""
    from tests.test_retrieval import NS

    parts = [(60, "The first indexed page says the yard opens at six. It closes at ten."),
             (300, "The third page lists the forklifts. Two are new this year."),
             (360, "The last lines name the report KESTREL-1303 and its author.")]
    chunks = []
    for i, (start, text) in enumerate(parts):
        end = start + len(text)
        gap = None if i == len(parts) - 1 else " " * (parts[i + 1][0] - end)
        chunks.append(Chunk("doc_gapped", i, text, start, end, i + 1, i + 1, (), ctx.counter.count(text),
                            gap_after=gap, joins_next=i != 0))
    ctx.store.add_chunks(NS, chunks, ctx.embedder.embed([c.text for c in chunks]))
    ctx.lexical.add(NS, chunks)
    full = stored_text(chunks)
    record = DocumentRecord("doc_gapped", "Gapped", "pdf", len(chunks), ctx.counter.count(full), len(full), 3)
    ctx.store.put_document(NS, record)
    return record, full


@pytest.mark.parametrize("budget", BUDGETS)
def test_every_start_of_a_document_with_unindexed_gaps_reads_on_and_ends(ctx, budget):
    """The same property on a stored document with unindexed text before its first chunk and
    between two chunks: a start in either gap reads from the next chunk; every walk ends."""
    from retrieval.read import read_document
    from tests.test_retrieval import NS

    record, full = _gapped(ctx)
    assert full[:60].strip() == "" and full[128:300].strip() == ""
    for n in range(record.n_chars + 1):
        cursor, windows = f"char:{n}", 0
        while cursor is not None:
            r = read_document(ctx, NS, record, start=cursor, budget_tokens=budget)
            assert r.text == full[r.start_char:r.end_char], (n, cursor, budget)
            assert r.text or (r.next_cursor is None and not _WORD.search(full, n)), (n, cursor, budget, r.message)
            assert r.next_cursor is None or _offset(r.next_cursor) > max(r.start_char, _offset(cursor)), (n, cursor)
            if windows == 0 and _WORD.search(full, n):
                assert r.start_char == n + len(full[n:]) - len(full[n:].lstrip()), (n, r.start_char)
            cursor, windows = r.next_cursor, windows + 1
            assert windows < MAX_WINDOWS, (n, budget)


def test_reading_at_the_end_says_it_is_the_end_not_to_raise_the_budget(a03):
    """Before (second trial of this change): readDocument from the document's last offset with a
    budget of 1,500 answered "Nothing could be read ... Call readDocument again with budget_tokens
    of at least 300", which no budget helps; the CLI said "(end of document)"."""
    from plugin.app import create_app

    da, record, full = a03
    client = create_app(da.settings, da).test_client()
    lobe = client.post("/lobechat/readDocument", content_type="text/plain;charset=UTF-8",
                       data=json.dumps({"doc_id": record.doc_id, "from": f"char:{len(full)}", "budget_tokens": 1500}))
    assert lobe.status_code == 200, lobe.get_data(as_text=True)
    answer = lobe.get_data(as_text=True)
    assert "this is the end of the document" in answer and "budget_tokens" not in answer


def test_a_read_from_a_page_without_indexed_text_says_where_it_starts(a03):
    """Before (second trial of this change): ``page:1`` of a03, whose page 1 is garbled and not
    indexed, read page 2 without saying so at any door. Now every door tells that page 1 has no
    indexed text and the read starts at page 2 (one sentence, ReadResult.note); ``page:2`` says
    nothing more."""
    import anyio
    from click.testing import CliRunner
    from mcp import Client

    from plugin.app import create_app
    from plugin.cli import main
    from plugin.mcp_server import build_server

    da, record, full = a03
    r = da.read(record.doc_id, start="page:1", budget_tokens=400)
    assert (r.page_start, r.start_char) == (2, _first_indexed(full))
    note = r.note
    assert "Page 1 has no indexed text" in note and "page 2" in note, note
    assert da.read(record.doc_id, start="page:2", budget_tokens=400).note == ""
    assert da.read(record.doc_id, budget_tokens=400).note == ""

    client = create_app(da.settings, da).test_client()
    body = client.post("/v1/read", json={"doc_id": record.doc_id, "from": "page:1", "budget_tokens": 400}).get_json()
    assert body["note"] == note and body["page_start"] == 2, body
    lobe = client.post("/lobechat/readDocument", content_type="text/plain;charset=UTF-8",
                       data=json.dumps({"doc_id": record.doc_id, "from": "page:1", "budget_tokens": 400}))
    assert note in lobe.get_data(as_text=True), lobe.get_data(as_text=True)

    cli = CliRunner().invoke(main, ["read", record.doc_id, "--from", "page:1", "--budget", "400"], obj=da,
                             catch_exceptions=False)
    assert cli.exit_code == 0 and note in cli.output, cli.output

    async def mcp():
        async with Client(build_server(da, lambda ctx: da.settings.namespace), mode="legacy") as c:
            result = await c.call_tool("readDocument", {"doc_id": record.doc_id, "from": "page:1", "budget_tokens": 400})
            assert not result.is_error and note in result.content[0].text, result.content[0].text

    anyio.run(mcp)
