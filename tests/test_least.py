"""The searches of docanchor.fit: the least budget named to a caller whose budget is too small (one
that works, and the least), and an answer shrunk until it fits its budget."""

from __future__ import annotations

from docanchor.fit import least_budget, shrink_to_fit
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


def test_shrink_to_fit_answers_the_first_smaller_size_that_fits():
    """Each next size is the caller's guess from the overshoot, so the answer is the first that
    fits (20 here), not the largest (25 would)."""
    tried = []

    def attempt(n: int) -> tuple[str, int]:
        tried.append(n)
        return f"answer {n}", 4 * n - 100  # 25 and below fit

    assert shrink_to_fit(attempt, 50, lambda n, answer, over: n - over // 4 - 5) == ("answer 20", True)
    assert tried == [50, 20]


def test_shrink_to_fit_takes_at_least_one_less_and_stops_at_one_or_after_its_tries():
    tried = []

    def attempt(n: int) -> tuple[int, int]:
        tried.append(n)
        return n, 1  # never fits

    assert shrink_to_fit(attempt, 4, lambda n, answer, over: n + 3) == (1, False)  # a guess too large still shrinks
    assert tried == [4, 3, 2, 1]
    tried.clear()
    assert shrink_to_fit(attempt, 9, lambda n, answer, over: -5) == (1, False)  # never below 1
    assert tried == [9, 1]
    tried.clear()
    assert shrink_to_fit(attempt, 100, lambda n, answer, over: n // 2, tries=2) == (25, False)
    assert tried == [100, 50, 25]
    tried.clear()
    assert shrink_to_fit(lambda n: (n, 0), 7, lambda n, answer, over: 1) == (7, True)  # 0 over fits
