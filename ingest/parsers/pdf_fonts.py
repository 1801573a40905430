"""What DocAnchor needs to know about a PDF font: glyph widths (where text lands on the page),
writing mode (vertical CJK text), and glyph names (letters behind private-use code points).

Sources: ISO 32000-1 section 9.6 (simple fonts: ``/FirstChar``, ``/Widths``, ``/Encoding``
``/Differences``), 9.7 (composite fonts: ``/DescendantFonts``, ``/W``, ``/DW``, CMaps ending in
``-V`` and ``/WMode 1`` for vertical writing), 9.6.5 (Type 3 ``/FontMatrix``), and the Adobe
Glyph List Specification ("Mapping a glyph name to a Unicode string") for glyph names such as
``fi``, ``f_f_i``, ``uniFB01`` and ``f_l.liga``. The glyph list itself is pypdf's copy of the AGL.

Pure functions over pypdf dictionaries; any malformed entry falls back to a default, never raises.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

DEFAULT_WIDTH = 500.0
"""Glyph width, in thousandths of the font size, assumed where a simple font gives none (about
the average Latin glyph of Helvetica and Times)."""
CID_DEFAULT_WIDTH = 1000.0
"""``/DW`` default of a CID font (ISO 32000-1 9.7.4.3): a full-width CJK glyph."""
MAX_WIDTH_ENTRIES = 70_000
"""Width entries read from one font at most (a CID font has at most 65,536 CIDs)."""

_UNI = re.compile(r"uni((?:[0-9A-F]{4})+)$")
_U = re.compile(r"u([0-9A-F]{4,6})$")


@dataclass(frozen=True)
class FontMetrics:
    """Widths and writing mode of one font resource.

    Attributes:
        widths: glyph width in glyph units per character code (simple fonts) or CID (composite).
        default_width: width of a code missing from ``widths``, in glyph units.
        two_byte: codes are two bytes (composite fonts; ISO 32000-1 9.7.6.2).
        vertical: glyphs advance downwards (writing mode 1).
        scale: text-space units per glyph unit at font size 1 (0.001; a Type 3 font's
            ``/FontMatrix`` a).
    """

    widths: dict[int, float] = field(default_factory=dict)
    default_width: float = DEFAULT_WIDTH
    two_byte: bool = False
    vertical: bool = False
    scale: float = 0.001

    def codes(self, raw: bytes) -> list[int]:
        """Character codes of a shown string."""
        if not self.two_byte:
            return list(raw)
        return [(raw[i] << 8) | (raw[i + 1] if i + 1 < len(raw) else 0) for i in range(0, len(raw), 2)]

    def width(self, code: int) -> float:
        """Advance of one code at font size 1, in text-space units."""
        return self.widths.get(code, self.default_width) * self.scale


def font_metrics(font: Any) -> FontMetrics:
    """:class:`FontMetrics` of a pypdf font dictionary (a default one for anything malformed)."""
    try:
        if font.get("/Subtype") == "/Type0":
            return _composite(font)
        return _simple(font)
    except Exception:  # noqa: BLE001 - a damaged font only loses its widths
        return FontMetrics()


def _simple(font: Any) -> FontMetrics:
    scale = 0.001
    if font.get("/Subtype") == "/Type3":
        try:
            scale = abs(float(font["/FontMatrix"][0])) or 0.001
        except Exception:  # noqa: BLE001
            scale = 0.001
    widths: dict[int, float] = {}
    raw = font.get("/Widths")
    if raw is not None:
        first = int(font.get("/FirstChar", 0))
        for i, w in enumerate(raw.get_object()[:256]):
            widths[first + i] = _num(w)
    else:
        widths = _core_widths(str(font.get("/BaseFont", "")).lstrip("/"))
    default = DEFAULT_WIDTH
    desc = font.get("/FontDescriptor")
    if desc is not None and desc.get_object().get("/MissingWidth"):
        default = float(desc.get_object()["/MissingWidth"])
    return FontMetrics(widths, default, False, False, scale)


def _core_widths(name: str) -> dict[int, float]:
    """Widths of a standard 14 font without ``/Widths``, by Latin-1 code (pypdf's AFM data)."""
    from pypdf._codecs.core_font_metrics import CORE_FONT_METRICS

    metrics = CORE_FONT_METRICS.get(name)
    if metrics is None:
        return {}
    return {ord(ch): float(w) for ch, w in metrics.character_widths.items() if len(ch) == 1 and ord(ch) < 256}


def _composite(font: Any) -> FontMetrics:
    vertical = is_vertical(font)
    widths: dict[int, float] = {}
    default = CID_DEFAULT_WIDTH
    descendants = font.get("/DescendantFonts")
    if descendants is not None:
        cid = descendants.get_object()[0].get_object()
        default = float(cid.get("/DW", CID_DEFAULT_WIDTH))
        if not vertical:  # /W holds horizontal widths; vertical advances come from /W2 and /DW2
            widths = _cid_widths(cid.get("/W"))
        else:
            default = _vertical_advance(cid.get("/DW2"))
    return FontMetrics(widths, default, True, vertical, 0.001)


def _vertical_advance(dw2: Any) -> float:
    """The vertical advance of a CID font's glyphs (``/DW2`` [v w1y], default [880 -1000])."""
    try:
        return abs(float(dw2.get_object()[1]))
    except Exception:  # noqa: BLE001
        return CID_DEFAULT_WIDTH


def _cid_widths(w: Any) -> dict[int, float]:
    """A CID font's ``/W`` array: ``c [w1 w2 ...]`` and ``c_first c_last w`` entries."""
    out: dict[int, float] = {}
    if w is None:
        return out
    items = list(w.get_object())
    i = 0
    while i + 1 < len(items) and len(out) < MAX_WIDTH_ENTRIES:
        start = items[i]
        nxt = items[i + 1].get_object() if hasattr(items[i + 1], "get_object") else items[i + 1]
        if isinstance(nxt, list):
            for k, width in enumerate(nxt[: MAX_WIDTH_ENTRIES]):
                out[int(start) + k] = _num(width)
            i += 2
        elif i + 2 < len(items):
            last = min(int(nxt), int(start) + MAX_WIDTH_ENTRIES)
            for code in range(int(start), last + 1):
                out[code] = _num(items[i + 2])
            i += 3
        else:
            break
    return out


def _num(value: Any) -> float:
    return float(value.get_object() if hasattr(value, "get_object") else value)


def is_vertical(font: Any) -> bool:
    """True for a composite font in writing mode 1: a predefined CMap whose name ends in ``-V``
    (``Identity-V``, ``UniJIS-UCS2-V`` ...) or an embedded CMap with ``/WMode 1``."""
    try:
        enc = font.get("/Encoding")
        if enc is None:
            return False
        enc = enc.get_object()
        if isinstance(enc, str):
            return enc.endswith("-V")
        return int(enc.get("/WMode", 0)) == 1
    except Exception:  # noqa: BLE001
        return False


# ---------------------------------------------------------------- glyph names


def glyph_text(name: str) -> str:
    """The text a glyph name stands for, by the Adobe Glyph List Specification: the part
    before the first period, split at underscores, each component looked up in the AGL or
    read as ``uniXXXX[XXXX...]`` / ``uXXXX[XX]``. ``""`` when a component is unknown or the
    result is itself a private-use character. Presentation forms are decomposed by NFKC
    ("ﬁ" gives "fi")."""
    from pypdf._codecs.adobe_glyphs import adobe_glyphs

    base = name.lstrip("/").split(".", 1)[0]
    if not base:
        return ""
    out = []
    for part in base.split("_"):
        text = adobe_glyphs.get("/" + part)
        if text is None:
            text = _hex_name(part)
        if not text:
            return ""
        out.append(text)
    result = unicodedata.normalize("NFKC", "".join(out))
    if any(unicodedata.category(c) in ("Co", "Cc", "Cn") for c in result):
        return ""
    return result


def _hex_name(part: str) -> str:
    m = _UNI.match(part)
    if m:
        hexes = m.group(1)
        codes = [int(hexes[i : i + 4], 16) for i in range(0, len(hexes), 4)]
        if any(0xD800 <= c <= 0xDFFF for c in codes):
            return ""
        return "".join(chr(c) for c in codes)
    m = _U.match(part)
    if m:
        code = int(m.group(1), 16)
        if code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF:
            return chr(code)
    return ""


def differences(font: Any) -> dict[int, str]:
    """Code -> glyph name from a simple font's ``/Encoding /Differences`` (empty when none)."""
    out: dict[int, str] = {}
    try:
        enc = font.get("/Encoding")
        if enc is None:
            return out
        enc = enc.get_object()
        if isinstance(enc, str) or "/Differences" not in enc:
            return out
        code = 0
        for item in enc["/Differences"].get_object():
            if isinstance(item, (int, float)) and not isinstance(item, bool):
                code = int(item)
            else:
                out[code] = str(item)
                code += 1
    except Exception:  # noqa: BLE001 - a damaged encoding gives no names
        return {}
    return out


SYMBOL_GLYPHS: dict[str, dict[int, str]] = {
    "WPTypographicSymbols": {0x21: "bullet"},
    "Symbol": {0xB7: "bullet"},
}
"""Glyph names of the known bullet codes of symbol fonts, by font name (without a subset prefix
"ABCDEF+"), for fonts that name no glyph for them: without a Unicode map pypdf reads such a code
as the Latin character of its value ("!"), or as a private-use character from a ToUnicode that
maps it to one (U+F0B7). Sources: WordPerfect's Typographic Symbols set, whose first character,
code 0x21 in the font, is the bullet (dmca.pdf's list items, a new-user trial); Adobe's Symbol
encoding (ISO 32000-1 Annex D.5: ``bullet`` at octal 267, 0xB7)."""


def font_name(font: Any) -> str:
    """The font's ``/BaseFont`` without a subset prefix ("ELCKGH+WPTypographicSymbols" ->
    "WPTypographicSymbols"); "" when it has none."""
    try:
        name = str(font.get("/BaseFont") or "").lstrip("/")
    except Exception:  # noqa: BLE001 - a damaged font has no name
        return ""
    return name.split("+", 1)[1] if re.match(r"[A-Z]{6}\+", name) else name


def name_symbol_glyphs(fonts: list[Any]) -> None:
    """Give each font of :data:`SYMBOL_GLYPHS` without a ToUnicode map an ``/Encoding
    /Differences`` that names its known codes (those its own encoding leaves unnamed), so that
    pypdf writes their Unicode text ("•"). The font dictionaries are changed in memory only."""
    from pypdf.generic import ArrayObject, DictionaryObject, NameObject, NumberObject

    for font in fonts:
        known = SYMBOL_GLYPHS.get(font_name(font))
        try:
            if not known or "/ToUnicode" in font:
                continue
            named = differences(font)
            extra = [(code, glyph) for code, glyph in sorted(known.items()) if code not in named]
            if not extra:
                continue
            enc = font.get("/Encoding")
            enc = enc.get_object() if enc is not None else None
            new = DictionaryObject()
            if isinstance(enc, DictionaryObject):
                new.update(enc)
            elif enc is not None:
                new[NameObject("/BaseEncoding")] = enc
            diffs = ArrayObject(new.get("/Differences", ArrayObject()).get_object())
            for code, glyph in extra:
                diffs.extend([NumberObject(code), NameObject("/" + glyph)])
            new[NameObject("/Differences")] = diffs
            font[NameObject("/Encoding")] = new
        except Exception:  # noqa: BLE001 - a damaged font is read as it is
            continue


def private_use_letters(fonts: list[Any]) -> dict[str, str]:
    """What the private-use characters and unresolved glyph names that pypdf emits for these
    fonts stand for: ``{"\ue001": "fi", "/f_l": "fl"}``.

    A simple font's ``/Differences`` name the glyph behind each code; where its ToUnicode maps
    such a code to one private-use character (U+E000-F8FF), or pypdf could not map the name and
    wrote it out as ``/name``, the name's text (:func:`glyph_text`) replaces it. A character
    that two fonts give different texts is left out (it cannot be told which font drew it).
    """
    out: dict[str, str] = {}
    clash: set[str] = set()
    for font in fonts:
        names = {**SYMBOL_GLYPHS.get(font_name(font), {}), **differences(font)}
        to_unicode = _to_unicode(font) if names else {}
        for code, name in names.items():
            text = glyph_text(name)
            if not text:
                continue
            for emitted in _emitted(to_unicode.get(chr(code)), name):
                if out.get(emitted, text) != text:
                    clash.add(emitted)
                out[emitted] = text
    return {k: v for k, v in out.items() if k not in clash}


def _to_unicode(font: Any) -> dict:
    """pypdf's reading of the font's ToUnicode CMap (code character -> text)."""
    from pypdf._cmap import get_encoding

    try:
        return get_encoding(font)[1]
    except Exception:  # noqa: BLE001 - a damaged font: no ToUnicode to read
        return {}


def _emitted(mapped: Any, name: str) -> list[str]:
    """What pypdf writes for a code: its ToUnicode value ``mapped`` when that is one
    private-use character, and ``/name`` when there is none and pypdf's glyph list lacks it."""
    out = []
    if isinstance(mapped, str) and len(mapped) == 1 and unicodedata.category(mapped) == "Co":
        out.append(mapped)
    if mapped is None and not _pypdf_knows(name):
        out.append(name if name.startswith("/") else "/" + name)
    return out


def _pypdf_knows(name: str) -> bool:
    from pypdf._cmap import _glyph_name_to_unicode

    try:
        return bool(_glyph_name_to_unicode(name if name.startswith("/") else "/" + name))
    except Exception:  # noqa: BLE001
        return False
