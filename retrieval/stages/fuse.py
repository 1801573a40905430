"""Fuse: one score per listed chunk from the dense and the BM25 list.

Relative score fusion: each list's scores are min-max normalised over that list's own top-k (the
best candidate of a list gets 1, its k-th 0) and a chunk's fused score is ``w * dense + (1 - w)
* bm25`` (a chunk missing from a list gets 0 there). This is the "relativeScoreFusion" of
Weaviate's hybrid search; unlike reciprocal rank fusion (Cormack et al., SIGIR 2009) it keeps
how far apart the scores are, which the cut-off needs. The two lists weigh the same
(:data:`DENSE_WEIGHT`), except that all-MiniLM-L6-v2 maps most CJK characters to ``[UNK]``: for
a query that is mostly CJK the dense list weighs :data:`CJK_DENSE_WEIGHT` and BM25's character
bigrams carry the match; and a mostly-CJK chunk's dense similarity weighs
:data:`CJK_DENSE_WEIGHT` for any query, because its mostly-``[UNK]`` vector is weakly similar to
everything (a quarter of the dense top-40 for English chatlog questions were Chinese chunks when
the Chinese novel shared the namespace).
"""

from __future__ import annotations

from typing import Sequence

from docanchor.text import cjk_share
from retrieval.candidate import Candidate, Pool
from retrieval.stages.gather import LEXICAL_K, Lists

DENSE_WEIGHT = 0.5
"""Weight of the dense list in the fused score (BM25 gets the rest): neither list is preferred.
Source: relative score fusion (Weaviate's ``relativeScoreFusion``: min-max per list, then a
weighted sum) with equal weights, set in commit fd08135, which gives the bench figures."""
CJK_DENSE_WEIGHT = 0.2
"""Weight of the dense similarity when at least half of the letters of the query, or of the
chunk, are CJK: all-MiniLM-L6-v2 reads CJK text as mostly ``[UNK]`` word pieces, so its vectors
match unrelated text. Source: bench/budget_recall.py, commit 8cb4ddc gives the figures;
``--ablate cjk_weight`` re-measures it."""


def query_dense_weight(query: str) -> float:
    """The dense list's weight for ``query``: :data:`CJK_DENSE_WEIGHT` for a mostly-CJK query."""
    return CJK_DENSE_WEIGHT if cjk_share(query) >= 0.5 else DENSE_WEIGHT


def fuse(lists: Lists, dense_weight: float, cjk_chunks: bool = True) -> Pool:
    """Candidates for every listed chunk, with ranks, raw scores and the fused score (rounded to
    8 decimals), dense list first, then BM25 hits not in it; ``cjk_chunks`` False gives a mostly-CJK
    chunk the query's dense weight (an ablation)."""
    pool: Pool = {}
    dense_norm = minmax([score for _, score in lists.dense])
    # fewer BM25 hits than asked for means every other chunk scores 0: that is the list's floor
    lexical_norm = minmax([s for _, s in lists.lexical], floor=0.0 if len(lists.lexical) < LEXICAL_K else None)
    for rank, ((chunk, score), norm) in enumerate(zip(lists.dense, dense_norm), 1):
        weight = CJK_DENSE_WEIGHT if cjk_chunks and cjk_share(chunk.text) >= 0.5 else dense_weight
        pool[chunk.chunk_id] = Candidate(chunk.chunk_id, chunk, dense_rank=rank, dense_score=round(score, 6),
                                         fused_score=weight * norm)
    for rank, ((cid, score), norm) in enumerate(zip(lists.lexical, lexical_norm), 1):
        cand = pool.setdefault(cid, Candidate(cid, lists.chunks.get(cid)))
        cand.bm25_rank, cand.bm25_score = rank, round(score, 6)
        cand.fused_score += (1.0 - dense_weight) * norm
    for cand in pool.values():
        cand.fused_score = cand.score = round(cand.fused_score, 8)
    return pool


def minmax(scores: Sequence[float], floor: float | None = None) -> list[float]:
    """Scores rescaled to [0, 1] over the list (all 1.0 when they are equal); ``floor``, when
    given, is the score that maps to 0 instead of the list's lowest."""
    if not scores:
        return []
    hi, lo = max(scores), (min(scores) if floor is None else floor)
    if hi - lo <= 1e-12:
        return [1.0] * len(scores)
    return [(s - lo) / (hi - lo) for s in scores]
