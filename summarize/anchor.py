"""The anchor: what the chat keeps of an offloaded document, at most ``max_tokens`` budget tokens.

Layout (lines, in this order; optional parts only when they fit)::

    Document: <title>
    Type: PDF · 12 pages · 40 chunks · 9,812 tokens offloaded · 41,020 characters
    Schema: (CSV)           / Outline: (headings, top levels first; not a first one that
    - ...                     repeats the title, see summarize.outline.map_headings)
    (+N more headings not shown)   (when some are left out; likewise columns)
    Central passages:       (the most central sentences, see summarize.central)
    - ...
    Notes: page 3 garbled, not indexed; ...
    doc_id: doc_0123456789abcdef
    More: searchDocuments(...) ...; readDocument(...) ...

Parts are added by priority — title, doc_id and the how-to line (always), size, quality notes,
CSV schema, the first outline entries, central sentences, more outline entries — and each
addition is kept only if the whole rendered anchor, counted exactly with the budget tokenizer,
stays within ``max_tokens``. Nothing depends on time, set order or randomness: the same input
gives the same bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Sequence

from docanchor import formats
from docanchor.display import counted, not_shown
from docanchor.text import collapse_space
from docanchor.tokens import TokenCounter
from docanchor.tool_calls import how_to_line, short_how_to
from docanchor.types import Chunk, ParsedDocument, stored_text
from summarize import outline as ol
from summarize.central import central_sentences
from summarize.notes import quality_notes

TITLE_TOKENS = 40
"""Longest title kept, in budget tokens."""
SENTENCE_TOKENS = 60
"""Longest central sentence kept, in budget tokens (longer ones are cut and end with "…")."""
MAX_SENTENCES = 4
FIRST_OUTLINE = 8
"""Most outline entries tried before the central sentences (whole heading levels, top first);
more are added after the sentences while room is left, up to :data:`MAX_OUTLINE`."""
MAX_OUTLINE = 24


@dataclass
class _Parts:
    title: str
    doc_id: str
    more: str
    size: str = ""
    notes: list[str] = field(default_factory=list)
    schema: list[str] = field(default_factory=list)
    outline: list[str] = field(default_factory=list)
    sentences: list[str] = field(default_factory=list)

    def render(self) -> str:
        lines = [f"Document: {self.title}"]
        if self.size:
            lines.append(self.size)
        if self.schema:
            lines.append("Schema:")
            lines.extend(f"- {s}" for s in self.schema)
        if self.outline:
            lines.append("Outline:")
            lines.extend(self.outline)
        if self.sentences:
            lines.append("Central passages:")
            lines.extend(f"- {s}" for s in self.sentences)
        if self.notes:
            lines.append("Notes: " + "; ".join(self.notes) + ".")
        lines.append(f"doc_id: {self.doc_id}")
        lines.append(self.more)
        return "\n".join(lines)


def build_anchor(
    parsed: ParsedDocument,
    chunks: list[Chunk],
    embeddings: Sequence[Sequence[float]],
    *,
    doc_id: str,
    counter: TokenCounter,
    max_tokens: int,
    size: tuple[int, int] | None = None,
) -> tuple[str, list[str]]:
    """Build a document's anchor and outline.

    Args:
        parsed: the parsed document (title, type, text, headings, flags; ``summary`` for CSV).
        chunks: its chunks in ordinal order.
        embeddings: one vector per chunk, as stored (used for the central sentences).
        doc_id: the document's id, always in the anchor.
        counter: the budget tokenizer; the anchor is measured with it on the exact string.
        max_tokens: the anchor's limit in budget tokens (``settings.anchor_tokens``, 300).
        size: ``(budget tokens, characters)`` of the stored text, as the record gives them
            (:attr:`~docanchor.types.DocumentRecord.n_tokens`, ``n_chars``); by default measured
            on :func:`~docanchor.types.stored_text` of ``chunks``.

    Returns:
        ``(anchor, outline)``: the anchor text, at most ``max_tokens`` budget tokens whenever the
        doc_id line and a short how-to line fit at all; and the first
        :data:`~summarize.outline.OUTLINE_LIMIT` headings' texts in reading order.
    """
    heads = ol.headings(parsed)
    parts = _Parts(title=clip(counter, collapse_space(parsed.title) or "Untitled document", TITLE_TOKENS),
                   doc_id=doc_id, more=how_to_line(doc_id))

    def fits(candidate: _Parts) -> bool:
        return counter.count(candidate.render()) <= max_tokens

    def attempt(**changes: object) -> bool:
        nonlocal parts
        candidate = replace(parts, **changes)
        if fits(candidate):
            parts = candidate
            return True
        return False

    parts = _fit_required(parts, counter, max_tokens)
    if size is None:
        text = stored_text(chunks) if chunks else ""
        size = (counter.count(text), len(text))
    attempt(size=_size_line(parsed, chunks, size))
    for note in quality_notes(parsed.flags):
        attempt(notes=parts.notes + [note])
    if parsed.summary:  # a schema (CSV, each sheet of a workbook)
        parts = _fit_schema(parts, parsed.summary, fits)
    listed = ol.map_headings(heads, parsed.title)
    ranked = ol.by_priority(listed)
    first = ol.whole_levels(ranked, FIRST_OUTLINE)
    chosen: list[ol.Heading] = []
    for h in ranked[:first]:
        if attempt(outline=ol.render(chosen + [h], len(listed))):
            chosen.append(h)
    if not parsed.summary and chunks and len(embeddings) == len(chunks):
        for s in central_sentences(chunks, embeddings, limit=MAX_SENTENCES):
            s = clip(counter, s, SENTENCE_TOKENS)
            if not attempt(sentences=parts.sentences + [s]):
                room = max_tokens - counter.count(parts.render()) - 4
                if room >= 15:
                    attempt(sentences=parts.sentences + [clip(counter, s, room)])
                break
    for h in ranked[first:MAX_OUTLINE]:
        if attempt(outline=ol.render(chosen + [h], len(listed))):
            chosen.append(h)
        else:
            break
    return parts.render(), ol.outline_list(heads)


def _fit_schema(parts: _Parts, summary: Sequence[str], fits) -> _Parts:
    """``parts`` with as much of a table's schema as fits: its first line (rows × columns), then
    column lines, identifying columns first (:func:`_identifying`), in table order; when some
    are left out, a last line says how many, so no column is dropped silently."""
    if not summary:
        return parts
    whole = replace(parts, schema=list(summary))
    if fits(whole):
        return whole
    head, columns = list(summary[:1]), list(summary[1:])
    order = sorted(range(len(columns)), key=lambda i: (not _identifying(columns[i]), i))
    kept: list[int] = []
    best = replace(parts, schema=head + [_left_out(len(columns))]) if columns else parts
    if not fits(best):
        return parts
    for i in order:
        trial = sorted(kept + [i])
        candidate = replace(parts, schema=head + [columns[j] for j in trial] + [_left_out(len(columns) - len(trial))])
        if not fits(candidate):
            break
        kept, best = trial, candidate
    return best


ID_WORDS = frozenset({"name", "title", "label", "id", "code", "key"})
"""A column whose header has one of these words identifies rows; the anchor keeps it first."""


def _identifying(column_line: str) -> bool:
    header = column_line.split(":", 1)[0].casefold()
    return bool(ID_WORDS & set(re.findall(r"[a-z]+", header)))


def _left_out(n: int) -> str:
    return not_shown(n, "column", "; readDocument shows every column")


def _fit_required(parts: _Parts, counter: TokenCounter, max_tokens: int) -> _Parts:
    """The title, doc_id and how-to lines alone, shortened until they fit (tiny limits only)."""
    if counter.count(parts.render()) <= max_tokens:
        return parts
    for more in (parts.more, short_how_to(parts.doc_id)):
        for tokens in (20, 10, 5, 0):
            candidate = replace(parts, more=more, title=clip(counter, parts.title, tokens) if tokens else "")
            if counter.count(candidate.render()) <= max_tokens:
                return candidate
    return replace(parts, more=short_how_to(parts.doc_id), title="")


def clip(counter: TokenCounter, text: str, max_tokens: int) -> str:
    """``text`` (whitespace collapsed) if it has at most ``max_tokens`` tokens of ``counter``, else
    a shorter prefix ending at a word (when there is one) with "…"; never over ``max_tokens``."""
    text = collapse_space(text)
    if counter.count(text) <= max_tokens:
        return text
    cut = counter.truncate(text, max(max_tokens - 1, 0))
    if " " in cut[len(cut) // 2:]:
        cut = cut[: cut.rindex(" ")]
    cut = cut.rstrip(" ,;:") + "…"
    while cut != "…" and counter.count(cut) > max_tokens:
        cut = cut[:-2].rstrip() + "…"
    return cut


def _size_line(parsed: ParsedDocument, chunks: list[Chunk], size: tuple[int, int]) -> str:
    """``Type: PDF · 12 pages · 40 chunks · N tokens offloaded · M characters``; ``size`` is
    ``(budget tokens, characters)`` of the stored text."""
    bits = [f"Type: {formats.anchor_name_of(parsed.doc_type)}"]
    if parsed.n_pages:
        bits.append((formats.unit_of(parsed.doc_type) or formats.PAGE).count(parsed.n_pages))
    bits.append(counted(len(chunks), "chunk"))
    bits.append(f"{size[0]:,} tokens offloaded")
    bits.append(f"{size[1]:,} characters")
    return " · ".join(bits)
