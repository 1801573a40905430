"""When text is invisible to a reader: the size and colour rules the DOCX and HTML parsers share.

A parser works out each run's or element's font size and its colour against what is painted
beneath it (:mod:`ingest.parsers.docx_format` from run properties and styles,
:mod:`ingest.parsers.html_css` from the computed CSS) and asks :func:`too_small` and
:func:`unreadable_colour`. Text they reject is hidden text: not indexed, counted in the
document's ``hidden_text`` flag (DESIGN.md, "Normalise": never silently indexed as good text).
"""

from __future__ import annotations

HIDDEN_MAX_FONT_PT = 1.0
"""Text this size or smaller (points) is unreadable: issue 18 names 1-pt text a hiding technique,
and the PDF parser's ``TINY_TEXT_PT`` draws the line at the same size."""

MIN_CONTRAST_RATIO = 1.1
"""Text whose WCAG 2 contrast ratio with its background is below this is invisible. Our choice:
white text on white is 1.0, ``#f5f5f5`` on white 1.09; faint but readable grey (``#e0e0e0``,
1.32) stays, far below WCAG's 4.5 minimum for comfortable reading."""

WHITE = (1.0, 1.0, 1.0)
"""The page a document is shown on unless it paints its own (sRGB, 0-1)."""

RGB = tuple[float, float, float]


def too_small(size_pt: float | None) -> bool:
    """Whether text of ``size_pt`` points (``None``: unknown) is too small to read."""
    return size_pt is not None and size_pt <= HIDDEN_MAX_FONT_PT


def composite(colour: RGB, alpha: float, beneath: RGB) -> RGB:
    """``colour`` painted with ``alpha`` (0-1) over ``beneath`` (source-over compositing)."""
    a = min(1.0, max(0.0, alpha))
    return tuple(a * c + (1 - a) * b for c, b in zip(colour, beneath))  # type: ignore[return-value]


def relative_luminance(colour: RGB) -> float:
    """WCAG 2.x relative luminance of an sRGB colour (channels 0-1)."""
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in colour)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(a: RGB, b: RGB) -> float:
    """WCAG 2.x contrast ratio of two colours: 1 (same) to 21 (black on white)."""
    la, lb = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def unreadable_colour(text: RGB, alpha: float, background: RGB) -> bool:
    """Whether text of colour ``text`` painted with opacity ``alpha`` on ``background`` is below
    :data:`MIN_CONTRAST_RATIO` (white on white, transparent text, ``opacity: 0``)."""
    return contrast_ratio(composite(text, alpha, background), background) < MIN_CONTRAST_RATIO


def hex_colour(value: str | None) -> RGB | None:
    """``"FFFFFF"`` or ``"#ffffff"`` (6 hex digits) as sRGB 0-1, else ``None``."""
    value = (value or "").strip().lstrip("#")
    if len(value) != 6:
        return None
    try:
        return tuple(int(value[i:i + 2], 16) / 255 for i in (0, 2, 4))  # type: ignore[return-value]
    except ValueError:
        return None
