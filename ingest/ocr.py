"""OCR of one page: a scanned PDF page or one frame of an image, read offline.

The engine is RapidOCR (``rapidocr-onnxruntime``): PaddleOCR's PP-OCRv4 detection and
recognition models (Chinese and English, Apache-2.0) run by onnxruntime, with the model files
inside the wheel, so nothing is downloaded at run time. It is loaded once per worker process, on
first use (:func:`engine`).

:func:`ocr_page` is what the sandbox runs (``ingest.scanned`` calls it once per page, so each page
is under the parse time and memory caps): it renders a PDF page with pdfium (``pypdfium2``) or
opens an image frame with Pillow, recognises text boxes and lays them out as lines and
paragraphs (:func:`layout`).
"""

from __future__ import annotations

import io
import re
import statistics
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field

from docanchor.errors import DocumentError, TooLarge

RENDER_DPI = 200
"""Resolution PDF pages are rendered at, in dots per inch (Tesseract's documentation and case a07
find 100-200 dpi reads best; finer renders only enlarge paper noise)."""
MAX_SIDE_PX = 2000
"""Longest side of a rendered PDF page, in pixels: RapidOCR shrinks larger images to 2,000 px
(``Global.max_side_len`` of its config) before detection and reads the text crops from that."""
MAX_IMAGE_PIXELS = 60_000_000
"""Largest image frame read, in pixels (a 60-megapixel photo); larger ones are refused as
``too_large`` before decoding (Pillow's own bomb limit is 89 million)."""
SPACE_GAP = 0.45
"""Between two recognised characters of Latin text, a gap wider than this share of the median
character width is a space. PP-OCRv4's Chinese-English recogniser often drops the spaces of
English lines (fixture scan_en.png: "HarbourAuthorityofLarkspur"); its character boxes
(``return_word_box``) show them: letters inside a word touch (gap 0-4 px at 15 px per letter),
words stand 10-15 px apart, but the boxes come from the recogniser's 8-px steps, so some letters
inside words stand apart too). On scan_en.png 0.45 gives the best word match against the known
text (0.82 of words, against 0.68 without it; 0.55-0.8 gave 0.76-0.78)."""
PARAGRAPH_GAP = 1.2
"""A vertical gap above this many median line heights starts a new paragraph."""
ENGINE_NAME = "RapidOCR 1.4.4 (PP-OCRv4)"
OCR_THREADS = 4
"""Threads each of the engine's three onnxruntime sessions runs on, at most (onnxruntime's own
default is one per physical core). Every thread's 8 MiB stack counts against the worker's memory
cap (``DOCANCHOR_PARSE_MEMORY_BYTES``), so without a bound the memory a page may use would shrink
as the machine's cores grow; up to 4 OCR workers run at once (:mod:`ingest.sandbox`) to use the
rest."""

_CJK = re.compile(r"[\u3000-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")
_engine = None


@dataclass
class OcrPage:
    """What OCR read on one page.

    Attributes:
        number: the 1-based page (PDF page or image frame).
        paragraphs: the text, in reading order, one string per paragraph (lines joined by "\\n").
        confidence: the recogniser's mean score over the page's characters, 0-1 (``None`` when
            nothing was found).
        boxes: text boxes found.
        seconds: time spent recognising (wall clock), for the bench.
    """

    number: int
    paragraphs: list[str] = field(default_factory=list)
    confidence: float | None = None
    boxes: int = 0
    seconds: float = 0.0


def engine():
    """The RapidOCR engine of this process, loaded on first use from the models in its wheel, its
    sessions on at most :data:`OCR_THREADS` threads each, whose threads sleep when idle
    (:func:`_threads_that_sleep`)."""
    global _engine
    if _engine is None:
        import os

        from rapidocr_onnxruntime import RapidOCR

        with _threads_that_sleep():
            _engine = RapidOCR(intra_op_num_threads=min(OCR_THREADS, os.cpu_count() or 1))
    return _engine


@contextmanager
def _threads_that_sleep():
    """While RapidOCR builds its sessions, their options also say
    ``session.intra_op.allow_spinning = 0``: onnxruntime's intra-op threads wait for work asleep
    instead of spinning (its default), which burns CPU that a parse worker beside them, or the
    embedder, would use (the same setting as :mod:`docanchor.onnx_query`). Spinning changes
    nothing that is computed, only how idle threads wait. RapidOCR 1.4.4 (pinned) builds every
    session's options in ``OrtInferSession._init_sess_opts`` and has no setting for this, so that
    function is wrapped for the duration of the build and put back afterwards."""
    from rapidocr_onnxruntime.utils import infer_engine

    cls = infer_engine.OrtInferSession
    build = cls.__dict__["_init_sess_opts"]

    def sleeping(config):
        options = build.__func__(config)
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return options

    cls._init_sess_opts = staticmethod(sleeping)
    try:
        yield
    finally:
        cls._init_sess_opts = build


def ocr_page(doc_type: str, data: bytes, number: int) -> OcrPage:
    """Read page ``number`` (1-based) of a ``doc_type`` document by OCR; the format's registry
    entry (``Format.ocr``) says how its page becomes a picture (:data:`PAGE_PICTURES`).

    Raises:
        DocumentError: ``malformed`` when the page cannot be rendered or decoded.
        TooLarge: an image frame over :data:`MAX_IMAGE_PIXELS`.
    """
    import time

    import numpy as np

    from docanchor import formats

    image = PAGE_PICTURES[formats.get(doc_type).ocr](data, number)
    started = time.monotonic()
    result, _ = engine()(np.asarray(image.convert("RGB")), return_word_box=True)
    page = layout(number, result or [])
    page.seconds = round(time.monotonic() - started, 3)
    return page


def render_pdf_page(data: bytes, number: int):
    """Page ``number`` of a PDF as a greyscale PIL image at :data:`RENDER_DPI` (long side at most
    :data:`MAX_SIDE_PX`)."""
    import pypdfium2 as pdfium

    try:
        pdf = pdfium.PdfDocument(data)
        try:
            page = pdf[number - 1]
            width, height = page.get_size()
            scale = min(RENDER_DPI / 72, MAX_SIDE_PX / max(width, height, 1))
            return page.render(scale=scale, grayscale=True).to_pil()
        finally:
            pdf.close()
    except (pdfium.PdfiumError, IndexError, ValueError) as exc:
        raise DocumentError(f"Page {number} of the PDF could not be rendered for OCR; re-export the PDF and "
                            "upload it again.", code="malformed", page=number) from exc


def open_image(data: bytes):
    """The image in ``data``, checked for size before decoding.

    Raises:
        DocumentError: ``malformed`` when Pillow cannot read it (damaged, cut off).
        TooLarge: more than :data:`MAX_IMAGE_PIXELS` pixels.
    """
    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        # Pillow's own bomb limits (89 and 179 million pixels) lie above ours: such an image is too large,
        # not damaged; Pillow refuses before its size can be read, so the sentence gives the limit only
        raise _too_large_image(f"more than {MAX_IMAGE_PIXELS:,} pixels") from exc
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise _damaged_image() from exc
    width, height = image.size
    if width * height > MAX_IMAGE_PIXELS:
        raise _too_large_image(f"{width:,} × {height:,} pixels", width=width, height=height)
    return image


def _too_large_image(size: str, **details: int) -> TooLarge:
    """The one sentence for an image over :data:`MAX_IMAGE_PIXELS` (``size``: what it is, in words)."""
    return TooLarge(f"The image is {size}; DocAnchor reads images up to {MAX_IMAGE_PIXELS:,} pixels. "
                    "Scale it down and upload it again.", code="too_large", limit_pixels=MAX_IMAGE_PIXELS, **details)


def image_frame(data: bytes, number: int):
    """Frame ``number`` (1-based; TIFF pages) of an image, upright (EXIF orientation applied)
    and fully decoded.

    Raises:
        DocumentError: ``malformed`` for a damaged or cut-off image.
    """
    from PIL import ImageOps

    image = open_image(data)
    try:
        image.seek(number - 1)
        image.load()
        return ImageOps.exif_transpose(image)
    except (OSError, ValueError, EOFError, SyntaxError) as exc:
        raise _damaged_image() from exc


def _damaged_image() -> DocumentError:
    return DocumentError("The image could not be decoded (it is damaged, cut off or not an image); save it "
                         "again as PNG or JPEG and upload it.", code="malformed")


def layout(number: int, boxes: list) -> OcrPage:
    """Text boxes (RapidOCR's ``[corners, text, score, character boxes]``) as lines and
    paragraphs in reading order: spaces restored where the character boxes show them
    (:func:`respace`); boxes whose vertical centres fall within one line's height form a line, read left to
    right (joined with a space, none between CJK characters); a gap of more than
    :data:`PARAGRAPH_GAP` median line heights starts a paragraph."""
    items = []
    for corners, text, score, *chars in boxes:
        text = " ".join(respace(str(text), chars[0] if chars else None).split())
        if not text:
            continue
        ys = [p[1] for p in corners]
        xs = [p[0] for p in corners]
        items.append((min(ys), max(ys), min(xs), text, float(score)))
    if not items:
        return OcrPage(number)
    lines: list[list[tuple]] = []
    for item in sorted(items, key=lambda i: (i[0] + i[1]) / 2):
        centre = (item[0] + item[1]) / 2
        if lines and min(i[0] for i in lines[-1]) <= centre <= max(i[1] for i in lines[-1]):
            lines[-1].append(item)
        else:
            lines.append([item])
    height = statistics.median(max(i[1] for i in line) - min(i[0] for i in line) for line in lines) or 1
    paragraphs: list[list[str]] = []
    bottom = None
    for line in lines:
        top = min(i[0] for i in line)
        if bottom is None or top - bottom > PARAGRAPH_GAP * height:
            paragraphs.append([])
        paragraphs[-1].append(_join([i[3] for i in sorted(line, key=lambda i: i[2])]))
        bottom = max(i[1] for i in line)
    chars = sum(len(i[3]) for i in items)
    confidence = sum(len(i[3]) * i[4] for i in items) / chars
    return OcrPage(number, ["\n".join(p) for p in paragraphs], round(confidence, 4), len(items))


def respace(text: str, char_boxes) -> str:
    """``text`` with a space wherever the gap between two characters' boxes is wider than
    :data:`SPACE_GAP` of the median character width; unchanged when it already has spaces,
    holds CJK characters, or the boxes do not match its characters one to one."""
    if " " in text or len(text) < 4 or _CJK.search(text) or not char_boxes or len(char_boxes) != len(text):
        return text
    spans = [(min(p[0] for p in box), max(p[0] for p in box)) for box in char_boxes]
    width = statistics.median(right - left for left, right in spans) or 1
    out = text[0]
    for i in range(1, len(text)):
        if spans[i][0] - spans[i - 1][1] > SPACE_GAP * width:
            out += " "
        out += text[i]
    return out


def _join(parts: list[str]) -> str:
    out = parts[0]
    for part in parts[1:]:
        glue = "" if _CJK.match(out[-1]) and _CJK.match(part[0]) else " "
        out += glue + part
    return out


PAGE_PICTURES = {"pdf_page": render_pdf_page, "image_frame": image_frame}
"""How a page becomes a picture, by the name a format's registry entry gives (``Format.ocr``)."""
