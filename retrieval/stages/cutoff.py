"""Cut-off: the score below which a candidate is not packed.

A candidate whose final score is below :data:`RELEVANCE_CUTOFF` times the best one's is not
packed, so a large budget is a ceiling, not a quota: weak matches do not dilute the context.
The share trades recall for precision (bench/budget_recall.py prints both; its ``--set``
option moves the share for an experiment).
"""

from __future__ import annotations

from retrieval.candidate import Fate, Pool

RELEVANCE_CUTOFF = 0.25
"""Candidates whose final score is below this share of the best candidate's are not packed."""


def relevance_floor(pool: Pool) -> float:
    """:data:`RELEVANCE_CUTOFF` times the best final score of the undecided candidates (0.0 for none)."""
    return RELEVANCE_CUTOFF * max((c.score for c in pool.values() if c.placement is None), default=0.0)


def drop_unread_below(pool: Pool, floor: float) -> None:
    """Forget neighbours not read yet whose score is below ``floor``: they enter only when their
    context lifts them over the cut-off."""
    for cid in [cid for cid, c in pool.items() if c.chunk is None and c.score < floor]:
        del pool[cid]


def mark_below(pool: Pool, floor: float) -> None:
    """Decide every undecided candidate under ``floor`` as :attr:`Fate.BELOW_CUTOFF`."""
    for cand in pool.values():
        if cand.placement is None and cand.score < floor:
            cand.decide(Fate.BELOW_CUTOFF)
