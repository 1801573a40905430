"""Data types shared across DocAnchor. Offsets are in characters of a document's normalised
text; sizes named ``n_tokens`` are budget tokens (see :mod:`docanchor.tokens`)."""

from __future__ import annotations

import hashlib
import os
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

from docanchor import formats
from docanchor.offsets import Runs

DOC_TYPES = formats.names()
"""Every ``doc_type`` (:mod:`docanchor.formats`)."""


@dataclass(frozen=True)
class Block:
    """A structural piece of a parsed document: ``text[start:end]`` of its normalised text.

    Attributes:
        start: first character (inclusive) in the normalised text.
        end: last character (exclusive).
        kind: ``heading``, ``paragraph``, ``table``, ``list``, ``code``, ``row``, ``header``,
            ``footer``, ``footnote`` or ``text``.
        page: 1-based number of the format's citation unit (PDF page, slide, sheet, chapter:
            :attr:`docanchor.formats.Format.unit`), else ``None``.
        heading_path: the headings this block sits under, outermost first (a heading's own
            path includes itself).
        level: a heading's level (1 = top); 0 for other kinds.
        flags: quality flags for this block, e.g. ``("hidden_text",)``; flagged blocks are not
            indexed as good text.
    """

    start: int
    end: int
    kind: str = "paragraph"
    page: int | None = None
    heading_path: tuple[str, ...] = ()
    level: int = 0
    flags: tuple[str, ...] = ()


@dataclass
class ParsedDocument:
    """What a parser returns: normalised text, its blocks, and what was noticed on the way.

    Attributes:
        text: the document's normalised text (NFKC, no control characters); blocks index it.
        blocks: structural blocks in reading order, non-overlapping, ascending.
        doc_type: one of :data:`DOC_TYPES`.
        title: a display title (from metadata, the first heading, or the file name).
        n_pages: count of the format's citation units (pages, slides, sheets, chapters), else
            ``None``.
        flags: document-level quality facts, e.g. ``{"garbled_pages": [3],
            "hidden_text": {"count": 2, "how": ["colour"]}}``.
        summary: optional ready-made anchor body lines (CSV schema), used by the anchor.
        source_runs: how offsets into ``text`` map to offsets into the decoded file text
            (:mod:`docanchor.offsets`), for formats whose normalised text is the decoded text
            character by character (plain text, Markdown); ``()`` for formats whose text is
            extracted (PDF, DOCX, HTML, CSV rows), where no decoded text holds it.
    """

    text: str
    blocks: list[Block]
    doc_type: str
    title: str
    n_pages: int | None = None
    flags: dict[str, Any] = field(default_factory=dict)
    summary: list[str] = field(default_factory=list)
    source_runs: Runs = ()


def make_doc_id(data: bytes) -> str:
    """``doc_`` + the first 16 hex digits of the SHA-256 of a document's bytes: same bytes, same id."""
    return "doc_" + hashlib.sha256(data).hexdigest()[:16]


def path_source(path: str | os.PathLike) -> str:
    """The source a document records for a file read from disk: its absolute path, symbolic links
    as given (``os.path.abspath``), so the same file named from another folder matches."""
    return os.path.abspath(path)


def chunk_id(doc_id: str, ordinal: int) -> str:
    """The id of chunk ``ordinal`` of ``doc_id``: ``{doc_id}:{ordinal:06d}``."""
    return f"{doc_id}:{ordinal:06d}"


@dataclass(frozen=True)
class Chunk:
    """One embedded piece of a document: ``text == normalised_text[start_char:end_char]``.

    Attributes:
        doc_id: the owning document.
        ordinal: 0-based position in the document.
        n_tokens: size in budget tokens.
        ends_line: the text after the chunk starts a new line (or the document ends there);
            False when the chunk stops inside a line. Chunks stored before this attribute
            existed read as True.
        context: a short text (characters) that says where the chunk belongs, used only as
            input to its embedding and its BM25 terms (see :func:`embedding_input`); never part
            of ``text``, never shown, never counted in ``n_tokens`` or any budget. Set for a
            piece of a CSV ``row`` block too wide for one chunk that does not name its row (the
            row's name cell or first cells), and for a chunk of a Markdown, HTML or DOCX table
            after the one holding its header row (the header's cells); at most 30 budget
            tokens, see ``ingest.row_context``; else "". Chunks stored before this attribute
            existed read as "".
        gap_after: the document's exact text between ``end_char`` and the next chunk's
            ``start_char`` ("" when they touch or overlap, or for the last chunk), so that
            chunks joined into a section read exactly as the document. ``None`` for chunks stored
            before this attribute existed (the gap is then guessed from ``ends_line``).
        joins_next: the next chunk continues this one's passage. False when text that is not
            indexed lies between them -- a flagged block (hidden text, a garbled page) or more
            than ``ingest.chunking.GAP_MAX_CHARS`` characters -- so no section spans both.
        source_runs: :mod:`docanchor.offsets` runs covering ``start_char`` to ``end_char``,
            mapping offsets to the decoded file text; ``()`` when the format has none (see
            :attr:`ParsedDocument.source_runs`) or the chunk was stored before they existed.
    """

    doc_id: str
    ordinal: int
    text: str
    start_char: int
    end_char: int
    page_start: int | None = None
    page_end: int | None = None
    heading_path: tuple[str, ...] = ()
    n_tokens: int = 0
    kind: str = "paragraph"
    ends_line: bool = True
    context: str = ""
    gap_after: str | None = None
    joins_next: bool = True
    source_runs: Runs = ()
    terms: str | None = field(default=None, compare=False, repr=False)
    """The distinct BM25 terms of :attr:`embedding_text` (:func:`docanchor.lexical.tokenize`) as
    the lexical index stored them when it wrote the chunk, joined by single spaces (a term holds
    no whitespace; kept as one string, so reading a chunk splits nothing); ``None`` when not known
    (a chunk read from Chroma): tokenise it then. Derived data, so it takes no part in equality."""

    @cached_property
    def chunk_id(self) -> str:
        """Derived id (see :func:`chunk_id`): re-ingesting overwrites, never duplicates. Formatted
        once per chunk (retrieval asks for it many times per candidate)."""
        return chunk_id(self.doc_id, self.ordinal)

    @property
    def embedding_text(self) -> str:
        """What is embedded and BM25-tokenised for this chunk: :func:`embedding_input`."""
        return embedding_input(self.text, self.context)


def embedding_input(text: str, context: str = "") -> str:
    """The text a chunk is embedded and BM25-indexed from: ``context + "\n" + text`` when the
    chunk has a context, else ``text`` unchanged.

    The one place this rule lives: ingest (``ingest.pipeline``), re-embedding
    (``docanchor.reindex``) and the lexical index (``docanchor.lexical``) all call it, so a chunk's
    vector and its BM25 terms always come from the same string.
    """
    return f"{context}\n{text}" if context else text


def stored_text(chunks: list[Chunk], start: int = 0) -> str:
    """A document's text as stored: its chunks at their offsets in the normalised text, up to the
    end of the last one. What ``char:`` cursors address and what a document's size counts (see
    :attr:`DocumentRecord.n_chars`): text never chunked (hidden, garbled) is not stored.

    The text between two chunks is the document's own (:attr:`Chunk.gap_after`) unless unindexed
    text lies there (:attr:`Chunk.joins_next`) or it is unknown (older chunks); such characters
    read as newlines, or as spaces after a chunk that stops inside a line.

    Args:
        chunks: at least one chunk of one document, in any order; for a part of the text, the
            chunks of one run of consecutive ordinals (the text between them is theirs).
        start: the character offset the returned text starts at (the text before it, ``start``
            characters, is left out); at most the first chunk's ``start_char``.
    """
    end = max(c.end_char for c in chunks)
    buf = ["\n"] * (end - start)
    ordered = sorted(chunks, key=lambda c: c.start_char)
    for c, nxt in zip(ordered, ordered[1:]):
        n = nxt.start_char - c.end_char
        if n <= 0:
            continue
        if c.joins_next and c.gap_after is not None and len(c.gap_after) == n:
            buf[c.end_char - start : nxt.start_char - start] = list(c.gap_after)
        elif not c.ends_line:
            buf[c.end_char - start : nxt.start_char - start] = [" "] * n
    for c in chunks:
        buf[c.start_char - start : c.start_char - start + len(c.text)] = list(c.text)
    return "".join(buf)


@dataclass
class DocumentRecord:
    """A stored document's metadata, as listed and returned by the API.

    ``n_tokens`` counts budget tokens of the stored text (:func:`stored_text`: hidden or garbled
    text that was never chunked is not counted); ``n_chars`` its characters, so ``char:0`` to
    ``char:<n_chars - 1>`` are the document's cursors. Unindexed text before the last chunk keeps
    its place there as blank characters (counted in ``n_chars``; a read from a ``char:`` cursor
    inside it starts at the next chunk); after the last chunk it is not counted.
    ``source_name`` is the file name its first ingest gave (a type hint and fallback title).
    ``sources`` says where its bytes came from, oldest first: a path as the command line or the
    Python API read it (absolute), a URL, or an upload's file name; identical bytes from several
    places are one document with several sources. Records stored before sources existed have none.
    ``tags`` and ``metadata`` are the caller's (rules in :mod:`docanchor.library`); ``added_at``
    is when the document was stored (ISO 8601, UTC; "" for records stored before it existed).
    ``outline`` holds the first :data:`summarize.outline.OUTLINE_LIMIT` headings in reading order;
    ``outline_total`` counts all of them, so ``outline_total - len(outline)`` headings are left
    out of the list (records stored before it existed count their ``outline``).
    """

    doc_id: str
    title: str
    doc_type: str
    n_chunks: int
    n_tokens: int
    n_chars: int
    n_pages: int | None = None
    anchor: str = ""
    outline: list[str] = field(default_factory=list)
    flags: dict[str, Any] = field(default_factory=dict)
    source_name: str = ""
    sources: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    added_at: str = ""
    outline_total: int | None = None

    def __post_init__(self) -> None:
        if self.outline_total is None:
            self.outline_total = len(self.outline)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Section:
    """A contiguous passage returned by retrieval: one or more merged chunks of one document.

    Attributes:
        text: exactly the document's normalised text from ``start_char`` to ``end_char``.
        start_char, end_char: character offsets in the document's normalised text.
        source_start, source_end: the same passage as character offsets into the decoded text
            of the uploaded file (they differ where normalisation changed characters, e.g. "½"
            or CRLF line ends), for a client to highlight it in that file; ``None`` for formats
            whose text is extracted (PDF, DOCX, HTML, CSV), see
            :attr:`ParsedDocument.source_runs`.
        score: the best relevance score among its chunks (higher is better).
        n_tokens: budget tokens of ``text`` alone (the citation line is counted separately).
        chunk_ids: the chunks it was built from.
        citation: the rendered citation line that introduces it in the context.
        unit: what ``page_start``/``page_end`` count (the format's citation unit: pages,
            slides, sheets, chapters); not part of :meth:`to_dict` (``citation`` says it).
        tail: what the context writes after ``text``: an ellipsis ("…") when the section was
            trimmed inside a sentence, else ""; every rendering of the section (the context, a
            tool answer) shows it. Not part of :meth:`to_dict` (``context`` shows it).
        head: what the context writes before ``text``: an ellipsis ("…") when the section
            starts inside a sentence (the document's text before ``start_char`` ends none), else
            "". Shown and left out of :meth:`to_dict` as ``tail`` is.
        heading_path: the headings the section's text starts under (whole even when the
            citation line leaves them out).
        cites_heading: whether ``citation`` names ``heading_path``; False for a passage shorter
            than its heading, whose citation line leaves it out to save budget tokens
            (:mod:`retrieval.pack` rule 6). Every rendering of the section's citation follows
            it. Not part of :meth:`to_dict`.
    """

    doc_id: str
    title: str
    text: str
    start_char: int
    end_char: int
    page_start: int | None
    page_end: int | None
    heading_path: tuple[str, ...]
    score: float
    n_tokens: int
    chunk_ids: list[str] = field(default_factory=list)
    citation: str = ""
    unit: formats.Unit | None = formats.PAGE
    source_start: int | None = None
    source_end: int | None = None
    tail: str = ""
    head: str = ""
    cites_heading: bool = True

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("unit", None)
        d.pop("tail", None)
        d.pop("head", None)
        d.pop("cites_heading", None)
        d["heading_path"] = list(self.heading_path)
        return d


@dataclass
class RetrievalResult:
    """The answer to a retrieval request.

    Attributes:
        context: the rendered string (citation lines and section texts) ready for a prompt.
        context_tokens_used: budget tokens of exactly ``context``; never above ``budget_tokens``.
        message: a sentence for the caller when nothing fits or nothing matched, else "".
        trace: the explanation of every candidate's fate when asked for, else ``None``.
        no_strong_match: no candidate is a strong match for the query by absolute measures
            (see ``retrieval.stages.cutoff``): the sections, if any, are the best weak ones.
        least_budget_tokens: when candidates matched but the budget was too small for any
            section, the smallest budget (budget tokens) that would return one (``message``
            names it); else ``None``. Not part of :meth:`to_dict` (the message says it).
    """

    query: str
    budget_tokens: int
    sections: list[Section]
    context: str
    context_tokens_used: int
    message: str = ""
    trace: dict[str, Any] | None = None
    no_strong_match: bool = False
    least_budget_tokens: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d = {
            "query": self.query,
            "budget_tokens": self.budget_tokens,
            "context_tokens_used": self.context_tokens_used,
            "sections": [s.to_dict() for s in self.sections],
            "context": self.context,
            "message": self.message,
            "no_strong_match": self.no_strong_match,
        }
        if self.trace is not None:
            d["trace"] = self.trace
        return d


@dataclass(frozen=True)
class TurnText:
    """One message of a conversation as text, for summarising offloaded turns.

    Attributes:
        turn: the message's 1-based position in the conversation it came from.
        speaker: who wrote it: ``user``, ``assistant``, ``system``, or ``tool <name>`` for a tool result.
        text: its text (a tool call is written as ``name(arguments)``).
    """

    turn: int
    speaker: str
    text: str
