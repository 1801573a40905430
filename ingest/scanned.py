"""Parsing with OCR: pages that hold only an image are read by OCR after the parser ran.

For a format whose registry entry says ``ocr`` (:mod:`docanchor.formats`):

- a parser that finds no text at all raises ``no_text_layer`` with ``n_pages`` (a scanned PDF;
  every image, see :mod:`ingest.parsers.image`): every page is read by OCR;
- a parser that finds text on some pages lists the others in ``flags["image_only_pages"]`` (a
  PDF mixing typed and scanned pages): only those pages are read by OCR, and their text is put
  in page order among the typed pages.

Each page is one sandboxed call (:func:`ingest.ocr.ocr_page`) under the parse limits (memory
cap, ``cpu_s`` of CPU time per page, the ``wall_s`` backstop; OCR workers are a pool of their own,
so parse workers never load the models), reported as stage ``ocr`` with ``done``/``total`` pages. At most ``ocr_max_pages`` pages of
a document are read (``DOCANCHOR_OCR_MAX_PAGES``); the rest stay in ``image_only_pages`` and are
listed in ``flags["ocr_skipped_pages"]``. OCR text is marked ``flags["ocr"] = {"pages",
"confidence" (per page, 0-1), "engine", "seconds" (wall clock spent recognising, all pages)}``; a
page whose confidence is below :data:`MIN_CONFIDENCE` is flagged like a garbled page (its blocks
``("garbled",)``, not indexed; listed in ``garbled_pages`` with the reason). With OCR off
(``DOCANCHOR_OCR=off``) nothing changes: ``no_text_layer`` as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath
from typing import Callable

from docanchor import formats
from docanchor.errors import DocAnchorError, DocumentError, TooLarge
from docanchor.settings import Settings
from docanchor.types import ParsedDocument
from ingest.builder import DocumentBuilder
from ingest.ocr import ENGINE_NAME, OcrPage
from ingest.parsers import call, parse

MIN_CONFIDENCE = 0.75
"""Mean recogniser score (0-1) under which a page's OCR text is treated as garbled. Clean
rendered and scanned text pages score 0.90-0.99; paper noise and pictures read as text score
lower (measured by bench/corpus_report.py on the fixtures and ../shared, see the commit)."""
MAX_FAILED_PAGES = 3
"""Pages whose OCR failed (damaged, over the caps) before the rest are skipped too."""

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class OcrOptions:
    """Whether and how much to OCR (from ``Settings.ocr`` and ``Settings.ocr_max_pages``)."""

    enabled: bool = True
    max_pages: int = 50


def parse_document(doc_type: str, data: bytes, filename: str | None = None, *,
                   ocr: OcrOptions = OcrOptions(), progress: Progress | None = None,
                   cpu_s: float = Settings.parse_cpu_s, wall_s: float = Settings.parse_wall_s,
                   memory_bytes: int = Settings.parse_memory_bytes) -> ParsedDocument:
    """Parse ``data`` as ``doc_type`` (:func:`ingest.parsers.parse`), then OCR its image-only
    pages when the format allows it and ``ocr.enabled``.

    Args:
        cpu_s: CPU seconds the parse, and the OCR of each page, may use (``DOCANCHOR_PARSE_CPU_S``).
        wall_s: the wall-clock backstop of each of those calls (``DOCANCHOR_PARSE_WALL_S``).
        memory_bytes: the memory each of those calls may allocate, in bytes
            (``DOCANCHOR_PARSE_MEMORY_BYTES``).

    Raises:
        DocumentError: the parser's codes; ``no_text_layer`` when no page has text and OCR is
            off or found none; the sandbox's limit error (``parse_cpu_limit``, ``parse_timeout``)
            when no page was read because OCR reached it.
        TooLarge, UnsupportedType: as :func:`ingest.parsers.parse`; ``too_large`` also when no page
            was read because OCR reached the memory cap.
    """
    fmt = formats.get(doc_type)
    limits = {"cpu_s": cpu_s, "wall_s": wall_s, "memory_bytes": memory_bytes}
    if fmt is None or not fmt.ocr:
        return parse(doc_type, data, filename, **limits)
    report = progress or (lambda stage, done, total: None)
    try:
        parsed = parse(doc_type, data, filename, **limits)
    except DocumentError as err:
        if err.code != "no_text_layer":
            raise
        n_pages = int(err.details.get("n_pages") or 0)
        if not ocr.enabled or not n_pages:
            raise _ocr_off(fmt, n_pages) if n_pages else err
        pages, skipped, failed = _read(doc_type, data, list(range(1, n_pages + 1)), ocr, report, limits)
        limit = _limit_reached(failed)
        if limit is not None and not any(p.paragraphs for p in pages):
            raise limit
        return _build(None, pages, skipped, list(failed), fmt, filename, n_pages)
    wanted = [int(p) for p in parsed.flags.get("image_only_pages") or []]
    if not wanted or not ocr.enabled:
        return parsed
    pages, skipped, failed = _read(doc_type, data, wanted, ocr, report, limits)
    return _build(parsed, pages, skipped, list(failed), fmt, filename, parsed.n_pages)


def _read(doc_type: str, data: bytes, numbers: list[int], ocr: OcrOptions, report: Progress,
          limits: dict) -> tuple[list[OcrPage], list[int], dict[int, DocAnchorError]]:
    """OCR ``numbers`` (at most ``ocr.max_pages`` of them), each under ``limits`` (``cpu_s``,
    ``wall_s``, ``memory_bytes``); returns the pages read, the pages skipped (over the cap, or after
    too many failures) and the pages whose OCR failed, with the error of each."""
    todo, skipped = numbers[: ocr.max_pages], numbers[ocr.max_pages:]
    pages: list[OcrPage] = []
    failed: dict[int, DocAnchorError] = {}
    for i, number in enumerate(todo):
        if len(failed) >= MAX_FAILED_PAGES:
            skipped = todo[i:] + skipped
            break
        report("ocr", i, len(todo))
        try:
            pages.append(call("ingest.ocr:ocr_page", doc_type, data, number, pool="ocr", **limits))
        except (DocumentError, TooLarge) as err:
            failed[number] = err
    report("ocr", len(todo), len(todo))
    return pages, skipped, failed


def _build(parsed: ParsedDocument | None, pages: list[OcrPage], skipped: list[int], failed: list[int],
           fmt: formats.Format, filename: str | None, n_pages: int | None) -> ParsedDocument:
    """The document with the OCR pages in page order among the parsed blocks (if any)."""
    if not any(p.paragraphs for p in pages) and parsed is None:
        raise DocumentError(
            f"OCR found no text on the {fmt.label} file's {n_pages} page(s)"
            + (f" ({len(skipped)} not read: over DOCANCHOR_OCR_MAX_PAGES)" if skipped else "")
            + "; check that the scan holds legible text.", code="no_text_layer", n_pages=n_pages)
    title = parsed.title if parsed is not None else (PurePath(filename).stem[:200] if filename else "")
    b = DocumentBuilder(fmt.name, title=title)
    old = parsed.blocks if parsed is not None else []
    by_number = {p.number: p for p in pages}
    low = {p.number: p.confidence for p in pages if p.confidence is not None and p.confidence < MIN_CONFIDENCE}
    i = 0
    for number in sorted(by_number):
        while i < len(old) and (old[i].page or 0) <= number:
            _copy(b, parsed, old[i])
            i += 1
        flags = ("garbled",) if number in low else ()
        for paragraph in by_number[number].paragraphs:
            b.add(paragraph, page=number, flags=flags)
    for block in old[i:]:
        _copy(b, parsed, block)
    out = b.build(n_pages=n_pages)
    out.title = title or out.title
    out.flags = dict(parsed.flags) if parsed is not None else {}
    out.summary = list(parsed.summary) if parsed is not None else []
    _flag(out.flags, pages, skipped, failed, low)
    if parsed is None and low and len(low) == len([p for p in pages if p.paragraphs]):
        out.flags["error_code"] = "text_quality"  # every page read is below the confidence floor
    return out


def _limit_reached(failed: dict[int, DocAnchorError]) -> DocAnchorError | None:
    """The first failed page's error when it is a sandbox limit (it names the limit and its
    setting, see :mod:`ingest.sandbox`): a document none of whose pages could be read for that
    reason is refused with it, not told its scan holds no legible text."""
    return next((err for err in failed.values() if err.details.get("limit")), None)


def _copy(b: DocumentBuilder, parsed: ParsedDocument, block) -> None:
    text = parsed.text[block.start:block.end]
    if block.kind == "heading":
        b.heading(text, level=block.level, page=block.page)
    else:
        b.add(text, kind=block.kind, page=block.page, flags=block.flags, raw=True)


def _flag(flags: dict, pages: list[OcrPage], skipped: list[int], failed: list[int], low: dict[int, float]) -> None:
    read = [p for p in pages if p.paragraphs]
    if read:
        flags["ocr"] = {"pages": [p.number for p in read], "engine": ENGINE_NAME,
                        "confidence": {str(p.number): p.confidence for p in read},
                        "seconds": round(sum(p.seconds for p in pages), 2)}
    left = sorted(set(skipped) | set(failed) | {p.number for p in pages if not p.paragraphs})
    if left:
        flags["image_only_pages"] = left
    else:
        flags.pop("image_only_pages", None)
    if skipped:
        flags["ocr_skipped_pages"] = sorted(skipped)
    if failed:
        flags["unreadable_pages"] = sorted(set(flags.get("unreadable_pages", [])) | set(failed))
    if low:
        flags["garbled_pages"] = sorted(set(flags.get("garbled_pages", [])) | set(low))
        reasons = dict(flags.get("garbled_reasons", {}))
        reasons.update({str(n): f"OCR confidence {c:.2f} (below {MIN_CONFIDENCE})" for n, c in low.items()})
        flags["garbled_reasons"] = reasons


def _ocr_off(fmt: formats.Format, n_pages: int) -> DocumentError:
    return DocumentError(
        f"The {fmt.label} file's {n_pages} page(s) are images without a text layer, and OCR is turned off "
        "(DOCANCHOR_OCR=off); turn it on, or run OCR elsewhere (for example ocrmypdf) and upload the result.",
        code="no_text_layer", n_pages=n_pages)
