"""Read-more windows: starts (beginning, heading, page, chunk, cursor), budget, cursors to the end."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from docanchor.context import Context
from docanchor.errors import InvalidRequest
from docanchor.settings import Settings
from retrieval.pack import sentence_spans
from docanchor.types import stored_text
from retrieval.read import _POSITIONS, read_document, render_window
from tests.conftest import CASES, CORPUS
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
    assert r.context == r.header + "\n" + r.text + r.tail
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
    with pytest.raises(InvalidRequest, match="numbered from 1"):  # was read from the start (trial of 3df9211)
        read_document(ctx, NS, rec, start="page:0", budget_tokens=200)


def test_unknown_start_lists_what_is_accepted(ctx: Context, docs):
    rec = docs["doc_paged"]
    for bad in ("No such heading", "page:99", "chunk:999"):
        with pytest.raises(InvalidRequest) as err:
            read_document(ctx, NS, rec, start=bad, budget_tokens=200)
        assert "page:1" in err.value.message and "chunk:0" in err.value.message


def test_a_refusal_on_a_one_chunk_document_names_its_one_position(ctx: Context):
    """Before (the trial of 3d88e0c, its defect 8c): a refused start on a document of one page and
    one chunk said "'page:1' to 'page:1', 'chunk:0' to 'chunk:0' (or that number)"."""
    add_document(ctx, "doc_one", "One", "A single short paragraph about the quarry ledger.", pages=True)
    rec = ctx.store.get_document(NS, "doc_one")
    with pytest.raises(InvalidRequest) as err:
        read_document(ctx, NS, rec, start="page:2", budget_tokens=200)
    assert err.value.message == (
        "The document has no page 2. Use start = nothing (the beginning), a heading's text, 'page:1', 'chunk:0' "
        "(or the number 0), or a next_cursor returned by an earlier read.")
    add_document(ctx, "doc_paged", "Paged manual", PAGED, paras_per_chunk=1, pages=True)
    with pytest.raises(InvalidRequest) as err:  # a range stays a range
        read_document(ctx, NS, ctx.store.get_document(NS, "doc_paged"), start="page:99", budget_tokens=200)
    assert "'page:1' to 'page:12', 'chunk:0' to 'chunk:11' (or that number)" in err.value.message, err.value.message


@pytest.mark.parametrize("bad, says", [("char:-1", "a whole number of characters from 0"),
                                       ("cursor:1e3", "a whole number of characters from 0"),
                                       ("page:-3", "a page number from 1"), ("chunk:x", "a chunk number from 0")])
def test_a_position_written_wrong_is_said_so_not_taken_for_a_missing_heading(ctx: Context, docs, bad, says):
    """Before (the trial of 5fd7ff0, its defect 7): start='char:-1' or 'page:-3' answered "Nothing in
    the document matches", as if a heading were missing."""
    with pytest.raises(InvalidRequest) as err:
        read_document(ctx, NS, docs["doc_paged"], start=bad, budget_tokens=200)
    assert err.value.message.startswith(f"{bad!r} is no position: after "), err.value.message
    assert says in err.value.message and "chunk:0" in err.value.message


@pytest.mark.parametrize("position", _POSITIONS, ids=lambda p: p.prefix)
def test_every_position_kind_is_read_and_one_written_wrong_is_refused_in_its_words(ctx: Context, docs, position):
    """Each row of the one table of positions (retrieval.read._POSITIONS) is read, in any case, and
    one written wrong is refused with the words its row gives (or, for a prefix a heading may begin
    with, as a missing heading)."""
    rec = docs["doc_paged"]
    start = position.prefix.upper() + "2"  # character 2, chunk 2, page 2: none at the beginning
    r = read_document(ctx, NS, rec, start=start, budget_tokens=200)
    assert r.text and r.start_char > 0, (start, r)
    with pytest.raises(InvalidRequest) as err:
        read_document(ctx, NS, rec, start=position.prefix + "x", budget_tokens=200)
    lead = (f"{position.prefix + 'x'!r} is no position: after {position.prefix!r} comes {position.follows}."
            if position.follows else f"Nothing in the document matches start={position.prefix + 'x'!r}.")
    assert err.value.message.startswith(lead), err.value.message


@pytest.mark.parametrize("bad, says", [("char:²", "'char:²' is no position"), ("chunk:¹", "'chunk:¹' is no position"),
                                       ("page:²", "'page:²' is no position"), ("p.³", "Nothing in the document")])
def test_a_superscript_number_is_refused_not_a_crash(ctx: Context, docs, bad, says):
    """Before (hlo): str.isdigit() holds for '²' and int() refuses it, so start='²' or 'page:²'
    raised ValueError (a 500 over HTTP). Digits are read as int() reads them (str.isdecimal)."""
    with pytest.raises(InvalidRequest) as err:
        read_document(ctx, NS, docs["doc_paged"], start=bad, budget_tokens=200)
    assert err.value.message.startswith(says), err.value.message
    assert read_document(ctx, NS, docs["doc_paged"], start="chunk:\u0663", budget_tokens=200).text  # Arabic-Indic 3
    # '²' alone is no chunk number: a heading's text, "2" once NFKC-normalised as headings are compared
    assert read_document(ctx, NS, docs["doc_paged"], start="²", budget_tokens=200).text.startswith("# Part 2")


CHAPTERS = "\n\n".join(
    f"# 第{n}回 " + "议温明董卓叱丁原 馈金珠李肃说吕布" + f"\n\n第{n}回的正文。" for n in range(1, 13))
"""Twelve long chapter headings, like the novel's (new-user trial: a refused start named eight
of them in 321 tokens at a budget of 200)."""


@pytest.mark.parametrize("bad", ["chunk:99999", "page:2", "No such heading"])
def test_a_refused_start_fits_the_budget_naming_fewer_headings(ctx: Context, bad):
    add_document(ctx, "doc_ch", "三国演义", CHAPTERS, paras_per_chunk=1)
    rec = ctx.store.get_document(NS, "doc_ch")
    with pytest.raises(InvalidRequest) as wide:
        read_document(ctx, NS, rec, start=bad, budget_tokens=4000)
    assert wide.value.message.count("回 议温明") == 8 and "(4 more)" in wide.value.message
    for budget in (200, 120, 60):
        with pytest.raises(InvalidRequest) as err:
            read_document(ctx, NS, rec, start=bad, budget_tokens=budget)
        assert ctx.counter.count(err.value.message) <= budget, (budget, err.value.message)
        assert "chunk:0" in err.value.message and err.value.details["field"] == "start"
    assert "more)" in err.value.message or "such as" not in err.value.message


def test_tiny_budget_returns_empty_window_and_says_so(ctx: Context, docs):
    r = read_document(ctx, NS, docs["doc_own"], budget_tokens=5)
    assert r.context == "" and r.context_tokens_used == 0 and "too small" in r.message
    one = read_document(ctx, NS, docs["doc_own"], budget_tokens=1)
    assert one.message.startswith("The budget of 1 token is too small"), one.message  # new-user trial: "1 tokens"


_WORD = re.compile(r"[^\W_]")  # a letter or digit in any script


@pytest.fixture(scope="module")
def corpus_docs(tmp_path_factory):
    """The Markdown chapter and norwich-city.txt ingested (fake embedder), with their stored text."""
    from plugin.api import DocAnchor

    inst = DocAnchor(Settings(data_dir=tmp_path_factory.mktemp("read_corpus")), embedder=HashEmbedder())
    docs = []
    for path in (CORPUS / "md" / "ch04-01-what-is-ownership.md", CORPUS / "txt" / "norwich-city.txt"):
        doc_id = inst.ingest_file(path).record.doc_id
        docs.append((doc_id, stored_text(inst.ctx.store.get_chunks(inst.settings.namespace, doc_id))))
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
    full = stored_text(inst.ctx.store.get_chunks(inst.settings.namespace, doc_id))
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


PAGED_FILES = {
    "dpr": CORPUS / "pdf" / "multi-column.pdf",  # Dense Passage Retrieval, two-column, 13 pages
    "ownership": CORPUS / "md" / "ch04-01-what-is-ownership.md",
    "a14": CASES / "a14_md_long_unpunctuated_paragraph.md",
    "a13": CASES / "a13_txt_gbk_chinese_no_spaces.txt",
}


@pytest.fixture(scope="module")
def paged_docs(tmp_path_factory):
    """Each of PAGED_FILES ingested (fake embedder): ``(record, chunks, full text)``."""
    from plugin.api import DocAnchor

    inst = DocAnchor(Settings(data_dir=tmp_path_factory.mktemp("read_paged")), embedder=HashEmbedder())
    docs = {}
    for name, path in PAGED_FILES.items():
        record = inst.ingest_file(path).record
        chunks = inst.ctx.store.get_chunks(inst.settings.namespace, record.doc_id)
        docs[name] = (record, chunks, stored_text(chunks))
    yield inst.ctx.counter, docs
    inst.close()


def _stored(chunks, counter):
    """A context whose store holds ``chunks`` (read by id, or all of them) and no lexical index."""
    by_id = {c.chunk_id: c for c in chunks}
    store = SimpleNamespace(get_chunks=lambda ns, doc_id: chunks,
                            get_chunks_by_id=lambda ns, ids: {i: by_id[i] for i in ids if i in by_id})
    lexical = SimpleNamespace(get_chunks=lambda ns, ids: {}, search=lambda *args, **kwargs: [])
    return SimpleNamespace(store=store, lexical=lexical, counter=counter)


def _page_through(counter, doc, budget: int):
    """Follow next_cursor from the beginning at ``budget`` until it is None.

    Every window is checked against the budget and the module's rendering. A window with no
    text must be one that cannot be helped -- the header line and the shortest text holding a
    letter or digit are over budget -- and must name the exact least budget that reads on; the
    walk then reads that one window at the named budget, as a caller would, and goes on at
    ``budget``. Returns the windows and the ``(start, least)`` of each raise.
    """
    record, chunks, full = doc
    ctx = _stored(chunks, counter)
    cursor, windows, raises = None, [], []
    for _ in range(len(full)):  # a window that moves on takes at least one character
        r = read_document(ctx, NS, record, start=cursor, budget_tokens=budget)
        if not r.text:
            s = r.start_char
            assert r.next_cursor == f"char:{s}" and r.context == "" and r.context_tokens_used == 0, r
            least = int(re.search(r"raise budget_tokens to (\d+) or more", r.message)[1])
            shortest = _WORD.search(full, s).end()
            assert counter.count(render_window(record, chunks, full, s, shortest)[2]) > budget, (s, r.message)
            assert not read_document(ctx, NS, record, start=r.next_cursor, budget_tokens=least - 1).text
            raises.append((s, least))
            r = read_document(ctx, NS, record, start=r.next_cursor, budget_tokens=least)
            assert r.text and r.context_tokens_used <= least
        else:
            assert r.context_tokens_used <= budget
        assert r.context == render_window(record, chunks, full, r.start_char, r.end_char)[2]
        assert r.context_tokens_used == counter.count(r.context)
        assert _WORD.search(r.text), r.text  # never punctuation alone
        windows.append(r)
        cursor = r.next_cursor
        if cursor is None:
            return windows, raises
        assert int(cursor[5:]) >= r.end_char > r.start_char
    pytest.fail(f"reading at budget {budget} did not reach the end in {len(full)} windows")


def _assert_tiles(full: str, windows) -> None:
    """The windows read the document in order, nothing skipped or read twice (whitespace aside)."""
    assert windows[0].start_char == len(full) - len(full.lstrip())
    for prev, nxt in zip(windows, windows[1:]):
        assert nxt.start_char == int(prev.next_cursor[5:]) and full[prev.end_char : nxt.start_char].strip() == ""
    assert not _WORD.search(full[windows[-1].end_char :])
    # a window cut inside a word joins the next one without a space
    joined = "".join(w.text + (" " if w.end_char >= len(full) or full[w.end_char].isspace() else "") for w in windows)
    assert " ".join(joined.split()) == " ".join(full[: windows[-1].end_char].split())


@pytest.mark.parametrize("name", list(PAGED_FILES))
@pytest.mark.parametrize("budget", [57, 200])
def test_paging_at_a_fixed_budget_reaches_the_end_and_reads_everything_once(paged_docs, name, budget):
    """Regression: at budget 57 the DPR paper stalled at char 4023 ('arXiv:2004.04906v3 [cs.CL]'
    fits no 20-character word cut): an empty window whose next_cursor was the cursor given."""
    counter, docs = paged_docs
    windows, raises = _page_through(counter, docs[name], budget)
    # Header lines leave room for text at 57, except where the DPR paper's header names its section
    # (typographic headings, "5.2 Ablation Study on Model Training" under "5 Experiments: Passage
    # Retrieval", a heading since its line stands alone): there a window asks for a budget at most
    # a few tokens higher (12 under those two, the longest), and _page_through checks that it reads
    # on with it.
    assert all(least - budget <= 12 for _, least in raises), max(raises, key=lambda r: r[1])
    assert raises == [] or (name == "dpr" and budget == 57)
    _assert_tiles(docs[name][2], windows)


@pytest.mark.parametrize("name", list(PAGED_FILES))
def test_paging_at_budget_40_moves_on_wherever_the_header_leaves_room(paged_docs, name):
    """At 40 a header line can leave no room (the DPR paper's title, page, doc id and character
    range take 40 tokens, 42 with the newline and one letter); only then is a window empty,
    naming the budget that reads on."""
    counter, docs = paged_docs
    record, chunks, full = docs[name]
    header_at_start = counter.count(render_window(record, chunks, full, 0, 1)[0])
    if header_at_start >= 40:  # nothing of this document can be read at 40: it says so, at once
        first = read_document(_stored(chunks, counter), NS, record, budget_tokens=40)
        assert first.text == "" and first.next_cursor == f"char:{first.start_char}" and "too small" in first.message
        return
    windows, raises = _page_through(counter, docs[name], 40)
    _assert_tiles(full, windows)


def test_a_word_is_cut_only_when_it_cannot_fit_whole(paged_docs):
    """Regression: at budget 57 the ownership chapter was cut 9 times inside ``{{#include}}``
    paths ('../listings/…/s' | 'rc/main.rs') though a whitespace cut was possible. Now a window
    ends inside a word only when that word, with the header line, is over budget, and a path
    is then cut after a '/'."""
    counter, docs = paged_docs
    record, chunks, full = docs["ownership"]
    windows, _ = _page_through(counter, docs["ownership"], 57)
    inside = 0
    for w in windows:
        e = w.end_char
        if e >= len(full) or full[e].isspace():
            continue
        inside += 1
        word_start = max(w.start_char, max((m.end() for m in re.finditer(r"\s", full[w.start_char : e])), default=0)
                         + w.start_char)
        word_end = next((m.start() for m in re.finditer(r"\s", full[e:])), len(full) - e) + e
        assert not _WORD.search(full[w.start_char : word_start]), w.text  # no whole word could end it
        whole = render_window(record, chunks, full, w.start_char, word_end)[2]
        assert counter.count(whole) > 57, (w.text, full[word_start:word_end])
        assert full[e - 1] == "/", w.text
    assert inside >= 1  # the chapter does hold paths longer than a window at 57


def test_n_chars_agrees_with_the_header_and_the_record(da):
    """A trial read ch04-01-what-is-ownership.md over POST /v1/read: ``n_chars`` 25183 while its
    header and the document record said 25184 (the text's final newline is in no chunk, and the
    window counted the text rebuilt from chunks). Every read reports the record's length."""
    path = CORPUS / "md" / "ch04-01-what-is-ownership.md"
    record = da.ingest_file(path).record
    for start, budget in ((None, 200), ("chunk:0", 10_000), (f"char:{record.n_chars - 40}", 200), (None, 1)):
        window = da.read(record.doc_id, start=start, budget_tokens=budget)
        assert window.n_chars == record.n_chars, (start, budget, window.n_chars, record.n_chars)
        if window.header:
            assert window.header.endswith(f"of {record.n_chars}")


def test_hidden_text_is_not_counted_in_the_document_size(da, client):
    """Regression: a08 (a PDF with hidden instructions after its visible text) read as "chars
    0–191 of 393" and its anchor said 88 tokens offloaded, yet ``char:192`` was past the end: the
    size counted the hidden text, which is never stored. Size, anchor, header and cursors agree."""
    record = da.ingest_file(CASES / "a08_pdf_hidden_injection.pdf").record
    assert record.flags.get("hidden_text")
    whole = da.read(record.doc_id, budget_tokens=10_000)
    assert whole.next_cursor is None and whole.end_char == record.n_chars
    assert whole.header.endswith(f"of {record.n_chars}")
    visible = stored_text(da.ctx.store.get_chunks(da.settings.namespace, record.doc_id))
    assert record.n_chars == len(visible)
    assert record.n_tokens == da.ctx.counter.count(visible)
    assert f"{record.n_tokens:,} tokens offloaded · {record.n_chars:,} characters" in record.anchor
    last = da.read(record.doc_id, start=f"char:{record.n_chars - 1}", budget_tokens=200)
    assert last.n_chars == record.n_chars
    resp = client.post("/v1/read", json={"doc_id": record.doc_id, "budget_tokens": 10_000})
    assert resp.status_code == 200, resp.get_json()
    body = resp.get_json()
    assert body["n_chars"] == record.n_chars and f"of {record.n_chars}" in body["context"]
    past = client.post("/v1/read", json={"doc_id": record.doc_id, "from": f"char:{record.n_chars + 1}"})
    assert past.status_code == 400



def test_a_window_header_names_the_title_once(tmp_path):
    """Before: a document whose H1 is its title read with the header "Larkspur Freight yard
    handbook — Larkspur Freight yard handbook › Yard safety — ..." (new-user trial, issue 15),
    where a search citation leaves a heading equal to the title out (retrieval.render)."""
    from plugin.api import DocAnchor

    text = "# Larkspur Freight yard handbook\n\n## Yard safety\n\nWear a high-visibility vest in the yard at all times.\n"
    with DocAnchor(Settings(data_dir=tmp_path / "data"), embedder=HashEmbedder()) as da:
        doc_id = da.ingest_bytes(text.encode(), filename="yard.md").record.doc_id
        r = da.read(doc_id, start="Yard safety", budget_tokens=200)
    assert r.header.count("Larkspur Freight yard handbook") == 1, r.header
    assert "Yard safety" in r.header, r.header


NOVEL = CORPUS / "txt" / "sanguo_yanyi_gbk.txt"


def _chapters(first: str, last: str) -> str:
    """The novel from the line of chapter ``first`` to the line of chapter ``last`` (excluded)."""
    text = NOVEL.read_bytes().decode("gb18030")
    start = text.index(first)
    return text[start:text.index(last, start)]


def test_a_window_stops_before_the_heading_that_opens_the_next_part(da):
    """Before (new user, the novel): `read <novel> --from chunk:8730 --budget 400` ended on
    "第九十四回 诸葛亮乘雪破羌兵 司马懿克日擒孟达" and its next cursor started after that line, so a reader
    paging on never saw the chapter open under its heading. A window ends before a heading alone
    (the rule sections follow, :func:`retrieval.pack.opens_part`); the next one starts at it."""
    from retrieval.pack import is_heading

    heading = "第九十四回 诸葛亮乘雪破羌兵 司马懿克日擒孟达"
    doc = da.ingest_text(_chapters("第九十三回", "第九十五回"), title="sanguo_93.txt").record
    full = stored_text(da.ctx.store.get_chunks(da.settings.namespace, doc.doc_id))
    at = full.index(heading)
    met = 0
    for back in range(40, 400, 20):  # windows starting before the chapter's last lines
        start = full.rfind("。", 0, at - back) + 1
        for budget in (150, 300, 400, 600):
            r = da.read(doc.doc_id, start=f"char:{start}", budget_tokens=budget)
            last = r.text.rstrip().rsplit("\n", 1)[-1]
            assert not is_heading(last, (heading,)), (back, budget, r.text[-60:])
            if r.end_char < at < int(r.next_cursor[5:]) + 1 and full[r.end_char:at].strip() == "":
                assert r.next_cursor == f"char:{at}"
                assert da.read(doc.doc_id, start=r.next_cursor, budget_tokens=budget).text.startswith(heading)
                met += 1
    assert met, "no window stopped at the chapter's end: the test no longer meets its case"


def _hard_wrapped(paragraphs: list[str], width: int = 38) -> str:
    """Chinese paragraphs as the novel lays them out: a four-space indent, lines hard-wrapped
    every ``width`` characters wherever that falls (inside clauses), blank lines between."""
    out = []
    for para in paragraphs:
        text = "    " + para
        out.append("\n".join(text[i:i + width] for i in range(0, len(text), width)))
    return "\n\n\n".join(out)


CJK_HEADING = "第九十四回　诸葛亮乘雪破羌兵　司马懿克日擒孟达"
CJK_CHAPTER = CJK_HEADING + "\n\n\n\n\n" + _hard_wrapped([
    "却说郭淮谓曹真曰：“西羌之人，自太祖时连年入贡，文皇帝亦有恩惠加之；我等今可据住险阻，遣人从小路直入羌中求救，"
    "许以和亲，羌人必起兵袭蜀兵之后。吾却以大兵击之，首尾夹攻，岂不大胜？”真从之，即遣人星夜驰书赴羌。",
    "却说西羌国王彻里吉，自曹操时年年入贡；手下有一文一武：文乃雅丹丞相，武乃越吉元帅。时魏使赍金珠并书到国，"
    "先来见雅丹丞相，送了礼物，具言求救之意。雅丹引见国王，呈上书礼。彻里吉览了书，与众商议。",
])


def test_a_cjk_window_never_ends_at_a_hard_wrap_inside_a_sentence(da):
    """Before (trial D11, the novel): `read --from 第九十四回 --budget 200` ended "...我等今可", where
    the line is hard-wrapped inside a clause (a word end to the fill of rule 1, since a line break
    is whitespace), with nothing to say it was cut; at 150 and 170 it returned the heading alone,
    which the header line already names. Now a window ends on a sentence, or inside one after a
    clause (", ; 、"), with an ellipsis after its text (as after a sentence inside an open
    quotation: the rule search sections follow), and holds more than the heading once its first
    clause fits (140 tokens here; below, the heading alone, or a cut inside it, is all there is)."""
    from docanchor.text import ends_passage, ends_sentence

    doc = da.ingest_text(CJK_CHAPTER, title="sanguo_94.txt").record
    full = stored_text(da.ctx.store.get_chunks(da.settings.namespace, doc.doc_id))
    heading_end = full.index("\n")
    cut = 0
    for budget in range(140, 300, 10):
        r = da.read(doc.doc_id, start=CJK_HEADING[:5], budget_tokens=budget)
        assert r.context_tokens_used <= budget and r.context_tokens_used == da.ctx.counter.count(r.context)
        assert r.end_char > heading_end, (budget, r.text)  # more than the heading alone
        if ends_passage(full, r.end_char, pages=False):
            assert r.context == f"{r.header}\n{r.text}", budget
        else:  # cut inside a sentence after a clause, or inside the quotation after a sentence: marked
            assert full[r.end_char - 1] in ",;、" or ends_sentence(full, r.end_char), (budget, r.text[-12:])
            assert r.context == f"{r.header}\n{r.text}…", budget
            cut += 1
    assert cut, "no window was cut inside a sentence: the test no longer meets its case"


def test_a_tool_answer_shows_a_cut_windows_ellipsis(da):
    """The model-facing answer of readDocument (LobeChat, MCP) ends a window cut inside a sentence
    with its "…" too, not only the context: before, it had no mark (and the window none either)."""
    from plugin.answers import read_answer

    doc = da.ingest_text(CJK_CHAPTER, title="sanguo_94.txt").record
    window = da.read(doc.doc_id, start=CJK_HEADING[:5], budget_tokens=170)
    assert window.tail == "…" and window.context.endswith("…")
    assert read_answer(window).split("\n\nMore:")[0][-2:] in (",…", ";…", "、…"), read_answer(window)


def test_a_window_reads_the_chunks_around_it_not_the_whole_document(da):
    """Before (trial D4): every window read all of its document's chunks from Chroma
    (store.get_chunks), so a window of the novel's 11,241 chunks cost 1.2-2.4 s over HTTP whatever
    its start. Now a window reads the chunks around it by id (the lexical index's on-disk chunks,
    then Chroma): from the beginning, a chunk number, a cursor and a heading alike, and the
    windows are those the whole document's text gives (the chunks around a window give the same
    text)."""
    doc = da.ingest_text(_chapters("第九十回", "第九十八回"), title="sanguo_90.txt").record
    ns = da.settings.namespace
    chunks = da.ctx.store.get_chunks(ns, doc.doc_id)
    full = stored_text(chunks)
    assert len(chunks) > 200, len(chunks)
    whole, by_id = [], []
    store, lexical = da.ctx.store, da.ctx.lexical
    get_chunks, get_by_id, get_lexical = store.get_chunks, store.get_chunks_by_id, lexical.get_chunks
    store.get_chunks = lambda *a: whole.append(a) or get_chunks(*a)
    store.get_chunks_by_id = lambda n, ids: by_id.extend(ids) or get_by_id(n, ids)
    lexical.get_chunks = lambda n, ids: by_id.extend(ids := list(ids)) or get_lexical(n, ids)
    middle = full.index("。", len(full) // 2) + 1
    for start in (None, "chunk:150", f"char:{middle}", "第九十四回"):
        for budget in (150, 600):
            by_id.clear()
            r = da.read(doc.doc_id, start=start, budget_tokens=budget)
            assert r.text and r.text == full[r.start_char:r.end_char], (start, budget)
            assert r.context_tokens_used <= budget
            assert not whole, (start, budget)
            assert 0 < len(set(by_id)) < len(chunks) // 3, (start, budget, len(set(by_id)))


def test_a_store_missing_a_chunk_reads_every_chunk_and_gives_the_same_window(da):
    """A store that has lost a chunk the record counts (read by id, it is not there) reads the
    whole document once, as every window did before, and answers the same windows."""
    doc = da.ingest_text(_chapters("第九十三回", "第九十五回"), title="sanguo_93.txt").record
    chunks = da.ctx.store.get_chunks(da.settings.namespace, doc.doc_id)
    whole = _stored(chunks, da.ctx.counter)
    by_id = {c.chunk_id: c for c in chunks if c.ordinal != 5}
    lost = SimpleNamespace(store=SimpleNamespace(get_chunks=lambda ns, d: chunks,
                                                 get_chunks_by_id=lambda ns, ids: {i: by_id[i] for i in ids if i in by_id}),
                           lexical=whole.lexical, counter=whole.counter)
    for start in (None, "chunk:3", "char:400", "第九十四回"):
        assert read_document(lost, NS, doc, start=start, budget_tokens=300) == read_document(
            whole, NS, doc, start=start, budget_tokens=300), start


def test_a_heading_copied_from_the_file_or_a_window_finds_its_chapter(da):
    """Before (trial of 3df9211, the novel): `from` was compared with the stored headings as sent,
    so a chapter line copied from the uploaded file ("第五回" + U+3000 ideographic spaces, which
    NFKC makes plain spaces at ingest) or from a window's own text (chapter 81's line holds two
    spaces, its stored heading one) was "Nothing in the document matches". Both sides are now
    normalised as ingested text is."""
    raw = NOVEL.read_bytes().decode("gb18030")
    doc = da.ingest_text(_chapters("第八十回", "第八十二回"), title="sanguo_80.txt").record
    full = stored_text(da.ctx.store.get_chunks(da.settings.namespace, doc.doc_id))
    line = next(ln for ln in raw.splitlines() if ln.startswith("第八十一回"))
    assert "\u3000" in line  # the file's own line, as a user copies it
    shown = next(ln for ln in full.splitlines() if ln.startswith("第八十一回"))
    assert "  " in shown  # the window text's line, two spaces in a row
    for start in (line, shown, line.replace("\u3000", " ")):
        r = da.read(doc.doc_id, start=start, budget_tokens=150)
        assert r.start_char == full.index("第八十一回"), start
