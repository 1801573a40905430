"""EPUB e-books (EPUB 2 and 3): chapters in spine order, each read by the HTML extractor.

EbookLib reads the package (container, OPF manifest and spine, the navigation document or NCX);
each spine document's XHTML goes through :func:`ingest.parsers.html.parse_html`, so chapters get
the same main-text extraction, hidden-element removal and heading structure as web pages.

- Chapter numbers (the block's ``page``, cited as "chapter N") count the spine documents that
  hold text, in reading order; the table of contents' title of a document is its level-1 heading
  (left out when the document opens with the same heading), its own headings sit below it.
- The navigation document (EPUB 3 ``nav``) is not indexed (it repeats the chapter titles); spine
  items marked ``linear="no"`` (notes, answers, pop-ups) follow the linear ones.
- DRM: a book with ``META-INF/rights.xml`` or an ``encryption.xml`` that encrypts anything but
  fonts (the IDPF and Adobe font obfuscation algorithms) is refused with ``epub_drm``.
"""

from __future__ import annotations

import io
import posixpath
from pathlib import PurePath

from lxml import etree

from docanchor.errors import DocumentError
from docanchor.types import ParsedDocument
from ingest.builder import DocumentBuilder
from ingest.parsers.html import parse_html
from ingest.parsers.package import malformed, open_package

LABEL = "EPUB file"
FONT_OBFUSCATION = frozenset({"http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"})
"""Encryption algorithms that only obfuscate embedded fonts (OCF 3.3 §4.3.6.3); text stays readable."""
_ENC_NS = "{http://www.w3.org/2001/04/xmlenc#}"


def parse_epub(data: bytes, filename: str | None = None) -> ParsedDocument:
    """Parse an EPUB book.

    Returns:
        A :class:`ParsedDocument` of ``doc_type="epub"``; ``n_pages`` is the chapter count;
        title from the book's ``dc:title``, else the file name.

    Raises:
        DocumentError: ``empty_file``; ``epub_drm`` for a DRM-protected book; ``malformed`` for a
            damaged package; ``xml_entities`` (an XML bomb); ``no_text`` when no chapter has text.
        TooLarge: ``too_large`` for a zip bomb.
    """
    with open_package(data, LABEL) as zf:
        _refuse_drm(zf)
    from ebooklib import ITEM_DOCUMENT, epub

    try:
        book = epub.read_epub(io.BytesIO(data), options={"ignore_ncx": False})
        documents = _spine(book, ITEM_DOCUMENT, epub.EpubNav)
        titles = _toc_titles(book.toc)
        meta = book.get_metadata("DC", "title")
    except DocumentError:
        raise
    except Exception as exc:  # EbookLib raises EpubException, KeyError, lxml and zipfile errors alike
        raise malformed(LABEL, f"its package cannot be read ({type(exc).__name__})") from exc
    title = " ".join(str(meta[0][0]).split())[:200] if meta and meta[0] and meta[0][0] else ""
    b = DocumentBuilder("epub", title=title or (PurePath(filename).stem[:200] if filename else ""))
    chapter = 0
    for item, linear in documents:
        chapter += _chapter(b, item, titles.get(_bare(item.get_name())), chapter + 1, linear)
    parsed = b.build(n_pages=chapter)
    if not parsed.blocks:
        raise DocumentError("The EPUB book's chapters hold no text (it may be images only).", code="no_text")
    return parsed


def _refuse_drm(zf) -> None:
    names = set(zf.namelist())
    drm = "META-INF/rights.xml" in names
    if not drm and "META-INF/encryption.xml" in names:
        try:
            root = etree.fromstring(zf.read("META-INF/encryption.xml"),
                                    etree.XMLParser(resolve_entities=False, no_network=True))
        except etree.XMLSyntaxError as exc:
            raise malformed(LABEL, "its encryption.xml is not well-formed") from exc
        methods = {m.get("Algorithm", "") for m in root.iter(_ENC_NS + "EncryptionMethod")}
        drm = bool(methods - FONT_OBFUSCATION)
    if drm:
        raise DocumentError("The EPUB book is protected by DRM (its chapters are encrypted); DocAnchor can only "
                            "read DRM-free books. Upload a DRM-free copy.", code="epub_drm")


def _spine(book, document_type, nav_type) -> list[tuple[object, bool]]:
    """Spine documents in reading order, linear ones first; the navigation document left out."""
    out = []
    for idref, linear in book.spine:
        item = book.get_item_with_id(idref)
        if item is None or item.get_type() != document_type or isinstance(item, nav_type):
            continue
        out.append((item, str(linear).lower() not in ("no", "false")))
    return [p for p in out if p[1]] + [p for p in out if not p[1]]


def _toc_titles(toc) -> dict[str, str]:
    """Document href (no fragment) -> its first title in the table of contents."""
    titles: dict[str, str] = {}

    def walk(entries) -> None:
        for entry in entries:
            if isinstance(entry, (tuple, list)):
                section, children = entry[0], entry[1] if len(entry) > 1 else []
                walk([section])
                walk(children)
            elif getattr(entry, "href", None) and getattr(entry, "title", None):
                titles.setdefault(_bare(entry.href), " ".join(entry.title.split()))

    walk(toc)
    return titles


def _bare(href: str) -> str:
    return posixpath.normpath(href.split("#", 1)[0]).lstrip("./")


def _chapter(b: DocumentBuilder, item, toc_title: str | None, number: int, linear: bool) -> int:
    """Add one spine document as chapter ``number``; return 1 when it held text, else 0."""
    try:
        parsed = parse_html(item.get_content(), item.get_name())
    except DocumentError:
        return 0
    if not parsed.blocks:
        return 0
    b.reset_headings()
    hidden = parsed.flags.get("hidden_text")
    if isinstance(hidden, int) and hidden:
        b.flags["hidden_text"] = b.flags.get("hidden_text", 0) + hidden
    first = parsed.blocks[0]
    opens_with_title = (first.kind == "heading" and toc_title is not None
                        and parsed.text[first.start:first.end].casefold() == toc_title.casefold())
    shift = 0
    if toc_title and not opens_with_title:
        b.heading(toc_title, level=1, page=number)
        shift = 1
    for block in parsed.blocks:
        text = parsed.text[block.start:block.end]
        if block.kind == "heading":
            b.heading(text, level=block.level + shift, page=number)
        else:
            kind = block.kind if linear else "footnote"
            b.add(text, kind=kind, page=number, flags=block.flags, raw=kind in ("table", "list", "code"))
    return 1
