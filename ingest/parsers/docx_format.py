"""DOCX run formatting as Word shows it, and whether a run's text is visible.

A run's properties come from the style hierarchy (ECMA-376 part 1, §17.7.2), each level
overriding the one before: document defaults (``w:docDefaults/w:rPrDefault``), the paragraph
style (``w:pStyle``, else the default paragraph style, with its ``w:basedOn`` chain), the
character style (``w:rStyle``, else the default character style, with its chain), then the run's
own ``w:rPr``. Table styles and numbering levels are not applied.

A run is hidden text (:meth:`RunFormats.why_hidden`) when it holds more than whitespace and

* ``vanish``: ``w:vanish`` is on (Word's "Hidden" font effect);
* ``tiny``: its size (``w:sz``, or ``w:szCs`` for a complex-script or right-to-left run) is at
  most :data:`~ingest.parsers.visibility.HIDDEN_MAX_FONT_PT`;
* ``colour``: its colour (``w:color``; ``auto`` is always readable) has too little contrast with
  what lies beneath it (:func:`~ingest.parsers.visibility.unreadable_colour`): the run's
  highlight or shading, else its paragraph's shading (direct or from its style), else the
  shading of the table cells around it (innermost first), else the page colour
  (``w:background``), else white. A cell without shading of its own in a table whose table
  style paints shading somewhere (a banded or header-row style) has an unknown background, and
  the colour rule does not judge text in it.
"""

from __future__ import annotations

from lxml import etree

from ingest.parsers.visibility import WHITE, RGB, hex_colour, too_small, unreadable_colour

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
DEFAULT_SIZE_PT = 10.0
"""A run's font size in points when no level of the hierarchy sets ``w:sz`` (an assumption: the
title rule that reads sizes compares a run's size with the body's, both defaulting alike)."""
MAX_BASED_ON = 20
"""Longest ``w:basedOn`` chain followed (a cycle in a damaged file ends there)."""

HIGHLIGHTS = {
    "black": "000000", "blue": "0000FF", "cyan": "00FFFF", "green": "00FF00", "magenta": "FF00FF",
    "red": "FF0000", "yellow": "FFFF00", "white": "FFFFFF", "darkBlue": "000080", "darkCyan": "008080",
    "darkGreen": "008000", "darkMagenta": "800080", "darkRed": "800000", "darkYellow": "808000",
    "darkGray": "808080", "lightGray": "C0C0C0",
}
"""``w:highlight`` values (ECMA-376 part 1, §17.18.40 ST_HighlightColor) as RGB hex."""

Props = dict[str, object]
"""Run properties that decide visibility: ``vanish`` (bool), ``color`` (hex or ``"auto"``),
``sz``/``szCs`` (half-points), ``cs`` (bool: complex script or right-to-left), ``bg`` (hex of a
highlight or shading)."""


def on(el: etree._Element | None) -> bool:
    """A WordprocessingML on/off property: present and not ``false``/``0``/``off``."""
    return el is not None and el.get(W + "val", "true").lower() not in ("false", "0", "off")


def shading(shd: etree._Element | None) -> str | None:
    """The colour a ``w:shd`` paints (hex), or ``None`` for none/``auto``: its fill, or its pattern
    colour when the pattern is ``solid`` (ECMA-376 part 1, §17.3.5)."""
    if shd is None or shd.get(W + "val") == "nil":
        return None
    value = shd.get(W + "color") if shd.get(W + "val") == "solid" else shd.get(W + "fill")
    return value if hex_colour(value) is not None else None


def run_props(rpr: etree._Element | None) -> Props:
    """The visibility-deciding properties an ``w:rPr`` sets (absent ones are left out)."""
    props: Props = {}
    if rpr is None:
        return props
    vanish = rpr.find(W + "vanish")
    if vanish is not None:
        props["vanish"] = on(vanish)
    color = rpr.find(W + "color")
    if color is not None and color.get(W + "val"):
        props["color"] = color.get(W + "val")
    for key in ("sz", "szCs"):
        el = rpr.find(W + key)
        if el is not None and (el.get(W + "val") or "").isdecimal():
            props[key] = int(el.get(W + "val"))
    if rpr.find(W + "rtl") is not None or rpr.find(W + "cs") is not None:
        props["cs"] = on(rpr.find(W + "rtl")) or on(rpr.find(W + "cs"))
    highlight = rpr.find(W + "highlight")
    bg = HIGHLIGHTS.get(highlight.get(W + "val", "")) if highlight is not None else None
    bg = bg or shading(rpr.find(W + "shd"))
    if bg:
        props["bg"] = bg
    return props


class RunFormats:
    """Resolves run formatting through a document's styles part and page colour.

    Args:
        styles: the styles part's root (``w:styles``), or ``None``.
        document: the main part's root (``w:document``), for ``w:background``; or ``None``.
    """

    def __init__(self, styles: etree._Element | None, document: etree._Element | None) -> None:
        self._styles: dict[str, etree._Element] = {}
        self._defaults: dict[str, str] = {}
        self._chains: dict[str, tuple[Props, str | None]] = {}
        self._shaded_tables: dict[str, bool] = {}
        self.doc_defaults: Props = {}
        if styles is not None:
            self.doc_defaults = run_props(styles.find(f"{W}docDefaults/{W}rPrDefault/{W}rPr"))
            for st in styles.iter(W + "style"):
                sid = st.get(W + "styleId", "")
                self._styles.setdefault(sid, st)
                if st.get(W + "default") in ("1", "true", "on"):
                    self._defaults.setdefault(st.get(W + "type", "paragraph"), sid)
        background = document.find(W + "background") if document is not None else None
        page = background.get(W + "color") if background is not None else None
        self.page: RGB = hex_colour(page) or WHITE

    def style(self, sid: str | None, kind: str) -> tuple[Props, str | None]:
        """``(run properties, paragraph shading hex)`` of style ``sid`` with its ``w:basedOn``
        chain applied (the default style of ``kind`` when ``sid`` is empty or unknown)."""
        if not sid or sid not in self._styles:
            sid = self._defaults.get(kind, "")
        if sid in self._chains:
            return self._chains[sid]
        chain: list[etree._Element] = []
        cur = sid
        while cur in self._styles and len(chain) < MAX_BASED_ON and self._styles[cur] not in chain:
            chain.append(self._styles[cur])
            based = self._styles[cur].find(W + "basedOn")
            cur = based.get(W + "val", "") if based is not None else ""
        props: Props = {}
        shade: str | None = None
        for st in reversed(chain):  # the base first, each derived style overriding it
            props.update(run_props(st.find(W + "rPr")))
            shade = shading(st.find(f"{W}pPr/{W}shd")) or shade
        self._chains[sid] = (props, shade)
        return props, shade

    def why_hidden(self, run: etree._Element) -> str | None:
        """``"vanish"``, ``"tiny"`` or ``"colour"`` when run ``run`` (a ``w:r`` holding more than
        whitespace) is invisible to a reader (see the module docstring), else ``None``."""
        if not any((t.text or "").strip() for t in run.iter(W + "t")):
            return None
        props, ppr, para_shade = self._resolved(run)
        if props.get("vanish"):
            return "vanish"
        size = props.get("szCs" if props.get("cs") else "sz")
        if isinstance(size, int) and too_small(size / 2):
            return "tiny"
        colour = hex_colour(str(props.get("color", "auto")))
        if colour is None:
            return None
        beneath = self._beneath(run, props, ppr, para_shade)
        return "colour" if beneath is not None and unreadable_colour(colour, 1.0, beneath) else None

    def _resolved(self, run: etree._Element) -> tuple[Props, etree._Element | None, str | None]:
        """``(properties, w:pPr of its paragraph, paragraph shading)`` of run ``run`` through the
        style hierarchy (see the module docstring)."""
        p = next(run.iterancestors(W + "p"), None)
        ppr = p.find(W + "pPr") if p is not None else None
        p_style = ppr.find(W + "pStyle") if ppr is not None else None
        para_props, para_shade = self.style(p_style.get(W + "val") if p_style is not None else None, "paragraph")
        rpr = run.find(W + "rPr")
        r_style = rpr.find(W + "rStyle") if rpr is not None else None
        char_props, _ = self.style(r_style.get(W + "val") if r_style is not None else None, "character")
        return {**self.doc_defaults, **para_props, **char_props, **run_props(rpr)}, ppr, para_shade

    def size_pt(self, run: etree._Element | None = None) -> float:
        """The font size of run ``run`` in points, as Word shows it; without a run, that of the
        default paragraph style (body text). :data:`DEFAULT_SIZE_PT` where nothing sets one."""
        props = self._resolved(run)[0] if run is not None else {**self.doc_defaults, **self.style(None, "paragraph")[0]}
        size = props.get("szCs" if props.get("cs") else "sz")
        return size / 2 if isinstance(size, int) and size > 0 else DEFAULT_SIZE_PT

    def _beneath(self, run: etree._Element, props: Props, ppr, para_shade: str | None) -> RGB | None:
        """What is painted under the run: highlight or shading, paragraph, cells, page; ``None``
        when a table style may paint it."""
        for value in (props.get("bg"), shading(ppr.find(W + "shd")) if ppr is not None else None, para_shade):
            if value:
                return hex_colour(str(value)) or self.page
        for tc in run.iterancestors(W + "tc"):
            value = shading(tc.find(f"{W}tcPr/{W}shd"))
            if value:
                return hex_colour(value) or self.page
            tbl = next(tc.iterancestors(W + "tbl"), None)
            style = tbl.find(f"{W}tblPr/{W}tblStyle") if tbl is not None else None
            if style is not None and self._shaded_table_style(style.get(W + "val", "")):
                return None
        return self.page

    def _shaded_table_style(self, sid: str) -> bool:
        """Whether table style ``sid`` or a style it is based on sets any shading."""
        if sid not in self._shaded_tables:
            cur, seen, shaded = sid, 0, False
            while cur in self._styles and seen < MAX_BASED_ON and not shaded:
                st = self._styles[cur]
                shaded = any(shading(shd) for shd in st.iter(W + "shd"))
                based = st.find(W + "basedOn")
                cur, seen = (based.get(W + "val", "") if based is not None else ""), seen + 1
            self._shaded_tables[sid] = shaded
        return self._shaded_tables[sid]
