"""HTML: the main text, without scripts, styles, navigation and hidden elements, with headings as
structure and tables one row per line.

Steps:

1. Decode: a byte-order mark, else the declared charset (``<meta charset>``, ``http-equiv``, or
   the XML declaration), else UTF-8, else Windows-1252 when that gives plain Latin text (the
   WHATWG encoding standard's fallback for Western locales), else charset detection.
2. Parse with lxml and remove the text a reader cannot see, decided from the computed CSS
   (:mod:`ingest.parsers.html_css`: ``display``, ``visibility``, ``opacity``, tiny fonts, text
   coloured like its background, off-screen positions and clipping, from ``<style>`` rules and
   ``style`` attributes), plus ``hidden``, ``aria-hidden="true"``, ``<template>`` and inline-XBRL
   ``<ix:header>``: hidden text is a prompt-injection route and, in SEC filings, pages of raw
   XBRL facts. ``flags["hidden_text"]`` records ``{"count": elements, "how": reasons}``.
3. Extract the main content with trafilatura (boilerplate, navigation, scripts and styles
   dropped) as its XML, and map it to blocks: ``<head rend="hN">`` -> heading of level N,
   ``<table>`` -> ``table`` (``cell | cell`` per row), ``<list>`` -> ``list``, others -> paragraphs.
   If trafilatura finds nothing, the visible text of ``<body>`` is used.
"""

from __future__ import annotations

import codecs
import re
from pathlib import PurePath

import lxml.html
from lxml import etree

from docanchor.errors import DocumentError
from docanchor.text import CELL_SEP
from docanchor.types import ParsedDocument
from ingest.builder import DocumentBuilder
from ingest.parsers.html_css import hide
from ingest.parsers.text import _plain_latin, decode_text

DECLARATION_BYTES = 4096
"""Where a charset declaration is looked for (bytes from the start; WHATWG prescans 1,024)."""

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_XML_DECL = re.compile(rb"""^\s*<\?xml[^>]*encoding\s*=\s*["']([A-Za-z0-9_.:-]+)["']""", re.IGNORECASE)
_XML_DECL_TEXT = re.compile(r"^\s*<\?xml[^>]*\?>")
_DROP_TAGS = ("script", "style", "noscript", "nav", "iframe", "svg", "form", "button", "select")
_BLOCK_TAGS = {"p", "div", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "table", "pre", "blockquote", "section"}
_WHATWG_LATIN = {"iso-8859-1", "latin-1", "latin1", "ascii", "us-ascii", "iso8859-1", "l1"}


def decode_html(data: bytes) -> tuple[str, str]:
    """Decode HTML bytes (see the module docstring, step 1).

    Returns:
        ``(text, encoding_name)``.
    """
    if data.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
        return decode_text(data)
    head = data[:DECLARATION_BYTES]
    match = _XML_DECL.match(head) or _META_CHARSET.search(head)
    if match:
        label = match.group(1).decode("ascii", "ignore").lower()
        label = "cp1252" if label in _WHATWG_LATIN else label
        try:
            name = codecs.lookup(label).name
            return data.decode(name), name
        except (LookupError, UnicodeDecodeError):
            pass  # a wrong declaration: detect instead
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    latin = _plain_latin(data)
    if latin is not None:
        return latin, "cp1252"
    return decode_text(data)


def parse_html(data: bytes, filename: str | None = None) -> ParsedDocument:
    """Parse an HTML page into main-text blocks.

    Returns:
        A :class:`ParsedDocument` of ``doc_type="html"``; title from ``<title>``, else the first
        heading, else the file name.

    Raises:
        DocumentError: ``empty_file``; ``malformed`` when the markup cannot be parsed at all.
    """
    if not data:
        raise DocumentError("The file is empty (0 bytes); upload a file with content.", code="empty_file")
    text, encoding = decode_html(data)
    text = _XML_DECL_TEXT.sub("", text, count=1)
    try:
        tree = lxml.html.document_fromstring(text)
    except (etree.ParserError, ValueError) as exc:
        raise DocumentError(
            "The HTML page could not be parsed; save it again as HTML or upload it as text.", code="malformed"
        ) from exc

    hidden = hide(tree)
    page_title = " ".join((tree.findtext(".//title") or "").split())[:200]
    if re.fullmatch(r"[\w.-]+\.x?html?", page_title):
        page_title = ""  # a file name, not a title (common in generated filings)
    first_h1 = tree.find(".//h1")
    first_h1_text = " ".join(first_h1.text_content().split())[:200] if first_h1 is not None else ""

    b = DocumentBuilder("html", title=page_title)
    extracted = _main_content(tree)
    if extracted is not None:
        if first_h1_text and first_h1_text not in " ".join(extracted.itertext()):
            b.heading(first_h1_text, 1)  # trafilatura drops a page's lone title heading
        _emit(b, extracted)
    if not b.build().blocks:  # nothing judged main content: fall back to all visible text
        _visible_text(b, tree)

    if hidden.count:
        b.flags["hidden_text"] = {"count": hidden.count, "how": sorted(hidden.how)}
    b.flags["encoding"] = encoding
    parsed = b.build()
    if not b.title:
        parsed.title = (PurePath(filename).stem[:200] if filename else "") or parsed.title
    return parsed


def _main_content(tree) -> etree._Element | None:
    import trafilatura

    try:
        xml = trafilatura.extract(
            tree, output_format="xml", include_tables=True, include_comments=False,
            include_images=False, include_links=False, favor_recall=True, deduplicate=False,
        )
    except Exception:  # trafilatura has no exception hierarchy; fall back to visible text
        return None
    if not xml:
        return None
    try:
        root = etree.fromstring(xml.encode("utf-8"))
    except etree.XMLSyntaxError:
        return None
    for lb in root.iter("lb"):
        lb.tail = "\n" + (lb.tail or "")
    return root.find("main") if root.find("main") is not None else root


def _text(el) -> str:
    return " ".join("".join(el.itertext()).split())


def _emit(b: DocumentBuilder, parent) -> None:
    for el in parent:
        tag = el.tag
        if tag == "head":
            rend = el.get("rend", "h2")
            level = int(rend[1]) if len(rend) == 2 and rend[1].isdecimal() else 2
            b.heading(_text(el), level)
        elif tag == "table":
            rows = []
            for row in el.iter("row"):
                cells = [_text(c) for c in row if c.tag == "cell"]
                cells = [c for c in cells if c]
                if cells:
                    rows.append(CELL_SEP.join(cells))
            if rows:
                b.add("\n".join(rows), "table", raw=True)
        elif tag == "list":
            items = [_text(i) for i in el.iter("item")]
            b.add("\n".join(f"- {i}" for i in items if i), "list", raw=True)
        elif tag == "code":
            b.add("".join(el.itertext()), "code", raw=True)
        elif tag in ("div", "main", "section"):
            _emit(b, el)
        elif tag != "graphic":
            b.add("".join(el.itertext()))


def _visible_text(b: DocumentBuilder, tree) -> None:
    body = tree.find("body") if tree.find("body") is not None else tree
    for el in [e for tag in _DROP_TAGS for e in body.iter(tag)]:
        if el.getparent() is not None:
            el.drop_tree()
    for el in body.iter():
        if el.tag == "br":
            el.tail = "\n" + (el.tail or "")
        elif el.tag in _BLOCK_TAGS:
            el.tail = "\n\n" + (el.tail or "")
    for block in re.split(r"\n\s*\n", body.text_content()):
        b.add(block)
