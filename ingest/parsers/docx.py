"""DOCX: everything a reader sees, in reading order.

python-docx is the package reader (DESIGN.md: "python-docx over body, tables, headers/footers,
footnotes"): :func:`docx.Document` opens the OPC package, resolves its relationships and parses
its XML parts; this module takes from it the body element (``document.element.body``), the
styles part, each section's header and footer parts (default, first-page and even-page, each part
once) and, since python-docx 1.2 has no notes API, the footnotes and endnotes parts related to the
document part (``part_related_by``). python-docx's block objects (``Document.paragraphs``,
``row.cells``) miss text boxes, content controls and nested tables and repeat merged cells, so
the content of those parts is walked here with lxml (ECMA-376 part 1, §17):

* body: paragraphs (``w:p``), tables (``w:tbl``: one line per row, ``cell | cell``, each
  logical cell once: ``w:gridSpan`` cells are single elements and ``w:vMerge`` continuation
  cells are skipped; nested tables inline), content controls (``w:sdt``), custom XML;
* text boxes: ``mc:AlternateContent`` takes the first ``mc:Choice`` only (never the VML
  ``mc:Fallback`` copy); ``w:txbxContent`` paragraphs follow the paragraph that anchors them;
* tracked changes: insertions (``w:ins``, ``w:moveTo``) kept, deletions (``w:del``,
  ``w:moveFrom``) dropped;
* hidden runs are not indexed: ``w:vanish``, text of 1 pt or less, or text coloured like what
  lies beneath it (white on a white page), from the run's properties and the style hierarchy
  (:class:`~ingest.parsers.docx_format.RunFormats`). They are counted in ``flags["hidden_text"]``:
  ``{"count": runs, "chars": characters, "where": parts, "how": techniques}``;
* headers and footers once each (ones across sections that differ only by a number -- a page or
  chapter number, a date -- or a rule's length are one running line, kept once:
  :meth:`ingest.parsers.running.RunningLines.keep_first`; the others are counted in the ``running_headers``
  flag, as the PDF parser's), footnotes and
  endnotes (separator notes skipped);
* headings from paragraph styles (``Title``, ``Heading 1``..``Heading 9``) or outline level;
* list numbers of directly numbered paragraphs as Word shows them ("2.", "b)", "(iv)"), from the
  numbering part (:class:`_Numbering`).

Two kinds of package python-docx refuses are read from the ZIP directly (:class:`_Package`), with
the same walker: Strict OOXML (ISO/IEC 29500 Strict namespaces, mapped onto the transitional
ones; python-docx finds no transitional ``officeDocument`` relationship) and the other Word
main-part types (macro-enabled ``.docm``, templates ``.dotx``/``.dotm``; python-docx accepts only
``…document.main+xml``). Any other package python-docx cannot open is ``malformed``; one whose
main part is not WordprocessingML at all (a workbook or presentation named ``.docx``) is
``docx_unsupported``.

Zip bombs are refused from the ZIP central directory before python-docx or anything else
inflates a part, by the limits of every ZIP-based format
(:func:`ingest.parsers.package.check_limits`).
"""

from __future__ import annotations

import io
import posixpath
import re
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import PurePath

import docx
from docx.exceptions import PythonDocxError
from docx.opc.constants import RELATIONSHIP_TYPE as RT
from docx.opc.exceptions import OpcError
from docx.opc.part import XmlPart
from docx.opc.parts.coreprops import CorePropertiesPart
from lxml import etree

from docanchor.errors import DocumentError, TooLarge
from docanchor.text import CELL_SEP
from docanchor.types import ParsedDocument
from ingest.builder import DocumentBuilder
from ingest.parsers.docx_format import RunFormats, on as _on
from ingest.parsers.package import MAX_XML_PART_BYTES, check_limits
from ingest.parsers.running import RunningLines
from ingest.titles import COVER_LINES, cover_title

HEADING_MAX_CHARS = 200
"""A paragraph in a heading style longer than this (characters) is body text in a misused style
(seen in LibreOffice conversions), not a heading."""

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
R_NS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
MC_NS = "http://schemas.openxmlformats.org/markup-compatibility/2006"
PKG_REL_NS = "http://schemas.openxmlformats.org/package/2006/relationships"
CT_NS = "http://schemas.openxmlformats.org/package/2006/content-types"
W = "{%s}" % W_NS
MC = "{%s}" % MC_NS
M = "{http://schemas.openxmlformats.org/officeDocument/2006/math}"

WORD_MAIN_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
"""The one main-part content type python-docx opens (ECMA-376 part 1, §11.3.10)."""

WORD_VARIANT_TYPES = frozenset({
    "application/vnd.ms-word.document.macroEnabled.main+xml",  # .docm
    "application/vnd.openxmlformats-officedocument.wordprocessingml.template.main+xml",  # .dotx
    "application/vnd.ms-word.template.macroEnabledTemplate.main+xml",  # .dotm
})
"""Main parts with the same WordprocessingML as a ``.docx`` that python-docx 1.2 refuses by
content type ([MS-OE376]/[MS-DOCX] content types); read through :class:`_Package` instead."""

# Any other ``…main+xml`` main part (spreadsheetml.sheet, presentationml.presentation, …) is another
# kind of document: ``docx_unsupported``. An undeclared or generic one is left to python-docx.

# Strict OOXML -> transitional namespace names (ISO/IEC 29500-1:2016 Annex A vs. ECMA-376 T).
_STRICT_NS = (
    (b"http://purl.oclc.org/ooxml/wordprocessingml/main", W_NS.encode()),
    (b"http://purl.oclc.org/ooxml/officeDocument/relationships", R_NS.encode()),
    (b"http://purl.oclc.org/ooxml/officeDocument/math", b"http://schemas.openxmlformats.org/officeDocument/2006/math"),
    (b"http://purl.oclc.org/ooxml/drawingml/main", b"http://schemas.openxmlformats.org/drawingml/2006/main"),
    (b"http://purl.oclc.org/ooxml/drawingml/wordprocessingDrawing",
     b"http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"),
)

# What python-docx (and the ZIP/XML layers under it) raise for a package it cannot read: its own
# errors, KeyError for a missing part, relationship or content type, ValueError for a bad attribute
# value, and AttributeError/TypeError from its element classes on XML of an unexpected shape (e.g.
# a ``[Content_Types].xml`` outside the OPC namespace).
_PYTHON_DOCX_ERRORS = (PythonDocxError, OpcError, KeyError, ValueError, AttributeError, TypeError,
                       etree.LxmlError, zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError)

_LEVEL_REF = re.compile(r"%([1-9])")  # a level's number in w:lvlText (ECMA-376 part 1, §17.9.11)
_HEADING_STYLE = re.compile(r"^heading\s*([1-9])$", re.IGNORECASE)
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True, remove_comments=True)
_SKIP = {W + "rPr", W + "pPr", W + "del", W + "moveFrom", W + "delText", W + "instrText", W + "sectPr",
         W + "tblPr", W + "tblGrid", W + "trPr", W + "tcPr", W + "sdtPr", W + "sdtEndPr",
         W + "footnoteReference", W + "endnoteReference", W + "commentReference",
         MC + "Fallback"}

LABEL = "Word file"
"""How messages name the format."""


def check_zip_limits(zf: zipfile.ZipFile) -> None:
    """The zip-bomb limits of every ZIP-based format (:func:`ingest.parsers.package.check_limits`)
    for a Word file, checked from the central directory before python-docx inflates anything.

    Raises:
        TooLarge: ``too_large`` as :func:`~ingest.parsers.package.check_limits` says.
    """
    check_limits(zf, LABEL)


def open_checked(data: bytes) -> zipfile.ZipFile:
    """``data`` as a ZIP package whose central directory passed :func:`check_zip_limits` (nothing
    inflated yet); the caller closes it. Used by :func:`parse_docx` and ``ingest --dry-run``.

    Raises:
        DocumentError: ``malformed`` when it is no readable ZIP.
        TooLarge: ``too_large`` for a zip bomb.
    """
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise _malformed("it is not a readable ZIP package") from exc
    try:
        check_zip_limits(zf)
    except BaseException:
        zf.close()
        raise
    return zf


def parse_docx(data: bytes, filename: str | None = None) -> ParsedDocument:
    """Parse a Word document: transitional ``.docx`` through python-docx; Strict OOXML,
    ``.docm``, ``.dotx`` and ``.dotm`` from the ZIP directly.

    Returns:
        A :class:`ParsedDocument` of ``doc_type="docx"``; blocks of kind ``heading``,
        ``paragraph``, ``list``, ``table``, ``header``, ``footer`` and ``footnote``; title from the
        core properties, else the cover's title lines (:func:`ingest.titles.cover_title`), else the
        first heading unless a division heading comes first (:class:`ingest.builder.DocumentBuilder`),
        else the file name.

    Raises:
        TooLarge: ``too_large`` for zip bombs (see :func:`check_zip_limits`).
        DocumentError: ``empty_file``; ``malformed`` for a damaged package (not a ZIP, no main
            part, missing content types or relationships, broken XML); ``docx_unsupported`` when
            the main part is not a Word document (e.g. a workbook named ``.docx``).
    """
    if not data:
        raise DocumentError("The file is empty (0 bytes); upload a file with content.", code="empty_file")
    with open_checked(data) as zf:  # the zip-bomb limits before python-docx inflates anything
        package = _Package(zf)
        main_type = package.content_type(package.main)
        if package.strict or main_type in WORD_VARIANT_TYPES:
            parts = _parts_from_zip(package)
        elif main_type is not None and main_type.endswith("main+xml") and main_type != WORD_MAIN_TYPE:
            raise DocumentError(
                f"This file is not a Word document: its main part is {main_type!r}. Open it in the "
                "program that made it and save it as DOCX or PDF.",
                code="docx_unsupported", content_type=main_type,
            )
        else:
            parts = _parts_from_python_docx(data)
    return _DocxReader(parts, filename).read()


def _malformed(why: str) -> DocumentError:
    return DocumentError(
        f"The Word file is damaged ({why}); open it in Word or LibreOffice, save it again and re-upload it.",
        code="malformed",
    )


def _part_too_large(name: str, size: int) -> TooLarge:
    return TooLarge(
        f"The Word file's part {name!r} is {size:,} bytes; DocAnchor reads parts up to "
        f"{MAX_XML_PART_BYTES:,} bytes. Split the document and upload the parts.",
        code="too_large", part=name,
    )


@dataclass
class _Parts:
    """The XML roots the walker reads, whichever package reader found them."""

    body: etree._Element
    styles: etree._Element | None = None
    headers: list[etree._Element] = field(default_factory=list)
    footers: list[etree._Element] = field(default_factory=list)
    notes: list[tuple[etree._Element, str]] = field(default_factory=list)
    """``(notes part root, "footnote" | "endnote")``: all footnotes parts, then all endnotes."""
    numbering: etree._Element | None = None
    title: str = ""
    strict: bool = False


# --------------------------------------------------------------------- python-docx


def _parts_from_python_docx(data: bytes) -> _Parts:
    """Open ``data`` with :func:`docx.Document` and collect the parts the walker reads.

    Raises:
        DocumentError: ``malformed`` for anything python-docx cannot read.
    """
    try:
        document = docx.Document(io.BytesIO(data))
        doc_part = document.part
        body = document.element.body
        if body is None:
            raise _malformed("its main document part has no body")
        headers: list[etree._Element] = []
        footers: list[etree._Element] = []
        seen: set[str] = set()
        for section in document.sections:  # in document order; each header/footer part once
            # The page a reader meets first: the first-page header when the section has one
            # (w:titlePg), else the default one; even-page ones after.
            kinds = ("first_page_", "", "even_page_") if section.different_first_page_header_footer \
                else ("", "even_page_", "first_page_")
            for item, dest in [(getattr(section, k + "header"), headers) for k in kinds] + \
                    [(getattr(section, k + "footer"), footers) for k in kinds]:
                if item.is_linked_to_previous:  # no reference of its own; reading .part would create one
                    continue
                try:
                    part = item.part
                except KeyError:  # a reference to a relationship that is not there: nothing to read
                    continue
                if str(part.partname) not in seen:
                    seen.add(str(part.partname))
                    dest.append(_root(part))
        notes = [(_root(part), tag) for reltype, tag in ((RT.FOOTNOTES, "footnote"), (RT.ENDNOTES, "endnote"))
                 for part in _related(doc_part, reltype)]
        styles = next((_root(p) for p in _related(doc_part, RT.STYLES)), None)
        numbering = next((_root(p) for p in _related(doc_part, RT.NUMBERING)), None)
        return _Parts(body=body, styles=styles, headers=headers, footers=footers, notes=notes,
                      numbering=numbering, title=_core_title(document))
    except DocumentError:
        raise
    except _PYTHON_DOCX_ERRORS as exc:
        err = _malformed("its parts, their content types or their relationships are missing or broken")
        err.details["reason"] = _reason(exc)
        raise err from exc


def _related(part, reltype: str) -> list:
    """Internal parts related to ``part`` by ``reltype``, in the order its relationships list them."""
    return [rel.target_part for rel in part.rels.values() if rel.reltype == reltype and not rel.is_external]


def _root(part) -> etree._Element:
    """The XML root of a python-docx part: its parsed element, or its blob parsed here (python-docx
    keeps parts it has no class for, e.g. footnotes, as bytes)."""
    if isinstance(part, XmlPart):
        return part.element
    return etree.fromstring(part.blob, _PARSER)


def _core_title(document) -> str:
    """``dc:title`` when the package has core properties (python-docx would invent a default)."""
    try:
        core_part = document.part.package.part_related_by(RT.CORE_PROPERTIES)
    except KeyError:
        return ""
    if not isinstance(core_part, CorePropertiesPart):
        return ""
    title = document.core_properties.title or ""
    return " ".join(title.split())[:200]


def _reason(exc: BaseException) -> str:
    """A short, safe account of a dependency error for ``details`` (no object reprs)."""
    text = re.sub(r"\s*'?<[^<>]* at 0x[0-9a-fA-F]+>'?", "", str(exc))
    text = " ".join(text.split())
    return (text[:160] or type(exc).__name__).rstrip(".")


# --------------------------------------------------------------------- raw ZIP


class _Package:
    """Reads parts, content types and relationships from the ZIP, mapping Strict namespaces.

    Used to route a package (Strict? which main-part type?) and to read the packages python-docx
    refuses (see the module docstring).
    """

    def __init__(self, zf: zipfile.ZipFile) -> None:
        self.zf = zf
        self.names = set(zf.namelist())
        self.strict = False
        rels = self.rels("")
        main = [t for typ, t in rels.values() if typ.endswith("/officeDocument")]
        if not main:
            main = ["word/document.xml"] if "word/document.xml" in self.names else []
        if not main or main[0] not in self.names:
            raise _malformed("it has no main document part")
        self.main = main[0]

    def raw(self, name: str) -> bytes | None:
        if name not in self.names:
            return None
        info = self.zf.getinfo(name)
        if info.file_size > MAX_XML_PART_BYTES:
            raise _part_too_large(name, info.file_size)
        try:
            data = self.zf.read(name)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError, zlib.error) as exc:
            raise _malformed(f"part {name!r} cannot be unpacked") from exc
        if b"purl.oclc.org/ooxml" in data[:4096]:
            self.strict = True
            for strict, transitional in _STRICT_NS:
                data = data.replace(strict, transitional)
        return data

    def xml(self, name: str) -> etree._Element | None:
        data = self.raw(name)
        if data is None:
            return None
        try:
            return etree.fromstring(data, _PARSER)
        except etree.XMLSyntaxError as exc:
            raise _malformed(f"part {name!r} is not well-formed XML") from exc

    def content_type(self, name: str) -> str | None:
        """The declared content type of part ``name`` (``[Content_Types].xml``), or None."""
        root = self.xml("[Content_Types].xml")
        if root is None:
            return None
        for el in root.iter("{%s}Override" % CT_NS):
            if el.get("PartName", "").lstrip("/").lower() == name.lower():
                return el.get("ContentType")
        ext = posixpath.splitext(name)[1].lstrip(".").lower()
        for el in root.iter("{%s}Default" % CT_NS):
            if el.get("Extension", "").lower() == ext:
                return el.get("ContentType")
        return None

    def rels(self, part: str) -> dict[str, tuple[str, str]]:
        """``{rId: (type, target part name)}`` for ``part`` ("" = the package)."""
        folder, base = posixpath.split(part)
        root = self.xml(posixpath.join(folder, "_rels", base + ".rels"))
        out: dict[str, tuple[str, str]] = {}
        if root is None:
            return out
        for rel in root.iter("{%s}Relationship" % PKG_REL_NS):
            if rel.get("TargetMode") == "External":
                continue
            target = rel.get("Target", "")
            name = target.lstrip("/") if target.startswith("/") else posixpath.normpath(posixpath.join(folder, target))
            out[rel.get("Id", "")] = (rel.get("Type", ""), name)
        return out


def _parts_from_zip(pkg: _Package) -> _Parts:
    """Collect the walker's parts straight from the ZIP (Strict OOXML, ``.docm``/``.dotx``/``.dotm``).

    Raises:
        DocumentError: ``malformed`` when the main part is missing, broken or has no body.
    """
    root = pkg.xml(pkg.main)
    if root is None:
        raise _malformed("its main document part is missing")
    body = root.find(W + "body")
    if body is None:
        raise _malformed("its main document part has no body")
    rels = pkg.rels(pkg.main)
    headers: list[etree._Element] = []
    footers: list[etree._Element] = []
    seen: set[str] = set()
    for sect in body.iter(W + "sectPr"):
        for ref in sect:
            if ref.tag not in (W + "headerReference", W + "footerReference"):
                continue
            rel = rels.get(ref.get("{%s}id" % R_NS, ""))
            if rel is None or rel[1] in seen:
                continue
            seen.add(rel[1])
            part = pkg.xml(rel[1])
            if part is not None:
                (headers if ref.tag == W + "headerReference" else footers).append(part)
    notes = []
    for typ, tag in (("/footnotes", "footnote"), ("/endnotes", "endnote")):
        for _, target in (v for v in rels.values() if v[0].endswith(typ)):
            part = pkg.xml(target)
            if part is not None:
                notes.append((part, tag))
    styles_name = next((t for typ, t in rels.values() if typ.endswith("/styles")), "word/styles.xml")
    styles = pkg.xml(styles_name)
    title = ""
    for typ, target in pkg.rels("").values():
        if typ.endswith("/core-properties") or target == "docProps/core.xml":
            core = pkg.xml(target)
            el = core.find("{http://purl.org/dc/elements/1.1/}title") if core is not None else None
            if el is not None and el.text and el.text.strip():
                title = " ".join(el.text.split())[:200]
                break
    numbering_name = next((t for typ, t in rels.values() if typ.endswith("/numbering")), None)
    numbering = pkg.xml(numbering_name) if numbering_name else None
    return _Parts(body=body, styles=styles, headers=headers, footers=footers, notes=notes,
                  numbering=numbering, title=title, strict=pkg.strict)


# --------------------------------------------------------------------- walker


class _DocxReader:
    """Walks the WordprocessingML of :class:`_Parts` into blocks (see the module docstring)."""

    def __init__(self, parts: _Parts, filename: str | None) -> None:
        self.parts = parts
        self.filename = filename
        self.hidden_runs = 0
        self.hidden_chars = 0
        self.hidden_where: set[str] = set()
        self.hidden_how: set[str] = set()
        self.part = "body"  # the part being walked, for ``hidden_text["where"]``
        self.formats = RunFormats(parts.styles, parts.body.getparent())
        self.heading_styles: dict[str, int] = {}
        self.list_styles: set[str] = set()
        self.known_styles: set[str] = set()
        self.numbering = _Numbering(parts.numbering) if parts.numbering is not None else None
        self.cover: list[tuple[str, float]] = []
        """The body's paragraphs before its first heading with their largest font size (points),
        for a cover title (:func:`ingest.titles.cover_title`)."""
        self.cover_open = not parts.title  # still reading the cover (no title in the core properties)
        self.run_sizes: list[float] = []  # sizes of the visible runs of the paragraph being read

    # ----------------------------------------------------------------- document

    def read(self) -> ParsedDocument:
        parts = self.parts
        if parts.styles is not None:
            self._load_styles(parts.styles)
        b = DocumentBuilder("docx", title=parts.title)
        running = RunningLines()
        self.part = "header"
        for root in parts.headers:
            self._add_once(b, root, "header", running)
        self.part = "body"
        self._blocks(b, parts.body)
        b.reset_headings()  # headers, notes and footers sit outside the body's heading tree
        for root, tag in parts.notes:
            self.part = tag
            self._notes(b, root, tag)
        self.part = "footer"
        for root in parts.footers:
            self._add_once(b, root, "footer", running)
        if running.count:
            b.flags["running_headers"] = running.as_flag()

        if self.hidden_runs:
            b.flags["hidden_text"] = {"count": self.hidden_runs, "chars": self.hidden_chars,
                                      "where": sorted(self.hidden_where), "how": sorted(self.hidden_how)}
        if parts.strict:
            b.flags["strict_ooxml"] = True
        parsed = b.build()
        cover = cover_title(self.cover, self.formats.size_pt()) if not parts.title else ""
        if cover:
            parsed.title = cover
        elif not b.title and self.filename:
            parsed.title = PurePath(self.filename).stem[:200] or parsed.title
        return parsed

    def _load_styles(self, root: etree._Element) -> None:
        based: dict[str, str] = {}
        own_level: dict[str, int] = {}
        for st in root.iter(W + "style"):
            sid = st.get(W + "styleId", "")
            self.known_styles.add(sid)
            name_el = st.find(W + "name")
            name = (name_el.get(W + "val", "") if name_el is not None else "").strip()
            kind = st.get(W + "type")
            if kind != "paragraph":
                continue
            m = _HEADING_STYLE.match(name) or _HEADING_STYLE.match(sid)
            if m:
                own_level[sid] = int(m.group(1))
            elif name.lower() == "title" or sid.lower() == "title":
                own_level[sid] = 1
            else:
                lvl = st.find(f"{W}pPr/{W}outlineLvl")
                if lvl is not None and lvl.get(W + "val", "9").isdecimal() and int(lvl.get(W + "val")) < 9:
                    own_level[sid] = int(lvl.get(W + "val")) + 1
            if st.find(f"{W}pPr/{W}numPr") is not None or "list" in name.lower():
                self.list_styles.add(sid)
            parent = st.find(W + "basedOn")
            if parent is not None:
                based[sid] = parent.get(W + "val", "")
        for sid in list(based) + list(own_level):
            cur, hops = sid, 0
            while cur and cur not in own_level and hops < 20:
                cur, hops = based.get(cur, ""), hops + 1
            if cur in own_level:
                self.heading_styles[sid] = own_level[cur]

    def _add_once(self, b: DocumentBuilder, root: etree._Element, kind: str, running: RunningLines) -> None:
        """Add a header or footer part unless one of the same running line was added
        (:meth:`ingest.parsers.running.RunningLines.keep_first`, which counts the one left out)."""
        sink = _Collector()
        self._blocks(sink, root)
        text = "\n".join(t for t, _ in sink.items if t.strip())
        if running.keep_first(text):
            b.add(text, kind)

    def _notes(self, b: DocumentBuilder, root: etree._Element, tag: str) -> None:
        for note in root.iter(W + tag):
            if note.get(W + "type") in ("separator", "continuationSeparator", "continuationNotice"):
                continue
            sink = _Collector()
            self._blocks(sink, note)
            text = " ".join(t for t, _ in sink.items if t.strip())
            if text.strip():
                b.add(text, "footnote")

    # ----------------------------------------------------------------- block level

    def _blocks(self, b, parent: etree._Element) -> None:
        """Emit the block-level content of ``parent`` (body, cell, text box, note, header)."""
        for el in parent:
            tag = el.tag
            if tag == W + "p":
                self._paragraph(b, el)
            elif tag == W + "tbl":
                rows = self._table_rows(el)
                if rows:
                    b.add("\n".join(rows), "table", raw=True)
            elif tag in (W + "sdt", W + "customXml", W + "ins", W + "moveTo", W + "smartTag"):
                content = el.find(W + "sdtContent") if tag == W + "sdt" else el
                if content is not None:
                    self._blocks(b, content)
            elif tag == MC + "AlternateContent":
                choice = el.find(MC + "Choice")
                if choice is not None:
                    self._blocks(b, choice)

    def _paragraph(self, b, p: etree._Element) -> None:
        parts: list[str] = []
        boxes: list[etree._Element] = []
        self.run_sizes = []
        self._inline(p, parts, boxes)
        text = "".join(parts)
        level, is_list = self._paragraph_style(p)
        if self.numbering is not None:
            label = self.numbering.label(p)  # counts even an empty item, as Word does
            if label and text.strip():
                text = label + text
        if text.strip():
            heading = bool(level and len(text.strip()) <= HEADING_MAX_CHARS)
            self._on_cover(p, text, heading)
            if heading:
                b.heading(text, level)
            else:
                b.add(text, "list" if is_list else "paragraph")
        for box in boxes:  # text boxes anchored in this paragraph follow it
            self._blocks(b, box)

    def _on_cover(self, p: etree._Element, text: str, heading: bool) -> None:
        """Record a body paragraph of the cover (:attr:`cover`) with its largest run size; the
        first heading, or :data:`ingest.titles.COVER_LINES` paragraphs, end the cover."""
        if not self.cover_open or self.part != "body" or p.getparent() is not self.parts.body:
            return
        if heading:
            self.cover_open = False
            return
        self.cover.append((text, max(self.run_sizes, default=self.formats.size_pt())))
        self.cover_open = len(self.cover) < COVER_LINES

    def _paragraph_style(self, p: etree._Element) -> tuple[int, bool]:
        ppr = p.find(W + "pPr")
        if ppr is None:
            return 0, False
        level = 0
        style = ppr.find(W + "pStyle")
        sid = style.get(W + "val", "") if style is not None else ""
        if sid:
            level = self.heading_styles.get(sid, 0)
            if not level and sid not in self.known_styles:  # style not defined: trust its id
                m = _HEADING_STYLE.match(sid)
                level = int(m.group(1)) if m else 1 if sid.lower() == "title" else 0
        lvl = ppr.find(W + "outlineLvl")
        if lvl is not None:
            val = lvl.get(W + "val", "9")
            level = int(val) + 1 if val.isdecimal() and int(val) < 9 else 0
        is_list = ppr.find(W + "numPr") is not None or sid in self.list_styles
        return level, is_list

    def _inline(self, el: etree._Element, parts: list[str], boxes: list[etree._Element]) -> None:
        """Collect the visible text under ``el`` into ``parts``; text boxes go to ``boxes``."""
        for child in el:
            tag = child.tag
            if tag in _SKIP or not isinstance(tag, str):
                continue
            if tag == W + "r":
                how = self.formats.why_hidden(child)
                if how:
                    self.hidden_runs += 1
                    self.hidden_chars += sum(len(t.text or "") for t in child.iter(W + "t"))
                    self.hidden_where.add(self.part)
                    self.hidden_how.add(how)
                    continue
                if self.cover_open and self.part == "body" and any((t.text or "").strip() for t in child.iter(W + "t")):
                    self.run_sizes.append(self.formats.size_pt(child))
                self._inline(child, parts, boxes)
            elif tag == W + "t" or tag == M + "t":
                parts.append(child.text or "")
            elif tag == W + "tab" or tag == W + "ptab":
                parts.append("\t")
            elif tag in (W + "br", W + "cr"):
                parts.append("\n" if child.get(W + "type") in (None, "textWrapping") else " ")
            elif tag == W + "noBreakHyphen":
                parts.append("-")
            elif tag == W + "txbxContent":
                boxes.append(child)
            elif tag == MC + "AlternateContent":
                choice = child.find(MC + "Choice")
                if choice is not None:
                    self._inline(choice, parts, boxes)
            elif tag == W + "p":  # a paragraph inside an inline container (rare)
                self._inline(child, parts, boxes)
                parts.append("\n")
            else:
                self._inline(child, parts, boxes)

    # ----------------------------------------------------------------- tables

    def _table_rows(self, tbl: etree._Element) -> list[str]:
        """One line per row: its logical cells' texts joined by `` | ``."""
        lines: list[str] = []
        for tr in _children(tbl, W + "tr"):
            cells: list[str] = []
            for tc in _children(tr, W + "tc"):
                vmerge = tc.find(f"{W}tcPr/{W}vMerge")
                if vmerge is not None and vmerge.get(W + "val", "continue") == "continue":
                    continue  # the cell above already carries the merged text
                text = self._cell_text(tc)
                if text:
                    cells.append(text)
            if cells:
                lines.append(CELL_SEP.join(cells))
        return lines

    def _cell_text(self, tc: etree._Element) -> str:
        sink = _Collector()
        self._blocks(sink, tc)
        pieces = []
        for text, kind in sink.items:
            if kind == "table":  # a nested table stays inside its cell, rows separated by ";"
                rows = [" ".join(r.split()) for r in text.split("\n") if r.strip()]
                piece = "[" + "; ".join(rows) + "]" if rows else ""
            else:
                piece = " ".join(text.split())
            if piece:
                pieces.append(piece)
        return " ".join(pieces)


class _Numbering:
    """List numbers as Word shows them ("1.", "2.1.", "iv)") for paragraphs numbered directly
    (``w:pPr/w:numPr``), from the numbering part (ECMA-376 part 1, §17.9).

    Counters run per abstract numbering definition in reading order; a level starts at its
    ``w:start`` (or the ``w:num``'s ``w:startOverride``, applied on that list's first use), and
    deeper levels restart when a shallower one advances. Bullets, ``none`` and formats not in
    :data:`_FORMATS` get no label. Not handled: numbering inherited from a paragraph style,
    ``w:lvlRestart``, ``w:numStyleLink``.
    """

    def __init__(self, root: etree._Element) -> None:
        self.abstract: dict[str, dict[int, etree._Element]] = {}
        for an in root.iter(W + "abstractNum"):
            levels = {_int(lvl.get(W + "ilvl")): lvl for lvl in an.iter(W + "lvl")}
            self.abstract[an.get(W + "abstractNumId", "")] = levels
        self.nums: dict[str, tuple[str, dict[int, int], dict[int, etree._Element]]] = {}
        for num in root.iter(W + "num"):
            ref = num.find(W + "abstractNumId")
            starts: dict[int, int] = {}
            levels: dict[int, etree._Element] = {}
            for override in num.iter(W + "lvlOverride"):
                ilvl = _int(override.get(W + "ilvl"))
                start = override.find(W + "startOverride")
                if start is not None:
                    starts[ilvl] = _int(start.get(W + "val"))
                lvl = override.find(W + "lvl")
                if lvl is not None:
                    levels[ilvl] = lvl
            self.nums[num.get(W + "numId", "")] = (ref.get(W + "val", "") if ref is not None else "", starts, levels)
        self.counters: dict[str, list[int | None]] = {}
        self.started: set[tuple[str, int]] = set()

    def label(self, p: etree._Element) -> str:
        """The number label of paragraph ``p`` with its separator (``"2.1. "``), or ``""``."""
        num_pr = p.find(f"{W}pPr/{W}numPr")
        if num_pr is None:
            return ""
        num_id = num_pr.find(W + "numId")
        num = self.nums.get(num_id.get(W + "val", "") if num_id is not None else "")
        if num is None:  # includes numId 0: numbering switched off
            return ""
        abstract_id, starts, overrides = num
        ilvl_el = num_pr.find(W + "ilvl")
        ilvl = min(8, max(0, _int(ilvl_el.get(W + "val") if ilvl_el is not None else "0")))
        levels = {**self.abstract.get(abstract_id, {}), **overrides}
        if ilvl not in levels:
            return ""
        counters = self.counters.setdefault(abstract_id, [None] * 9)
        key = (num_id.get(W + "val", ""), ilvl)
        if ilvl in starts and key not in self.started:
            self.started.add(key)
            counters[ilvl] = starts[ilvl]
        elif counters[ilvl] is None:
            counters[ilvl] = self._start(levels[ilvl])
        else:
            counters[ilvl] += 1
        for deeper in range(ilvl + 1, 9):
            counters[deeper] = None
        return self._render(levels, ilvl, counters)

    @staticmethod
    def _start(lvl: etree._Element) -> int:
        start = lvl.find(W + "start")
        return _int(start.get(W + "val") if start is not None else "1", 1)

    def _render(self, levels: dict[int, etree._Element], ilvl: int, counters: list[int | None]) -> str:
        lvl = levels[ilvl]
        text_el = lvl.find(W + "lvlText")
        template = text_el.get(W + "val", "") if text_el is not None else ""
        legal = _on(lvl.find(W + "isLgl"))  # "legal" numbering shows every level in decimal
        failed = False

        def number(match: re.Match) -> str:
            nonlocal failed
            k = int(match.group(1)) - 1
            fmt_el = levels[k].find(W + "numFmt") if k in levels else None
            fmt = "decimal" if legal else (fmt_el.get(W + "val", "decimal") if fmt_el is not None else "decimal")
            value = counters[k] if counters[k] is not None else (self._start(levels[k]) if k in levels else 1)
            render = _FORMATS.get(fmt)
            if render is None or k > ilvl:
                failed = True
                return ""
            return render(value)

        label = _LEVEL_REF.sub(number, template)
        if failed or not label.strip() or "%" not in template:
            return ""  # bullets and static text carry no number
        suffix = lvl.find(W + "suff")
        sep = "" if suffix is not None and suffix.get(W + "val") == "nothing" else " "
        return label + sep


def _roman(n: int) -> str:
    if not 0 < n < 4000:
        return str(n)
    out = []
    for value, digits in ((1000, "m"), (900, "cm"), (500, "d"), (400, "cd"), (100, "c"), (90, "xc"),
                          (50, "l"), (40, "xl"), (10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i")):
        count, n = divmod(n, value)
        out.append(digits * count)
    return "".join(out)


def _letter(n: int) -> str:
    """Word's letter numbering: a..z, then aa..zz, aaa.. (the letter repeated), ECMA-376 §17.18.59."""
    if n < 1:
        return str(n)
    return chr(ord("a") + (n - 1) % 26) * ((n - 1) // 26 + 1)


_FORMATS = {
    "decimal": str,
    "decimalZero": lambda n: f"{n:02d}",
    "lowerLetter": _letter,
    "upperLetter": lambda n: _letter(n).upper(),
    "lowerRoman": _roman,
    "upperRoman": lambda n: _roman(n).upper(),
}
"""``w:numFmt`` values rendered as list numbers (ECMA-376 part 1, §17.18.59 ST_NumberFormat)."""


def _int(value: str | None, default: int = 0) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


class _Collector:
    """A stand-in builder that just collects ``(text, kind)`` (cells, headers, notes)."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def add(self, text: str, kind: str = "paragraph", raw: bool = False, **_: object) -> None:
        self.items.append((text, kind))

    def heading(self, text: str, level: int = 1, **_: object) -> None:
        self.items.append((text, "heading"))


def _children(el: etree._Element, tag: str):
    """Direct ``tag`` children of ``el``, looking through content controls and custom XML."""
    for child in el:
        if child.tag == tag:
            yield child
        elif child.tag in (W + "sdt", W + "customXml", W + "ins", W + "moveTo"):
            inner = child.find(W + "sdtContent") if child.tag == W + "sdt" else child
            if inner is not None:
                yield from _children(inner, tag)

