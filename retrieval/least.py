"""The least budget that returns something: one search shared by ``read`` and ``search``.

When a budget is too small for any text, both doors answer with the smallest budget that would
return some (``raise budget_tokens to N or more``). They differ only in what "returns something"
means (a window of the document holding text, :mod:`retrieval.read`; a packed section,
:mod:`retrieval.search`) and in their first guess, so the search itself lives here.
"""

from __future__ import annotations

from collections.abc import Callable

NEAR_TRIES = 4
"""Budgets tried one by one on each side of the caller's guess (in budget tokens): a longer text
can count a token or two less than a shorter one (BPE merges), so the guess is only close.
Source: the rule ``read`` used since it first named the least budget; not tuned."""


def least_budget(fits: Callable[[int], bool], near: int, above: int) -> int:
    """The least budget (budget tokens) above ``above`` for which ``fits(budget)`` holds.

    Budgets from :data:`NEAR_TRIES` below ``near`` (the caller's guess) to as many above are
    tried one by one; past that the budget grows by 1, 2, 4... until one fits, then bisects (so
    ``fits`` should hold for every budget above one that fits). The caller knows that some
    budget fits; the search stops at 2**24 tokens regardless.
    """
    for budget in range(max(above + 1, near - NEAR_TRIES), near + NEAR_TRIES + 1):
        if fits(budget):
            return budget
    lo = max(above, near + NEAR_TRIES)
    step, hi = 1, lo + 1
    while not fits(hi) and hi < 1 << 24:
        lo, step = hi, step * 2
        hi = lo + step
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid
    return hi
