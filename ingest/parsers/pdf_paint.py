"""Points, rectangles and colours of the PDF imaging model, for :mod:`ingest.parsers.pdf_visibility`.

Matrices are ISO 32000-1 8.3.3's ``[a b c d e f]`` (a point is a row vector times the matrix);
colours are RGB triples 0-1, converted from DeviceGray, DeviceRGB, DeviceCMYK and their
calibrated or ICC-based cousins (8.6), with the naive CMYK conversion of 10.4.2; contrast is
WCAG 2's (relative luminance, contrast ratio).
"""

from __future__ import annotations

import functools
from typing import Any

MIN_CONTRAST_RATIO = 1.3
"""Text whose contrast ratio with its background is below this is not readable: hidden. The
ratio is WCAG 2's ((L1 + 0.05) / (L2 + 0.05) of relative luminances; WCAG asks 4.5 for body
text); 1.3 puts grey 0.88 on white at the limit, so faint watermark-grey (0.9 and lighter) and
near-white text are hidden while light grey captions (0.75: ratio 1.9) stay."""
MIN_CHANNEL_DIFF = 0.35
"""... unless one colour channel differs by at least this (0-1 scale): pure yellow on white has
a ratio of 1.07 but is plainly visible."""

Rect = tuple[float, float, float, float]
"""``(x0, y0, x1, y1)`` in default user space (points), x0 <= x1 and y0 <= y1."""


def mul(m, n):
    a, b, c, d, e, f = m
    a2, b2, c2, d2, e2, f2 = n
    return (a * a2 + b * c2, a * b2 + b * d2, c * a2 + d * c2, c * b2 + d * d2,
            e * a2 + f * c2 + e2, e * b2 + f * d2 + f2)


def apply(m, x: float, y: float) -> tuple[float, float]:
    return (m[0] * x + m[2] * y + m[4], m[1] * x + m[3] * y + m[5])


def rect_of(points) -> Rect:
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    return (min(xs), min(ys), max(xs), max(ys))


def transform_rect(m, r: Rect) -> Rect:
    return rect_of([apply(m, r[0], r[1]), apply(m, r[2], r[1]), apply(m, r[0], r[3]), apply(m, r[2], r[3])])


def intersect(a: Rect | None, b: Rect) -> Rect:
    if a is None:
        return b
    return (max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3]))


def overlaps(a: Rect, b: Rect) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def contains(outer: Rect, inner: Rect, tol: float = 0.5) -> bool:
    return (outer[0] <= inner[0] + tol and outer[1] <= inner[1] + tol
            and outer[2] >= inner[2] - tol and outer[3] >= inner[3] - tol)


def has_point(r: Rect, x: float, y: float) -> bool:
    return r[0] <= x <= r[2] and r[1] <= y <= r[3]


def nums(operands) -> list[float]:
    out = []
    for o in operands:
        try:
            out.append(float(o))
        except (TypeError, ValueError):
            return []
    return out


# ---------------------------------------------------------------- colour


def to_rgb(space: str, values: list[float]) -> tuple | None:
    """An RGB triple (0-1) for a colour in a device-like space, or None when unknown."""
    if space == "gray" and len(values) == 1:
        return (values[0],) * 3
    if space == "rgb" and len(values) == 3:
        return tuple(values)
    if space == "cmyk" and len(values) == 4:
        c, m, y, k = values
        return ((1 - c) * (1 - k), (1 - m) * (1 - k), (1 - y) * (1 - k))
    if space == "lab" and len(values) == 3:
        return (max(0.0, min(1.0, values[0] / 100)),) * 3
    return None


def colour_space(name: Any, resources: Any) -> str:
    """``gray``, ``rgb``, ``cmyk``, ``lab`` or ``""`` (unknown) for a colour space operand."""
    direct = {"/DeviceGray": "gray", "/G": "gray", "/CalGray": "gray", "/DeviceRGB": "rgb", "/RGB": "rgb",
              "/CalRGB": "rgb", "/DeviceCMYK": "cmyk", "/CMYK": "cmyk", "/Lab": "lab"}
    key = str(name)
    if key in direct:
        return direct[key]
    try:
        cs = resources["/ColorSpace"][key].get_object()
        if isinstance(cs, str):
            return direct.get(cs, "")
        family = str(cs[0])
        if family == "/ICCBased":
            return {1: "gray", 3: "rgb", 4: "cmyk"}.get(int(cs[1].get_object().get("/N", 0)), "")
        return direct.get(family, "")
    except Exception:  # noqa: BLE001 - unknown or damaged colour space
        return ""


@functools.lru_cache(maxsize=4096)
def luminance(rgb: tuple[float, float, float]) -> float:
    """Relative luminance (0-1) of an sRGB colour (channels 0-1, a tuple: results are cached,
    a page compares the same few colours thousands of times)."""
    def lin(c: float) -> float:
        c = min(1.0, max(0.0, c))
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (lin(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def low_contrast(fg, bg) -> bool:
    """True when colour ``fg`` cannot be told from ``bg`` (see :data:`MIN_CONTRAST_RATIO`)."""
    hi, lo = sorted((luminance(fg), luminance(bg)), reverse=True)
    if (hi + 0.05) / (lo + 0.05) >= MIN_CONTRAST_RATIO:
        return False
    return max(abs(a - b) for a, b in zip(fg, bg)) < MIN_CHANNEL_DIFF


def norm_rect(r) -> Rect:
    return (min(r[0], r[2]), min(r[1], r[3]), max(r[0], r[2]), max(r[1], r[3]))
