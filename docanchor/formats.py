"""The format registry: every document format DocAnchor reads, declared once.

Each :class:`Format` says how a file of that format is recognised (leading bytes, the members of
a ZIP package, or a sniffing rule for text), which file name endings and MIME types it goes by,
which parser reads it and whether that parser runs in the sandboxed worker process, and how a
citation and the anchor name its parts (``p. 3``, ``slide 3``, ``sheet 2``, ``chapter 3``).

Everything else reads this table: detection (``ingest.detect``), the parser table
(``ingest.parsers``), folder ingest in the CLI, the upload page's accept list, the manifest and
plugin descriptions, the anchor's type line, citations, the ``unsupported_type`` message, the
OpenAPI description and the README's format table (``tests/test_formats.py`` checks the README,
``manifest.json`` and the upload page against it). Adding a format is one parser module plus one
entry in :data:`FORMATS` (README, "Adding a format").

Signatures come from the formats' own specifications: PDF (ISO 32000-2 §7.5.2: ``%PDF-`` within
the first 1,024 bytes, Acrobat's tolerance), OOXML (ECMA-376 part 2: a ZIP package whose main
part is ``word/document.xml``, ``ppt/presentation.xml`` or ``xl/workbook.xml``), OpenDocument
(ODF 1.3 part 2 §3.3) and EPUB (OCF 3.3 §4.2: a first, stored ``mimetype`` member holding the
media type), PNG (RFC 2083), JPEG (JFIF, ``FF D8 FF``), TIFF 6.0 (``II*\\0`` / ``MM\\0*``), WebP
(RIFF container, ``WEBP`` at byte 8) and Internet messages (RFC 5322 header fields).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from docanchor.display import counted


@dataclass(frozen=True)
class Unit:
    """What a citation counts in a format whose blocks carry a number (``Block.page``).

    Attributes:
        one: the label before one number (``"p."``, ``"slide"``).
        many: the label before a range (``"p."``, ``"slides"``).
        noun: the counted thing in the anchor's type line, singular and plural
            (``("page", "pages")``).
    """

    one: str
    many: str
    noun: tuple[str, str]

    def label(self, start: int | None, end: int | None) -> str:
        """``p. 3``, ``slides 3–4``, or ``""`` when there is no number."""
        if start is None:
            return ""
        if end is None or end == start:
            return f"{self.one} {start}"
        return f"{self.many} {start}–{end}"

    def count(self, n: int) -> str:
        """``1 page``, ``12 slides``."""
        return counted(n, *self.noun)


PAGE = Unit("p.", "p.", ("page", "pages"))
SLIDE = Unit("slide", "slides", ("slide", "slides"))
SHEET = Unit("sheet", "sheets", ("sheet", "sheets"))
CHAPTER = Unit("chapter", "chapters", ("chapter", "chapters"))


@dataclass(frozen=True)
class Format:
    """One format DocAnchor reads.

    Attributes:
        name: the ``doc_type`` stored with a document and used in code (``"pptx"``).
        label: how people call it in messages, the manifest and the upload page
            (``"PowerPoint (PPTX)"``).
        anchor_name: how the anchor's ``Type:`` line names it (``"PowerPoint"``).
        extensions: file name endings, lower case with the dot; the first is the usual one.
        mime_types: the media types it is served or uploaded as.
        parser: ``"module:function"`` taking ``(data: bytes, filename: str | None)`` and
            returning a :class:`docanchor.types.ParsedDocument`.
        sandboxed: parsed in a killable worker process under the parse time and memory caps
            (``ingest.sandbox``): every binary or archive format.
        unit: what ``Block.page`` counts for this format (citations, the anchor, ``page:N``
            reads), or ``None`` when its blocks carry no number.
        magic: signatures, each a tuple of ``(offset, bytes)`` pairs that must all match; the
            file is this format when any signature matches. A negative offset means "anywhere
            in the first ``-offset`` bytes" (PDF).
        zip_member: a ZIP package is this format when it has this member (OOXML main parts).
        zip_mimetype: a ZIP package is this format when its ``mimetype`` member holds exactly
            this (OpenDocument, EPUB).
        sniff: the name of a text sniffing rule in ``ingest.detect`` (``"markup"``,
            ``"headers"``, ``"delimited"``) for text formats recognised by content.
        ocr: how OCR gets the picture of one of its pages when a page holds only an image:
            ``"pdf_page"`` (render the page) or ``"image_frame"`` (decode the frame), the names
            of :data:`ingest.ocr.PAGE_PICTURES`; ``""`` for formats OCR does not read.
        summary: one line for the README's format table: what is read and how.
    """

    name: str
    label: str
    anchor_name: str
    extensions: tuple[str, ...]
    mime_types: tuple[str, ...]
    parser: str
    sandboxed: bool
    unit: Unit | None = None
    magic: tuple[tuple[tuple[int, bytes], ...], ...] = ()
    zip_member: str = ""
    zip_mimetype: str = ""
    sniff: str = ""
    ocr: str = ""
    summary: str = field(default="", compare=False)


FORMATS: tuple[Format, ...] = (
    Format("pdf", "PDF", "PDF", (".pdf",), ("application/pdf",), "ingest.parsers.pdf:parse_pdf", True, PAGE,
           magic=(((-1024, b"%PDF-"),),), ocr="pdf_page",
           summary="text layer with pypdf (pdfminer.six where pypdf fails); a page of rows of figures "
                   "by cell with pdfplumber, each row labelled by column; pages without a text layer by OCR"),
    Format("docx", "Word (DOCX)", "DOCX", (".docx", ".docm", ".dotx", ".dotm"),
           ("application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            "application/vnd.ms-word.document.macroEnabled.12"),
           "ingest.parsers.docx:parse_docx", True, zip_member="word/document.xml",
           summary="python-docx: body, tables, text boxes, headers, footers, footnotes"),
    Format("pptx", "PowerPoint (PPTX)", "PowerPoint", (".pptx",),
           ("application/vnd.openxmlformats-officedocument.presentationml.presentation",),
           "ingest.parsers.pptx:parse_pptx", True, SLIDE, zip_member="ppt/presentation.xml",
           summary="python-pptx: slide titles, text frames, tables, groups, speaker notes; hidden slides skipped"),
    Format("xlsx", "Excel (XLSX)", "Excel workbook", (".xlsx", ".xlsm"),
           ("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            "application/vnd.ms-excel.sheet.macroEnabled.12"),
           "ingest.parsers.xlsx:parse_xlsx", True, SHEET, zip_member="xl/workbook.xml",
           summary="openpyxl, streamed: each sheet a typed schema and self-describing rows; hidden ones skipped"),
    Format("epub", "EPUB", "EPUB e-book", (".epub",), ("application/epub+zip",), "ingest.parsers.epub:parse_epub", True,
           CHAPTER, zip_mimetype="application/epub+zip",
           summary="spine order, chapter titles as headings, the HTML extractor per chapter; DRM refused"),
    Format("odt", "OpenDocument text (ODT)", "OpenDocument text", (".odt",), ("application/vnd.oasis.opendocument.text",),
           "ingest.parsers.odt:parse_odt", True, zip_mimetype="application/vnd.oasis.opendocument.text",
           summary="odfpy: headings, paragraphs, lists, tables, notes"),
    Format("eml", "e-mail (EML)", "e-mail", (".eml",), ("message/rfc822",), "ingest.parsers.eml:parse_eml", True,
           sniff="headers",
           summary="stdlib email: from, to, date, subject; text and HTML bodies; attachments listed"),
    Format("image", "image (PNG, JPEG, TIFF, WebP)", "image (OCR)", (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp"),
           ("image/png", "image/jpeg", "image/tiff", "image/webp"), "ingest.parsers.image:parse_image", True, PAGE,
           magic=(((0, b"\x89PNG\r\n\x1a\n"),), ((0, b"\xff\xd8\xff"),), ((0, b"II*\x00"),), ((0, b"MM\x00*"),),
                  ((0, b"RIFF"), (8, b"WEBP"))),
           ocr="image_frame", summary="OCR (RapidOCR, PP-OCRv4 models shipped in the package), one page per TIFF frame"),
    Format("html", "HTML", "HTML", (".html", ".htm", ".xhtml"), ("text/html", "application/xhtml+xml"),
           "ingest.parsers.html:parse_html", False, sniff="markup",
           summary="trafilatura main text; scripts, navigation and hidden elements dropped"),
    Format("md", "Markdown", "Markdown", (".md", ".markdown", ".mdown", ".mkd"), ("text/markdown",),
           "ingest.parsers.text:parse_md", False, summary="headings as structure, code and lists kept"),
    Format("csv", "CSV", "CSV", (".csv", ".tsv"), ("text/csv", "text/tab-separated-values"),
           "ingest.parsers.csv:parse_csv", False, sniff="delimited",
           summary="a typed schema in the anchor, one self-describing row per block"),
    Format("txt", "text", "plain text", (".txt", ".text", ".rst"), ("text/plain",), "ingest.parsers.text:parse_txt", False,
           summary="charset detection, paragraphs, chapter lines (第N回, Chapter N) as headings; any other text "
                   "file (source code, logs, JSON ...) is read as text when named or uploaded, never picked from a "
                   "folder"),
)
"""Every format, in the order people look for them (documents, office files, then text)."""

TEXT_FALLBACK = "txt"
"""The format of text that no rule and no file name ending claims: a file named or uploaded with
another ending (``script.py``, ``app.log``) is read as plain text, as the text format's summary
says; a folder ingest takes only the endings of :data:`FORMATS`."""

_BY_NAME = {f.name: f for f in FORMATS}


def names() -> tuple[str, ...]:
    """Every format's ``name`` (``doc_type``), in :data:`FORMATS` order."""
    return tuple(_BY_NAME)


def get(name: str) -> Format | None:
    """The format called ``name``, or ``None``."""
    return _BY_NAME.get(name)


def by_extension(ext: str) -> Format | None:
    """The format a file name ending (``".pptx"``, any case) stands for, or ``None``."""
    ext = ext.lower()
    return next((f for f in FORMATS if ext in f.extensions), None)


def extensions() -> tuple[str, ...]:
    """Every file name ending DocAnchor reads, in :data:`FORMATS` order."""
    return tuple(e for f in FORMATS for e in f.extensions)


def mime_types() -> tuple[str, ...]:
    """Every MIME type DocAnchor reads, in :data:`FORMATS` order."""
    return tuple(m for f in FORMATS for m in f.mime_types)


def unit_of(doc_type: str) -> Unit | None:
    """What ``Block.page`` counts for ``doc_type`` (``None``: no numbered parts; unknown types,
    e.g. of documents stored by an older version, count pages)."""
    fmt = _BY_NAME.get(doc_type)
    return fmt.unit if fmt is not None else PAGE


def label_of(doc_type: str) -> str:
    """How people call ``doc_type`` (``"PowerPoint (PPTX)"``); the name in capitals if unknown."""
    fmt = _BY_NAME.get(doc_type)
    return fmt.label if fmt is not None else doc_type.upper()


def anchor_name_of(doc_type: str) -> str:
    """How the anchor's ``Type:`` line names ``doc_type``; the name in capitals if unknown."""
    fmt = _BY_NAME.get(doc_type)
    return fmt.anchor_name if fmt is not None else doc_type.upper()


def phrase() -> str:
    """The formats as one phrase for sentences: ``"PDF, Word (DOCX), …, CSV or text"``."""
    labels = [f.label for f in FORMATS]
    return ", ".join(labels[:-1]) + " or " + labels[-1]


def supported_sentence() -> str:
    """``"DocAnchor reads PDF, Word (DOCX), … or text files"``: the ``unsupported_type`` text."""
    return f"DocAnchor reads {phrase()} files"


def accept_attribute() -> str:
    """The upload input's ``accept`` list: every extension and MIME type, comma-separated."""
    return ",".join(extensions() + mime_types())


def markdown_table() -> str:
    """The README's format table (``tests/test_formats.py`` checks README.md holds exactly this)."""
    rows = ["| format | file names | cited by | sandboxed | how it is read |", "| --- | --- | --- | --- | --- |"]
    for f in FORMATS:
        unit = f"`{f.unit.one} N`" if f.unit else "heading"
        rows.append(f"| {f.label} | {', '.join(f'`{e}`' for e in f.extensions)} | {unit} | "
                    f"{'yes' if f.sandboxed else 'no'} | {f.summary} |")
    return "\n".join(rows)
