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


def test_coverage_counts_the_terms_the_lexical_index_stored_with_a_chunk():
    """A chunk read from the lexical index carries its BM25 terms (Chunk.terms): coverage counts
    those, not the text tokenised again; a chunk without them (read from Chroma) is tokenised, and
    a tokenizer other than the index's own always tokenises. Before: every listed chunk's text was
    tokenised at every query (Chunk had no terms)."""
    import dataclasses

    from retrieval.stages.coverage import add_coverage, held_terms

    text = "The harbour ferry's winter timetable: two crossings a day."
    stored = _cand("doc_a", 0, text, 0.5)
    stored.chunk = dataclasses.replace(stored.chunk, terms="winter")  # as if stored so
    unknown = _cand("doc_a", 1, text, 0.5)
    terms = set(tokenize(QUERY))
    add_coverage(_pool(stored, unknown), terms, (1000, {t: 10 for t in terms}), tokenize)
    assert 0 < stored.coverage < 1.0 == unknown.coverage
    assert held_terms(stored, terms, lambda t: tokenize(t)) == terms  # not the index's tokenizer


def test_a_rare_query_term_held_counts_more_than_a_common_one():
    """The share is of the terms' IDF weight: holding "winter" (in 2 of 1,000 chunks) says more
    than holding "harbour" (in 400)."""
    from retrieval.stages.coverage import add_coverage, candidate_weights

    rare = _cand("doc_a", 0, "Winter storms close the pier.", 0.5)
    common = _cand("doc_b", 0, "The harbour wall is old.", 0.5)
    neighbour = _cand("doc_a", 1, "Winter again.", 0.2, listed=False)  # not listed: its own evidence is none
    pool = _pool(rare, common, neighbour)
    terms = set(tokenize(QUERY))
    freqs = {t: 50 for t in terms} | {"winter": 2, "harbour": 400}
    add_coverage(pool, terms, (1000, freqs), tokenize)
    weights = candidate_weights({t: idf(1000, freqs[t]) for t in terms}, [{"winter"}, {"harbour"}])
    assert rare.coverage == pytest.approx(weights["winter"] / sum(weights.values()), abs=1e-4)
    assert rare.coverage > common.coverage > 0
    assert neighbour.coverage is None and neighbour.fused_score == 0.2



def test_a_term_every_candidate_holds_counts_less_than_the_one_that_holds_the_point():
    """Every candidate comes from the article the question names ("Valkyria", rare in the
    index), and the chunk that answers holds the question's point ("lyrics", common in the
    index) but not the name. Weighted by the index alone, the name outweighs the point and every
    chunk of the article that repeats it ranks above the answer; weighted also by how many
    candidates hold a term, the point counts more. Before: ``answer`` got 0.31 of the terms'
    weight and each ``subject`` chunk 0.69."""
    from retrieval.stages.coverage import add_coverage

    query = "Who wrote the lyrics of Valkyria?"
    answer = _cand("doc_a", 7, "The lyrics were written by a poet from Osaka.", 0.5)
    subjects = [_cand("doc_a", o, f"Valkyria sold well in part {o}.", 0.5) for o in range(4)]
    pool = _pool(answer, *subjects)
    terms = set(tokenize(query))
    (point,), (name,) = tokenize("lyrics"), tokenize("Valkyria")
    freqs = {t: 300 for t in terms} | {name: 5, point: 100}
    add_coverage(pool, terms, (1000, freqs), tokenize)
    assert answer.coverage > max(s.coverage for s in subjects) > 0
    assert ranked(pool)[0] is answer

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


def _context_by_every_window_chunk(fused: dict[int, float], n: int) -> dict[int, tuple[float, float, int | None]]:
    """The context rule written out over every chunk of every window (the plain reading of
    retrieval/stages/context.py's docstring): ordinal -> (context score, score, neighbour_of)."""
    from retrieval.stages.context import CONTEXT_WINDOW, capped, lifted, own_score

    positions = set(fused)
    for o in fused:
        positions.update(range(max(0, o - CONTEXT_WINDOW), min(n, o + CONTEXT_WINDOW + 1)))
    own = {}
    for p in positions:
        window = [o for o in range(max(0, p - CONTEXT_WINDOW), min(n, p + CONTEXT_WINDOW + 1)) if o != p]
        total = 0
        for o in window:
            total += fused.get(o, 0.0)
        ctx = round(total / len(window), 8) if window else 0.0
        ctx = capped(fused.get(p, 0.0), ctx, max([fused.get(p, 0.0)] + [fused.get(o, 0.0) for o in window]))
        own[p] = (ctx, own_score(fused.get(p, 0.0), ctx))
    out = {}
    for p, (ctx, final) in own.items():
        best, parent = final, None
        for o in (p - 1, p + 1):
            if o in fused and lifted(own[o][1]) > best:
                best, parent = lifted(own[o][1]), o
        out[p] = (ctx, best, parent)
    return out


@pytest.mark.parametrize("seed", range(40))
def test_context_visits_only_the_matches_and_scores_as_every_window_chunk_would(seed):
    """add_context sums only the matches of each window; every score equals the rule computed over
    every chunk of the window, to the bit (documents of 1-30 chunks, matches at the edges, runs of
    matches, tied scores, a match past a stale chunk count)."""
    import random

    rng = random.Random(seed)
    n = rng.randint(1, 30)
    picks = rng.sample(range(n + 2), rng.randint(1, min(n + 2, 12)))
    scores = [0.0, 0.25, 0.5, 1.0, -0.25] + [round(rng.random(), 8) for _ in range(4)]  # below 0: never fused, still exact
    fused = {o: rng.choice(scores) for o in picks}
    pool = _pool(*[_cand("doc_r", o, f"chunk {o}", f) for o, f in fused.items()])
    add_context(pool, {"doc_r": DocumentRecord("doc_r", "r", "txt", n_chunks=n, n_tokens=0, n_chars=0)})
    got = {int(cid.rsplit(":", 1)[1]): (c.context_score, c.score,
                                        None if c.neighbour_of is None else int(c.neighbour_of.rsplit(":", 1)[1]))
           for cid, c in pool.items()}
    assert got == _context_by_every_window_chunk(fused, n)
