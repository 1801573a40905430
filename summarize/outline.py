"""Headings of a parsed document, in reading order, and a short selection for the anchor."""

from __future__ import annotations

from dataclasses import dataclass

from docanchor.display import not_shown
from docanchor.text import collapse_space
from docanchor.types import ParsedDocument

OUTLINE_LIMIT = 50
"""Most headings kept in a document's stored outline (its first 50, in reading order)."""
HEADING_CHARS = 80
"""Longest heading shown in the anchor, in characters (longer ones end with "…")."""


@dataclass(frozen=True)
class Heading:
    """One heading: ``index`` is its position among the document's headings (reading order),
    ``level`` 1 is the top."""

    index: int
    level: int
    text: str
    page: int | None


def headings(parsed: ParsedDocument) -> list[Heading]:
    """The document's unflagged heading blocks in reading order, whitespace collapsed; a heading
    repeated with the same level and text (running headers) is kept once."""
    out: list[Heading] = []
    seen: list[tuple[int, str]] = []
    for b in parsed.blocks:
        if b.kind != "heading" or b.flags:
            continue
        # A heading's own path ends with its clean name (Markdown's "##" marks left out).
        raw = b.heading_path[-1] if b.heading_path else parsed.text[b.start:b.end]
        text = collapse_space(raw)
        key = (max(1, b.level), text)
        if not text or key in seen:
            continue
        seen.append(key)
        out.append(Heading(len(out), key[0], text, b.page))
    return out


def outline_list(heads: list[Heading], limit: int = OUTLINE_LIMIT) -> list[str]:
    """The stored outline: the first ``limit`` headings' texts, exactly as in chunks'
    ``heading_path`` (so each one is a valid ``from`` for reading on)."""
    return [h.text for h in heads[:limit]]


def map_headings(heads: list[Heading], title: str) -> list[Heading]:
    """The headings the anchor's outline lists: all of ``heads`` but a first heading that repeats
    the document's ``title`` (whitespace collapsed, case ignored). The anchor's first line names
    the title already, and reading from it is reading from the start, so listing it again only
    nests the real map, the sections, one level under it. Source: the new-user trial of 5af026a,
    which read docs/guide.md's outline ("- The DocAnchor guide" over its nine sections, indented)
    as one heading and no "(+N more headings not shown)" line."""
    if heads and heads[0].text.casefold() == collapse_space(title).casefold():
        return heads[1:]
    return heads


def by_priority(heads: list[Heading]) -> list[Heading]:
    """Headings in the order the anchor adds them: top levels first, then reading order."""
    return sorted(heads, key=lambda h: (h.level, h.index))


def whole_levels(ranked: list[Heading], most: int) -> int:
    """How many of the ``ranked`` headings (see :func:`by_priority`) make up complete levels
    without going over ``most``; at least ``min(most, len(ranked))`` of the top level. A single
    top heading (a title under another name than the document's, see :func:`map_headings`) alone
    is no outline: then the next level fills up to ``most`` in reading order (such a title over
    nine sections shows its first seven sections)."""
    n = 0
    while n < len(ranked):
        level = ranked[n].level
        end = n
        while end < len(ranked) and ranked[end].level == level:
            end += 1
        if end > most:
            return n if n > 1 else min(most, len(ranked))
        n = end
    return n


def render(selected: list[Heading], total: int = 0) -> list[str]:
    """Anchor lines for the selected headings, in reading order, indented two spaces per level
    below the shallowest selected one; when they are fewer than the document's ``total``
    headings, a last line says how many are left out (:func:`docanchor.display.not_shown`), so none is dropped silently."""
    if not selected:
        return []
    top = min(h.level for h in selected)
    lines = []
    for h in sorted(selected, key=lambda h: h.index):
        text = h.text if len(h.text) <= HEADING_CHARS else h.text[: HEADING_CHARS - 1].rstrip() + "…"
        lines.append("  " * min(h.level - top, 4) + "- " + text)
    if total > len(selected):
        lines.append(not_shown(total - len(selected), "heading"))
    return lines

