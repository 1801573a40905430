"""Document type detection: content first, the file name's extension second.

The file name is only a hint: a PDF named ``notes.txt`` is a PDF, and an executable named
``report.pdf`` is refused. What each format looks like (leading bytes, the members of a ZIP
package, a text sniffing rule, its extensions) is declared in :mod:`docanchor.formats`; this
module applies those declarations in a fixed order:

1. leading bytes (:attr:`Format.magic`), e.g. ``%PDF-`` in the first 1,024 bytes, PNG, JPEG;
2. a ZIP package: its ``mimetype`` member (OpenDocument, EPUB), else its main part (OOXML);
3. other binary content is refused, named where it is recognisable (:data:`_NOT_SUPPORTED`);
4. text: the ``headers`` rule (an e-mail starts with RFC 5322 header fields) and the ``markup``
   rule (HTML) win over the extension; then the extension; then the ``delimited`` rule (CSV)
   for a name-less upload; else plain text (:data:`docanchor.formats.TEXT_FALLBACK`).
"""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import PurePath

from docanchor import formats
from docanchor.errors import DocumentError, UnsupportedType

SNIFF_BYTES = 8192
"""How much of the start is looked at to decide text versus binary and to sniff text (bytes)."""

MIMETYPE_MAX_BYTES = 200
"""Longest ``mimetype`` member read from a ZIP package (bytes; OCF and ODF hold one short line)."""

_NOT_SUPPORTED: tuple[tuple[bytes, str], ...] = (
    (b"GIF87a", "a GIF image; save it as PNG"),
    (b"GIF89a", "a GIF image; save it as PNG"),
    (b"MZ", "a Windows executable"),
    (b"\x7fELF", "an ELF executable"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "a legacy Office file (.doc/.xls/.ppt); save it as DOCX, XLSX or PPTX"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"Rar!", "a RAR archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"{\\rtf", "an RTF file; save it as DOCX or PDF"),
    (b"OggS", "an audio/video file"),
    (b"fLaC", "an audio file"),
    (b"ID3", "an audio file"),
)
"""Binary content DocAnchor does not read, with the name used in the refusal."""

_TEXT_BOMS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")
_CONTROL_BYTES = set(range(0, 32)) - {9, 10, 12, 13, 27}
_MARKUP = re.compile(rb"<!doctype\s+html|<html[\s>]|<body[\s>]|<head[\s>]", re.IGNORECASE)
_HEADER_FIELD = re.compile(rb"^([A-Za-z][A-Za-z0-9-]{0,60}):[ \t]?[^\r\n]*$")
_MESSAGE_FIELDS = frozenset({b"from", b"date", b"subject", b"to", b"message-id", b"mime-version",
                             b"received", b"return-path", b"delivered-to"})
"""RFC 5322 / 2045 fields; an e-mail's header block names at least two of them, ``from`` among them."""


def detect_type(data: bytes, filename: str | None = None) -> str:
    """Decide which parser reads ``data``.

    Args:
        data: the file's bytes.
        filename: the original file name, used only as a hint after the content.

    Returns:
        A :attr:`docanchor.formats.Format.name` (``"pdf"``, ``"pptx"``, ``"image"``, ``"txt"`` …).

    Raises:
        DocumentError: ``empty_file`` for zero bytes.
        UnsupportedType: executables, archives and other binary content no format claims, and
            ZIP packages that are none of the ZIP-based formats.
    """
    if not data:
        raise DocumentError("The file is empty (0 bytes); upload a file with content.", code="empty_file")
    ext = PurePath(filename).suffix.lower() if filename else ""
    head = data[:SNIFF_BYTES]
    for fmt in formats.FORMATS:
        if any(_matches(data, signature) for signature in fmt.magic):
            return fmt.name
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")):
        return _zip_type(data, ext)
    for signature, what in _NOT_SUPPORTED:
        if head.startswith(signature):
            raise _unsupported(f"This file is {what}")
    if head[8:12] in (b"AVI ", b"WAVE") or head[4:8] == b"ftyp":
        raise _unsupported("This file is an audio or video file")
    if not _looks_like_text(head):
        raise _unsupported("This file is binary, not text")
    return _text_type(head, ext)


def _matches(data: bytes, signature: tuple[tuple[int, bytes], ...]) -> bool:
    """All ``(offset, bytes)`` pairs match; a negative offset searches the first ``-offset`` bytes."""
    for offset, magic in signature:
        if offset < 0:
            if magic not in data[:-offset]:
                return False
        elif data[offset:offset + len(magic)] != magic:
            return False
    return bool(signature)


def _zip_type(data: bytes, ext: str) -> str:
    claimed = formats.by_extension(ext)
    zip_formats = [f for f in formats.FORMATS if f.zip_member or f.zip_mimetype]
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            names = set(zf.namelist())
            mimetype = _mimetype(zf) if "mimetype" in names else ""
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        if claimed in zip_formats:
            return claimed.name  # its parser reports the damage as ``malformed``
        raise _unsupported("This file is a damaged ZIP archive") from exc
    for fmt in zip_formats:
        if (fmt.zip_mimetype and mimetype == fmt.zip_mimetype) or (fmt.zip_member and fmt.zip_member in names):
            return fmt.name
    if claimed is not None and claimed.zip_member and "[Content_Types].xml" in names:
        return claimed.name  # an OOXML package without its usual main part: the parser says what is wrong
    kinds = ", ".join(f.label for f in zip_formats)
    raise _unsupported(f"This file is a ZIP archive, but not one of the packages DocAnchor reads ({kinds})")


def _mimetype(zf: zipfile.ZipFile) -> str:
    info = zf.getinfo("mimetype")
    if info.file_size > MIMETYPE_MAX_BYTES:
        return ""
    with zf.open(info) as fh:
        return fh.read(MIMETYPE_MAX_BYTES).decode("ascii", "replace").strip()


def _text_type(head: bytes, ext: str) -> str:
    text_formats = [f for f in formats.FORMATS if not f.magic and not f.zip_member and not f.zip_mimetype]
    for rule in ("headers", "markup"):
        fmt = next((f for f in text_formats if f.sniff == rule), None)
        if fmt is not None and _SNIFFERS[rule](head):
            return fmt.name
    claimed = formats.by_extension(ext)
    if claimed in text_formats:
        return claimed.name
    delimited = next((f for f in text_formats if f.sniff == "delimited"), None)
    if not ext and delimited is not None and _sniff_delimited(head):
        return delimited.name
    return formats.TEXT_FALLBACK


def _looks_like_text(head: bytes) -> bool:
    """True when the start of the file is text in some encoding (no NULs, few control bytes)."""
    if head.startswith(_TEXT_BOMS):
        return True
    if b"\x00" in head:
        return False
    controls = sum(1 for b in head if b in _CONTROL_BYTES)
    return controls <= max(2, len(head) // 100)


def _sniff_markup(head: bytes) -> bool:
    """HTML: a doctype, ``<html>``, ``<head>`` or ``<body>`` tag in the first 2 KiB."""
    return bool(_MARKUP.search(head[:2048].lstrip()[:2048]))


def _sniff_headers(head: bytes) -> bool:
    """An Internet message (RFC 5322): the file opens with header fields (folded lines allowed)
    up to a blank line, and they name ``From`` and at least one more message field."""
    fields: set[bytes] = set()
    for line in head.removeprefix(b"\xef\xbb\xbf").splitlines()[:200]:
        if not line.strip():
            break
        if line[:1] in (b" ", b"\t") and fields:
            continue  # a folded continuation line
        match = _HEADER_FIELD.match(line)
        if match is None:
            return False
        fields.add(match.group(1).lower())
    return b"from" in fields and len(fields & _MESSAGE_FIELDS) >= 2


def _sniff_delimited(head: bytes) -> bool:
    """A name-less upload is CSV when its first lines share one delimiter count above zero."""
    lines = [ln for ln in head.decode("utf-8", "ignore").splitlines()[:6] if ln.strip()]
    if len(lines) < 3:
        return False
    for delim in (",", ";", "\t"):
        counts = {ln.count(delim) for ln in lines[:-1]}  # the last line may be cut off
        if len(counts) == 1 and counts.pop() > 0:
            return True
    return False


_SNIFFERS = {"markup": _sniff_markup, "headers": _sniff_headers, "delimited": _sniff_delimited}
"""The text sniffing rules a :attr:`Format.sniff` may name."""


def known_sniffers() -> frozenset[str]:
    """The rule names :attr:`docanchor.formats.Format.sniff` may use (checked by a test)."""
    return frozenset(_SNIFFERS)


def _unsupported(what: str) -> UnsupportedType:
    return UnsupportedType(f"{what}. {formats.supported_sentence()}; convert it to one of these and upload it again.")

