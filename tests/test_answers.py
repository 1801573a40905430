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
