"""OpenDocument text (ODT): headings, paragraphs, lists, tables, frames and notes in reading order,
read with odfpy (the OASIS ODF 1.3 ``office:text`` body).

- ``text:h`` with its ``text:outline-level`` -> a heading of that level;
- ``text:p`` -> a paragraph; ``text:list`` -> a ``list`` block (``- item`` lines, nested lists
  indented); ``table:table`` -> a ``table`` block, one line per row (``cell | cell``; a covered
  cell of a merged range is left out, so its value appears once);
- ``text:section``, ``draw:frame``/``draw:text-box`` are walked in place;
- ``text:note`` (foot- and endnotes) -> a ``footnote`` block after its paragraph;
- tracked deletions (``text:tracked-changes``), comments (``office:annotation``) and hidden text
  (``text:hidden-text``, ``text:hidden-paragraph``) are not indexed; hidden ones are counted in
  ``flags["hidden_text"]``.
"""

from __future__ import annotations

import io
from pathlib import PurePath

from docanchor.errors import DocumentError
from docanchor.text import CELL_SEP
from docanchor.types import ParsedDocument
from ingest.builder import DocumentBuilder
from ingest.parsers.package import malformed, open_package

LABEL = "OpenDocument file"
TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
DRAW = "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
_SKIP = {(TEXT, "tracked-changes"), (OFFICE, "annotation"), (OFFICE, "annotation-end"), (TEXT, "note-citation"),
         (TEXT, "sequence-decls"), (TEXT, "variable-decls"), (TEXT, "user-field-decls")}
_HIDDEN = {(TEXT, "hidden-text"), (TEXT, "hidden-paragraph")}


def parse_odt(data: bytes, filename: str | None = None) -> ParsedDocument:
    """Parse an OpenDocument text file.

    Returns:
        A :class:`ParsedDocument` of ``doc_type="odt"``; title from the document's ``dc:title``,
        else the first heading, else the file name.

    Raises:
        DocumentError: ``empty_file``; ``malformed`` for a damaged package; ``xml_entities`` (an
            XML bomb); ``no_text`` when the body holds no text.
        TooLarge: ``too_large`` for a zip bomb.
    """
    open_package(data, LABEL).close()
    from odf import opendocument

    try:
        doc = opendocument.load(io.BytesIO(data))
        body = doc.text
        title = _title(doc)
    except Exception as exc:  # odfpy raises KeyError, zipfile and SAX errors alike
        raise malformed(LABEL, f"odfpy cannot read its content ({type(exc).__name__})") from exc
    b = DocumentBuilder("odt", title=title)
    walker = _Walker(b)
    walker.block_children(body)
    if walker.hidden:
        b.flags["hidden_text"] = walker.hidden
    parsed = b.build()
    if not parsed.blocks:
        raise DocumentError("The OpenDocument file's body holds no text.", code="no_text")
    if not b.title:
        parsed.title = PurePath(filename).stem[:200] if filename else parsed.title
    return parsed


def _title(doc) -> str:
    from odf.dc import Title

    for el in doc.meta.getElementsByType(Title):
        text = " ".join(str(el).split())
        if text:
            return text[:200]
    return ""


class _Walker:
    def __init__(self, b: DocumentBuilder) -> None:
        self.b = b
        self.hidden = 0

    def block_children(self, el) -> None:
        for child in el.childNodes:
            if child.nodeType == child.ELEMENT_NODE:
                self.block(child)

    def block(self, el) -> None:
        q = el.qname
        if q in _SKIP:
            return
        if q in _HIDDEN:
            self.hidden += 1
            return
        if q == (TEXT, "h"):
            level = int(el.getAttrNS(TEXT, "outline-level") or 1)
            text, notes = self.inline(el)
            self.b.heading(text, level=level)
            self._notes(notes)
        elif q == (TEXT, "p"):
            text, notes = self.inline(el)
            self.b.add(text)
            self._notes(notes)
        elif q == (TEXT, "list"):
            self.b.add("\n".join(self.list_lines(el, 0)), "list", raw=True)
        elif q == (TABLE, "table"):
            self.b.add("\n".join(self.table_rows(el)), "table", raw=True)
        else:  # sections, frames, text boxes, table of contents bodies ...
            self.block_children(el)

    def _notes(self, notes: list[str]) -> None:
        for note in notes:
            self.b.add(note, "footnote")

    def inline(self, el) -> tuple[str, list[str]]:
        """The text of a paragraph or heading, and the notes it anchors."""
        parts: list[str] = []
        notes: list[str] = []
        self._inline(el, parts, notes)
        return "".join(parts), notes

    def _inline(self, el, parts: list[str], notes: list[str]) -> None:
        for child in el.childNodes:
            if child.nodeType == child.TEXT_NODE:
                parts.append(child.data)
                continue
            if child.nodeType != child.ELEMENT_NODE:
                continue
            q = child.qname
            if q in _SKIP:
                continue
            if q in _HIDDEN:
                self.hidden += 1
            elif q == (TEXT, "s"):
                parts.append(" " * int(child.getAttrNS(TEXT, "c") or 1))
            elif q == (TEXT, "tab"):
                parts.append("\t")
            elif q == (TEXT, "line-break"):
                parts.append("\n")
            elif q == (TEXT, "note"):
                body = [self.inline(p)[0] for p in child.getElementsByType(_note_paragraph())]
                text = " ".join(" ".join(t.split()) for t in body if t.strip())
                if text:
                    notes.append(text)
            else:
                self._inline(child, parts, notes)

    def list_lines(self, el, depth: int) -> list[str]:
        lines: list[str] = []
        for item in el.childNodes:
            if item.nodeType != item.ELEMENT_NODE:
                continue
            for child in item.childNodes:
                if child.nodeType != child.ELEMENT_NODE:
                    continue
                if child.qname == (TEXT, "list"):
                    lines.extend(self.list_lines(child, depth + 1))
                elif child.qname in ((TEXT, "p"), (TEXT, "h")):
                    text = " ".join(self.inline(child)[0].split())
                    if text:
                        lines.append("  " * depth + "- " + text)
        return lines

    def table_rows(self, el) -> list[str]:
        rows: list[str] = []
        for row in _descendants(el, (TABLE, "table-row")):
            cells = []
            for cell in row.childNodes:
                if cell.nodeType == cell.ELEMENT_NODE and cell.qname == (TABLE, "table-cell"):
                    text = " ".join(" ".join(self.inline(p)[0].split()) for p in cell.childNodes
                                    if p.nodeType == p.ELEMENT_NODE and p.qname in ((TEXT, "p"), (TEXT, "h")))
                    cells.append(text.strip())
            if any(cells):
                rows.append(CELL_SEP.join(c for c in cells if c))
        return rows


def _descendants(el, qname):
    for child in el.childNodes:
        if child.nodeType != child.ELEMENT_NODE:
            continue
        if child.qname == qname:
            yield child
        elif child.qname != (TABLE, "table"):  # a nested table's rows are its own
            yield from _descendants(child, qname)


def _note_paragraph():
    from odf.text import P

    return P
