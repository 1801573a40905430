"""The explain trace: every candidate's scores and fate, from the :class:`Candidate` fields.

Deterministic: candidates are listed best first (final score, then chunk id), every number is
rounded by the stage that made it, and nothing depends on timing or dictionary order.
"""

from __future__ import annotations

from typing import Any, Callable

from docanchor.text import collapse_space

from retrieval.candidate import Candidate, Fate
from retrieval.stages.expand import chunk_tokens

PREVIEW_CHARS = 80
"""Characters of a candidate's text shown in the trace (whitespace collapsed; cut with "…")."""


def preview(cand: Candidate) -> str | None:
    """The start of what the candidate brings (its span, or its whole text), at most
    :data:`PREVIEW_CHARS` characters; ``None`` when its chunk was never read."""
    if cand.chunk is None:
        return None
    a, b = cand.span or (0, len(cand.chunk.text))
    text = collapse_space(cand.chunk.text[a:b])
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS - 1].rstrip() + "…"


def candidate_row(cand: Candidate, count: Callable[[str], int]) -> dict[str, Any]:
    """One candidate as the trace shows it."""
    placement = cand.placement
    return {
        "chunk_id": cand.chunk_id,
        "doc_id": cand.doc_id,
        "why": cand.why.value,
        "dense_rank": cand.dense_rank, "dense_score": cand.dense_score,
        "bm25_rank": cand.bm25_rank, "bm25_score": cand.bm25_score,
        "fused_score": cand.fused_score, "coverage": cand.coverage,
        "context_score": cand.context_score,
        "neighbour_of": cand.neighbour_of, "same_text_as": cand.same_text_as,
        "rerank_score": cand.rerank_score, "novelty": cand.novelty,
        "score": cand.score,
        "tokens": chunk_tokens(cand.chunk, count),
        "preview": preview(cand),
        "fate": str(placement) if placement is not None else Fate.DROPPED_FOR_BUDGET.describe(),
    }
