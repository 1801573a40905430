"""The anchor: at most max_tokens budget tokens, the same bytes every time, doc_id and the how-to
line always there, the CSV schema instead of sentences, Chinese documents, quality notes."""

from __future__ import annotations

import re

import pytest

from docanchor.settings import Settings
from docanchor.tokens import get_counter
from docanchor.types import ParsedDocument
from ingest.builder import DocumentBuilder
from ingest.chunking import chunk_document
from summarize.anchor import build_anchor, how_to_line
from summarize.central import split_sentences
from summarize.notes import page_ranges
from tests.conftest import CASES, CORPUS
from tests.fakes import HashEmbedder

COUNTER = get_counter("cl100k_base")
DOC_ID = "doc_0123456789abcdef"


def anchor_of(parsed: ParsedDocument, embedder=None, max_tokens: int = 300) -> tuple[str, list[str]]:
    embedder = embedder or HashEmbedder()
    chunks = chunk_document(parsed, DOC_ID, counter=COUNTER, embedder=embedder, settings=Settings())
    vectors = embedder.embed([c.text for c in chunks])
    return build_anchor(parsed, chunks, vectors, doc_id=DOC_ID, counter=COUNTER, max_tokens=max_tokens)


def handbook_like(n_chapters: int = 12, sections: int = 6) -> ParsedDocument:
    b = DocumentBuilder("docx", title="Handbook for Chapter 13 Standing Trustees")
    for ch in range(1, n_chapters + 1):
        b.heading(f"Chapter {ch} - Duties and procedures of the standing trustee, part {ch}", level=1)
        for sec in range(1, sections + 1):
            b.heading(f"{chr(64 + sec)}. Section {sec} of chapter {ch}", level=2)
            b.add(f"The standing trustee must review each case file in chapter {ch} before the meeting. "
                  f"Section {sec} explains how receipts are deposited and reconciled every month. "
                  "Reports go to the United States Trustee within thirty days of the close of the quarter.")
    return b.build()


def _parse(module: str, func: str, path, fallback):
    """A parser written in parallel, when present; else the test's hand-built document."""
    try:
        mod = __import__(module, fromlist=[func])
    except ImportError:
        return fallback()
    return getattr(mod, func)(path.read_bytes(), path.name)


def test_within_budget_identical_and_has_doc_id_and_how_to():
    parsed = handbook_like()
    first, outline = anchor_of(parsed)
    second, outline2 = anchor_of(parsed)
    assert first.encode() == second.encode() and outline == outline2
    assert COUNTER.count(first) <= 300
    assert f"doc_id: {DOC_ID}" in first
    assert first.endswith(how_to_line(DOC_ID))
    assert first.startswith("Document: Handbook for Chapter 13 Standing Trustees\n")
    assert "Type: DOCX · " in first and "tokens offloaded" in first
    assert f"{COUNTER.count(parsed.text):,} tokens offloaded" in first
    assert "Central passages:\n- " in first


def test_outline_lists_top_levels_first_and_is_bounded():
    parsed = handbook_like(n_chapters=12, sections=6)
    anchor, outline = anchor_of(parsed)
    assert len(outline) == 50  # 84 headings, the first 50 in reading order
    assert outline[:3] == ["Chapter 1 - Duties and procedures of the standing trustee, part 1",
                           "A. Section 1 of chapter 1", "B. Section 2 of chapter 1"]
    shown = [line for line in anchor.splitlines() if line.startswith("- Chapter")]
    assert len(shown) >= 4  # top-level headings come before any second-level one
    assert shown == [f"- Chapter {i} - Duties and procedures of the standing trustee, part {i}"
                     for i in range(1, len(shown) + 1)]


def test_a_guide_with_one_title_and_nine_sections_shows_its_sections_before_central_passages():
    """A title over nine sections (docs/guide.md's shape): the first sections are listed before
    the central sentences take the room. Before, only whole levels were tried first, and nine
    second-level headings are more than eight, so the first anchor a new user saw listed the
    title alone."""
    b = DocumentBuilder("md", title="The guide")
    b.heading("The guide", level=1)
    for n in range(1, 10):
        b.heading(f"Topic {n} of the guide", level=2)
        b.add(" ".join(f"Sentence {k} of topic {n} explains one more idea about budgets, anchors and passages, "
                       "and it goes on about chunks, citations, collections, namespaces, rerankers, embeddings "
                       "and the lexical index in words long enough that four such central passages take most "
                       "of the anchor's three hundred tokens by themselves." for k in range(6)))
    anchor, _ = anchor_of(b.build())
    shown = [line.strip() for line in anchor.splitlines() if line.strip().startswith("- Topic")]
    assert shown[:7] == [f"- Topic {n} of the guide" for n in range(1, 8)]
    assert anchor.index("- Topic 7 of the guide") < anchor.index("Central passages:")


@pytest.mark.parametrize("max_tokens", [50, 80, 120, 300, 1000])
def test_fits_any_budget_and_keeps_the_essentials(max_tokens):
    b = DocumentBuilder("md", title="A very long title " * 30)
    for i in range(40):
        b.heading("A long heading that goes on and on about freight operations " * 3, level=1 + i % 3)
        b.add("This paragraph explains the procedure for checking container seals at the gate. " * 8)
    anchor, _ = anchor_of(b.build(), max_tokens=max_tokens)
    assert COUNTER.count(anchor) <= max_tokens
    assert f"doc_id: {DOC_ID}" in anchor
    assert f'searchDocuments(query, doc_id="{DOC_ID}")' in anchor
    if max_tokens >= 120:
        assert anchor.endswith(how_to_line(DOC_ID))
        assert "…" in anchor.splitlines()[0]  # the title was shortened


def test_csv_uses_the_schema_not_sentences():
    def fallback() -> ParsedDocument:
        b = DocumentBuilder("csv", title="a15")
        b.add("invoice_id: INV-1004 | amount_eur: -18,250.75", kind="row")
        doc = b.build()
        doc.summary = ["6 rows × 6 columns (comma-separated)", "amount_eur:float[-18.3K–3980.5]"]
        return doc

    parsed = _parse("ingest.parsers.csv", "parse_csv", CASES / "a15_csv_quoted_fields.csv", fallback)
    anchor, outline = anchor_of(parsed)
    assert "Schema:" in anchor and "Central passages" not in anchor
    for line in parsed.summary:
        assert f"- {line}" in anchor
    assert anchor.index("Schema:") < anchor.index("doc_id:")
    assert COUNTER.count(anchor) <= 300 and outline == []


def test_chinese_document_with_the_real_model(real_embedder):
    def fallback() -> ParsedDocument:
        raw = (CASES / "a13_txt_gbk_chinese_no_spaces.txt").read_bytes().decode("gb18030")
        b = DocumentBuilder("txt", title="a13")
        for para in raw.split("\n\n"):
            b.add(para)
        return b.build()

    parsed = _parse("ingest.parsers.text", "parse_txt", CASES / "a13_txt_gbk_chinese_no_spaces.txt", fallback)
    first, _ = anchor_of(parsed, embedder=real_embedder)
    second, _ = anchor_of(parsed, embedder=real_embedder)  # a second, independent embedding pass
    assert first == second
    assert COUNTER.count(first) <= 300
    passages = first.split("Central passages:\n", 1)[1].split("\ndoc_id:")[0].splitlines()
    assert 1 <= len(passages) <= 4
    for p in passages:
        assert p.startswith("- ") and p.endswith("。") and p[2:] in parsed.text


def test_chinese_sentences_split_on_cjk_punctuation():
    # NFKC makes ！？ ASCII; they still end sentences next to Chinese text.
    assert split_sentences("第一句。第二句!第三句?最后") == ["第一句。", "第二句!", "第三句?", "最后"]
    assert split_sentences("One sentence here. Another one!\nA wrapped\nline.") == [
        "One sentence here.", "Another one!", "A wrapped line."]


def test_quality_notes_from_flags():
    parsed = handbook_like(2, 2)
    parsed.flags = {"garbled_pages": [3, 4, 5, 9], "hidden_text": {"pages": [1], "count": 2},
                    "encoding": "utf-8"}
    anchor, _ = anchor_of(parsed)
    assert "Notes: pages 3–5, 9 garbled, not indexed; 2 hidden text passages skipped on page 1" in anchor
    assert "utf-8" not in anchor
    assert page_ranges(list(range(1, 40, 2))) .endswith("and 12 more")


def test_ocr_and_hidden_part_notes():
    from summarize.notes import quality_notes

    notes = quality_notes({"ocr": {"pages": [2, 3], "confidence": {"2": 0.9, "3": 0.9}},
                           "ocr_skipped_pages": [7, 8], "image_only_pages": [5, 7, 8],
                           "hidden_slides": {"pages": [4], "count": 1}, "hidden_rows": 3, "hidden_sheets": 0})
    assert notes == ["page 5 image-only (no text layer), not indexed", "pages 2–3 read by OCR (letters may be wrong)",
                     "scanned pages 7–8 not read (OCR page cap), not indexed", "1 hidden slide skipped",
                     "3 hidden rows skipped"]


def test_real_documents_stay_within_budget():
    cases = [("ingest.parsers.text", "parse_md", CORPUS / "md" / "ch04-01-what-is-ownership.md"),
             ("ingest.parsers.docx", "parse_docx", CORPUS / "docx" / "handbook-872p.docx")]
    for module, func, path in cases:
        parsed = _parse(module, func, path, lambda: pytest.skip(f"{module} is not written yet"))
        anchor, outline = anchor_of(parsed)
        assert COUNTER.count(anchor) <= 300, path.name
        assert anchor == anchor_of(parsed)[0]
        assert outline and "Outline:" in anchor


def test_a_wide_csv_anchor_says_how_many_columns_it_leaves_out_and_keeps_the_name_column():
    """Before: the schema lines that did not fit were dropped silently (country_name among them)."""
    from ingest.parsers.csv import parse_csv

    header = [f"measurement_{i:02d}_value" for i in range(60)]
    header[45] = "country_name"
    rows = [",".join(header)] + [",".join(f"Land{r}" if h == "country_name" else str(r * 60 + i)
                                          for i, h in enumerate(header)) for r in range(5)]
    parsed = parse_csv(("\n".join(rows) + "\n").encode(), "wide.csv")
    anchor, _ = anchor_of(parsed)
    assert COUNTER.count(anchor) <= 300
    shown = [line for line in anchor.splitlines() if line.startswith("- measurement_") or "country_name" in line]
    assert "- country_name:" in anchor
    left = re.search(r"\(\+(\d+) more columns not shown", anchor)
    assert left and int(left.group(1)) + len(shown) == 60


@pytest.mark.parametrize("sentence", [
    "Smith, J. and Doe, K. (2019). Deep learning for text. In: Proceedings of ACL, pp. 1-10.",
    "The full list of the many items is at https://example.com/page for anyone who asks.",
    "Copyright 2020 Example Corp. All rights reserved, and nothing here may be copied.",
    "`docanchor_http_requests_total{method,route,status}`, `docanchor_http_request_duration_seconds{method,route}`"
    " (histogram), `docanchor_ingest_jobs{state}`, `docanchor_ingest_queue_depth` and more.",
])
def test_central_passages_skip_references_links_and_boilerplate(sentence):
    from summarize.central import readable

    assert not readable(sentence)
    assert readable("The ownership rules are checked at compile time, so they cost nothing at run time.")
    assert readable("Set `DOCANCHOR_CHUNK_TOKENS` to change the chunk size, then run the reindex command again.")


def test_a_pdf_without_bookmarks_shows_its_typographic_outline_and_read_accepts_it(da):
    """multi-column.pdf has no bookmarks: the anchor lists its numbered sections, the record's
    outline holds them, and ``read`` starts at one by its text."""
    res = da.ingest_file(CORPUS / "pdf" / "multi-column.pdf")
    assert "2 Background" in res.record.outline and "4 Experimental Setup" in res.record.outline
    assert "Background" in res.record.anchor
    window = da.read(res.record.doc_id, start="4 Experimental Setup", budget_tokens=200)
    assert window.text.startswith("4 Experimental Setup")
    assert window.heading_path[-1] == "4 Experimental Setup"
    window = da.read(res.record.doc_id, start="5 Experiments", budget_tokens=200)  # missed before
    assert window.text.startswith("5 Experiments: Passage Retrieval\n")


def test_a_style_name_heading_is_no_title(da):
    """example.docx's first heading reads "Heading 1" (a style name left as text): the title is
    the file name instead."""
    assert da.ingest_file(CORPUS / "docx" / "example.docx").record.title == "example"
    md = da.ingest_text("# Figure 2: crane layout\n\nThe cranes stand on the east quay.\n", title=None)
    assert not md.record.title.startswith("Figure 2")


_WRAP_SPACE = re.compile(r"[\u4e00-\u9fff,，、] [\u4e00-\u9fff]")


def _passages(anchor: str) -> list[str]:
    return anchor.split("Central passages:\n", 1)[1].split("\ndoc_id:")[0].splitlines()


def test_chinese_lines_wrapped_in_a_generated_gbk_text_join_without_a_space():
    from ingest.parsers.text import parse_txt
    raw = "卓待百官到了，然后徐\n    \u3000\u3000图归耕故园。程昱谏曰：“明\n公所以能威震四方。”\n"
    parsed = parse_txt((raw * 6).encode("gbk"), "wrapped.txt")  # long enough to be read as GBK
    assert "徐\n" in parsed.text  # the stored text keeps its lines; joining them adds no space
    sentences = split_sentences(parsed.text)
    assert sentences[0] == "卓待百官到了,然后徐图归耕故园。", sentences
    assert sentences[1].startswith("程昱谏曰:“明公所以"), sentences
    assert not any(_WRAP_SPACE.search(p) for p in sentences), sentences


def test_the_novels_stored_chunks_read_as_passages_have_no_space_where_a_line_wrapped():
    """The anchor's passages are sentences of the stored chunks joined onto one line
    (split_sentences); before, the novel's read "然后徐 徐到园门", "赤兔 马"."""
    from ingest.parsers.text import parse_txt
    path = CORPUS / "txt" / "sanguo_yanyi_gbk.txt"
    parsed = parse_txt(path.read_bytes(), path.name)
    chunks = chunk_document(parsed, DOC_ID, counter=COUNTER, embedder=HashEmbedder(), settings=Settings())
    sentences = [x for c in chunks for x in split_sentences(c.text)]
    assert any("然后徐徐到园门下马" in x for x in sentences)
    chapter = re.compile(r"第[一二三四五六七八九十百零]+回 ")  # a chapter line keeps its own spaces
    assert not [x for x in sentences if _WRAP_SPACE.search(x) and not chapter.match(x)][:5]
@pytest.mark.parametrize("path, title", [
    (CASES / "a13_txt_gbk_chinese_no_spaces.txt", "云雀货运合作社华东仓库第三季度盘点通报"),
    (CASES / "a17_txt_cp1252_french.txt", "Larkspur Fret – avis aux transporteurs"),
    (CORPUS / "txt" / "sanguo_yanyi_gbk.txt", "sanguo_yanyi_gbk"),  # its first line runs on: no title line
    (CORPUS / "pdf" / "issue-1113-evil-xobjects.pdf", "Hello world"),  # drawn twice, named once
])
def test_a_real_title_line_names_the_document(da, path, title):
    assert da.ingest_file(path).record.title == title


def test_an_anchor_that_leaves_out_outline_entries_says_how_many():
    """Before: the novel's anchor listed 6 of its 120 chapter headings and a handbook's a few of
    its 84, with nothing saying more exist (new-user trial). Now the outline ends with
    "(+N more headings not shown)", N counted exactly, and the anchor still fits 300 tokens."""
    from ingest.parsers.text import parse_txt

    novel = CORPUS / "txt" / "sanguo_yanyi_gbk.txt"
    for parsed, total in ((parse_txt(novel.read_bytes(), novel.name), 120), (handbook_like(12, 6), 84)):
        anchor, _ = anchor_of(parsed)
        lines = anchor.splitlines()
        outline = lines[lines.index("Outline:") + 1:]
        shown = outline[: next(i for i, line in enumerate(outline) if not line.lstrip().startswith("- "))]
        assert 0 < len(shown) < total
        assert outline[len(shown)] == f"(+{total - len(shown)} more headings not shown)", anchor
        assert COUNTER.count(anchor) <= 300


def test_an_anchor_showing_every_heading_has_no_count_line():
    anchor, _ = anchor_of(handbook_like(n_chapters=3, sections=1))
    assert "Outline:" in anchor and "more heading" not in anchor


def test_a_central_passage_that_starts_mid_sentence_shows_it():
    """Before: case a14's central passage began "the customs shed and scan ..." (a chunk cut
    inside a 5,533-character unpunctuated paragraph) with no "…" (new-user trial, issue 15). A
    passage that does not start a sentence now starts with "…", as a cut end ends with one."""
    from ingest.parsers.text import parse_md

    path = CASES / "a14_md_long_unpunctuated_paragraph.md"
    anchor, _ = anchor_of(parse_md(path.read_bytes(), path.name))
    lines = anchor.split("Central passages:\n", 1)[1].split("\ndoc_id:", 1)[0].splitlines()
    passages = [line.removeprefix("- ") for line in lines if line.startswith("- ")]
    assert passages, anchor
    for p in passages:
        assert p.startswith("…") or not p[0].islower(), p


def test_a_central_passage_is_a_whole_sentence_when_the_document_has_one():
    """Before: docs/guide.md's anchor quoted "…the sentences that carry the query's words." as a
    central passage: the tail of list item 11 that a chunk boundary cut off (its chunk 37 starts
    there), chosen because it ends like a sentence, though the document has whole sentences to
    quote. A piece that starts mid-sentence is quoted (marked "…") only when no chunk has a
    punctuated sentence (case a14, test_a_central_passage_that_starts_mid_sentence_shows_it)."""
    from docanchor.types import Chunk
    from summarize.central import central_sentences

    texts = [
        "Anchors name the document, its size and its outline in a few lines. A section that does "
        "not fit whole is trimmed to",
        "the sentences that carry the query's words. Sentences end where the text module says:",
        "Every retrieval request carries a token budget that the returned context never exceeds.",
    ]
    chunks = [Chunk(DOC_ID, i, t, 0, len(t)) for i, t in enumerate(texts)]
    vectors = [[1.0, 0.2, 0.0], [1.0, 1.0, 0.0], [0.2, 1.0, 0.0]]  # chunk 1 is the most central
    passages = central_sentences(chunks, vectors)
    assert passages, passages
    assert all(not p.startswith("…") and not p[0].islower() for p in passages), passages


def _outline_part(anchor: str) -> tuple[list[str], str]:
    """The anchor's outline entries (as printed) and its count line ("" when there is none)."""
    lines = anchor.splitlines()
    part = lines[lines.index("Outline:") + 1:]
    entries = part[: next(i for i, line in enumerate(part) if not line.lstrip().startswith("- "))]
    after = part[len(entries)] if len(part) > len(entries) else ""
    return entries, after if after.startswith("(+") else ""


def test_the_guides_outline_lists_its_sections_at_the_top_level():
    """Before: docs/guide.md's anchor listed "- The DocAnchor guide" (its H1, the same as the
    anchor's "Document:" line) and its nine sections indented under it; the new-user trial of
    5af026a read that outline as one heading with no "(+N more headings not shown)" line. The
    title is no longer listed again: the sections are the outline's top level, each one a
    ``read --from`` target, and any left out are counted."""
    from ingest.parsers.text import parse_md
    from docanchor.display import not_shown
    from tests.conftest import REPO

    guide = REPO / "docs" / "guide.md"
    parsed = parse_md(guide.read_bytes(), guide.name)
    sections = [line[3:].strip() for line in guide.read_text(encoding="utf-8").splitlines() if line.startswith("## ")]
    assert len(sections) == 9
    anchor, outline = anchor_of(parsed)
    assert outline == ["The DocAnchor guide"] + sections  # the stored outline keeps every heading
    entries, count = _outline_part(anchor)
    assert entries == [f"- {s}" for s in sections[: len(entries)]], anchor
    assert len(entries) >= 7 and anchor.index("Outline:") < anchor.index("Central passages:")
    assert count == ("" if len(entries) == 9 else not_shown(9 - len(entries), "heading"))
    assert COUNTER.count(anchor) <= 300


def test_a_titled_document_with_many_sections_shows_a_map_of_them_and_counts_the_rest():
    """A title heading over 40 sections: the sections (not the title again) are listed at the top
    level in reading order, at least the first :data:`summarize.anchor.FIRST_OUTLINE` of them
    before the central passages, and a last line counts exactly the sections left out."""
    from summarize.anchor import FIRST_OUTLINE

    b = DocumentBuilder("md", title="The operations manual")
    b.heading("The operations manual", level=1)
    for n in range(1, 41):
        b.heading(f"Section {n}: gate procedures", level=2)
        b.add(f"Section {n} explains how the gate staff check container seals and log every truck. " * 4)
    anchor, outline = anchor_of(b.build())
    assert len(outline) == 41
    entries, count = _outline_part(anchor)
    assert entries == [f"- Section {n}: gate procedures" for n in range(1, len(entries) + 1)], anchor
    assert len(entries) >= FIRST_OUTLINE and "Central passages:" in anchor
    assert count == f"(+{40 - len(entries)} more headings not shown)"
    assert COUNTER.count(anchor) <= 300


def test_a_cjk_passage_cut_inside_a_word_is_not_quoted_as_a_whole_sentence():
    """Before: nlp2004slides.pdf's anchor quoted "有表現であるとは限らない。" as a central passage
    with no "…": the word 固有表現 was cut before it, and a CJK letter has no lower case to tell.
    A chunk that starts right after a Chinese or Japanese letter that ends no sentence starts
    mid-sentence (docanchor.text.starts_sentence on the text before it): it is no whole sentence,
    and quoted only with "…" when no chunk has one."""
    from docanchor.types import Chunk
    from summarize.central import central_sentences, starts_mid_sentence, text_before

    texts = ["疎なデータの問題として、コンパラブルコーパスを使う研究では頻度の少ない単語がすべて固",
             "有表現であるとは限らない。まれにしか使われない普通名詞やタイプミスも頻度の少ない単語に含まれる",
             "複数の異なる新聞社による同一日の新聞記事は、コンパラブルな記事を多く含んでいる。"]
    starts = [0, len(texts[0]), len(texts[0]) + len(texts[1])]
    chunks = [Chunk(DOC_ID, i, t, s, s + len(t), gap_after="") for i, (t, s) in enumerate(zip(texts, starts))]
    assert all(len(t) >= 40 for t in texts)  # central_chunks passes over shorter chunks
    vectors = [[1.0, 0.2, 0.0], [1.0, 1.0, 0.0], [0.2, 1.0, 0.0]]  # chunk 1 is the most central
    passages = central_sentences(chunks, vectors)
    assert passages and not any(p.startswith("有表現") for p in passages), passages
    assert text_before(chunks, 1) == texts[0] and starts_mid_sentence(texts[1], texts[0])
    assert not starts_mid_sentence(texts[2], "有表現であるとは限らない。")  # after a full stop
    assert not starts_mid_sentence(texts[1])  # nothing known before it: no case to tell by
