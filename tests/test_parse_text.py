"""TXT and Markdown parsing on real files: charset detection, offsets, Markdown structure."""

from __future__ import annotations

import unicodedata

import pytest

from ingest.normalise import normalise
from ingest.parsers.text import decode_text, parse_md, parse_txt
from tests.conftest import CASES, CORPUS

TEXT_FILES = {
    # path: (parser, phrases that must be in parsed.text, encoding family)
    CORPUS / "txt" / "sanguo_yanyi_gbk.txt": (parse_txt, ["宴桃园豪杰三结义", "滚滚长江东逝水"], "gb"),
    CORPUS / "txt" / "sample-french-1.txt": (parse_txt, ["JEAN-BAPTISTE POQUELIN MOLIÈRE", "NÉ LE 15 JANVIER 1622"], "cp1252"),
    CORPUS / "txt" / "norwich-city.txt": (parse_txt, ["Iwan Wyn Roberts", "â1986 Watford"], "utf-8"),
    CASES / "a13_txt_gbk_chinese_no_spaces.txt": (parse_txt, ["云雀货运合作社华东仓库第三季度盘点通报", "ALBATROSS-2313"], "gb"),
    CASES / "a17_txt_cp1252_french.txt": (
        parse_txt, ["l’accès au terminal fluvial", "14,50 €", "« accès permanent »", "GREBE-1717"], "cp1252"),
    CORPUS / "md" / "umlauts-non-utf8.md": (parse_md, ["können", "äöüß"], "cp1252"),
    CORPUS / "md" / "ch04-01-what-is-ownership.md": (parse_md, ["Ownership Rules", "let s = String::from(\"hello\");"], "utf-8"),
    CASES / "a14_md_long_unpunctuated_paragraph.md": (parse_md, ["SHEARWATER-2414"], "utf-8"),
}


@pytest.mark.parametrize("path", list(TEXT_FILES), ids=lambda p: p.name)
def test_real_text_files_decode_and_keep_their_phrases(path):
    parser, phrases, family = TEXT_FILES[path]
    parsed = parser(path.read_bytes(), path.name)
    for phrase in phrases:
        assert normalise(phrase) in parsed.text, phrase
    assert "\ufffd" not in parsed.text
    assert not any("\x80" <= c <= "\x9f" for c in parsed.text)  # no C1 controls from a latin-1 misread
    assert "Ã©" not in parsed.text
    assert parsed.flags["encoding"].lower().startswith(family)
    _check_blocks(parsed)


def _check_blocks(parsed):
    assert parsed.blocks, "no blocks"
    last = 0
    for block in parsed.blocks:
        content = parsed.text[block.start : block.end]
        assert block.start >= last and block.end > block.start
        assert content == content.strip() and content  # a block is its trimmed content
        last = block.end


def test_utf8_markdown_text_equals_the_file_when_nfkc():
    raw = (CORPUS / "md" / "ch04-01-what-is-ownership.md").read_text("utf-8")
    assert unicodedata.is_normalized("NFKC", raw)
    parsed = parse_md(raw.encode("utf-8"), "ch04.md")
    assert parsed.text == raw
    # offsets into the parsed text are offsets into the file's characters
    for block in parsed.blocks:
        assert raw[block.start : block.end] == parsed.text[block.start : block.end]


def test_markdown_headings_levels_paths_and_fences():
    parsed = parse_md((CORPUS / "md" / "ch04-01-what-is-ownership.md").read_bytes(), "ch04.md")
    headings = [(b.level, parsed.text[b.start : b.end]) for b in parsed.blocks if b.kind == "heading"]
    assert (2, "## What Is Ownership?") in headings
    assert (4, "#### Variables and Data Interacting with Move") in headings
    move = next(b for b in parsed.blocks if b.kind == "paragraph" and b.heading_path[-1:] == ("Variables and Data Interacting with Move",))
    assert move.heading_path == ("What Is Ownership?", "Memory and Allocation", "Variables and Data Interacting with Move")
    codes = [b for b in parsed.blocks if b.kind == "code"]
    assert codes and all(parsed.text[b.start : b.end].startswith("```") for b in codes)
    assert all(parsed.text[b.start : b.end].rstrip().endswith("```") for b in codes)


def test_hash_inside_fence_is_not_a_heading_and_setext_is():
    md = "Title\n=====\n\nIntro.\n\n```bash\n# not a heading\nls\n```\n\nSub\n---\n\nBody <|endoftext|> here.\n"
    parsed = parse_md(md.encode(), "x.md")
    kinds = [(b.kind, b.level, parsed.text[b.start : b.end]) for b in parsed.blocks]
    assert ("heading", 1, "Title\n=====") in kinds
    assert ("heading", 2, "Sub\n---") in kinds
    assert ("code", 0, "```bash\n# not a heading\nls\n```") in kinds
    assert parsed.title == "Title"
    body = parsed.blocks[-1]
    assert body.heading_path == ("Title", "Sub")
    assert "<|endoftext|>" in parsed.text[body.start : body.end]  # special tokens are ordinary text


def test_markdown_title_falls_back_to_top_heading_then_file_name():
    assert parse_md(b"## Only level two\n\ntext\n\n### Deeper", "notes/my-notes.md").title == "Only level two"
    assert parse_md(b"no headings at all\n\njust text", "notes/my-notes.md").title == "my-notes"
    assert parse_md((CASES / "a14_md_long_unpunctuated_paragraph.md").read_bytes(), "a14.md").title == (
        "Larkspur Freight yard handbook"
    )


def test_long_unblanked_text_is_split_at_line_ends():
    parsed = parse_txt((CORPUS / "txt" / "norwich-city.txt").read_bytes(), "norwich-city.txt")
    assert len(parsed.blocks) > 20
    assert max(b.end - b.start for b in parsed.blocks) < 4000
    _check_blocks(parsed)


def test_a14_paragraph_keeps_heading_path():
    parsed = parse_md((CASES / "a14_md_long_unpunctuated_paragraph.md").read_bytes(), "a14.md")
    block = next(b for b in parsed.blocks if "SHEARWATER-2414" in parsed.text[b.start : b.end])
    assert block.heading_path[-1] == "Yard procedures"


def test_decode_text_prefers_latin_for_short_ambiguous_bytes():
    text, enc = decode_text("Grüße aus Köln".encode("latin-1"))
    assert text == "Grüße aus Köln" and enc == "cp1252"
    text, enc = decode_text("\ufeffBOM".encode("utf-8"))
    assert text == "BOM" and enc == "utf-8"


def test_crlf_text_offsets_still_cover_blocks():
    parsed = parse_txt(b"first para\r\nline two\r\n\r\nsecond para\r\n", "crlf.txt")
    assert [parsed.text[b.start : b.end] for b in parsed.blocks] == ["first para\nline two", "second para"]


def _headings(parsed) -> list[tuple[str, int]]:
    return [(parsed.text[b.start : b.end], b.level) for b in parsed.blocks if b.kind == "heading"]


def test_plain_text_chapter_lines_are_headings_and_paths():
    """Chapter lines of plain text (第N回 / 第N章 / 第N节, Chapter N, CHAPTER IV.) are headings and
    give their paragraphs a heading path; a sentence that starts with "Chapter 3" is not one."""
    text = ("第一回　宴桃园豪杰三结义\n　　滚滚长江东逝水，浪花淘尽英雄。\n\n话说天下大势，分久必合。\n\n"
            "第二十章 新的开始\n正文在此。\n\n第三节：小节\n小节正文。\n\n"
            "CHAPTER IV.\n\nIt was a dark night.\n\nChapter 12: The Return\nHe came back.\n\n"
            "Chapter 3 shows that the method works on every dataset we tried and\nmore text follows here.\n\n"
            "第三回合他们又打了起来\n")
    parsed = parse_txt(text.encode("utf-8"), "novel.txt")
    assert _headings(parsed) == [("第一回 宴桃园豪杰三结义", 1), ("第二十章 新的开始", 1), ("第三节:小节", 2),
                                 ("CHAPTER IV.", 1), ("Chapter 12: The Return", 1)]
    by_text = {parsed.text[b.start : b.end].split("\n")[0]: b.heading_path for b in parsed.blocks if b.kind != "heading"}
    assert by_text["话说天下大势,分久必合。"] == ("第一回 宴桃园豪杰三结义",)
    assert by_text["小节正文。"] == ("第二十章 新的开始", "第三节:小节")
    assert by_text["It was a dark night."] == ("CHAPTER IV.",)
    assert by_text["He came back."] == ("Chapter 12: The Return",)
    assert by_text["Chapter 3 shows that the method works on every dataset we tried and"] == ("Chapter 12: The Return",)
    assert by_text["第三回合他们又打了起来"] == ("Chapter 12: The Return",)
    _check_blocks(parsed)


def test_sanguo_chapters_are_headings():
    """The real novel: its 120 chapter lines are headings (chapter 35's line is in the file twice), and a passage of chapter 5 has it in
    its heading path (the new-user trial found the novel cited by title only)."""
    parsed = parse_txt((CORPUS / "txt" / "sanguo_yanyi_gbk.txt").read_bytes(), "sanguo_yanyi_gbk.txt")
    heads = [h for h, _ in _headings(parsed)]
    assert len(set(heads)) == 120 and heads[0].startswith("第一回") and heads[-1].startswith("第一百二十回")
    at = parsed.text.index("破关兵三英战吕布") + 200
    block = next(b for b in parsed.blocks if b.start <= at < b.end)
    assert block.heading_path == ("第五回 发矫诏诸镇应曹公 破关兵三英战吕布",)
    _check_blocks(parsed)


def test_sanguo_citations_carry_the_chapter(da):
    """Ingested and searched (fake embedder), a passage of the novel is cited with its chapter,
    and the document's outline lists the chapters."""
    res = da.ingest_file(CORPUS / "txt" / "sanguo_yanyi_gbk.txt")
    assert res.record.outline[0] == "第一回 宴桃园豪杰三结义 斩黄巾英雄首立功"
    found = da.retrieve("孙坚 华雄", 300)
    assert found.sections and found.sections[0].cites_heading
    chapter = "第五回 发矫诏诸镇应曹公 破关兵三英战吕布"
    assert all(s.heading_path == (chapter,) for s in found.sections), [s.heading_path for s in found.sections]
    # a section trimmed to a clause may cite without its heading (retrieval.pack, rule 6); its heading_path keeps it
    assert all(chapter in s.citation for s in found.sections if s.cites_heading), [s.citation for s in found.sections]


def test_a_short_first_line_before_a_blank_line_is_the_plain_text_title():
    body = b"\n\nThe cranes stand on the east quay and the barges wait.\n"
    assert parse_txt(b"Quay notice\n" + body, "n.txt").title == "Quay notice"
    assert parse_txt(b"Dear all,\n" + body, "n.txt").title == "n"  # a salutation, not a title
    assert parse_txt(b"Quay notice\nThe cranes stand on the quay.\n", "n.txt").title == "n"  # runs on
    assert parse_txt(b"Quay notice\n\n", "n.txt").title == "n"  # nothing after it
    assert parse_txt(b"Chapter 1\n" + body, "n.txt").title == "n"  # a chapter line, not the book's title
