"""The least budget named to a caller whose budget is too small: one that works, and the least."""

from __future__ import annotations

from docanchor.fit import least_budget
from docanchor.tokens import get_counter
from retrieval.pack import Piece, least_budget_for, pack


def test_the_least_budget_may_lie_below_the_guess():
    """New-user trial: "raise budget_tokens to 38" while 30 returned a section (the guess, a
    citation line and 24 tokens of text, was tried downward only 4 budgets)."""
    tried = []

    def fits(budget: int) -> bool:
        tried.append(budget)
        return budget >= 30

    assert least_budget(fits, near=42, above=10) == 30
    assert least_budget(fits, near=20, above=10) == 30  # the guess too low: grows, then bisects
    assert least_budget(fits, near=42, above=35) == 36  # never at or below `above`
    assert len(tried) < 40


def test_a_dip_just_below_the_bisected_budget_is_found():
    """BPE merges: a budget a token or two below one that does not fit can fit."""
    fitting = {27} | set(range(29, 100))
    assert least_budget(fitting.__contains__, near=50, above=10) == 27


def test_search_names_the_least_budget_pack_returns_a_section_at():
    """A short passage under a long heading fits at far less than its cited line and 24 tokens of
    text (its citation line leaves the heading out, rule 6 of retrieval.pack)."""
    count = get_counter().count
    text = "45. Roberts 2004, p. 14."
    piece = Piece("c1", "doc_norwich", 3, "Norwich City F.C.", text, 100, 100 + len(text),
                  heading_path=("History", "Twenty-first century and the Premier League return"), score=1.0)
    least = least_budget_for([piece], 5, count)
    assert pack([piece], least, count).sections
    assert not pack([piece], least - 1, count).sections
