"""Cut-off: the score below which a candidate is not packed.

A candidate whose final score is below :data:`RELEVANCE_CUTOFF` times the best one's is not
packed, so a large budget is a ceiling, not a quota: weak matches do not dilute the context.
The share trades recall for precision (bench/budget_recall.py prints both; its ``--set``
option moves the share for an experiment).
"""

from __future__ import annotations

from retrieval.candidate import Fate, Pool

RELEVANCE_CUTOFF = 0.25
"""Candidates whose final score is below this share of the best candidate's are not packed.
Source: bench/budget_recall.py; lowered from 0.3 with the context score (commit ca6c282 gives the
figures); ``--ablate cutoff`` re-measures it."""


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


STRONG_DENSE = 0.45
"""Cosine similarity (all-MiniLM-L6-v2, query to chunk) at or above which a chunk is a strong
match. Source: bench/budget_recall.py's questions asked with and without their corpus (a round
value between the two distributions; commit e462449 gives the figures)."""
STRONG_COVERAGE = 0.5
"""Share of the query's distinct BM25 terms one chunk must hold to be a strong match (with at
least :data:`STRONG_MIN_TERMS` terms in the query). Source: as :data:`STRONG_DENSE`."""
STRONG_MIN_TERMS = 2
"""A one-term query is never a strong match by coverage alone (one common word would be). Source:
as :data:`STRONG_DENSE`."""
COVERAGE_TOP = 10
"""Listed candidates (best fused score first) whose query-term coverage is checked. Source: as
:data:`STRONG_DENSE` (commit e462449)."""
WEAK_BUDGET_TOKENS = 150
"""With no strong match, the most budget tokens returned: the closest passage, not a full budget.
Source: issue 15's target for questions without an answer in the index (at most 150 tokens on
average at a 1000-token budget); ``--ablate weak_cap`` re-measures it."""


def strong_match(pool: Pool, query_terms: set[str], tokenize) -> bool:
    """Whether some undecided listed candidate is a strong match by absolute measures: its dense
    similarity is at least :data:`STRONG_DENSE`, or it holds at least :data:`STRONG_COVERAGE` of
    the query's distinct terms. Relative scores cannot say this: min-max fusion gives the best
    candidate of any query 1.0, however weak."""
    listed = [c for c in pool.values() if c.listed and c.placement is None and c.chunk is not None]
    if any((c.dense_score or 0.0) >= STRONG_DENSE for c in listed):
        return True
    if len(query_terms) < STRONG_MIN_TERMS:
        return False
    for cand in sorted(listed, key=lambda c: (-c.fused_score, c.chunk_id))[:COVERAGE_TOP]:
        held = query_terms.intersection(tokenize(cand.chunk.embedding_text))
        if len(held) >= STRONG_COVERAGE * len(query_terms):
            return True
    return False
