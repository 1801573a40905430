"""References: a chunk that is a reference list weighs less than prose as evidence.

A reference list repeats the words of its article's subject in every entry's title, and its links
split into more of them ("/norwich-city/iwan-roberts-..."), so BM25 and the embedding rank its
chunks with the prose that answers -- or above it (a new user's trial over norwich-city.txt:
"Archived from the original" lines first for questions about the club). A chunk dense with
citation marks (:func:`docanchor.text.citation_marks`: links, "Retrieved", "ISBN", dates in
brackets) keeps :data:`REFERENCE_FACTOR` of its fused score: a reference it lists is a pointer to
the evidence, not the evidence. It runs after coverage, before context, so its neighbours are
lifted by what is left.
"""

from __future__ import annotations

import math
from functools import lru_cache

from docanchor.text import citation_marks, non_space_chars
from docanchor.types import Chunk
from retrieval.candidate import Pool
from retrieval.pack import MIN_TRIM_TOKENS
from retrieval.stages.coverage import TERMS_CACHE_TEXTS

REFERENCE_DENSITY = 1.0
"""Citation marks per 100 non-space characters from which a chunk is a reference list. Source:
norwich-city.txt's reference list has 1.3-2.8 in every window of 8 lines, its prose 0; the
bench corpora of bench/budget_recall.py (../shared/bench/chunking_eval) have at most 0.8 in any
450-character window (a 10-K's links to its filings)."""
REFERENCE_MIN_MARKS = 2
"""Fewer marks than this never make a reference list: one link in a short chunk is a prose line
that cites something. Source: a round value, not tuned."""
REFERENCE_FACTOR = 0.5
"""Share of its fused score a reference-list chunk keeps. Source: bench/budget_recall.py
(``--ablate references``; the commit that added it gives the figures) and the norwich-city.txt
trial."""


@lru_cache(maxsize=TERMS_CACHE_TEXTS)
def is_reference_list(text: str) -> bool:
    """Whether ``text`` reads as a reference list: at least :data:`REFERENCE_MIN_MARKS` citation
    marks (:func:`docanchor.text.citation_marks`) and :data:`REFERENCE_DENSITY` of them per 100
    non-space characters (cached: the same chunks come back query after query)."""
    chars = non_space_chars(text)
    need = max(REFERENCE_MIN_MARKS, math.ceil(REFERENCE_DENSITY * chars / 100))
    return chars > 0 and citation_marks(text, need) >= need


def weigh_references(pool: Pool) -> None:
    """Scale the fused (and final) score of every undecided candidate whose chunk was read and is a
    reference list (:func:`is_reference_list`) by :data:`REFERENCE_FACTOR`."""
    for cand in pool.values():
        if cand.placement is None and cand.chunk is not None and is_reference_list(cand.chunk.text):
            cand.fused_score = cand.score = round(cand.fused_score * REFERENCE_FACTOR, 8)


def is_reference_scrap(chunk: Chunk) -> bool:
    """Whether ``chunk`` is a scrap of a reference list: fewer than
    :data:`retrieval.pack.MIN_TRIM_TOKENS` budget tokens (its stored ``n_tokens``) holding a
    citation mark ("45. Roberts 2004, p. 14", "Retrieved 12 November 2007.", the tail of an entry
    the chunker cut off). Such a scrap only completes the entry a neighbour holds: it never starts
    a section (:func:`retrieval.stages.expand.shape`), where it would take the place of prose (a
    new-user trial over norwich-city.txt: "Iwan Roberts" at 30 tokens answered "45. Roberts 2004,
    p. 14" alone). ``False`` for a chunk stored without its token count."""
    return 0 < chunk.n_tokens < MIN_TRIM_TOKENS and citation_marks(chunk.text, 1) >= 1
