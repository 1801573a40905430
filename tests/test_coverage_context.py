"""The rules that let a chunk's own evidence decide its rank: query-term coverage
(retrieval/stages/coverage.py), the context cap (retrieval/stages/context.py) and the order of
candidates tied on their final score (retrieval/candidate.py)."""

from __future__ import annotations

import pytest

from docanchor.lexical import tokenize
from docanchor.types import Chunk, DocumentRecord
from retrieval.candidate import Candidate, Why, ranked
from retrieval.stages.context import CONTEXT_WEIGHT, add_context
from retrieval.stages.coverage import idf

QUERY = "What is the winter timetable of the harbour ferry?"


def _cand(doc_id: str, ordinal: int, text: str, fused: float, listed: bool = True) -> Candidate:
    chunk = Chunk(doc_id, ordinal, text, 100 * ordinal, 100 * ordinal + len(text))
    return Candidate(chunk.chunk_id, chunk, dense_rank=1 if listed else None, fused_score=fused, score=fused,
                     why=Why.MATCHED if listed else Why.NEIGHBOUR)


def _pool(*cands: Candidate) -> dict:
    return {c.chunk_id: c for c in cands}


def test_a_chunk_holding_every_query_term_gains_the_whole_coverage_weight_and_one_holding_none_nothing():
    from retrieval.stages.coverage import COVERAGE_WEIGHT, add_coverage

    every = _cand("doc_a", 0, "The harbour ferry's winter timetable: two crossings a day.", 0.5)
    none = _cand("doc_a", 1, "Gulls gather near the wall at dawn.", 0.5)
    pool = _pool(every, none)
    terms = set(tokenize(QUERY))
    add_coverage(pool, terms, (1000, {t: 10 for t in terms}), tokenize)
    assert every.coverage == 1.0 and every.fused_score == every.score == 0.5 + COVERAGE_WEIGHT
    assert none.coverage == 0.0 and none.fused_score == 0.5


def test_a_rare_query_term_held_counts_more_than_a_common_one():
    """The share is of the terms' IDF weight: holding "winter" (in 2 of 1,000 chunks) says more
    than holding "harbour" (in 400)."""
    from retrieval.stages.coverage import add_coverage

    rare = _cand("doc_a", 0, "Winter storms close the pier.", 0.5)
    common = _cand("doc_b", 0, "The harbour wall is old.", 0.5)
    neighbour = _cand("doc_a", 1, "Winter again.", 0.2, listed=False)  # not listed: its own evidence is none
    pool = _pool(rare, common, neighbour)
    terms = set(tokenize(QUERY))
    freqs = {t: 50 for t in terms} | {"winter": 2, "harbour": 400}
    add_coverage(pool, terms, (1000, freqs), tokenize)
    weights = {t: idf(1000, freqs[t]) for t in terms}
    assert rare.coverage == pytest.approx(weights["winter"] / sum(weights.values()), abs=1e-4)
    assert rare.coverage > common.coverage > 0
    assert neighbour.coverage is None and neighbour.fused_score == 0.2


def test_neighbours_lift_a_chunk_no_higher_than_the_best_fused_score_around_it():
    """Before: a chunk between two good matches scored its own fused score plus half their mean
    and passed both of them (and the best match of another passage)."""
    left = _cand("doc_a", 0, "a", 0.8)
    middle = _cand("doc_a", 1, "b", 0.6)
    right = _cand("doc_a", 2, "c", 0.8)
    alone = _cand("doc_b", 0, "d", 0.9)
    pool = _pool(left, middle, right, alone)
    records = {d: DocumentRecord(d, d, "md", n, 10, 10) for d, n in (("doc_a", 3), ("doc_b", 1))}
    add_context(pool, records)
    assert middle.score == pytest.approx(0.8) and middle.context_score == pytest.approx(0.2 / CONTEXT_WEIGHT)
    assert left.score == right.score == 0.8  # the best of their windows: nothing around lifts them
    assert alone.score == 0.9
    assert ranked(pool)[0].chunk_id == alone.chunk_id


def test_of_candidates_tied_on_their_final_score_the_one_with_more_evidence_of_its_own_ranks_first():
    lifted = _cand("doc_a", 0, "a", 0.3)
    match = _cand("doc_a", 1, "b", 0.8)
    lifted.score = match.score = 0.8
    assert [c.chunk_id for c in ranked(_pool(lifted, match))] == [match.chunk_id, lifted.chunk_id]
