"""One typed record per candidate chunk, filled in by the retrieval stages in turn.

Each stage of :func:`retrieval.search.retrieve` reads and writes :class:`Candidate` fields; no
stage signals another through special values. The trace (:mod:`retrieval.trace`) explains every
candidate from these fields alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from docanchor.types import Chunk


class Why(Enum):
    """Why a chunk is a candidate."""

    MATCHED = "matched"
    """It is in the dense or the BM25 list itself."""
    NEIGHBOUR = "neighbour"
    """It sits next to a match (context stage): it completes the match's passage."""
    RUN_ON = "run-on"
    """A match's sentence runs on into it (expand stage)."""


class Fate(Enum):
    """What became of a candidate; :meth:`describe` words it for the trace."""

    KEPT = "kept in section"
    MERGED = "merged into section"
    TRIMMED = "trimmed into section"
    DROPPED_FOR_BUDGET = "dropped for budget"
    DUPLICATE = "dropped as duplicate"
    BELOW_CUTOFF = "below relevance cut-off"
    NO_EVIDENCE = "below evidence floor"
    SECTION_BREAK = "beyond a section break"
    NOT_VISIBLE = "not visible (no stored document)"
    WORD_TAIL = "left out as a word's tail"
    """Packed with its section's chunks, but its text is the tail of a word hyphenated across a
    line break, which the section starts after (:func:`retrieval.pack._word_tail`)."""

    def describe(self, section: int | None = None) -> str:
        """The fate as the trace words it: ``"kept in section 2"``, ``"dropped for budget"``."""
        return f"{self.value} {section}" if section is not None else self.value


class Placement(NamedTuple):
    """A fate and, for a packed candidate, the 1-based section it went into."""

    fate: Fate
    section: int | None = None

    def __str__(self) -> str:
        return self.fate.describe(self.section)


@dataclass
class Candidate:
    """A chunk under consideration for one query, with every score the stages gave it.

    Attributes:
        chunk_id: the chunk's id (:func:`docanchor.types.chunk_id`).
        chunk: the chunk, once read (a neighbour's is read only if it passes the cut-off).
        dense_rank, dense_score: 1-based rank and cosine similarity in the dense list, if there.
        bm25_rank, bm25_score: 1-based rank and BM25 score in the lexical list, if there.
        fused_score: relative score fusion of both lists, plus its query-term coverage bonus
            (:mod:`retrieval.stages.coverage`): its own evidence (0 without any).
        coverage: the IDF-weighted share of the query's terms its chunk holds
            (:mod:`retrieval.stages.coverage`); ``None`` when not measured.
        context_score: mean fused score of the chunks around it in its document, capped so
            that it does not lift the chunk above the best fused score around it
            (:data:`retrieval.stages.context.CONTEXT_UP_TO_OWN`).
        score: the final score the chunk is ranked and cut by.
        rerank_score: the reranker's score, when a reranker is configured.
        novelty: the share of its query terms' weight that no chunk of its document ranked
            above it holds (:mod:`retrieval.stages.novelty`); ``None`` when not ranked so.
        why: why it is a candidate (:class:`Why`).
        neighbour_of: the chunk whose score lifted this one (a match next to it, or the previous
            link of a run-on sentence).
        same_text_as: for a first copy of a repeated text, the copy whose score it took.
        span: the character span of ``chunk.text`` it brings (``None``: the whole text).
        joins_only: it may join a section next to it but never start one.
        placement: its fate, once decided.
    """

    chunk_id: str
    chunk: Chunk | None = None
    dense_rank: int | None = None
    dense_score: float | None = None
    bm25_rank: int | None = None
    bm25_score: float | None = None
    fused_score: float = 0.0
    coverage: float | None = None
    context_score: float = 0.0
    score: float = 0.0
    rerank_score: float | None = None
    novelty: float | None = None
    why: Why = Why.MATCHED
    neighbour_of: str | None = None
    same_text_as: str | None = None
    span: tuple[int, int] | None = None
    joins_only: bool = False
    placement: Placement | None = None

    @property
    def listed(self) -> bool:
        """It is in the dense or the BM25 list."""
        return self.dense_rank is not None or self.bm25_rank is not None

    @property
    def has_own_evidence(self) -> bool:
        """Its fused score is above 0: it matched the query better than the lists' floors."""
        return self.fused_score > 0

    @property
    def doc_id(self) -> str | None:
        return self.chunk.doc_id if self.chunk is not None else None

    def decide(self, fate: Fate, section: int | None = None) -> None:
        """Record the candidate's fate."""
        self.placement = Placement(fate, section)


Pool = dict[str, Candidate]
"""The candidates of one query by chunk id, in the order the stages added them."""


def ranked(pool: Pool) -> list[Candidate]:
    """Candidates best first: by final score, then by own evidence (fused score: of a match and
    the neighbour its context lifted to the same score, the match leads), then chunk id
    (deterministic)."""
    return sorted(pool.values(), key=rank_key)


def rank_key(cand: Candidate) -> tuple[float, float, str]:
    """The sort key of :func:`ranked` (smaller first)."""
    return -cand.score, -cand.fused_score, cand.chunk_id
