"""Searches for a size that fits a budget, in one place for every layer.

:func:`least_budget` grows a budget until something fits it, then bisects; :func:`shrink_to_fit`
shrinks an answer until it fits its budget. They are two searches, not one: the first asks a
cheap yes or no (a pack, a window) and names the least budget; the second measures by how much
a whole answer (a retrieval) is over and stops at the first that fits.

:func:`least_budget`: the least budget that returns something. When a budget is too small for
any text, ``read`` and ``search`` answer with the smallest budget that would return some
(``raise budget_tokens to N or more``). They differ only in what "returns something" means (a
window of the document holding text, :mod:`retrieval.read`; a packed section,
:mod:`retrieval.search`) and in their first guess, so the search itself lives here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

NEAR_TRIES = 4
"""Budgets tried one by one below the least budget the bisection finds (in budget tokens): a
longer text can count a token or two less than a shorter one (BPE merges), so a budget just
below one that does not fit may still fit. Source: the rule ``read`` used since it first named
the least budget; not tuned."""

MAX_BUDGET = 1 << 24
"""Where the search gives up growing (budget tokens): far above any model's context."""


def least_budget(fits: Callable[[int], bool], near: int, above: int) -> int:
    """The least budget (budget tokens) above ``above`` for which ``fits(budget)`` holds.

    ``near`` (the caller's guess) is tried first; while it does not fit the budget grows by 1, 2,
    4... until one does. The least fitting budget is then bisected between ``above`` and it (the
    guess is only a first try: the answer may lie below it, a short text under a bare citation
    line), and the :data:`NEAR_TRIES` budgets below the bisected one are tried one by one. So
    the budget named is one that fits and, where ``fits`` grows with the budget, the least that
    does. The caller knows that some budget fits; the search stops at :data:`MAX_BUDGET`.
    """
    lo, hi, step = above, max(near, above + 1), 1
    while not fits(hi) and hi < MAX_BUDGET:
        lo, step = hi, step * 2
        hi = lo + step
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid
    for budget in range(max(above + 1, hi - NEAR_TRIES), hi - 1):
        if fits(budget):
            return budget
    return hi


def shrink_to_fit(attempt: Callable[[int], tuple[T, int]], size: int, smaller: Callable[[int, T, int], int],
                  tries: int | None = None) -> tuple[T, bool]:
    """The first of ``attempt(size)``, then of smaller sizes, that fits, and ``True``; else the
    last attempt and ``False``.

    ``attempt(n)`` answers with size ``n`` (passage tokens, documents listed...) and returns the
    answer and its overshoot: the budget tokens it takes beyond its budget (``<= 0``: it fits).
    After one that does not fit, the next size is ``smaller(n, answer, overshoot)`` (the caller's
    guess from what it measured), kept from 1 to ``n - 1``; the search ends at size 1, or after
    ``tries`` smaller sizes (``None``: no limit). Each attempt is a whole answer (a retrieval, a
    page of the library), so the sizes fall by the measured overshoot instead of being bisected:
    the answer is the first size tried that fits, not always the largest that would.
    """
    n, tried = size, 0
    while True:
        answer, over = attempt(n)
        if over <= 0:
            return answer, True
        if n <= 1 or (tries is not None and tried >= tries):
            return answer, False
        n, tried = max(1, min(n - 1, smaller(n, answer, over))), tried + 1
