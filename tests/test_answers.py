"""The LobeChat/MCP search answer says when no passage is a strong match (retrieval's no_strong_match)."""

from __future__ import annotations

from docanchor.tokens import get_counter
from docanchor.types import RetrievalResult, Section
from plugin.answers import search_answer
from retrieval.search import WEAK_MATCH_MESSAGE


def _result(weak: bool) -> RetrievalResult:
    s = Section("doc_1", "Guide", "Some passage about budgets.", 0, 27, None, None, (), 0.5, 6, ["doc_1:000000"],
                "[1] Guide — doc_1")
    return RetrievalResult("what is the capital of Mars?", 1000, [s], "[1] Guide — doc_1\nSome passage about budgets.",
                           12, message=WEAK_MATCH_MESSAGE if weak else "", no_strong_match=weak)


def test_a_weak_match_is_said_in_the_answer():
    counter = get_counter("cl100k_base")
    weak = search_answer(_result(True), doc_id=None, max_budget_tokens=8000, counter=counter)
    strong = search_answer(_result(False), doc_id=None, max_budget_tokens=8000, counter=counter)
    assert weak.startswith("No passage is a strong match") and "may not answer it. Say so rather than guess." in weak
    assert "strong match" not in strong and "Some passage about budgets." in strong


def test_an_answer_too_long_for_its_limit_is_cut_at_a_word_end_with_an_ellipsis():
    """The answer renderer's own character limit (MAX_ANSWER_CHARS) cut a passage mid-word; it
    now cuts where a trimmed passage is cut (retrieval.pack.cut_end): a sentence end, else a
    clause or word end followed by "…"."""
    from plugin.answers import MAX_ANSWER_CHARS, read_answer
    from retrieval.read import ReadResult

    words = " ".join(f"word{n:05d}" for n in range(1500))  # 15,000 characters, no sentence end
    window = ReadResult("doc_1", "Guide", "Guide (doc_1)", words, "", 0, len(words), None, None, [], 3000, 3000,
                        "char:15000", len(words))
    text = read_answer(window)
    body = text.split("\n", 1)[1].split("\n\nMore:")[0]
    assert len(text) <= MAX_ANSWER_CHARS and "More:" in text
    assert body.endswith("…") and body[:-1] == words[:len(body) - 1]
    assert words[len(body) - 1] == " "  # the word before the ellipsis is whole


def test_compact_passages_drop_the_novels_ideographic_spaces_inside_and_before_lines():
    """Before (new-user trial, the novel's opening poem in a LobeChat answer): "几度夕阳红。  白发渔樵"
    (two U+3000, made ASCII by NFKC) kept two spaces mid-line, and a line of 24 spaces came before
    "——调寄《临江仙》". Full-width indentation goes like ASCII indentation; a heading line keeps its
    spaces."""
    from plugin.answers import compact_passage

    stored = ("第一回 宴桃园豪杰三结义 斩黄巾英雄首立功\n    滚滚长江东逝水,浪花淘尽英雄。是非成败转头空。\n"
              "      青山依旧在,几度夕阳红。  白发渔樵江渚上,惯\n      看秋月春风。\n"
              "                        ——调寄《临江仙》\n\n\n\n    话说天下大势,分久必合,合久必分。")
    got = compact_passage(stored, ("第一回 宴桃园豪杰三结义 斩黄巾英雄首立功",))
    assert got == ("第一回 宴桃园豪杰三结义 斩黄巾英雄首立功\n滚滚长江东逝水,浪花淘尽英雄。是非成败转头空。"
                   "青山依旧在,几度夕阳红。白发渔樵江渚上,惯看秋月春风。\n——调寄《临江仙》\n\n"
                   "话说天下大势,分久必合,合久必分。"), got
    code = "def f():\n    return 1  # two  spaces"
    assert compact_passage(code) == code  # ASCII indentation and spacing of code are kept


def test_a_chapter_heading_after_a_single_line_break_keeps_its_line():
    """Before (new-user trial, readDocument across the novel's chapter 80): "…且看下文分解。第八十一回
    急兄仇张飞遇害  雪弟恨先主兴兵": the text has one line break before that heading, which was joined
    as a hard wrap. A break before a heading line is kept, as one after it is."""
    from plugin.answers import compact_passage

    stored = ("未知子龙所谏若何,且看下文分解。\n第八十一回 急兄仇张飞遇害  雪弟恨先主兴兵\n\n\n\n\n"
              "    却说先主欲起兵东征,赵云谏曰:“国贼乃曹操,\n非孙权也。”")
    got = compact_passage(stored, ("第八十回 曹丕废帝篡炎刘 汉王正位续大统", "第八十一回 急兄仇张飞遇害  雪弟恨先主兴兵"))
    assert got == ("未知子龙所谏若何,且看下文分解。\n第八十一回 急兄仇张飞遇害  雪弟恨先主兴兵\n\n"
                   "却说先主欲起兵东征,赵云谏曰:“国贼乃曹操,非孙权也。”"), got
