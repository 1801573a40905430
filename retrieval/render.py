"""Rendering of retrieved sections into the context string a caller pastes into a prompt.

Shape (one block per section, blocks separated by a blank line)::

    [1] Title — p. 3–4 — Heading › Sub — doc_abc123
    section text ...

    [2] ...

The citation line is kept short: titles over 60 characters and headings over 40 are cut with an
ellipsis, and only the innermost two headings are shown. Budgets are measured on this exact
string (see :mod:`retrieval.pack`).
"""

from __future__ import annotations

from typing import Iterable, Sequence

SEPARATOR = "\n\n"
MAX_TITLE_CHARS = 60
MAX_HEADING_CHARS = 40
MAX_HEADINGS = 2


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def pages_label(page_start: int | None, page_end: int | None) -> str:
    """``p. 3``, ``p. 3–4`` or ``""`` when the document has no pages."""
    if page_start is None:
        return ""
    if page_end is None or page_end == page_start:
        return f"p. {page_start}"
    return f"p. {page_start}–{page_end}"


def citation_line(
    number: int, title: str, doc_id: str, page_start: int | None = None, page_end: int | None = None,
    heading_path: Sequence[str] = (),
) -> str:
    """The one-line citation for section ``number`` (1-based): title, pages, headings, doc id."""
    parts = [f"[{number}] {_cut(title, MAX_TITLE_CHARS) or 'Untitled'}"]
    pages = pages_label(page_start, page_end)
    if pages:
        parts.append(pages)
    heads = [_cut(h, MAX_HEADING_CHARS) for h in heading_path if h.strip()][-MAX_HEADINGS:]
    if heads:
        parts.append(" › ".join(heads))
    parts.append(doc_id)
    return " — ".join(parts)


def render_block(citation: str, text: str) -> str:
    """One section as it appears in the context: its citation line, a newline, its text."""
    return f"{citation}\n{text}"


def render_context(blocks: Iterable[tuple[str, str]]) -> str:
    """The context string for ``(citation, text)`` pairs in order; ``""`` for none."""
    return SEPARATOR.join(render_block(c, t) for c, t in blocks)
