"""Read-more windows: starts (beginning, heading, page, chunk, cursor), budget, cursors to the end."""

from __future__ import annotations

import re

import pytest

from docanchor.context import Context
from docanchor.errors import InvalidRequest
from docanchor.settings import Settings
from retrieval.pack import sentence_spans
from retrieval.read import _rebuild, read_document
from tests.conftest import CORPUS
from tests.fakes import HashEmbedder
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


_WORD = re.compile(r"[^\W_]")  # a letter or digit in any script


@pytest.fixture(scope="module")
def corpus_docs(tmp_path_factory):
    """The Markdown chapter and norwich-city.txt ingested (fake embedder), with their stored text."""
    from plugin.api import DocAnchor

    inst = DocAnchor(Settings(data_dir=tmp_path_factory.mktemp("read_corpus")), embedder=HashEmbedder())
    docs = []
    for path in (CORPUS / "md" / "ch04-01-what-is-ownership.md", CORPUS / "txt" / "norwich-city.txt"):
        doc_id = inst.ingest_file(path).record.doc_id
        docs.append((doc_id, _rebuild(inst.ctx.store.get_chunks(inst.settings.namespace, doc_id))))
    yield inst, docs
    inst.close()


def test_windows_from_punctuation_only_sentences_hold_text_at_every_small_budget(corpus_docs):
    """Regression: a window starting at a lone '>' quote line, a code fence or '"...' was that
    punctuation alone when the next sentence did not fit. From each such place, at budgets
    1..120: text with a letter or digit within budget, or an empty window naming the least
    budget that returns text -- the first budget that did."""
    inst, docs = corpus_docs
    for doc_id, full in docs:
        starts = [0] + [a for a, b in sentence_spans(full) if not _WORD.search(full[a:b])]
        assert len(starts) > 2  # the corpus files do hold such sentences
        for s in starts:
            first_text, named = None, set()
            for budget in range(1, 121):
                r = inst.read(doc_id, start=f"char:{s}", budget_tokens=budget)
                assert r.context_tokens_used <= budget and r.context_tokens_used == inst.ctx.counter.count(r.context)
                if r.text:
                    assert _WORD.search(r.text), (s, budget, r.text)
                    assert r.end_char > r.start_char == s
                    assert r.next_cursor is None or int(r.next_cursor[5:]) >= r.end_char
                    first_text = first_text or budget
                else:
                    assert first_text is None, (s, budget)  # a larger budget never loses the text
                    assert r.next_cursor == f"char:{s}" and "too small" in r.message
                    named.add(int(re.search(r"raise budget_tokens to (\d+) or more", r.message)[1]))
            assert first_text is not None and named == {first_text}, (s, first_text, named)


def test_walk_at_budget_60_progresses_and_never_returns_bare_punctuation(corpus_docs):
    inst, docs = corpus_docs
    doc_id, full = docs[0]
    start, end, steps = None, 0, 0
    while True:
        r = inst.read(doc_id, start=start, budget_tokens=60)
        assert r.context_tokens_used <= 60
        if not r.text:  # a sentence longer than 60 tokens cannot even be cut: read it at the named budget
            least = int(re.search(r"raise budget_tokens to (\d+) or more", r.message)[1])
            r = inst.read(doc_id, start=start, budget_tokens=least)
        assert _WORD.search(r.text) and r.start_char >= end and r.end_char > r.start_char
        end, start, steps = r.end_char, r.next_cursor, steps + 1
        if start is None:
            break
        assert steps < 1000
    assert not _WORD.search(full[end:])  # the walk read every letter of the document


def test_only_punctuation_left_ends_the_document(ctx: Context):
    text = "A first sentence with words.\n\n```"
    add_document(ctx, "doc_tail", "Tail", text, paras_per_chunk=1)
    rec = ctx.store.get_document(NS, "doc_tail")
    texts = set()
    for budget in range(1, 80):
        r = read_document(ctx, NS, rec, budget_tokens=budget)
        if r.text:
            texts.add(r.text)
            # a closing fence alone is not worth another read
            assert (r.next_cursor is None) == (not _WORD.search(text[r.end_char:])), (budget, r.text)
    assert {"A first sentence with words.", text} <= texts
    tail = read_document(ctx, NS, rec, start=f"char:{text.index('```')}", budget_tokens=200)
    assert tail.text == "" and tail.next_cursor is None and "Nothing is left" in tail.message


def test_a_long_unpunctuated_paragraph_fills_the_window_instead_of_stopping_short(tmp_path):
    """Regression: a14's paragraph has no sentence end, so a window of whole sentences stopped
    before it at any budget (168 tokens used of 800); now its words are taken up to the budget,
    and the windows still tile the document without gaps or overlaps."""
    from plugin.api import DocAnchor
    from tests.conftest import CASES

    inst = DocAnchor(Settings(data_dir=tmp_path), embedder=HashEmbedder())
    doc_id = inst.ingest_file(CASES / "a14_md_long_unpunctuated_paragraph.md").record.doc_id
    full = _rebuild(inst.ctx.store.get_chunks(inst.settings.namespace, doc_id))
    first = inst.read(doc_id, budget_tokens=800)
    assert 400 <= first.context_tokens_used <= 800, first.context_tokens_used
    assert first.text[-1].isalnum() and full[first.end_char].isspace()  # cut at a word boundary
    cursor, end, windows = None, 0, 0
    while True:
        w = inst.read(doc_id, start=cursor, budget_tokens=300)
        assert w.context_tokens_used <= 300 and w.text.strip()
        assert full[end:w.start_char].strip() == ""  # no gap
        end, cursor, windows = w.end_char, w.next_cursor, windows + 1
        if cursor is None:
            break
    assert full[end:].strip() == "" and windows > 1
    inst.close()
