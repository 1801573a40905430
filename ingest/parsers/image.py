"""Images (PNG, JPEG, TIFF, WebP): checked here, read by OCR afterwards.

An image has no text layer: :func:`parse_image` decodes every frame (so a damaged or cut-off file
fails here, in the sandbox, with ``malformed``) and then raises ``no_text_layer`` with the frame
count, exactly as a scanned PDF does. The ingest step :mod:`ingest.scanned` catches that and reads
each frame by OCR (one page per frame, a multi-page TIFF giving several); with OCR turned off
(``DOCANCHOR_OCR=off``) the upload is refused with that code.
"""

from __future__ import annotations

from docanchor.errors import DocumentError, TooLarge
from docanchor.types import ParsedDocument
from ingest.ocr import MAX_IMAGE_PIXELS, image_frame, open_image

MAX_FRAMES = 2_000
"""Frames (TIFF pages) read at most; more is refused as ``too_large``."""


def parse_image(data: bytes, filename: str | None = None) -> ParsedDocument:
    """Check an image and count its frames.

    Raises:
        DocumentError: ``empty_file``; ``malformed`` for an image Pillow cannot decode;
            ``no_text_layer`` (with ``n_pages``, the frame count) for every readable image.
        TooLarge: a frame over :data:`ingest.ocr.MAX_IMAGE_PIXELS` pixels, or more than
            :data:`MAX_FRAMES` frames.
    """
    if not data:
        raise DocumentError("The file is empty (0 bytes); upload a file with content.", code="empty_file")
    frames = getattr(open_image(data), "n_frames", 1)
    if frames > MAX_FRAMES:
        raise TooLarge(f"The image has {frames:,} frames; DocAnchor reads at most {MAX_FRAMES:,}: split it into smaller files.",
                       code="too_large", frames=frames)
    for number in range(1, frames + 1):
        width, height = image_frame(data, number).size
        if width * height > MAX_IMAGE_PIXELS:
            raise TooLarge(f"Frame {number} of the image is {width:,} × {height:,} pixels; DocAnchor reads "
                           f"images up to {MAX_IMAGE_PIXELS:,} pixels: scale it down and upload it again.", code="too_large")
    raise DocumentError(
        f"The image's {frames} page(s) hold no text layer; DocAnchor reads images by OCR, which is turned off "
        "(DOCANCHOR_OCR=off): turn OCR on where DocAnchor runs, or upload the image's text.", code="no_text_layer",
        n_pages=frames)
