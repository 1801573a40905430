"""Context: a chunk's score gains the evidence of the chunks around it in its document.

The evidence for a question is often spread over consecutive passages, and a 100-token chunk
that answers it may not repeat the words that the passages around it share with the question.
So each chunk's final score is its fused score plus :data:`CONTEXT_WEIGHT` times the mean fused
score of the :data:`CONTEXT_WINDOW` chunks on either side of it (a box kernel along the
document; positions past the document's ends are not counted). Neighbours that matched neither
list become candidates this way; and a chunk right next to a match scores at least
:data:`NEIGHBOUR_WEIGHT` of the match (a sentence cut by a chunk boundary comes back whole).
The window and weight are round values, not fitted (bench/budget_recall.py's ablation prints
what this stage adds). Context brings a chunk *along*, it does not rank it above the evidence it
borrows: with :data:`CONTEXT_UP_TO_OWN` its neighbours lift it at most up to the best fused score
within its window, so the best-matching chunk of a passage is never outranked by the chunks
around it (:func:`retrieval.candidate.ranked` puts the one with more evidence of its own first on
a tie).
"""

from __future__ import annotations

from docanchor.types import DocumentRecord, chunk_id
from retrieval.candidate import Candidate, Pool, Why

CONTEXT_WINDOW = 2
"""Chunks on each side of a chunk (same document, by ordinal) whose fused scores make its context.
Source: bench/budget_recall.py (English and CJK parts), commit ca6c282 "context score" gives the
figures; ``--ablate context`` re-measures it."""
CONTEXT_WEIGHT = 0.5
"""Weight of the context score (the mean fused score of the neighbours) in a chunk's final score.
Source: as :data:`CONTEXT_WINDOW` (commit ca6c282)."""
NEIGHBOUR_WEIGHT = 0.5
"""A chunk right next to a match (same document, ordinal +-1) scores at least this share of the
match's final score: a passage that runs over a chunk boundary comes back whole. Source:
bench/budget_recall.py, commit fd08135 (neighbour expansion) gives the figures;
``--ablate neighbours`` re-measures it."""


CONTEXT_UP_TO_OWN = True
"""Cap a chunk's context (:func:`capped`) so that its fused score plus its context's share does not
pass the best fused score within its window. Source: issue 15 (the answering passage, ranked
10th-50th under the neighbours of the best match); bench/budget_recall.py, English and CJK
parts (the commit that added it gives the figures); ``--ablate context_cap`` re-measures it."""


def capped(fused: float, context: float, best: float) -> float:
    """The context score of a chunk whose fused score is ``fused``, whose neighbours' mean fused
    score is ``context`` and whose window's best fused score (its own included) is ``best``: at
    most what lifts its own score (:func:`own_score`) to ``best`` (rounded to 8 decimals)."""
    return round(max(0.0, min(context, (best - fused) / CONTEXT_WEIGHT)), 8)


def own_score(fused: float, context: float) -> float:
    """A chunk's score from its own match and its context, before any lift by a neighbour."""
    return round(fused + CONTEXT_WEIGHT * context, 8)


def lifted(match_own: float) -> float:
    """The least score of a chunk right next to a match whose own score is ``match_own``."""
    return round(NEIGHBOUR_WEIGHT * match_own, 8)


def add_context(pool: Pool, records: dict[str, DocumentRecord], lift: bool = True, cap: bool = True) -> None:
    """Set ``context_score``, ``score`` and ``neighbour_of`` of the undecided candidates, and add
    their neighbours within :data:`CONTEXT_WINDOW` as candidates (``chunk`` not read yet).

    A chunk's context score is the mean fused score of the chunks within :data:`CONTEXT_WINDOW`
    ordinals of it (chunks that matched neither list count 0); its final score is ``fused +
    CONTEXT_WEIGHT * context``, or :data:`NEIGHBOUR_WEIGHT` times the final score of a match
    right next to it if that is more (``neighbour_of`` names that match; on a tie the earlier).
    With ``cap`` (:data:`CONTEXT_UP_TO_OWN`) the context score is :func:`capped` at what lifts the
    chunk to the best fused score of its window. ``lift`` or ``cap`` False leaves out that rule
    (an ablation).
    """
    fused: dict[str, dict[int, float]] = {}  # doc_id -> ordinal -> fused score of the matches
    for c in pool.values():
        if c.placement is None and c.chunk is not None:
            fused.setdefault(c.chunk.doc_id, {})[c.chunk.ordinal] = c.fused_score
    for doc_id, scores in fused.items():
        _add_document_context(pool, doc_id, scores, records[doc_id].n_chunks, lift, cap and CONTEXT_UP_TO_OWN)


def _add_document_context(pool: Pool, doc_id: str, fused: dict[int, float], n: int, lift: bool,
                          cap: bool) -> None:
    """:func:`add_context` within one document of ``n`` chunks whose matches' fused scores by
    ordinal are ``fused``."""
    positions = set(fused)
    for ordinal in list(fused):
        positions.update(range(max(0, ordinal - CONTEXT_WINDOW), min(n, ordinal + CONTEXT_WINDOW + 1)))
    sums, tops = _window_matches(fused, n)
    own: dict[int, tuple[float, float]] = {}
    for ordinal in positions:
        lo, hi = max(0, ordinal - CONTEXT_WINDOW), min(n, ordinal + CONTEXT_WINDOW + 1)
        score = fused.get(ordinal, 0.0)
        total = sums.get(ordinal)
        ctx = 0.0 if total is None else round(total / (max(0, hi - lo) - (lo <= ordinal < hi)), 8)
        if cap:  # an unmatched chunk's 0.0 never changes the cap (a context above 0 has a match above 0)
            top = tops.get(ordinal)
            ctx = capped(score, ctx, score if top is None else max(score, top))
        own[ordinal] = (ctx, own_score(score, ctx))
    lifts = {o: lifted(own[o][1]) for o in fused} if lift else {}  # what each match lifts its neighbours to
    for ordinal, (ctx, final) in own.items():
        best, parent = final, None
        if ordinal - 1 in lifts or ordinal + 1 in lifts:
            for o in (ordinal - 1, ordinal + 1):  # on a tie the earlier chunk is named
                up = lifts.get(o)
                if up is not None and up > best:
                    best, parent = up, o
        cid = chunk_id(doc_id, ordinal)
        cand = pool.get(cid)
        if cand is None:
            cand = pool[cid] = Candidate(cid, why=Why.NEIGHBOUR)
        cand.context_score, cand.score = ctx, best
        cand.neighbour_of = None if parent is None else chunk_id(doc_id, parent)


def _window_matches(fused: dict[int, float], n: int) -> tuple[dict[int, float], dict[int, float]]:
    """For each ordinal with a match (of ``fused``, ordinals ``0 <= o < n``) within
    :data:`CONTEXT_WINDOW` of it, other than itself: the matches' fused scores summed in ordinal
    order (so to the bit what summing every chunk of the window, 0.0 for the others, gives) and the
    highest of them. Only matches are visited, not every chunk of every window."""
    sums: dict[int, float] = {}
    tops: dict[int, float] = {}
    for o in sorted(fused):
        if not 0 <= o < n:
            continue
        score = fused[o]
        for p in range(o - CONTEXT_WINDOW, o + CONTEXT_WINDOW + 1):
            if p == o:
                continue
            if p in sums:
                sums[p] += score
                tops[p] = max(tops[p], score)
            else:
                sums[p], tops[p] = 0 + score, score
    return sums, tops
