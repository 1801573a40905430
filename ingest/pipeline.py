"""The ingest pipeline's steps for one document: bytes in, chunks and then a record out.

read -> detect -> parse (normalised text + blocks) -> chunk (:func:`prepare`), then, once the
chunks are embedded, anchor -> document record (:func:`make_record`). :mod:`ingest.stream` runs
these steps for many documents at once, embeds and stores, and writes each record last, so a
document becomes visible only when all of its chunks are stored (see :mod:`docanchor.store`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any, Callable

import numpy as np

from docanchor import formats
from docanchor.context import Context
from docanchor.display import display_line
from docanchor.errors import DocumentError, TooLarge, sentences, unreadable_file
from docanchor.library import now_iso
from docanchor.types import Chunk, DocumentRecord, ParsedDocument, make_doc_id, stored_text
from ingest.chunking import chunk_document
from ingest.detect import detect_type
from ingest.scanned import OcrOptions, parse_document
from ingest.titles import once, title_problem
from summarize.anchor import build_anchor
from summarize.outline import headings

Progress = Callable[[str, int, int], None]
"""``progress(stage, done, total)``; stages: parsing, ocr (pages), loading (the model), chunking, embedding,
storing, anchoring."""

@dataclass
class IngestResult:
    """What one ingest produced.

    Attributes:
        record: the stored document's record (anchor included).
        duplicate: True when the same bytes were already stored; nothing was written.
        parsed: the parsed document (normalised text and blocks); ``None`` for a duplicate.
        chunks: the stored chunks; empty for a duplicate.
    """

    record: DocumentRecord
    duplicate: bool
    parsed: ParsedDocument | None = None
    chunks: list[Chunk] | None = None


def refuse_empty(data: bytes) -> None:
    """Refuse a file with nothing to index: zero bytes, or only ASCII whitespace (after an optional
    UTF-8 byte-order mark).

    Raises:
        DocumentError: ``empty_file`` (422).
    """
    if not data:
        raise DocumentError("The file is empty (0 bytes); upload a file with content.", code="empty_file")
    if not data.removeprefix(b"\xef\xbb\xbf").strip():
        raise DocumentError(
            f"The file holds only whitespace ({len(data):,} bytes); upload a file with content.", code="empty_file"
        )


def refuse_at_upload(data: bytes, filename: str | None = None) -> str:
    """The checks an upload gets when it arrives, before a job is queued (every door: HTTP /v1,
    and the URL fetch of LobeChat's and MCP's ``addDocument``): only what reads no page and
    inflates nothing -- empty content, the type, and for a ZIP package (DOCX, PPTX, XLSX, EPUB,
    ODT) the sizes its central directory declares (:func:`ingest.parsers.package.check_limits`,
    case a12 of ../shared/cases). The parse checks the same again, and everything else.

    Returns:
        The detected type (a :attr:`docanchor.formats.Format.name`).

    Raises:
        DocumentError: ``empty_file``, or ``malformed`` for a ZIP package that does not open.
        UnsupportedType: no format DocAnchor reads.
        TooLarge: ``too_large`` for a zip bomb.
    """
    refuse_empty(data)
    doc_type = detect_type(data, filename)
    if doc_type == "docx":
        from ingest.parsers.docx import open_checked  # the Word parser's own check, without parsing

        open_checked(data).close()
    elif (fmt := formats.get(doc_type)) is not None and (fmt.zip_member or fmt.zip_mimetype):
        from ingest.parsers.package import open_directory

        open_directory(data, fmt.label).close()
    return doc_type


def precheck(data: bytes, filename: str | None = None) -> str:
    """What can be known of an ingest without parsing pages or embedding (``ingest --dry-run``):
    the same checks, in the same order and with the same errors, as :func:`prepare`
    makes first -- :func:`refuse_at_upload`, then for a PDF whether it opens without a password,
    and for a ZIP package other than DOCX whether an XML part declares entities.

    Returns:
        The detected type (a :attr:`docanchor.formats.Format.name`).

    Raises:
        DocumentError: ``empty_file``, ``pdf_encrypted``, ``xml_entities``, or ``malformed`` for a
            ZIP package that does not open.
        UnsupportedType: no format DocAnchor reads.
        TooLarge: a PDF hit a decompression limit, or a package is a zip bomb.
    """
    doc_type = refuse_at_upload(data, filename)
    if doc_type == "pdf":
        from ingest.parsers.pdf import check_opens

        check_opens(data)
    elif doc_type != "docx" and (fmt := formats.get(doc_type)) is not None and (fmt.zip_member or fmt.zip_mimetype):
        from ingest.parsers.package import open_package  # its parsers open it so first

        open_package(data, fmt.label).close()
    return doc_type


@dataclass(frozen=True)
class Source:
    """One thing to ingest: its bytes, or a file read when its turn to be parsed comes.

    Attributes:
        data: the bytes (text given as a string is UTF-8 encoded by the caller).
        path: a file to read instead of ``data``; its name is the default ``filename``.
        filename: the original name, a type hint and display title only (never opened).
        title: a display title that wins over the one found in the document.
        origin: where the bytes came from (a path, a URL, an upload's file name), recorded in a
            new document's ``sources`` (see :class:`docanchor.types.DocumentRecord`); ``None``
            records nothing.
        tags, metadata: stored in a new document's record as given (checked by the caller, see
            :mod:`docanchor.library`); a duplicate keeps its own.
        prepared: these bytes parsed and chunked already (:func:`prepare` of this source, e.g. by
            an ingest job before it changed lanes, :mod:`plugin.runner`): not parsed again.
    """

    data: bytes | None = None
    path: Path | None = None
    filename: str | None = None
    title: str | None = None
    origin: str | None = None
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] | None = None
    prepared: Prepared | None = None

    @property
    def name(self) -> str | None:
        """The file name: ``filename``, else the path's name."""
        return self.filename or (self.path.name if self.path is not None else None)

    @property
    def label(self) -> str:
        """How logs name this source."""
        return str(self.path) if self.path is not None else (self.filename or "bytes")

    def read(self, limit_bytes: int) -> bytes:
        """The bytes, refused past ``limit_bytes`` before a large file is read.

        Raises:
            TooLarge: over ``limit_bytes`` (see :func:`check_size`).
            DocumentError: ``unreadable_file`` when the file cannot be read.
        """
        if self.data is not None:
            check_size(len(self.data), limit_bytes)
            return self.data
        if self.path is None:
            raise ValueError("a Source needs data or a path")
        try:
            check_size(self.path.stat().st_size, limit_bytes)
            return self.path.read_bytes()
        except OSError as exc:
            raise unreadable_file(exc, self.path) from exc


def check_size(n_bytes: int, limit_bytes: int) -> None:
    """Raises: TooLarge when ``n_bytes`` exceeds ``limit_bytes`` (``DOCANCHOR_MAX_UPLOAD_BYTES``)."""
    if n_bytes > limit_bytes:
        raise TooLarge(
            f"The file is {n_bytes:,} bytes; DocAnchor accepts at most {limit_bytes:,} bytes "
            "(DOCANCHOR_MAX_UPLOAD_BYTES): split the file, or raise that limit where DocAnchor runs.",
            size_bytes=n_bytes, limit_bytes=limit_bytes,
        )


@dataclass
class Prepared:
    """A source parsed and chunked, ready to embed."""

    doc_id: str
    parsed: ParsedDocument
    chunks: list[Chunk]


def prepare(ctx: Context, source: Source, namespace: str, progress: Progress | None = None) -> Prepared | IngestResult:
    """Read, check, parse (OCR included, :func:`ingest.scanned.parse_document`) and chunk one
    source (safe on a thread beside the embedder).

    Args:
        progress: called on this function's thread with stage ``ocr`` (pages done/total) while
            scanned pages are read, ``loading`` (0/1) before the embedding model loads (when it
            is not loaded yet) and ``chunking`` (characters done/total of the normalised
            text) while chunking; an exception it raises stops the work there.

    Returns:
        The chunks to embed, or the stored document's result (``duplicate`` True) when these
        bytes are stored already.

    Raises:
        DocumentError: ``empty_file`` (zero bytes or only whitespace, see :func:`refuse_empty`),
            ``unreadable_file``, ``no_text`` or a parser's code (see ``ingest.parsers``).
        TooLarge: the bytes exceed ``max_upload_bytes``.
        UnsupportedType: the type is none DocAnchor reads.
    """
    report = progress or (lambda stage, done, total: None)
    data = source.read(ctx.settings.max_upload_bytes)
    refuse_empty(data)
    doc_id = make_doc_id(data)
    existing = ctx.store.get_document(namespace, doc_id)
    if existing is not None:
        return IngestResult(record=existing, duplicate=True)
    if source.prepared is not None:
        return source.prepared
    settings = ctx.settings
    ocr = OcrOptions(enabled=settings.ocr == "on", max_pages=settings.ocr_max_pages)
    parsed = parse_document(detect_type(data, source.name), data, source.name, ocr=ocr, progress=report,
                            cpu_s=settings.parse_cpu_s, wall_s=settings.parse_wall_s,
                            memory_bytes=settings.parse_memory_bytes)
    # one printable line, whoever wrote it (the caller, a file name, the document's metadata)
    found = once(display_line(parsed.title))
    if title_problem(found):  # a style name or a caption is no title: the file name instead
        found = display_line(PurePath(source.name).stem) if source.name else ""
    parsed.title = display_line(source.title) or found or "Untitled document"
    if not ctx.embedder.loaded:  # the first ingest of a process: the chunker counts in the model's tokenizer
        report("loading", 0, 1)
        ctx.embedder.load()
    report("chunking", 0, len(parsed.text))
    chunks = chunk_document(parsed, doc_id, counter=ctx.counter, embedder=ctx.embedder, settings=settings,
                            progress=lambda done, total: report("chunking", done, total))
    if not chunks:
        raise DocumentError(
            sentences("The document has no text that can be indexed" + _why(parsed), _NO_TEXT_STEP),
            code=str(parsed.flags.get("error_code", "no_text")),
            flags=parsed.flags,
        )
    return Prepared(doc_id, parsed, chunks)


def make_record(ctx: Context, doc_id: str, source: Source, parsed: ParsedDocument, chunks: list[Chunk],
                embeddings: np.ndarray) -> DocumentRecord:
    """The document's record, its anchor built from the chunks and their embeddings (float32
    rows, one per chunk)."""
    visible = stored_text(chunks)  # hidden or garbled text never chunked is not the document's size
    n_tokens, n_chars = ctx.counter.count(visible), len(visible)
    del visible
    anchor, outline = build_anchor(
        parsed, chunks, embeddings, doc_id=doc_id, counter=ctx.counter, max_tokens=ctx.settings.anchor_tokens,
        size=(n_tokens, n_chars),
    )
    return DocumentRecord(
        doc_id=doc_id,
        title=parsed.title,
        doc_type=parsed.doc_type,
        n_chunks=len(chunks),
        n_tokens=n_tokens,
        n_chars=n_chars,
        n_pages=parsed.n_pages,
        anchor=anchor,
        outline=outline,
        outline_total=len(headings(parsed)),
        flags=parsed.flags,
        source_name=(source.name or "")[:300],
        sources=[source.origin] if source.origin else [],
        tags=list(source.tags),
        metadata=dict(source.metadata or {}),
        added_at=now_iso(),
    )


_NO_TEXT_STEP = ("Check that it opens with its text in its own application; a scan needs OCR (DocAnchor's runs on images "
                 "and image-only PDF pages), else save or export it as text.")
"""What a document with no indexable text may do (:func:`docanchor.errors.sentences` adds it to the reason)."""


def _why(parsed: ParsedDocument) -> str:
    if parsed.flags.get("no_text_layer"):
        return f": its {parsed.n_pages or 'few'} page(s) are images without a text layer"
    if parsed.flags.get("garbled_pages"):
        return ": its text could not be decoded into readable characters"
    return ""
