"""Rendering of retrieved sections into the context string a caller pastes into a prompt.

Shape (one block per section, blocks separated by a blank line)::

    [1] Title — p. 3–4 — Heading › Sub — doc_abc123   (slide 3, sheet 2, chapter 4 ... by format)
    section text ...

    [2] Title — p. 7 — Other heading
    section text of the same document ...

The citation line is kept short: titles over 60 characters and headings over 40 are cut with an
ellipsis, only the innermost two headings are shown, a heading equal to the title is left out,
and the doc id is given on the first section of each document only (a repeated doc id costs
about 10 tokens, which at 1000 tokens and six sections of one document is 5 % of the budget).
Budgets are measured on this exact string (see :mod:`retrieval.pack`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable, Sequence

from docanchor.formats import PAGE, Unit
from docanchor.text import collapse_space

SEPARATOR = "\n\n"
MAX_TITLE_CHARS = 60
MAX_HEADING_CHARS = 40
MAX_HEADINGS = 2


def _cut(text: str, limit: int) -> str:
    text = collapse_space(text)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def pages_label(page_start: int | None, page_end: int | None, unit: Unit | None = PAGE) -> str:
    """``p. 3``, ``p. 3–4``, ``slides 3–4`` (the format's citation unit,
    :attr:`docanchor.formats.Format.unit`) or ``""`` when the document has no numbered parts."""
    return unit.label(page_start, page_end) if unit is not None else ""


def citation_line(
    number: int, title: str, doc_id: str, page_start: int | None = None, page_end: int | None = None,
    heading_path: Sequence[str] = (), show_doc_id: bool = True, unit: Unit | None = PAGE,
) -> str:
    """The one-line citation for section ``number`` (1-based): title, pages (or slides, sheets,
    chapters: ``unit``), headings, doc id.

    A heading that repeats the title (a document's H1, usually) is not shown twice. With
    ``show_doc_id`` false the doc id is left out: a context names it on the first section of each
    document only.
    """
    return _citation_line(number, title, doc_id, page_start, page_end, tuple(heading_path), show_doc_id, unit)


CITATION_CACHE_LINES = 4096
"""Citation lines kept by :func:`_citation_line` (least recently used go first): the packer
re-renders every section's line for each piece it tries (the numbers shift as sections are
added), about 200 lines per query at a 4000-token budget. Source: a bound on memory (a few
hundred kilobytes), not tuned."""


@lru_cache(maxsize=CITATION_CACHE_LINES)
def _citation_line(number: int, title: str, doc_id: str, page_start: int | None, page_end: int | None,
                   heading_path: tuple[str, ...], show_doc_id: bool, unit: Unit | None) -> str:
    """:func:`citation_line` with hashable arguments, cached (it is a pure function of them)."""
    parts = [f"[{number}] {_cut(title, MAX_TITLE_CHARS) or 'Untitled'}"]
    pages = pages_label(page_start, page_end, unit)
    if pages:
        parts.append(pages)
    heads = shown_headings(title, heading_path)
    if heads:
        parts.append(" › ".join(heads))
    if show_doc_id:
        parts.append(doc_id)
    return " — ".join(parts)


def shown_headings(title: str, heading_path: Sequence[str]) -> list[str]:
    """The headings a citation or a read window's header shows: the innermost
    :data:`MAX_HEADINGS`, each cut to :data:`MAX_HEADING_CHARS` characters, without a heading that
    repeats ``title`` (a document's H1, usually: the title is shown once)."""
    same = " ".join(title.split()).casefold()
    heads = [_cut(h, MAX_HEADING_CHARS) for h in heading_path if h.strip() and " ".join(h.split()).casefold() != same]
    return heads[-MAX_HEADINGS:]


def render_block(citation: str, text: str) -> str:
    """One section as it appears in the context: its citation line, a newline, its text."""
    return f"{citation}\n{text}"


def render_context(blocks: Iterable[tuple[str, str]]) -> str:
    """The context string for ``(citation, text)`` pairs in order; ``""`` for none."""
    return SEPARATOR.join(render_block(c, t) for c, t in blocks)
