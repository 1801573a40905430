"""The ingest pipeline: bytes in, a stored, searchable document and its anchor out.

detect -> parse (normalised text + blocks) -> chunk -> embed -> store chunks -> BM25 index ->
anchor -> document record. The record is written last, so a document becomes visible only when
all of its chunks are stored (see :mod:`docanchor.store`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Callable, Sequence

import numpy as np

from docanchor.context import Context
from docanchor.display import display_line
from docanchor.errors import DocumentError, TooLarge
from docanchor.library import now_iso
from docanchor.types import Chunk, DocumentRecord, ParsedDocument, make_doc_id
from ingest.chunking import chunk_document
from ingest.detect import detect_type
from ingest.scanned import OcrOptions, parse_document
from ingest.titles import title_problem
from summarize.anchor import build_anchor

Progress = Callable[[str, int, int], None]
"""``progress(stage, done, total)``; stages: parsing, ocr (pages), chunking, embedding, storing, anchoring."""

EMBED_BATCH = 64


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


def ingest_document(
    ctx: Context,
    data: bytes,
    *,
    namespace: str,
    filename: str | None = None,
    title: str | None = None,
    progress: Progress | None = None,
    source: str | None = None,
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
) -> IngestResult:
    """Ingest one document's bytes into ``namespace``.

    Args:
        data: the file's bytes (text given as a string is UTF-8 encoded by the caller).
        filename: the original name, used as a type hint and display title only (never a path).
        title: a display title that wins over the one found in the document.
        progress: called as work advances.
        source: where the bytes came from, recorded in a new document's ``sources`` (see
            :class:`docanchor.types.DocumentRecord`); a duplicate's record is left as it is.
        tags, metadata: stored in the record as given (checked by the caller, see
            :mod:`docanchor.library`); a duplicate keeps its own.

    Returns:
        The result; ``duplicate`` is True when these bytes were already stored.

    Raises:
        DocumentError: ``empty_file`` (zero bytes or only whitespace, see :func:`refuse_empty`),
            ``no_text`` or a parser's code (see ``ingest.parsers``).
        TooLarge: the bytes exceed ``max_upload_bytes``.
        UnsupportedType: the type is none DocAnchor reads.
    """
    report = progress or (lambda stage, done, total: None)
    refuse_empty(data)
    limit = ctx.settings.max_upload_bytes
    if len(data) > limit:
        raise TooLarge(
            f"The file is {len(data):,} bytes; DocAnchor accepts at most {limit:,} bytes "
            "(DOCANCHOR_MAX_UPLOAD_BYTES).",
            size_bytes=len(data), limit_bytes=limit,
        )
    doc_id = make_doc_id(data)
    existing = ctx.store.get_document(namespace, doc_id)
    if existing is not None:
        return IngestResult(record=existing, duplicate=True)

    report("parsing", 0, 1)
    doc_type = detect_type(data, filename)
    ocr = OcrOptions(enabled=ctx.settings.ocr == "on", max_pages=ctx.settings.ocr_max_pages)
    parsed = parse_document(doc_type, data, filename, ocr=ocr, progress=report,
                            cpu_s=ctx.settings.parse_cpu_s, wall_s=ctx.settings.parse_wall_s)
    # one printable line, whoever wrote it (the caller, a file name, the document's metadata)
    found = display_line(parsed.title)
    if title_problem(found):  # a style name or a caption is no title: the file name instead
        found = display_line(PurePath(filename).stem) if filename else ""
    parsed.title = display_line(title) or found or "Untitled document"
    report("chunking", 0, len(parsed.text))
    chunks = chunk_document(parsed, doc_id, counter=ctx.counter, embedder=ctx.embedder, settings=ctx.settings,
                            progress=lambda done, total: report("chunking", done, total))
    if not chunks:
        raise DocumentError(
            "The document has no text that can be indexed" + _why(parsed) + ".",
            code=str(parsed.flags.get("error_code", "no_text")),
            flags=parsed.flags,
        )

    # float32 rows, not lists of Python floats (8x smaller: 384 floats are 1.5 KB here, ~12 KB as a list)
    embeddings = np.empty((len(chunks), ctx.embedder.dimension), dtype=np.float32)
    for i in range(0, len(chunks), EMBED_BATCH):
        report("embedding", i, len(chunks))
        embeddings[i : i + EMBED_BATCH] = ctx.embedder.embed([c.embedding_text for c in chunks[i : i + EMBED_BATCH]])
    report("embedding", len(chunks), len(chunks))

    report("storing", 0, len(chunks))
    with ctx.write_lock:
        # A failed earlier attempt may have left chunks of this id behind: clear them first.
        ctx.store.delete_document(namespace, doc_id)
        ctx.store.add_chunks(namespace, chunks, embeddings)
        ctx.lexical.add(namespace, chunks)
    report("storing", len(chunks), len(chunks))

    report("anchoring", 0, 1)
    anchor, outline = build_anchor(
        parsed, chunks, embeddings, doc_id=doc_id, counter=ctx.counter, max_tokens=ctx.settings.anchor_tokens
    )
    record = DocumentRecord(
        doc_id=doc_id,
        title=parsed.title,
        doc_type=parsed.doc_type,
        n_chunks=len(chunks),
        n_tokens=ctx.counter.count(parsed.text),
        n_chars=len(parsed.text),
        n_pages=parsed.n_pages,
        anchor=anchor,
        outline=outline,
        flags=parsed.flags,
        source_name=(filename or "")[:300],
        sources=[source] if source else [],
        tags=list(tags),
        metadata=dict(metadata or {}),
        added_at=now_iso(),
    )
    with ctx.write_lock:
        ctx.store.put_document(namespace, record)
    report("anchoring", 1, 1)
    return IngestResult(record=record, duplicate=False, parsed=parsed, chunks=chunks)


def _why(parsed: ParsedDocument) -> str:
    if parsed.flags.get("no_text_layer"):
        return f": its {parsed.n_pages or 'few'} page(s) are images without a text layer"
    if parsed.flags.get("garbled_pages"):
        return ": its text could not be decoded into readable characters"
    return ""
