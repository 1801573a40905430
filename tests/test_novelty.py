"""The novelty stage: within a document, a match ranks by the query terms it adds
(retrieval/stages/novelty.py)."""

from __future__ import annotations

from docanchor.lexical import tokenize
from docanchor.types import Chunk
from retrieval.candidate import Candidate, Why, ranked
from retrieval.stages.coverage import idf
from retrieval.stages.novelty import (
    NOVELTY_WEIGHT,
    SAME_PASSAGE_CHUNKS,
    rank_by_novelty,
)

QUERY = "What was the final point total of the Blue Jackets season?"


def _cand(doc_id: str, ordinal: int, text: str, score: float, listed: bool = True) -> Candidate:
    chunk = Chunk(doc_id, ordinal, text, 100 * ordinal, 100 * ordinal + len(text))
    cand = Candidate(chunk.chunk_id, chunk, dense_rank=1 if listed else None, score=score,
                     why=Why.MATCHED if listed else Why.NEIGHBOUR)
    return cand


def _pool(*cands: Candidate) -> dict:
    return {c.chunk_id: c for c in cands}


def test_a_match_repeating_the_terms_above_it_ranks_below_one_that_adds_the_rest():
    """bench/budget_recall.py's misses: the chunk holding the answer ("65 points ... total") was
    matched but ranked 9th, under chunks of the same article that held only "Blue Jackets"."""
    first = _cand("doc_a", 1, "The Blue Jackets began the season with a loss.", 1.0)
    again = _cand("doc_a", 5, "The Blue Jackets lost again that season.", 0.9)
    answer = _cand("doc_a", 9, "Columbus finished with 65 points, their lowest total.", 0.8)
    pool = _pool(first, again, answer)
    terms = set(tokenize(QUERY))
    rank_by_novelty(pool, terms, (1000, {t: 5 for t in terms}), tokenize)
    assert [c.chunk_id for c in ranked(pool)] == [first.chunk_id, answer.chunk_id, again.chunk_id]
    assert again.novelty == 0.0 and answer.novelty == 1.0
    assert again.score == round(0.9 * (1 - NOVELTY_WEIGHT), 8)


def test_terms_held_in_another_document_do_not_count_and_a_neighbour_moves_with_its_match():
    first = _cand("doc_a", 1, "The Blue Jackets began the season with a loss.", 1.0)
    other = _cand("doc_b", 1, "The Blue Jackets are a hockey team; their season ended.", 0.9)
    again = _cand("doc_a", 5, "The Blue Jackets lost again that season.", 0.8)
    beside = _cand("doc_a", 6, "It was cold.", 0.4, listed=False)  # next to ``again``
    beside.neighbour_of = again.chunk_id
    pool = _pool(first, other, again, beside)
    terms = set(tokenize(QUERY))
    rank_by_novelty(pool, terms, (1000, {t: 5 for t in terms}), tokenize)
    assert other.score == 0.9 and other.novelty == 1.0
    assert again.score == round(0.8 * (1 - NOVELTY_WEIGHT), 8)
    assert beside.score == round(0.4 * (1 - NOVELTY_WEIGHT), 8)


def test_a_rare_term_weighs_more_than_a_common_one():
    assert idf(1000, 1) > idf(1000, 500) > 0
    assert idf(0, 0) == 0.0
    first = _cand("doc_a", 1, "The Blue Jackets season.", 1.0)
    rare = _cand("doc_a", 10, "Blue Jackets final points.", 0.8)
    common = _cand("doc_a", 20, "Blue Jackets season total.", 0.8)
    pool = _pool(first, rare, common)
    terms = set(tokenize(QUERY))
    freqs = {t: 5 for t in terms} | {"final": 1, "total": 900}
    rank_by_novelty(pool, terms, (1000, freqs), tokenize)
    assert rare.score > common.score


def test_a_match_without_query_terms_keeps_its_score():
    first = _cand("doc_a", 1, "The Blue Jackets season.", 1.0)
    dense = _cand("doc_a", 10, "Columbus ended with sixty-five.", 0.7)
    pool = _pool(first, dense)
    terms = set(tokenize(QUERY))
    rank_by_novelty(pool, terms, (1000, {t: 5 for t in terms}), tokenize)
    assert dense.score == 0.7 and dense.novelty == 1.0


def test_a_match_next_to_one_taken_continues_its_passage_and_keeps_its_score():
    """A passage over several chunks repeats its terms; its next chunk is not redundant (with
    the whole document as the place, bench/budget_recall.py's finance part lost 2.7 points at
    500 tokens, the rest of a table or paragraph ranking under far-away chunks)."""
    first = _cand("doc_a", 1, "The Blue Jackets began the season with a loss.", 1.0)
    near = _cand("doc_a", 1 + SAME_PASSAGE_CHUNKS, "The Blue Jackets lost again that season.", 0.9)
    far = _cand("doc_a", 2 + SAME_PASSAGE_CHUNKS, "The Blue Jackets lost once more that season.", 0.9)
    pool = _pool(first, near, far)
    terms = set(tokenize(QUERY))
    rank_by_novelty(pool, terms, (1000, {t: 5 for t in terms}), tokenize)
    assert near.score == 0.9 and near.novelty == 1.0
    assert far.score == round(0.9 * (1 - NOVELTY_WEIGHT), 8)



def test_copies_of_a_repeated_text_keep_their_scores():
    """bench/budget_recall.py's finance part (10-K snippets that recur in one document): a later
    copy next to the best match was exempt as part of its passage, the first copy far from it was
    judged redundant, so the later copy was cited and the first one (the reference) dropped as its
    duplicate. Copies are one piece of evidence, cited at the first occurrence (dedupe stage)."""
    repeated = "Blue Jackets final point total: 65."
    first_copy = _cand("doc_a", 1, repeated, 0.9)
    best = _cand("doc_a", 20, "The Blue Jackets season ended in April.", 1.0)
    later_copy = _cand("doc_a", 21, repeated, 0.9)
    pool = _pool(first_copy, best, later_copy)
    terms = set(tokenize(QUERY))
    rank_by_novelty(pool, terms, (1000, {t: 5 for t in terms}), tokenize)
    assert first_copy.score == later_copy.score == 0.9
    assert first_copy.novelty is None and later_copy.novelty is None
    assert [c.chunk_id for c in ranked(pool)] == [best.chunk_id, first_copy.chunk_id, later_copy.chunk_id]
