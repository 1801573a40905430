"""Read-more windows: starts (beginning, heading, page, chunk, cursor), budget, cursors to the end."""

from __future__ import annotations

import pytest

from docanchor.context import Context
from docanchor.errors import InvalidRequest
from retrieval.read import read_document
from tests.test_retrieval import NS, OWNERSHIP, add_document

PAGED = "\n\n".join(
    f"# Part {p}\n\n" + " ".join(f"Page {p} sentence {i} explains a rule." for i in range(12)) for p in range(1, 7)
)


@pytest.fixture
def docs(ctx: Context):
    add_document(ctx, "doc_own", "What Is Ownership?", OWNERSHIP)
    add_document(ctx, "doc_paged", "Paged manual", PAGED, paras_per_chunk=1, pages=True)
    return {r.doc_id: r for r in ctx.store.list_documents(NS)}


def test_window_from_beginning_respects_budget_and_cuts_at_sentence(ctx: Context, docs):
    r = read_document(ctx, NS, docs["doc_own"], budget_tokens=120)
    assert 0 < r.context_tokens_used <= 120 and r.context_tokens_used == ctx.counter.count(r.context)
    assert r.start_char == 0 and r.text.startswith("## What Is Ownership?")
    assert r.context == r.header + "\n" + r.text
    assert r.text.rstrip()[-1] in ".!?:`)" or r.text.endswith("\n")  # a sentence boundary
    assert r.next_cursor == f"char:{r.end_char + len(OWNERSHIP[r.end_char:]) - len(OWNERSHIP[r.end_char:].lstrip())}"


def test_cursor_walks_the_whole_document_without_gaps(ctx: Context, docs):
    record, start, seen, steps = docs["doc_paged"], None, [], 0
    while True:
        r = read_document(ctx, NS, record, start=start, budget_tokens=90)
        assert r.context_tokens_used <= 90 and r.text
        seen.append((r.start_char, r.end_char))
        start, steps = r.next_cursor, steps + 1
        if start is None:
            break
        assert steps < 100
    assert seen[0][0] == 0 and seen[-1][1] == len(PAGED)
    for (_, e), (s, _) in zip(seen, seen[1:]):
        assert PAGED[e:s].strip() == ""  # the next window starts where the last one ended


def test_page_and_heading_and_chunk_starts(ctx: Context, docs):
    rec = docs["doc_paged"]
    by_page = read_document(ctx, NS, rec, start="page:4", budget_tokens=200)
    assert by_page.page_start == 4
    by_heading = read_document(ctx, NS, rec, start="part 3", budget_tokens=200)
    assert by_heading.text.startswith("# Part 3") and by_heading.heading_path == ["Part 3"]
    by_chunk = read_document(ctx, NS, rec, start="chunk:1", budget_tokens=200)
    assert by_chunk.text.startswith("Page 1 sentence 0")
    assert read_document(ctx, NS, rec, start=1, budget_tokens=200).start_char == by_chunk.start_char


def test_unknown_start_lists_what_is_accepted(ctx: Context, docs):
    rec = docs["doc_paged"]
    for bad in ("No such heading", "page:99", "chunk:999"):
        with pytest.raises(InvalidRequest) as err:
            read_document(ctx, NS, rec, start=bad, budget_tokens=200)
        assert "page:1" in err.value.message and "chunk:0" in err.value.message


def test_tiny_budget_returns_empty_window_and_says_so(ctx: Context, docs):
    r = read_document(ctx, NS, docs["doc_own"], budget_tokens=5)
    assert r.context == "" and r.context_tokens_used == 0 and "too small" in r.message
