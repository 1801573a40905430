"""Novelty: within one document, a match ranks by what it adds to the matches ranked above it.

Chunks of one document that match a question often share the same few query terms (an article's
subject, a table's column names), and ranked by score alone they fill the budget with the same
evidence several times while the chunk that holds the rest of the question waits below. So the
matches are re-ranked greedily (maximal marginal relevance, Carbonell and Goldstein, SIGIR 1998,
with query-term coverage as the redundancy measure): each step takes the undecided match whose
score, scaled by the share of its query terms' weight that the matches of its document taken
before it do not hold yet, is highest; a match right after or before one taken continues its
passage and is not judged by it. A term's weight is its BM25 inverse document frequency
(:func:`retrieval.stages.coverage.idf`, from :meth:`docanchor.lexical.LexicalIndex.doc_freqs`),
so a rare term counts more than a common one. A neighbour or run-on chunk moves with the match
that brought it. Copies of a
text its document repeats word for word keep the score :mod:`retrieval.stages.dedupe` gave them,
so the first occurrence stays the one cited.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from retrieval.candidate import Candidate, Pool
from retrieval.stages.context import CONTEXT_WINDOW
from retrieval.stages.coverage import held_terms, term_weights

NOVELTY_WEIGHT = 0.25
"""Share of a match's score that depends on what it adds: a match whose query terms are all held
by matches of its document ranked above it keeps ``1 - NOVELTY_WEIGHT`` of its score. Source:
bench/budget_recall.py (``--set retrieval.stages.novelty.NOVELTY_WEIGHT=...``, 0.25 and 0.5 on
the odd half, confirmed on the even half: 0.25 gained or held at every budget on both halves, 0.5
lost at the smallest budget on the even half; the commit that set it gives the figures);
``--ablate novelty`` re-measures it."""

SAME_PASSAGE_CHUNKS = CONTEXT_WINDOW
"""A match at most this many chunks (same document, by ordinal) from one taken before it continues
that passage, so the terms they share do not count as held: the context window of
:mod:`retrieval.stages.context`. Source: bench/budget_recall.py, odd half: counting every chunk of
the document, or only the chunks within 10 or 30 ordinals, lost recall against this window (the
rest of a table or paragraph ranked under far-away chunks; commit a36594f gives the figures)."""


def factor(novelty: float, weight: float | None = None) -> float:
    """What a score is multiplied by for a match whose query terms' weight is ``novelty`` new
    (a share in [0, 1]): ``1 - weight + weight * novelty`` (``weight``: :data:`NOVELTY_WEIGHT`)."""
    weight = NOVELTY_WEIGHT if weight is None else weight
    return 1 - weight + weight * novelty


def rank_by_novelty(
    pool: Pool, query_terms: set[str], doc_freqs: tuple[int, dict[str, int]],
    tokenize: Callable[[str], list[str]], weight: float | None = None,
) -> None:
    """Scale the scores of the undecided listed candidates greedily by what each adds.

    Each step pops the candidate with the highest scaled score ``score * (1 - weight + weight *
    new / own)``, where ``own`` is the summed :func:`idf` of the query terms its chunk holds and
    ``new`` that of those not held by a candidate of the same document popped before it, more
    than :data:`SAME_PASSAGE_CHUNKS` chunks away (a match holding no query term, found by its
    embedding alone, keeps its score). Its ``score``
    and ``novelty`` are set then; popped scores never rise, so the order by ``score`` is the
    greedy order. A candidate that is not listed (a neighbour, a run-on) is scaled as the match
    its ``neighbour_of`` links lead to.

    Args:
        query_terms: the query's BM25 terms (:func:`docanchor.lexical.tokenize`).
        doc_freqs: ``(indexed chunks, {term: chunks holding it})`` of the namespace.
        tokenize: the BM25 tokenizer, applied to each chunk's ``embedding_text``.
    """
    weight = NOVELTY_WEIGHT if weight is None else weight
    live = [c for c in pool.values() if c.placement is None and c.chunk is not None and c.listed]
    if weight <= 0 or not live or not query_terms:
        return
    w = term_weights(query_terms, doc_freqs)
    held = {c.chunk_id: held_terms(c, query_terms, tokenize) for c in live}
    taken: dict[str, list[tuple[int, set[str]]]] = {}
    base = {c.chunk_id: c.score for c in live}

    def share(cand: Candidate) -> float:
        own = sum(w[t] for t in held[cand.chunk_id])
        if own <= 0:
            return 1.0
        near = set().union(*(ts for o, ts in taken.get(cand.doc_id, ())
                             if abs(o - cand.chunk.ordinal) > SAME_PASSAGE_CHUNKS))
        return sum(w[t] for t in held[cand.chunk_id] - near) / own

    copies = _copies(live)
    heap = [(-c.score, -c.fused_score, c.chunk_id, c) for c in live]  # ties as ranked() orders them
    heapq.heapify(heap)
    while heap:
        _, _, cid, cand = heapq.heappop(heap)
        if cid in copies:
            taken.setdefault(cand.doc_id, []).append((cand.chunk.ordinal, held[cid]))
            continue
        new = round(share(cand), 4)
        scaled = round(base[cid] * factor(new, weight), 8)
        if heap and (-scaled, -cand.fused_score, cid) > heap[0][:3]:  # lazy greedy: fell below another's bound
            heapq.heappush(heap, (-scaled, -cand.fused_score, cid, cand))
            continue
        cand.score, cand.novelty = scaled, new
        taken.setdefault(cand.doc_id, []).append((cand.chunk.ordinal, held[cid]))
    _carry(pool, weight)


def _copies(live: list[Candidate]) -> set[str]:
    """Chunk ids of the candidates whose text their document repeats word for word among
    ``live``: they keep the score :mod:`retrieval.stages.dedupe` gave them (the copies are one
    piece of evidence, cited at its first occurrence; judged one by one, a later copy next to a
    match taken before it would outrank the first copy and move the citation there)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for cand in live:
        groups.setdefault((cand.doc_id, cand.chunk.text.strip()), []).append(cand.chunk_id)
    return {cid for group in groups.values() if len(group) > 1 for cid in group}


def _carry(pool: Pool, weight: float) -> None:
    """Scale each undecided unlisted candidate as the listed match its ``neighbour_of`` chain
    reaches, and give it that match's ``novelty`` (unchanged when it reaches none)."""
    for cand in pool.values():
        if cand.listed or cand.placement is not None:
            continue
        root, hops = pool.get(cand.neighbour_of or ""), 0
        while root is not None and not root.listed and hops < len(pool):
            root, hops = pool.get(root.neighbour_of or ""), hops + 1
        if root is not None and root.novelty is not None:
            cand.score, cand.novelty = round(cand.score * factor(root.novelty, weight), 8), root.novelty
