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
