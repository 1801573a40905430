"""Coverage: a listed chunk's own evidence gains the share of the question's terms it holds.

Min-max fusion (:mod:`retrieval.stages.fuse`) scores a chunk by its place in each list: a chunk
that repeats one query term many times can top the BM25 list over the one passage holding every
term of the question. So each listed chunk's fused score gains :data:`COVERAGE_WEIGHT` times its
coverage: the summed inverse document frequency (:func:`idf`) of the
query's distinct BM25 terms its chunk holds, over that of all of them. This is the "coord"
factor of Lucene's classic similarity (``TFIDFSimilarity``: a document matching more of the
query's clauses scores higher), weighted by IDF so that a rare term counts more than a common one.
Its terms are the BM25 tokenizer's (:func:`docanchor.lexical.tokenize`) and its document
frequencies the lexical index's (:meth:`docanchor.lexical.LexicalIndex.doc_freqs`).

A term's weight is its IDF in the index times its IDF among the listed candidates
(:func:`candidate_weights`): a term that nearly every candidate holds -- the subject of the article
they all come from, "Valkyria Chronicles III" in a question about its opening theme's lyrics --
is rare in the index but tells the candidates apart no more than a stop word; the term that
holds the question's point ("lyrics") does. This is the IDF of the retrieved set used in
pseudo-relevance feedback (the candidates stand for the documents about the query's subject).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

from docanchor.lexical import tokenize as lexical_tokenize
from retrieval.candidate import Candidate, Pool

COVERAGE_WEIGHT = 0.5
"""What a chunk holding every query term adds to its fused score (fused scores are in [0, 1]);
a chunk holding a share of the terms' weight adds that share of it. Source:
bench/budget_recall.py (English and CJK parts): 0.25 with the index's IDF alone (0.5 then lost
recall on the CJK part at 500 tokens), 0.5 since terms also weigh by the candidates holding them
(:func:`candidate_weights`; tuned on the odd half, confirmed on the even half, 0.25, 0.3, 0.4,
0.5 and 0.6 measured; the commit that set it gives the figures); ``--ablate coverage``
re-measures it."""


TERMS_CACHE_TEXTS = 4096
"""Chunk texts whose distinct BM25 terms :func:`chunk_terms` remembers (least recently used go first):
the same chunks come back for query after query. Source: a bound on memory, not tuned."""


@lru_cache(maxsize=TERMS_CACHE_TEXTS)
def chunk_terms(tokenize, text: str) -> frozenset[str]:
    """The distinct terms ``tokenize`` gives ``text`` (a pure function of both, so cached)."""
    return frozenset(tokenize(text))


def held_terms(cand: Candidate, query_terms: set[str], tokenize: Callable[[str], list[str]]) -> set[str]:
    """The query's BM25 terms that ``cand``'s chunk (read) holds, in its ``embedding_text``: what
    coverage, the strong-match test (:func:`retrieval.stages.cutoff.strong_match`) and novelty
    (:mod:`retrieval.stages.novelty`) count. The terms the lexical index stored with the chunk
    (:attr:`docanchor.types.Chunk.terms`) when ``tokenize`` is the index's own tokenizer, else
    ``tokenize`` applied to the text."""
    chunk = cand.chunk
    if chunk.terms is not None and tokenize is lexical_tokenize:
        stored = f" {chunk.terms} "  # each term between single spaces; a query term holds none
        return {t for t in query_terms if f" {t} " in stored}
    return query_terms.intersection(chunk_terms(tokenize, chunk.embedding_text))


def idf(n_chunks: int, df: int) -> float:
    """BM25's inverse document frequency of a term held by ``df`` of ``n_chunks`` chunks:
    ``ln(1 + (N - df + 0.5) / (df + 0.5))`` (Robertson and Zaragoza 2009, as Lucene and tantivy
    compute it); 0.0 for an empty index."""
    if n_chunks <= 0:
        return 0.0
    return math.log(1 + (n_chunks - df + 0.5) / (df + 0.5))


def term_weights(query_terms: set[str], doc_freqs: tuple[int, dict[str, int]]) -> dict[str, float]:
    """Each query term's :func:`idf` in the namespace whose ``(indexed chunks, {term: chunks
    holding it})`` are ``doc_freqs``."""
    n, df = doc_freqs
    return {t: idf(n, df.get(t, 0)) for t in query_terms}


def coverage(held: set[str], weights: dict[str, float]) -> float:
    """The share of the query terms' summed IDF ``weights`` that the terms ``held`` carry, in
    [0, 1], rounded to 4 decimals; 0.0 when the query's terms weigh nothing."""
    total = sum(weights.values())
    if total <= 0:
        return 0.0
    return round(sum(weights[t] for t in held if t in weights) / total, 4)


def add_coverage(
    pool: Pool, query_terms: set[str], doc_freqs: tuple[int, dict[str, int]],
    tokenize: Callable[[str], list[str]], weight: float | None = None,
) -> None:
    """Add ``weight`` (:data:`COVERAGE_WEIGHT`) times its :func:`coverage` to the fused (and
    final) score of every undecided listed candidate whose chunk was read, and record the share in
    ``coverage``; a term weighs as :func:`candidate_weights` says, over those candidates.

    Args:
        query_terms: the query's BM25 terms (:func:`docanchor.lexical.tokenize`).
        doc_freqs: ``(indexed chunks, {term: chunks holding it})`` of the namespace.
        tokenize: the BM25 tokenizer, applied to each chunk's ``embedding_text``.
    """
    weight = COVERAGE_WEIGHT if weight is None else weight
    if weight <= 0 or not query_terms:
        return
    live = [c for c in pool.values() if c.placement is None and c.chunk is not None and c.listed]
    held = [held_terms(c, query_terms, tokenize) for c in live]
    weights = candidate_weights(term_weights(query_terms, doc_freqs), held)
    for cand, terms in zip(live, held):
        cand.coverage = coverage(terms, weights)
        cand.fused_score = cand.score = round(cand.fused_score + weight * cand.coverage, 8)


def candidate_weights(weights: dict[str, float], held: list[set[str]]) -> dict[str, float]:
    """Each term's index weight (``weights``, its :func:`idf` in the namespace) times its
    :func:`idf` among the candidates whose held terms are ``held`` (one set per candidate): a
    term every candidate holds weighs least, one none holds most (it changes no candidate's
    share's order, only the total)."""
    n = len(held)
    return {t: w * idf(n, sum(t in h for h in held)) for t, w in weights.items()}
