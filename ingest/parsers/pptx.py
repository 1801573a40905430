"""PowerPoint (PPTX): every visible slide as a page, in slide order, read with python-pptx.

Per slide (its number is the block's ``page``, cited as "slide N"):

- the title placeholder becomes a level-1 heading (the slide's other blocks sit under it);
- the other shapes in reading order (top to bottom, then left to right, by their position on the
  slide; a group's shapes in the same order inside the group): text frames as paragraphs (a
  frame of bullet points as a ``list``), tables one row per line (``cell | cell``, a merged
  cell once);
- the speaker notes last, as a paragraph beginning ``Speaker notes:``.

Hidden slides (``<p:sld show="0">``) are counted in ``flags["hidden_slides"]`` and not indexed.
Bombs are refused before python-pptx opens the package (:mod:`ingest.parsers.package`).
"""

from __future__ import annotations

import io
from pathlib import PurePath

from docanchor.errors import DocumentError
from docanchor.text import CELL_SEP
from docanchor.types import ParsedDocument
from ingest.builder import DocumentBuilder
from ingest.parsers.package import malformed, open_package

LABEL = "PowerPoint file"
NOTES_PREFIX = "Speaker notes: "


def parse_pptx(data: bytes, filename: str | None = None) -> ParsedDocument:
    """Parse a PowerPoint presentation.

    Returns:
        A :class:`ParsedDocument` of ``doc_type="pptx"``; ``n_pages`` is the slide count (hidden
        slides included, so numbers match PowerPoint's); title from the core properties, else
        the first slide title, else the file name.

    Raises:
        DocumentError: ``empty_file``; ``malformed`` for a damaged package or one python-pptx
            cannot read (a macro-enabled ``.pptm`` included); ``xml_entities`` (an XML bomb).
        TooLarge: ``too_large`` for a zip bomb.
    """
    open_package(data, LABEL).close()
    from pptx import Presentation
    from pptx.exc import PythonPptxError

    try:
        deck = Presentation(io.BytesIO(data))
        slides = list(deck.slides)
        title = " ".join((deck.core_properties.title or "").split())[:200]
    except (PythonPptxError, KeyError, ValueError, AttributeError, TypeError, IndexError) as exc:
        raise malformed(LABEL, "python-pptx cannot read its slides; a .pptm must be saved as .pptx") from exc
    except Exception as exc:  # lxml and zipfile errors from inside python-pptx
        if type(exc).__module__.startswith(("lxml", "zipfile")):
            raise malformed(LABEL, "a slide part is not well-formed") from exc
        raise
    b = DocumentBuilder("pptx", title=title)
    hidden = []
    for number, slide in enumerate(slides, 1):
        if slide.element.get("show") in ("0", "false"):
            hidden.append(number)
            continue
        _slide(b, slide, number)
    if hidden:
        b.flags["hidden_slides"] = {"pages": hidden, "count": len(hidden)}
    parsed = b.build(n_pages=len(slides))
    if not b.title:
        parsed.title = PurePath(filename).stem[:200] if filename else parsed.title
    if not parsed.blocks and not slides:
        raise DocumentError("The presentation has no slides.", code="no_text")
    return parsed


def _slide(b: DocumentBuilder, slide, number: int) -> None:
    b.reset_headings()
    title_shape = slide.shapes.title
    if title_shape is not None and title_shape.has_text_frame:
        b.heading(title_shape.text_frame.text, level=1, page=number)
    for shape in _reading_order(slide.shapes):
        if title_shape is not None and shape.shape_id == title_shape.shape_id:
            continue
        _shape(b, shape, number)
    if slide.has_notes_slide:
        frame = slide.notes_slide.notes_text_frame
        notes = frame.text.strip() if frame is not None else ""
        if notes:
            b.add(NOTES_PREFIX + notes, page=number)


def _reading_order(shapes) -> list:
    """Shapes top to bottom, then left to right (shapes without a position keep their order)."""
    indexed = list(enumerate(shapes))
    return [s for _, s in sorted(indexed, key=lambda p: (_pos(p[1].top), _pos(p[1].left), p[0]))]


def _pos(value) -> int:
    return int(value) if value is not None else 0


def _shape(b: DocumentBuilder, shape, number: int) -> None:
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
        for child in _reading_order(shape.shapes):
            _shape(b, child, number)
    elif getattr(shape, "has_table", False) and shape.has_table:
        rows = []
        for row in shape.table.rows:
            cells = [" ".join(c.text.split()) for c in row.cells if not c.is_spanned]
            if any(cells):
                rows.append(CELL_SEP.join(cells))
        b.add("\n".join(rows), "table", page=number, raw=True)
    elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
        paragraphs = [p for p in shape.text_frame.paragraphs if "".join(r.text for r in p.runs).strip()]
        lines = [" ".join("".join(r.text for r in p.runs).split()) for p in paragraphs]
        if len(lines) > 1 and (_is_body(shape) or any(p.level > 0 for p in paragraphs)):
            b.add("\n".join("  " * p.level + "- " + line for p, line in zip(paragraphs, lines)), "list",
                  page=number, raw=True)
        else:
            b.add("\n".join(lines), page=number)


def _is_body(shape) -> bool:
    """A body or content placeholder: its paragraphs are bullet points."""
    from pptx.enum.shapes import PP_PLACEHOLDER

    if not shape.is_placeholder:
        return False
    return shape.placeholder_format.type in (PP_PLACEHOLDER.BODY, PP_PLACEHOLDER.OBJECT)
