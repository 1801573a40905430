"""Document type detection: content (magic bytes) first, the file name's extension second.

The file name is only a hint: a PDF named ``notes.txt`` is a PDF, and a PNG named ``report.pdf``
is refused. Signatures come from the formats' own specifications (PDF: ISO 32000-2 §7.5.2 allows
the ``%PDF-`` header after leading junk, and readers search the first 1,024 bytes; OOXML: ECMA-376
part 2, a ZIP package whose main part is ``word/document.xml``).
"""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import PurePath

from docanchor.errors import DocumentError, UnsupportedType

PDF_SEARCH_BYTES = 1024
"""Where ``%PDF-`` may start (bytes from the beginning); Acrobat's documented tolerance."""

SNIFF_BYTES = 8192
"""How much of the start is looked at to decide text versus binary and to sniff HTML (bytes)."""

_BINARY_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"II*\x00", "a TIFF image"),
    (b"MM\x00*", "a TIFF image"),
    (b"MZ", "a Windows executable"),
    (b"\x7fELF", "an ELF executable"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "a legacy Office file (.doc/.xls/.ppt); save it as DOCX or PDF"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"Rar!", "a RAR archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"{\\rtf", "an RTF file; save it as DOCX or PDF"),
    (b"OggS", "an audio/video file"),
    (b"fLaC", "an audio file"),
    (b"ID3", "an audio file"),
)

_TEXT_BOMS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")
_HTML_SNIFF = re.compile(rb"<!doctype\s+html|<html[\s>]|<body[\s>]|<head[\s>]", re.IGNORECASE)
_CONTROL_BYTES = set(range(0, 32)) - {9, 10, 12, 13, 27}

SUPPORTED = "DocAnchor reads PDF, DOCX, TXT, Markdown, HTML and CSV files"


def detect_type(data: bytes, filename: str | None = None) -> str:
    """Decide which parser reads ``data``.

    Args:
        data: the file's bytes.
        filename: the original file name, used only as a hint after the content.

    Returns:
        One of ``"pdf"``, ``"docx"``, ``"txt"``, ``"md"``, ``"html"``, ``"csv"``.

    Raises:
        DocumentError: ``empty_file`` for zero bytes.
        UnsupportedType: images, executables, archives and other binary content, and ZIP files
            that are not Word documents.
    """
    if not data:
        raise DocumentError("The file is empty (0 bytes); upload a file with content.", code="empty_file")
    ext = PurePath(filename).suffix.lower() if filename else ""
    head = data[:SNIFF_BYTES]

    if b"%PDF-" in data[:PDF_SEARCH_BYTES]:
        return "pdf"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")):
        return _zip_type(data, ext)
    for signature, what in _BINARY_SIGNATURES:
        if head.startswith(signature):
            raise _unsupported(f"This file is {what}")
    if head[8:12] in (b"WEBP", b"AVI ", b"WAVE") or head[4:8] == b"ftyp":
        raise _unsupported("This file is an image, audio or video file")
    if not _looks_like_text(head):
        raise _unsupported("This file is binary, not text")

    if _HTML_SNIFF.search(head[:2048].lstrip()[:2048]) or ext in (".html", ".htm", ".xhtml"):
        return "html"
    if ext in (".md", ".markdown", ".mdown", ".mkd"):
        return "md"
    if ext in (".csv", ".tsv"):
        return "csv"
    if not ext and _sniff_csv(head):
        return "csv"
    return "txt"


def _zip_type(data: bytes, ext: str) -> str:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            names = set(zf.namelist())
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        if ext == ".docx":
            return "docx"  # the DOCX parser reports the damage as ``malformed``
        raise _unsupported("This file is a damaged ZIP archive") from exc
    if "word/document.xml" in names or (ext == ".docx" and "[Content_Types].xml" in names):
        return "docx"
    if "xl/workbook.xml" in names:
        raise _unsupported("This file is an Excel workbook; export it as CSV")
    if "ppt/presentation.xml" in names:
        raise _unsupported("This file is a PowerPoint presentation; export it as PDF")
    raise _unsupported("This file is a ZIP archive, not a Word document")


def _looks_like_text(head: bytes) -> bool:
    """True when the start of the file is text in some encoding (no NULs, few control bytes)."""
    if head.startswith(_TEXT_BOMS):
        return True
    if b"\x00" in head:
        return False
    controls = sum(1 for b in head if b in _CONTROL_BYTES)
    return controls <= max(2, len(head) // 100)


def _sniff_csv(head: bytes) -> bool:
    """A name-less upload is CSV when its first lines share one delimiter count above zero."""
    lines = [ln for ln in head.decode("utf-8", "ignore").splitlines()[:6] if ln.strip()]
    if len(lines) < 3:
        return False
    for delim in (",", ";", "\t"):
        counts = {ln.count(delim) for ln in lines[:-1]}  # the last line may be cut off
        if len(counts) == 1 and counts.pop() > 0:
            return True
    return False


def _unsupported(what: str) -> UnsupportedType:
    return UnsupportedType(f"{what}. {SUPPORTED}; convert it to one of these and upload it again.")
