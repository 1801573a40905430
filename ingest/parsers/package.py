"""Opening ZIP-based documents (PPTX, XLSX, EPUB, ODT) safely: bombs are refused from the ZIP
central directory and the first bytes of each XML part, before any library inflates a part.

- Zip bombs: too many entries, too many bytes in total, or one entry that expands more than
  :data:`MAX_COMPRESSION_RATIO` times (the declared sizes of the central directory, checked
  before inflating; Word files are checked by the same limits,
  :func:`ingest.parsers.docx.check_zip_limits`).
- XML bombs: an XML part that declares entities (``<!ENTITY`` in its DTD, which precedes the
  root element: "billion laughs", external entities) is refused; no office or e-book format
  needs them. Only the first :data:`DTD_SNIFF_BYTES` of each part are inflated for this.
"""

from __future__ import annotations

import io
import zipfile

from docanchor.errors import DocumentError, TooLarge

MAX_ZIP_ENTRIES = 5000
"""Parts in one package at most (the 872-page DOJ handbook DOCX has < 200)."""
MAX_UNCOMPRESSED_BYTES = 300 * 1024 * 1024
"""Total declared uncompressed size of all parts, in bytes."""
MAX_XML_PART_BYTES = 150 * 1024 * 1024
"""Largest single XML part inflated and parsed, in bytes."""
MAX_COMPRESSION_RATIO = 100
"""Largest uncompressed/compressed ratio of a part over :data:`RATIO_MIN_BYTES`. Deflated XML
reaches about 10-30:1; zip bombs reach 1,000:1 and more (case a12: 1,014:1)."""
RATIO_MIN_BYTES = 1024 * 1024
DTD_SNIFF_BYTES = 4096
"""How much of each XML part is inflated to look for entity declarations (bytes)."""
XML_SUFFIXES = (".xml", ".rels", ".opf", ".ncx", ".xhtml", ".html", ".htm", ".svg")


def open_package(data: bytes, label: str) -> zipfile.ZipFile:
    """``data`` as a ZIP package whose limits were checked (:func:`check_limits`) and whose XML
    parts declare no entities (:func:`check_entities`). ``label`` names the format in messages
    (``"PowerPoint file"``).

    Raises:
        DocumentError: ``empty_file``; ``malformed`` when it is no readable ZIP or a part is
            damaged; ``xml_entities`` when an XML part declares entities.
        TooLarge: ``too_large`` for a zip bomb.
    """
    zf = open_directory(data, label)
    try:
        check_entities(zf, label)
    except BaseException:
        zf.close()
        raise
    return zf


def open_directory(data: bytes, label: str) -> zipfile.ZipFile:
    """``data`` as a ZIP package whose central directory passed :func:`check_limits`; nothing is
    inflated (what an upload is checked for when it arrives, :func:`ingest.pipeline.refuse_at_upload`).

    Raises:
        DocumentError: ``empty_file``; ``malformed`` when it is no readable ZIP.
        TooLarge: ``too_large`` for a zip bomb.
    """
    if not data:
        raise DocumentError("The file is empty (0 bytes); upload a file with content.", code="empty_file")
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise malformed(label, "it is not a readable ZIP package (cut off or damaged)") from exc
    try:
        check_limits(zf, label)
    except BaseException:
        zf.close()
        raise
    return zf


BOMB_REMEDY = ("It may be a zip bomb; if the file is genuine, save it again with its large embedded media removed or "
               "made smaller, or save its text as PDF or plain text, and try that instead.")
"""What a package refused by :func:`check_limits` says to do (the one sentence for its three limits)."""


def check_limits(zf: zipfile.ZipFile, label: str) -> None:
    """Refuse a package whose central directory promises too much (nothing is inflated).

    Raises:
        TooLarge: ``too_large`` over :data:`MAX_ZIP_ENTRIES`, :data:`MAX_UNCOMPRESSED_BYTES`,
            :data:`MAX_COMPRESSION_RATIO` or, for an XML part, :data:`MAX_XML_PART_BYTES`.
    """
    infos = zf.infolist()
    if len(infos) > MAX_ZIP_ENTRIES:
        raise TooLarge(f"The {label} has {len(infos):,} parts; DocAnchor accepts at most {MAX_ZIP_ENTRIES:,}. "
                       f"{BOMB_REMEDY}", code="too_large", entries=len(infos))
    total = sum(i.file_size for i in infos)
    if total > MAX_UNCOMPRESSED_BYTES:
        raise TooLarge(f"The {label} unpacks to {total:,} bytes; DocAnchor accepts at most "
                       f"{MAX_UNCOMPRESSED_BYTES:,}. {BOMB_REMEDY}",
                       code="too_large", uncompressed_bytes=total)
    for info in infos:
        if info.file_size > RATIO_MIN_BYTES and info.file_size > MAX_COMPRESSION_RATIO * max(1, info.compress_size):
            ratio = info.file_size // max(1, info.compress_size)
            raise TooLarge(f"The {label}'s part {info.filename!r} expands {ratio:,}:1 ({info.file_size:,} bytes); "
                           f"DocAnchor accepts at most {MAX_COMPRESSION_RATIO}:1. {BOMB_REMEDY}",
                           code="too_large", part=info.filename, ratio=ratio)
        if info.file_size > MAX_XML_PART_BYTES and info.filename.lower().endswith(XML_SUFFIXES):
            raise TooLarge(f"The {label}'s part {info.filename!r} is {info.file_size:,} bytes; DocAnchor reads "
                           f"parts up to {MAX_XML_PART_BYTES:,} bytes. Split the file.", code="too_large",
                           part=info.filename)


def check_entities(zf: zipfile.ZipFile, label: str) -> None:
    """Refuse a package with an XML part that declares entities (an XML bomb or an external
    entity), reading only the first :data:`DTD_SNIFF_BYTES` of each XML part.

    Raises:
        DocumentError: ``xml_entities``; ``malformed`` when a part cannot be inflated.
    """
    for info in zf.infolist():
        if not info.filename.lower().endswith(XML_SUFFIXES):
            continue
        try:
            with zf.open(info) as fh:
                head = fh.read(DTD_SNIFF_BYTES)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError) as exc:
            raise malformed(label, f"its part {info.filename!r} cannot be unpacked") from exc
        if b"<!ENTITY" in head or b"<\x00!\x00E\x00N\x00T\x00I\x00T\x00Y" in head:
            raise DocumentError(f"The {label}'s part {info.filename!r} declares XML entities, which office files "
                                "and e-books do not use (an XML bomb or an external reference). Save the file "
                                "again from the program that made it.", code="xml_entities", part=info.filename)


def read_part(zf: zipfile.ZipFile, name: str, label: str) -> bytes:
    """The inflated bytes of part ``name`` (limits already checked by :func:`open_package`).

    Raises:
        DocumentError: ``malformed`` when the part is missing or damaged.
    """
    try:
        return zf.read(name)
    except KeyError as exc:
        raise malformed(label, f"its part {name!r} is missing") from exc
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError) as exc:
        raise malformed(label, f"its part {name!r} cannot be unpacked") from exc


def malformed(label: str, why: str) -> DocumentError:
    """The ``malformed`` error for a damaged package of ``label``."""
    return DocumentError(f"The {label} is damaged ({why}); open it in the program that made it, save it again "
                         "and re-upload it.", code="malformed")
