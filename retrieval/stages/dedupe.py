"""Dedupe: a passage a document repeats word for word is cited at its first occurrence.

Copies of one text within one document are one piece of evidence (packing returns a text once).
Among the copies that matched a list themselves (identical text has the same dense and BM25
scores; only context differs), the one with the lowest ordinal takes the best copy's score, and
``same_text_as`` names the copy the score came from. Reports and filings repeat passages (a
summary table restated in the notes); citing the first occurrence is where a reader meets it
first, and it keeps the citation stable when a later copy's surroundings happen to match the
query better. Copies in different documents are left to packing (the better-ranked one is
kept).
"""

from __future__ import annotations

from retrieval.candidate import Pool
from retrieval.stages.context import own_score


def first_copies(pool: Pool) -> None:
    """Give each repeated text's first copy the best copy's score (see the module docstring).

    A chunk lifted by a later copy (``neighbour_of`` it) keeps only its own score: the copy is
    not returned there, so it must not bring its surroundings as a section of their own.
    """
    copies: dict[tuple[str, str], list[str]] = {}
    for cid, c in pool.items():
        if c.listed and c.chunk is not None and c.placement is None:
            copies.setdefault((c.chunk.doc_id, c.chunk.text.strip()), []).append(cid)
    dropped: set[str] = set()
    for group in copies.values():
        if len(group) < 2:
            continue
        first = min(group, key=lambda cid: pool[cid].chunk.ordinal)
        best = min(group, key=lambda cid: (-pool[cid].score, pool[cid].chunk.ordinal))
        if best != first:
            pool[first].score, pool[first].same_text_as = pool[best].score, best
        dropped.update(cid for cid in group if cid != first)
    for cid, c in pool.items():
        if c.neighbour_of in dropped and cid not in dropped:
            c.score, c.neighbour_of = own_score(c.fused_score, c.context_score), None
