"""Hidden text in HTML, decided from the computed CSS the way a browser shows the page.

Style sources, in cascade order (CSS Cascading and Inheritance, level 4): presentational hints
(``<font color>``, ``bgcolor``, ``<body text>``) and the user-agent rule ``[hidden] {display:
none}``; the page's ``<style>`` sheets (rules inside ``@media all``/``screen``, ``@supports`` and
``@layer`` included; ``print`` or viewport-dependent media left out), matched by selector with
their specificity and order; the ``style`` attributes; ``!important`` declarations above all.
Stylesheets are parsed with tinycss2 and selectors are matched with cssselect's XPath on the
lxml tree. External stylesheets are not fetched: when a page links one, the background of an
element with a ``class`` or ``id`` is unknown (it may be painted there), and the colour rule
does not judge text over it.

:func:`hide` walks the tree once, top down, computing for each element what it needs: ``display``,
``visibility`` (inherited), ``opacity`` (multiplied down the tree), ``font-size`` in px
(inherited; ``em``, ``%`` and keywords relative to the parent, ``rem`` to the root), ``color``
(inherited) and the colour beneath (``background-color`` composited over the parent's, unknown
under a background image). An element's whole subtree is hidden by ``display: none``,
``opacity: 0``, moving it off-screen (``left``/``top``/``right``/``bottom`` of a positioned
element, ``margin-left``, ``margin-top``, ``text-indent`` or a ``translate`` at least
:data:`OFFSCREEN_PX` past the page's top or left edge), a zero-area ``clip``/``clip-path``,
``transform: scale(0)``, a size of at most 1 px with ``overflow: hidden``, ``aria-hidden="true"``,
``<template>`` and inline-XBRL ``<ix:header>``. Its own text (children may override) is hidden by
``visibility: hidden``, a font of at most
:data:`~ingest.parsers.visibility.HIDDEN_MAX_FONT_PT`, or a colour unreadable on what lies
beneath (:func:`~ingest.parsers.visibility.unreadable_colour`, with the opacity applied).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import cssselect
import tinycss2
import tinycss2.color4
from lxml import etree

from ingest.parsers.visibility import WHITE, RGB, composite, too_small, unreadable_colour

OFFSCREEN_PX = 500
"""An element moved at least this far (CSS px) past the page's left or top edge cannot be
scrolled into view. Our choice: hiding recipes use -999 px to -99999 px; layout offsets are tens
of pixels."""
ROOT_FONT_PX = 16.0
"""The browsers' default ``medium`` font size (CSS Fonts 4, ``font-size`` keywords)."""
PX_PER_PT = 4 / 3
"""CSS px per point (CSS Values 4: 1in = 96px = 72pt)."""
_ABSOLUTE = {"px": 1.0, "pt": PX_PER_PT, "pc": 16.0, "in": 96.0, "cm": 96 / 2.54, "mm": 96 / 25.4, "q": 96 / 101.6}
_RELATIVE = {"em": 1.0, "ex": 0.5, "ch": 0.5, "rem": 1.0}
VIEWPORT_PX = (1280, 800)
"""The window ``vw``/``vh`` lengths are taken against (CSS px): a common desktop size."""
_VIEWPORT = {"vw": VIEWPORT_PX[0] / 100, "vh": VIEWPORT_PX[1] / 100,
             "vmin": min(VIEWPORT_PX) / 100, "vmax": max(VIEWPORT_PX) / 100}
_KEYWORD_PX = {"xx-small": 9.0, "x-small": 10.0, "small": 13.0, "medium": 16.0, "large": 18.0,
               "x-large": 24.0, "xx-large": 32.0, "xxx-large": 48.0}
_KEYWORDS = frozenset({"display", "visibility", "position", "overflow"})
_LENGTHS = frozenset({"font-size", "left", "top", "right", "bottom", "margin-left", "margin-top", "text-indent",
                      "width", "height", "max-width", "max-height"})
_COLOURS = frozenset({"color", "background-color"})
_SKIP_TAGS = frozenset({"head", "script", "style", "noscript", "title"})
_TRANSLATOR = cssselect.HTMLTranslator()
_EMPTY: dict = {}

Length = tuple  # ("px" | "em" | "rem" | "%" | "kw", number or keyword)


class _Style(NamedTuple):
    """What an element passes to its children (inherited and accumulated values)."""

    font_px: float = ROOT_FONT_PX
    color: RGB = (0.0, 0.0, 0.0)
    alpha: float = 1.0
    opacity: float = 1.0
    invisible: bool = False  # visibility: hidden
    beneath: RGB | None = WHITE  # None: unknown (an image, or a linked stylesheet may paint it)


@dataclass
class Hidden:
    """What :func:`hide` removed: ``count`` elements whose text was hidden, ``how`` the reasons."""

    count: int = 0
    how: set[str] = field(default_factory=set)

    def add(self, reason: str) -> None:
        self.count += 1
        self.how.add(reason)


def hide(root: etree._Element) -> Hidden:
    """Remove from the lxml HTML tree ``root`` every text a reader cannot see (module docstring).

    Returns:
        How many elements had hidden text, and why (``display``, ``visibility``, ``opacity``,
        ``font-size``, ``colour``, ``off-screen``, ``clip``, ``hidden``, ``aria-hidden``).
    """
    declared = _cascade(root)
    external = bool(root.xpath("//link[contains(translate(@rel, 'STYLESHET', 'stylesheet'), 'stylesheet')]"))
    hidden = Hidden()
    memo: dict[tuple, tuple[str | None, _Style, str | None]] = {}
    stack: list[tuple[etree._Element, _Style, float]] = [(root, _Style(), ROOT_FONT_PX)]
    while stack:
        el, parent, root_px = stack.pop()
        if not isinstance(el.tag, str) or el.tag in _SKIP_TAGS:
            continue
        values = declared.get(el, _EMPTY)
        unknown = external and bool(el.get("class") or el.get("id"))
        key = (id(values), parent, root_px, unknown)
        if key not in memo:  # elements with the same declarations under the same parent style
            memo[key] = _element(values, parent, root_px, unknown)
        reason, style, why = memo[key]
        reason = _marked_hidden(el) or reason
        if reason:
            if el.text_content().strip():
                hidden.add(reason)
            el.drop_tree()
            continue
        if why and _drop_own_text(el):
            hidden.add(why)
        stack.extend((child, style, style.font_px if el is root else root_px) for child in reversed(el))
    return hidden


def _marked_hidden(el: etree._Element) -> str | None:
    if el.get("aria-hidden", "").strip().lower() == "true":
        return "aria-hidden"
    if el.tag in ("template", "ix:header"):
        return "hidden"
    return None


def _element(values: dict, parent: _Style, root_px: float, unknown: bool) -> tuple[str | None, _Style, str | None]:
    """``(why the subtree is hidden, the style passed on, why the own text is hidden)``."""
    font_px = _font_px(values.get("font-size"), parent.font_px, root_px)
    reason = _subtree_hidden(values, font_px, root_px)
    style = _compute(values, parent, font_px, unknown)
    return reason, style, None if reason else _own_text_hidden(style)


# ------------------------------------------------------------------ cascade


def _cascade(root: etree._Element) -> dict[etree._Element, dict[str, Any]]:
    """``{element: {property: value}}``, the winning declaration per property. Elements styled
    only by the same ``style`` attribute share one dict (so :func:`hide` can reuse results)."""
    ranked: dict[etree._Element, dict[str, tuple[tuple, Any]]] = {}

    def declare(props: dict, prop: str, value: Any, priority: tuple) -> None:
        if prop not in props or props[prop][0] <= priority:
            props[prop] = (priority, value)

    for el, prop, value in _hints(root):
        declare(ranked.setdefault(el, {}), prop, value, (0, 0, (0, 0, 0), 0))
    for order, (selector, declarations) in enumerate(_sheet_rules(root)):
        try:
            matched = root.xpath(_TRANSLATOR.selector_to_xpath(selector))
        except (cssselect.SelectorError, cssselect.xpath.ExpressionError, etree.XPathError, ValueError):
            continue
        for el in matched:
            props = ranked.setdefault(el, {})
            for prop, value, important in declarations:
                declare(props, prop, value, (important, 1, selector.specificity(), order))
    out: dict[etree._Element, dict[str, Any]] = {}
    parsed: dict[str, list] = {}
    shared: dict[str, dict[str, Any]] = {}
    for el in root.xpath("//*[@style]"):
        text = el.get("style")
        if text and text not in parsed:
            parsed[text] = _declarations(tinycss2.parse_blocks_contents(text, True, True))
        if el not in ranked and text and text in shared:
            out[el] = shared[text]
            continue
        props = ranked.get(el, {})
        for prop, value, important in parsed[text] if text else ():
            declare(props, prop, value, (important, 2, (0, 0, 0), 0))
        out[el] = {prop: value for prop, (_, value) in props.items()}
        if el not in ranked and text:
            shared[text] = out[el]
    for el, props in ranked.items():  # styled by rules or hints alone
        if el not in out:
            out[el] = {prop: value for prop, (_, value) in props.items()}
    return out


def _hints(root: etree._Element):
    """Presentational attributes and the user agent's ``[hidden]`` rule as declarations."""
    for el in root.xpath("//*[@hidden] | //font[@color] | //body[@text] | //*[@bgcolor]"):
        if el.get("hidden") is not None:
            yield el, "display", "none"
        colour = el.get("color") if el.tag == "font" else el.get("text") if el.tag == "body" else None
        if colour:
            yield el, "color", _colour_value(tinycss2.parse_component_value_list(colour, True))
        if el.get("bgcolor"):
            yield el, "background-color", _colour_value(tinycss2.parse_component_value_list(el.get("bgcolor"), True))


def _sheet_rules(root: etree._Element):
    """``(selector, declarations)`` for every qualified rule of the page's screen stylesheets,
    in document order."""
    for style in root.iter("style"):
        if _screen_media(style.get("media") or "all"):
            yield from _rules(tinycss2.parse_stylesheet(style.text_content(), True, True), depth=0)


def _rules(rules, depth: int):
    for rule in rules:
        if rule.type == "qualified-rule":
            declarations = _declarations(tinycss2.parse_blocks_contents(rule.content, True, True))
            if not declarations:
                continue
            try:
                selectors = cssselect.parse(tinycss2.serialize(rule.prelude))
            except cssselect.SelectorError:
                continue
            for selector in selectors:
                if selector.pseudo_element is None:
                    yield selector, declarations
        elif rule.type == "at-rule" and rule.content is not None and depth < 8:
            keyword = rule.lower_at_keyword
            if keyword in ("supports", "layer") or (keyword == "media" and _screen_media(tinycss2.serialize(rule.prelude))):
                yield from _rules(tinycss2.parse_rule_list(rule.content, True, True), depth + 1)


def _screen_media(query: str) -> bool:
    """Whether a media query list surely applies to a screen, whatever its size: one of its
    queries is just ``all`` or ``screen``."""
    return any(q.strip().lower().removeprefix("only ").strip() in ("all", "screen", "")
               for q in query.split(","))


# ------------------------------------------------------------------ declared values


def _declarations(nodes) -> list[tuple[str, Any, int]]:
    """``(property, value, important)`` for the declarations that decide visibility, each value
    interpreted once (keywords, numbers, colours, lengths; transforms and clips judged at once)
    and shorthands (``font``, ``background``, ``inset``, ``overflow-x``/``-y``) mapped to the
    longhands used."""
    out: list[tuple[str, Any, int]] = []
    for node in nodes:
        if node.type != "declaration":
            continue
        name = node.lower_name
        value = [t for t in node.value if t.type not in ("whitespace", "comment")]
        important = int(node.important)
        if name in _KEYWORDS or name in ("overflow-x", "overflow-y"):
            word = value[0].lower_value if value and value[0].type == "ident" else None
            out.append(("overflow" if name.startswith("overflow") else name, word, important))
        elif name in _LENGTHS:
            out.append((name, _length_value(value[0]) if value else None, important))
        elif name in _COLOURS:
            out.append((name, _colour_value(value), important))
        elif name == "opacity":
            out.append((name, _number(value[0]) if value else None, important))
        elif name == "background-image":
            out.append((name, "none" if value and value[0].type == "ident" and value[0].lower_value == "none"
                        else "image", important))
        elif name == "transform":
            out.append((name, _transform_hidden(value), important))
        elif name == "clip":
            out.append((name, _zero_clip(value), important))
        elif name == "clip-path":
            out.append((name, _zero_clip_path(value), important))
        else:
            out.extend((prop, v, important) for prop, v in _shorthand(name, value))
    return out


def _shorthand(name: str, value: list) -> list[tuple[str, Any]]:
    """The longhands used from ``font``, ``background`` and ``inset``."""
    if name == "font":
        size = _font_shorthand_size(value)
        return [("font-size", _length_value(size))] if size is not None else []
    if name == "background":
        colour = next((c for c in (_colour_value([t]) for t in value) if c is not None), None)
        image = any(t.type == "url" or (t.type == "function" and ("gradient" in t.lower_name or t.lower_name in
                                                                   ("url", "image", "image-set"))) for t in value)
        return [("background-color", colour), ("background-image", "image" if image else "none")]
    if name == "inset":
        return [(prop, _length_value(side)) for prop, side in zip(("top", "right", "bottom", "left"), _box(value))]
    return []


def _font_shorthand_size(value: list):
    """The size in a ``font`` shorthand: the first length, percentage, zero or size keyword."""
    for t in value:
        if t.type in ("dimension", "percentage") or (t.type == "number" and t.value == 0):
            return t
        if t.type == "ident" and t.lower_value in _KEYWORD_PX:
            return t
        if t.type == "literal" and t.value == "/":
            return None
    return None


def _box(value: list) -> list:
    """The four sides (top, right, bottom, left) of a 1-4 value box shorthand; [] when empty."""
    v = value[:4]
    if len(v) <= 1:
        return v * 4
    if len(v) == 2:
        return [v[0], v[1], v[0], v[1]]
    if len(v) == 3:
        return [v[0], v[1], v[2], v[1]]
    return v


def _number(token) -> float | None:
    if token.type == "number":
        return float(token.value)
    if token.type == "percentage":
        return float(token.value) / 100
    return None


def _length_value(token) -> Length | None:
    """A length token as ``(unit, number)`` with absolute units in px: ``("px", 12.0)``,
    ``("em", 1.5)``, ``("rem", 2.0)``, ``("%", 50.0)``, ``("kw", "small")``; ``None`` when unknown."""
    if token.type == "number" and token.value == 0:
        return ("px", 0.0)
    if token.type == "percentage":
        return ("%", float(token.value))
    if token.type == "ident" and (token.lower_value in _KEYWORD_PX or token.lower_value in ("smaller", "larger")):
        return ("kw", token.lower_value)
    if token.type != "dimension":
        return None
    unit = token.lower_unit
    if unit in _ABSOLUTE or unit in _VIEWPORT:
        return ("px", float(token.value) * (_ABSOLUTE.get(unit) or _VIEWPORT[unit]))
    if unit in _RELATIVE:
        return ("rem" if unit == "rem" else "em", float(token.value) * _RELATIVE[unit])
    return None


def _colour_value(value: list):
    """``((r, g, b), alpha)`` in sRGB 0-1, ``"currentcolor"``, or ``None`` (not a colour, or a
    colour space tinycss2 cannot convert)."""
    if not value:
        return None
    try:
        parsed = tinycss2.color4.parse_color(value[0])
    except (TypeError, ValueError, AttributeError):
        return None
    if parsed is None or parsed == "currentcolor":
        return parsed
    try:
        r, g, b, a = parsed.to("srgb")
    except (NotImplementedError, ValueError, TypeError):
        return None
    return (min(1.0, max(0.0, r)), min(1.0, max(0.0, g)), min(1.0, max(0.0, b))), a


def _args(fn) -> list:
    return [t for t in fn.arguments if t.type not in ("whitespace", "comment", "literal")]


def _transform_hidden(value: list) -> str | None:
    """``off-screen`` for a translate at least :data:`OFFSCREEN_PX` up or left, ``clip`` for
    ``scale(0)``; else ``None`` (relative lengths taken at :data:`ROOT_FONT_PX`)."""
    for fn in value:
        if fn.type != "function":
            continue
        args, name = _args(fn), fn.lower_name
        if name in ("translate", "translatex", "translatey", "translate3d"):
            lengths = [_px(_length_value(a), ROOT_FONT_PX, ROOT_FONT_PX) for a in args[:1 if name == "translatey" else 2]]
            if any(v is not None and v <= -OFFSCREEN_PX for v in lengths):
                return "off-screen"
        if name in ("scale", "scalex", "scaley", "scale3d") and any(a.type == "number" and a.value == 0 for a in args[:2]):
            return "clip"
    return None


def _zero_clip(value: list) -> bool:
    """``clip: rect(top, right, bottom, left)`` that leaves no area visible."""
    fn = value[0] if value else None
    if fn is None or fn.type != "function" or fn.lower_name != "rect":
        return False
    sides = [_px(_length_value(t), ROOT_FONT_PX, ROOT_FONT_PX) for t in _args(fn)]
    if len(sides) != 4 or any(v is None for v in sides):
        return False
    top, right, bottom, left = sides
    return bottom <= top or right <= left


def _zero_clip_path(value: list) -> bool:
    """``clip-path: inset(50%)`` (or more), ``circle(0)``, ``ellipse(0 0)``: no area left."""
    fn = value[0] if value else None
    if fn is None or fn.type != "function":
        return False
    args = _args(fn)
    if fn.lower_name == "inset":
        pct = [float(a.value) if a.type == "percentage" else None for a in _box(args)]
        return len(pct) == 4 and any(a is not None and b is not None and a + b >= 100
                                     for a, b in ((pct[0], pct[2]), (pct[1], pct[3])))
    if fn.lower_name in ("circle", "ellipse"):
        radii = [a for a in args if a.type in ("number", "dimension", "percentage")][:2]
        return bool(radii) and all(a.value == 0 for a in radii)
    return False


# ------------------------------------------------------------------ computed values


def _px(length: Length | None, font_px: float, root_px: float) -> float | None:
    """A declared length in px (``%`` and keywords are unknown here: ``None``)."""
    if length is None:
        return None
    unit, number = length
    if unit == "px":
        return number
    if unit == "em":
        return number * font_px
    if unit == "rem":
        return number * root_px
    return None


def _font_px(length: Length | None, parent_px: float, root_px: float) -> float:
    """The computed font size in px: keywords (``smaller``/``larger`` by 1.2, the ratio CSS
    Fonts 4 suggests), ``em`` and ``%`` of the parent's size, ``rem`` of the root's."""
    if length is None:
        return parent_px
    unit, number = length
    if unit == "kw":
        return _KEYWORD_PX.get(number) or (parent_px / 1.2 if number == "smaller" else parent_px * 1.2)
    if unit == "%":
        return max(0.0, number / 100 * parent_px)
    value = _px(length, parent_px, root_px)
    return max(0.0, value) if value is not None else parent_px


def _subtree_hidden(values: dict, font_px: float, root_px: float) -> str | None:
    """Why an element with declared ``values`` is hidden with everything in it, or ``None``."""
    if values.get("display") == "none":
        return "display"
    if values.get("opacity") is not None and values["opacity"] <= 0:
        return "opacity"
    px = {p: _px(values.get(p), font_px, root_px) for p in _LENGTHS if p in values and p != "font-size"}
    far = -OFFSCREEN_PX
    if values.get("position") in ("absolute", "fixed", "relative", "sticky") and (
            any(px.get(p) is not None and px[p] <= far for p in ("left", "top"))
            or any(px.get(p) is not None and px[p] >= -far for p in ("right", "bottom"))):
        return "off-screen"
    if any(px.get(p) is not None and px[p] <= far for p in ("margin-left", "margin-top", "text-indent")):
        return "off-screen"
    indent = values.get("text-indent")
    if indent and indent[0] == "%" and indent[1] >= 100 and values.get("overflow") in ("hidden", "clip"):
        return "off-screen"  # pushed past its own box's right edge, which clips it
    if values.get("transform"):
        return values["transform"]
    if (values.get("clip") and values.get("position") in ("absolute", "fixed")) or values.get("clip-path"):
        return "clip"
    if values.get("overflow") in ("hidden", "clip") and any(
            px.get(p) is not None and px[p] <= 1 for p in ("width", "height", "max-width", "max-height")):
        return "clip"
    return None


def _compute(values: dict, parent: _Style, font_px: float, unknown: bool) -> _Style:
    """The values an element passes on: font size, colour, opacity, visibility, and what lies
    beneath its text (its background composited over its parent's; ``None``, unknown, under a
    background image or when ``unknown``: a linked stylesheet may paint it)."""
    color, alpha = parent.color, parent.alpha
    colour = values.get("color")
    if colour is not None and colour != "currentcolor":
        color, alpha = colour
    opacity = parent.opacity * min(1.0, values["opacity"]) if values.get("opacity") is not None else parent.opacity
    visibility = values.get("visibility")
    invisible = visibility != "visible" if visibility in ("hidden", "collapse", "visible") else parent.invisible
    beneath = parent.beneath
    bg = values.get("background-color")
    if bg is not None and bg != "currentcolor" and bg[1] >= 1.0:
        beneath = bg[0]
    elif values.get("background-image") not in (None, "none") or unknown:
        beneath = None
    elif bg is not None and bg != "currentcolor" and beneath is not None:
        beneath = composite(bg[0], bg[1], beneath)
    return _Style(font_px, color, alpha, opacity, invisible, beneath)


def _own_text_hidden(style: _Style) -> str | None:
    if style.invisible:
        return "visibility"
    if too_small(style.font_px / PX_PER_PT):
        return "font-size"
    if style.beneath is not None and unreadable_colour(style.color, style.alpha * style.opacity, style.beneath):
        return "opacity" if style.opacity <= 0.1 else "colour"
    return None


def _drop_own_text(el: etree._Element) -> bool:
    """Remove the text ``el`` renders itself (its text and its children's tails); whether any of
    it was more than whitespace."""
    had = bool((el.text or "").strip())
    el.text = None
    for child in el:
        had = had or bool((child.tail or "").strip())
        child.tail = None
    return had
