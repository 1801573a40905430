"""Cut-off: the score below which a candidate is not packed.

A candidate whose final score is below :data:`RELEVANCE_CUTOFF` times the best one's is not
packed, so a large budget is a ceiling, not a quota: weak matches do not dilute the context.
The share trades recall for precision (bench/budget_recall.py prints both; its ``--set``
option moves the share for an experiment). A relative share cannot stop filler, though: when
the best match is a small document, the next-best passages of an unrelated one pass it. So
:func:`mark_without_evidence` adds an absolute floor on each passage's own evidence.
"""

from __future__ import annotations

from docanchor.embedder import MINILM_DENSE, DenseScale
from retrieval.candidate import Candidate, Fate, Pool
from retrieval.stages.context import CONTEXT_WINDOW
from retrieval.stages.coverage import coverage, held_terms, term_weights

RELEVANCE_CUTOFF = 0.28
"""Candidates whose final score is below this share of the best candidate's are not packed.
Source: bench/budget_recall.py; lowered from 0.3 with the context score (commit ca6c282 gives the
figures), raised back to 0.3 with the context cap and the coverage stage (the commit that did
gives the figures), 0.28 with the coverage weight of 0.5 (the best candidate scores higher, so
0.3 of it cut answers 0.3 did not before: 0.28 and 0.27 measured; the commit that set it gives
the figures); ``--ablate cutoff`` re-measures it."""


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


STRONG_DENSE_TERMS = 1
"""Query terms a chunk must hold for its dense similarity (``DenseScale.strong``) to make it a
strong match: a close embedding of a text that shares no word with the question is a near topic,
not an answer. Source: bench/budget_recall.py's no-answer questions (the commit that added it
gives the figures: fewer tokens returned for them, no recall lost on the English or CJK part)."""
STRONG_COVERAGE = 0.5
"""Share of the query's distinct BM25 terms, by their IDF weight (:func:`strong_match`), one chunk
must hold to be a strong match (with at least :data:`STRONG_MIN_TERMS` terms in the query).
Source: as ``DenseScale.strong`` (:data:`docanchor.embedder.MINILM_DENSE`); weighed by IDF since the commit that added
:data:`STRONG_DENSE_SHARE`."""
STRONG_MIN_TERMS = 2
"""Query terms from which the coverage and pair rules of :func:`strong_match` apply: with fewer,
a share of the query's terms says nothing more than "the word is there", which
:func:`holds_the_one_term` judges. Source: as :data:`STRONG_COVERAGE`."""
STRONG_PAIR_COVERAGE = 1 / 3
"""Share of the query's distinct BM25 terms that a chunk at ``DenseScale.strong_pair`` must hold
(a cosine just under ``strong``: two moderate signals on one chunk). Source: as
``strong_pair`` (:data:`docanchor.embedder.MINILM_DENSE`)."""
STRONG_DENSE_ALONE = 2
"""Query terms a chunk at ``DenseScale.strong`` must hold to be a strong match when the query terms
that no chunk of the index holds (document frequency 0) weigh at least :data:`STRONG_ABSENT_SHARE`
of the query (by IDF): the question's subject is something the index never mentions. "What is
ownership in Rust?" asked of documents without the Rust book found a 10-K chunk on "beneficial
ownership" at 0.47 -- one term, and not the subject (a new user's trial). Source:
bench/budget_recall.py's no-answer and answerable questions (the commit that added it gives the
figures)."""
STRONG_ABSENT_SHARE = 0.5
"""Share of the query terms' IDF weight that terms absent from the index must carry for
:data:`STRONG_DENSE_ALONE` to apply: as much as the terms the index holds. Source:
bench/budget_recall.py: applying it on any absent term lost an answerable State of the Union
question of 13 terms, one of them in no chunk (0.1-0.3 recall points on the English part)."""
COVERAGE_TOP = 10
"""Listed candidates (best fused score first) whose query-term coverage is checked. Source: as
``DenseScale.strong`` (commit e462449)."""
WEAK_BUDGET_TOKENS = 100
"""With no strong match, the most budget tokens returned: the closest passage, not a full budget --
as much as one chunk of the default size (``DOCANCHOR_CHUNK_TOKENS``), citation line included, so
a longer chunk is trimmed to its best sentences. Source: issue 15's target for questions without
an answer in the index (at most 150 tokens on average at a 1000-token budget), which a cap of 150
missed because the few such questions judged strong matches return a full budget; the commit
that set 100 gives the figures (bench/budget_recall.py); ``--ablate weak_cap`` re-measures it."""


def strong_match(pool: Pool, query_terms: set[str], tokenize,
                 doc_freqs: tuple[int, dict[str, int]] | None = None, dense: DenseScale = MINILM_DENSE) -> bool:
    """Whether some undecided listed candidate is a strong match by absolute measures: its dense
    similarity is at least ``dense.strong`` (the embedder's :class:`~docanchor.embedder.DenseScale`)
    and it holds :data:`STRONG_DENSE_TERMS` of the
    query's terms (:data:`STRONG_DENSE_ALONE` of them when the query terms in no chunk of the
    index weigh :data:`STRONG_ABSENT_SHARE`); or at least ``dense.strong_pair`` while
    holding :data:`STRONG_PAIR_COVERAGE` of them; or it holds at least :data:`STRONG_COVERAGE` of
    the query terms' weight; or, for a one-term query, it holds that term
    (:func:`holds_the_one_term`). Relative scores cannot say this:
    min-max fusion gives the best candidate of any query 1.0, however weak.

    A term's weight is its :func:`retrieval.stages.coverage.idf` by ``doc_freqs`` (``(indexed
    chunks, {term: chunks holding it})``), so a term no chunk holds -- the subject of a question
    the index cannot answer -- weighs most; without ``doc_freqs`` every term weighs the same.
    :func:`retrieval.search.retrieve` counts them over the documents searched (its ``doc_ids``):
    a term only other documents hold is absent from what can answer."""
    listed = [c for c in pool.values() if c.listed and c.placement is None and c.chunk is not None]
    weights = term_weights(query_terms, doc_freqs) if doc_freqs else dict.fromkeys(query_terms, 1.0)

    def held(cand: Candidate) -> set[str]:
        return held_terms(cand, query_terms, tokenize)

    absent = {t for t in query_terms if doc_freqs and doc_freqs[1].get(t, 0) == 0}
    alone = bool(absent) and coverage(absent, weights) >= STRONG_ABSENT_SHARE
    least = max(STRONG_DENSE_TERMS, STRONG_DENSE_ALONE if alone else 0)
    if any((c.dense_score or 0.0) >= dense.strong and len(held(c)) >= least for c in listed):
        return True
    if len(query_terms) < STRONG_MIN_TERMS:
        return holds_the_one_term(listed, query_terms, tokenize)
    pair = max(STRONG_MIN_TERMS, STRONG_PAIR_COVERAGE * len(query_terms))
    if any((c.dense_score or 0.0) >= dense.strong_pair and len(held(c)) >= pair for c in listed):
        return True
    top = sorted(listed, key=lambda c: (-c.fused_score, c.chunk_id))[:COVERAGE_TOP]
    return any(coverage(held(c), weights) >= STRONG_COVERAGE for c in top)


def holds_the_one_term(listed: list[Candidate], query_terms: set[str], tokenize) -> bool:
    """Whether a query of one BM25 term (a name, an identifier, a keyword: "PLOVER") has a listed
    chunk holding that term: the chunk holds the whole query, which is as strong as lexical
    evidence gets, whatever its dense similarity (one word's embedding rarely reaches
    ``DenseScale.strong``). A word no chunk holds leaves the query to its embedding. Source: a new
    user's trial ("PLOVER" found a04's "Schedule reference PLOVER-1404" first, flagged
    no_strong_match)."""
    return len(query_terms) == 1 and any(held_terms(c, query_terms, tokenize) for c in listed)


def has_evidence(cand: Candidate, dense: DenseScale = MINILM_DENSE) -> bool:
    """Whether a candidate's own match passes the absolute floor: dense similarity at least
    ``dense.evidence`` (the embedder's :class:`~docanchor.embedder.DenseScale`), or a BM25 match
    (it holds a query term; any BM25 match counts: a share of the query's terms as the floor, 0.3
    or 0.5, lost 1.3 recall points on bench/budget_recall.py). Its fused score or rank does not
    count: they are relative to the other candidates."""
    return (cand.dense_score or 0.0) >= dense.evidence or cand.bm25_rank is not None


def mark_without_evidence(pool: Pool, dense: DenseScale = MINILM_DENSE) -> None:
    """Decide as :attr:`Fate.NO_EVIDENCE` every undecided candidate with no evidence near it: no
    listed chunk within ``CONTEXT_WINDOW`` ordinals of it in its document passes
    :func:`has_evidence`, and none does along its ``neighbour_of`` links (a run-on sentence). Such a
    passage is only there to fill the budget. Used when the query has a strong match
    (:func:`strong_match`); without one the closest passage comes back under the weak budget.
    ``dense`` is the embedder's :class:`~docanchor.embedder.DenseScale`."""
    live = [c for c in pool.values() if c.placement is None and c.chunk is not None]
    anchors = {(c.doc_id, c.chunk.ordinal) for c in live if c.listed and has_evidence(c, dense)}

    def near(cand: Candidate, hops: int = 0) -> bool:
        o = cand.chunk.ordinal
        if any((cand.doc_id, k) in anchors for k in range(o - CONTEXT_WINDOW, o + CONTEXT_WINDOW + 1)):
            return True
        parent = pool.get(cand.neighbour_of or "")
        return parent is not None and parent.chunk is not None and hops < len(pool) and near(parent, hops + 1)

    for cand in live:
        if not near(cand):
            cand.decide(Fate.NO_EVIDENCE)
