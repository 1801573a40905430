"""Which text on a PDF page a reader can see.

``walk_page(reader, page, ops, data) -> PageInk``: every text-showing operator of the page's content
stream and of the Form XObjects it draws, with where it lands (device-space box), and a verdict:
visible, or hidden with the reason. The graphics are followed as a renderer would (ISO 32000-1
section 8: graphics state, ``q``/``Q``, ``cm``, colour spaces, paths and clipping, XObjects; 9:
text state and text objects; 11: ``/ca`` constant alpha), without drawing pixels:

- **render mode** 3 (invisible) or 7 (clip only): hidden, unless the text lies over an image
  (an OCR layer over a scan is the text a reader sees in the picture);
- **tiny**: rendered under :data:`TINY_TEXT_PT` points high or wide;
- **outside the page**: no part of its box inside the crop box (default: the media box);
- **clipped**: no part of its box inside the clipping path in force (the path's bounding box);
- **covered**: an opaque rectangle filled *after* it covers its whole box;
- **low contrast**: its colour (blended by its fill alpha) against what was painted beneath
  its centre (the topmost earlier filled area; the white page when none) has a contrast ratio
  under :data:`ingest.parsers.pdf_paint.MIN_CONTRAST_RATIO` and no colour channel differing by
  :data:`ingest.parsers.pdf_paint.MIN_CHANNEL_DIFF` (so yellow on white stays visible). An image or shading beneath,
  or a colour DocAnchor cannot resolve (patterns, separations), counts as visible.

Only fills are painted areas here (strokes are lines, not backgrounds). The rules are this
module's own reading of those sections; the thresholds are stated where they are defined.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Any

from ingest.parsers.pdf_fonts import FontMetrics, font_metrics
from ingest.parsers.pdf_paint import (
    Rect,
    apply,
    colour_space,
    contains,
    has_point,
    intersect,
    low_contrast,
    mul,
    norm_rect,
    nums,
    overlaps,
    rect_of,
    to_rgb,
    transform_rect,
)

TINY_TEXT_PT = 1.0
"""Text rendered smaller than this many points (height, or width of a glyph's em under
horizontal scaling) is unreadable to a person: hidden."""
FAKE_BOLD_EM = 0.2
"""A repeated string drawn within this fraction of its font size of the previous draw is the
same glyphs drawn twice (fake bold or shadow) and is kept once."""
OPAQUE_ALPHA = 0.9
"""A fill at least this opaque (``/ca``) hides what lies under it."""
MAX_FORM_DEPTH = 8
"""Nested Form XObjects followed at most (hostile files nest them in cycles)."""
MAX_OPS = 2_000_000
"""Operators walked per page at most; beyond it the rest of the page is taken as visible."""
MAX_COMPARISONS = 3_000_000
"""Text-against-painted-area comparisons per page at most (pages of vector art hold tens of
thousands of fills); beyond it text is judged without background and cover checks."""
ASCENT, DESCENT = 0.8, -0.25
"""Top and bottom of a glyph box, in font sizes above the baseline (typical Latin and CJK
fonts; the exact font box does not change which text is hidden)."""
_SHOW_OPS = {b"Tj", b"TJ", b"'", b'"'}
_FILL_OPS = {b"f", b"F", b"f*", b"B", b"B*", b"b", b"b*"}
_PAINT_OPS = _FILL_OPS | {b"S", b"s", b"n"}
_IDENT = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)
_WHITE = (1.0, 1.0, 1.0)

@dataclass
class Show:
    """One text-showing operator as drawn."""

    stream: int
    """Which content stream: 0 for the page, else the key of a Form XObject in :class:`PageInk`."""
    index: int
    """The operator's index in that stream's operations."""
    box: Rect
    origin: tuple[float, float]
    size: float
    font: str
    vertical: bool
    hidden: str = ""
    """Why it is hidden (``""`` when visible): ``render mode``, ``tiny``, ``outside the page``,
    ``clipped``, ``covered`` or ``low contrast``."""
    duplicate: bool = False
    seq: int = 0
    colours: tuple = ()
    alpha: float = 1.0
    clip: Rect | None = None
    invisible: bool = False
    word_space: float = 0.0
    """The word spacing ``Tw`` it is drawn with, in unscaled text space units, where it applies
    (single-byte fonts, code 32: ISO 32000-1 9.3.3); 0 for a composite font."""
    font_size: float = 0.0
    """The text font size ``Tfs`` of its ``Tf`` (text space, before any matrix)."""


@dataclass
class PageInk:
    """What :func:`walk_page` found on one page."""

    shows: list[Show] = field(default_factory=list)
    forms: dict[int, Any] = field(default_factory=dict)
    """Form XObject key -> its stream object."""
    form_ops: dict[int, list] = field(default_factory=dict)
    """Form XObject key -> its operators (parsed once, strings as bytes)."""
    form_sites: dict[int, list[tuple[Any, str]]] = field(default_factory=dict)
    """Form XObject key -> the ``(/XObject dictionary, name)`` places that name it."""
    form_data: dict[int, bytes] = field(default_factory=dict)
    """Form XObject key -> its decoded content bytes (:func:`content_operations`)."""
    page_ops: list = field(default_factory=list)
    page_data: bytes = b""
    """The page's decoded content bytes, the source of ``page_ops``."""
    fonts: dict[int, Any] = field(default_factory=dict)
    """Font key -> font dictionary, for every font a show used."""


@dataclass
class _Paint:
    seq: int
    box: Rect
    colour: tuple[float, float, float] | None  # None: unknown (image, shading, pattern)
    occludes: bool
    image: bool = False


@dataclass
class _State:
    ctm: tuple = _IDENT
    fill: tuple | None = (0.0, 0.0, 0.0)
    stroke: tuple | None = (0.0, 0.0, 0.0)
    fill_space: str = "gray"
    stroke_space: str = "gray"
    fill_alpha: float = 1.0
    normal_blend: bool = True
    clip: Rect | None = None
    tr: int = 0
    font: str = ""
    size: float = 0.0
    char_space: float = 0.0
    word_space: float = 0.0
    hscale: float = 1.0
    leading: float = 0.0
    rise: float = 0.0

    def copy(self) -> _State:
        """A shallow copy (what ``q`` saves; every field is immutable), without
        :func:`dataclasses.replace`'s field-by-field ``__init__``."""
        new = object.__new__(_State)
        new.__dict__.update(self.__dict__)
        return new


# ---------------------------------------------------------------- the walk


def content_operations(stream: Any, reader: Any) -> tuple[list, bytes]:
    """A content stream's operators, strings kept as bytes (as pypdf's text extraction reads
    them), and its decoded bytes; ``stream`` is a stream or an array of streams (a page's
    ``/Contents``). Each stream is parsed once per page: the bytes are kept because pypdf looks
    at them again before extracting text (:func:`ingest.parsers.pdf_extract.text_without`).

    Raises:
        Whatever pypdf raises for a damaged stream (``LimitReachedError`` past its limits).
    """
    from pypdf.generic import ContentStream

    parsed = ContentStream(stream, reader, "bytes")
    data = parsed.get_data()
    return list(parsed.operations), data


def walk_page(reader: Any, page: Any, ops: list, data: bytes = b"",
              metrics: dict[int, FontMetrics] | None = None) -> PageInk:
    """Follow the page's operators ``ops`` (parsed from its content bytes ``data``, see
    :func:`content_operations`) and the Form XObjects they draw, and judge every text-showing
    operator (see the module docstring). Never raises for damaged content: what cannot be
    followed is taken as visible.

    ``metrics`` is a cache of :func:`ingest.parsers.pdf_fonts.font_metrics` by font object
    number that the caller keeps for one document (its pages share fonts), filled here."""
    walker = _Walker(reader, _page_box(page), {} if metrics is None else metrics)
    ink = walker.ink
    ink.page_ops, ink.page_data = ops, data
    try:
        walker.walk(ops, page.get("/Resources"), _State(), stream=0, depth=0)
    except RecursionError:
        pass
    _judge(ink.shows, walker.paints, walker.box)
    return ink


def _page_box(page: Any) -> Rect:
    try:
        box = page.cropbox
        media = page.mediabox
        r = (float(box.left), float(box.bottom), float(box.right), float(box.top))
        m = (float(media.left), float(media.bottom), float(media.right), float(media.top))
        inter = intersect(norm_rect(m), norm_rect(r))
        return inter if inter[0] < inter[2] and inter[1] < inter[3] else norm_rect(m)
    except Exception:  # noqa: BLE001 - no usable box: US Letter
        return (0.0, 0.0, 612.0, 792.0)


@dataclass
class _Frame:
    """Per content stream state that ``q``/``Q`` does not save."""

    resources: Any
    stream: int
    depth: int
    stack: list = field(default_factory=list)
    tm: tuple = _IDENT
    lm: tuple = _IDENT
    path: list = field(default_factory=list)
    rects: int = 0
    curved: bool = False
    pending_clip: bool = False
    fonts: dict = field(default_factory=dict)
    """Font resource name -> :class:`FontMetrics`, for this stream's resources."""
    last: tuple | None = None
    """The last fresh show: ``(font, its strings operand, origin)`` (fake bold, :func:`_same_strings`)."""
    fresh: bool = True


class _Walker:
    """One page's walk: graphics state, text state, painted areas and text shows."""

    def __init__(self, reader: Any, box: Rect, metrics: dict[int, FontMetrics]) -> None:
        self.reader = reader
        self.box = box
        self.ink = PageInk()
        self.paints: list[_Paint] = []
        self.seq = 0
        self.budget = MAX_OPS
        self._metrics_by_number = metrics
        self._forms_open: list[int] = []
        self._handlers = {
            b"q": self._q, b"Q": self._big_q, b"cm": self._cm, b"gs": self._ext_gstate,
            b"W": self._clip, b"W*": self._clip, b"sh": self._shading, b"Do": self._do,
            b"INLINE IMAGE": self._inline_image, b"BT": self._bt,
            b"Tm": self._move, b"Td": self._move, b"TD": self._move, b"T*": self._move,
        }
        for op in _COLOUR_OPS:
            self._handlers[op] = self._colour
        for op in _PATH_OPS:
            self._handlers[op] = self._path
        for op in _PAINT_OPS:
            self._handlers[op] = self._paint_path
        for op in _TEXT_STATE_OPS:
            self._handlers[op] = _text_state
        for op in _SHOW_OPS:
            self._handlers[op] = self._show

    def walk(self, ops: list, resources: Any, gs: _State, *, stream: int, depth: int) -> None:
        frame = _Frame(_resolve(resources), stream, depth)
        for i, (operands, op) in enumerate(ops):
            self.budget -= 1
            if self.budget <= 0:
                return
            handler = self._handlers.get(op)
            if handler is not None:
                gs = handler(gs, frame, operands, op, i) or gs

    # -- graphics state

    def _q(self, gs: _State, frame: _Frame, *_):
        if len(frame.stack) < 1000:
            frame.stack.append(gs.copy())

    def _big_q(self, gs: _State, frame: _Frame, *_):
        return frame.stack.pop() if frame.stack else gs

    def _cm(self, gs: _State, frame: _Frame, operands, *_):
        v = nums(operands)
        if len(v) == 6:
            gs.ctm = mul(tuple(v), gs.ctm)

    def _colour(self, gs: _State, frame: _Frame, operands, op, _i):
        stroke = op.isupper() or op in (b"SC", b"SCN", b"CS")
        if op in (b"g", b"G", b"rg", b"RG", b"k", b"K"):
            space = {b"g": "gray", b"rg": "rgb", b"k": "cmyk"}[op.lower()]
            colour = to_rgb(space, nums(operands))
        elif op in (b"cs", b"CS"):
            space = colour_space(operands[0], frame.resources) if operands else ""
            colour = to_rgb(space, [0.0] if space == "gray" else [0.0, 0.0, 0.0, 1.0] if space == "cmyk"
                          else [0.0, 0.0, 0.0])
        else:  # sc, scn, SC, SCN in the current space
            space = gs.stroke_space if stroke else gs.fill_space
            colour = to_rgb(space, nums(operands))
        if stroke:
            gs.stroke, gs.stroke_space = colour, space
        else:
            gs.fill, gs.fill_space = colour, space

    def _ext_gstate(self, gs: _State, frame: _Frame, operands, *_):
        try:
            ext = frame.resources["/ExtGState"][str(operands[0])].get_object()
        except Exception:  # noqa: BLE001 - unknown state: nothing changes
            return
        if "/ca" in ext:
            v = nums([ext["/ca"]])
            gs.fill_alpha = v[0] if v else gs.fill_alpha
        blend = ext.get("/BM")
        if blend is not None:
            names = [str(b) for b in blend] if isinstance(blend, list) else [str(blend)]
            gs.normal_blend = names[0] in ("/Normal", "/Compatible")
        smask = ext.get("/SMask")
        if smask is not None and str(smask) != "/None":
            gs.fill_alpha = min(gs.fill_alpha, 0.5)  # a soft mask: neither clearly opaque nor judged by colour

    # -- paths, clipping and painting

    def _path(self, gs: _State, frame: _Frame, operands, op, _i):
        v = nums(operands)
        if op == b"re" and len(v) == 4:
            x, y, w, h = v
            frame.path += [apply(gs.ctm, x, y), apply(gs.ctm, x + w, y), apply(gs.ctm, x, y + h),
                           apply(gs.ctm, x + w, y + h)]
            frame.rects += 1
        elif op != b"h" and len(v) >= 2:
            frame.path += [apply(gs.ctm, v[k], v[k + 1]) for k in range(0, len(v) - 1, 2)]
            frame.curved = True

    def _clip(self, gs: _State, frame: _Frame, *_):
        frame.pending_clip = True

    def _paint_path(self, gs: _State, frame: _Frame, operands, op, _i):
        if frame.pending_clip:
            gs.clip = intersect(gs.clip, rect_of(frame.path) if frame.path else (0.0, 0.0, 0.0, 0.0))
            frame.pending_clip = False
        if op in _FILL_OPS and frame.path:
            exact = frame.rects == 1 and not frame.curved and _tilt(gs.ctm) == 0
            box = intersect(gs.clip, rect_of(frame.path))
            opaque = gs.fill_alpha >= OPAQUE_ALPHA and gs.normal_blend
            self._add_paint(box, gs.fill if opaque else None, occludes=exact and opaque)
        frame.path, frame.rects, frame.curved = [], 0, False

    def _shading(self, gs: _State, frame: _Frame, *_):
        self._add_paint(gs.clip or self.box, None, occludes=False)

    def _inline_image(self, gs: _State, frame: _Frame, *_):
        self._add_paint(intersect(gs.clip, transform_rect(gs.ctm, (0.0, 0.0, 1.0, 1.0))), None,
                        occludes=False, image=True)

    def _add_paint(self, box: Rect, colour, *, occludes: bool, image: bool = False) -> None:
        if box[0] >= box[2] or box[1] >= box[3]:
            return
        self.seq += 1
        self.paints.append(_Paint(self.seq, box, colour, occludes, image))

    # -- XObjects

    def _do(self, gs: _State, frame: _Frame, operands, *_):
        try:
            ref = frame.resources["/XObject"].raw_get(str(operands[0]))
            xobj = ref.get_object()
            subtype = xobj.get("/Subtype")
        except Exception:  # noqa: BLE001 - a missing XObject draws nothing
            return
        if subtype == "/Image":
            self._add_paint(intersect(gs.clip, transform_rect(gs.ctm, (0.0, 0.0, 1.0, 1.0))), None,
                            occludes=False, image=True)
        elif subtype == "/Form":
            key = _key(ref, xobj)
            sites = self.ink.form_sites.setdefault(key, [])
            xobjects, name = frame.resources["/XObject"], str(operands[0])
            if not any(d is xobjects and n == name for d, n in sites):
                sites.append((xobjects, name))
            self._form(gs, frame, key, xobj)

    def _form(self, gs: _State, frame: _Frame, key: int, xobj: Any) -> None:
        if frame.depth >= MAX_FORM_DEPTH or key in self._forms_open:
            return
        try:
            ops = self.ink.form_ops.get(key)
            if ops is None:
                ops, self.ink.form_data[key] = content_operations(xobj, self.reader)
            inner = gs.copy()
            m = nums(xobj.get("/Matrix", [1, 0, 0, 1, 0, 0]))
            inner.ctm = mul(tuple(m), gs.ctm) if len(m) == 6 else gs.ctm
            bbox = nums(xobj.get("/BBox", []))
            if len(bbox) == 4:
                inner.clip = intersect(gs.clip, transform_rect(inner.ctm, norm_rect(bbox)))
        except Exception:  # noqa: BLE001 - an unreadable form draws nothing we can judge
            return
        self.ink.forms[key] = xobj
        self.ink.form_ops[key] = ops
        self._forms_open.append(key)
        try:
            self.walk(ops, xobj.get("/Resources", frame.resources), inner, stream=key, depth=frame.depth + 1)
        finally:
            self._forms_open.pop()

    # -- text

    def _bt(self, gs: _State, frame: _Frame, *_):
        frame.tm = frame.lm = _IDENT
        frame.fresh = True

    def _move(self, gs: _State, frame: _Frame, operands, op, _i):
        v = nums(operands)
        if op == b"Tm" and len(v) == 6:
            frame.tm = frame.lm = tuple(v)
        elif op in (b"Td", b"TD") and len(v) == 2:
            if op == b"TD":
                gs.leading = -v[1]
            frame.lm = frame.tm = mul((1.0, 0.0, 0.0, 1.0, v[0], v[1]), frame.lm)
        elif op == b"T*":
            frame.lm = frame.tm = mul((1.0, 0.0, 0.0, 1.0, 0.0, -gs.leading), frame.lm)
        frame.fresh = True

    def _show(self, gs: _State, frame: _Frame, operands, op, i):
        if op in (b"'", b'"'):
            if op == b'"':
                v = nums(operands[:2])
                if len(v) == 2:
                    gs.word_space, gs.char_space = v
            self._move(gs, frame, [], b"T*", i)
        metrics = frame.fonts.get(gs.font) or self._metrics(gs.font, frame)
        advance, box = _advance(gs, metrics, operands, op)
        trm = mul(frame.tm, gs.ctm)
        dev = transform_rect(trm, box)
        size = abs(gs.size) * (abs(trm[0] * trm[3] - trm[1] * trm[2]) ** 0.5)
        self.seq += 1
        show = Show(frame.stream, i, dev, (trm[4], trm[5]), size, gs.font, metrics.vertical, seq=self.seq,
                    colours=_text_colours(gs), alpha=gs.fill_alpha, clip=gs.clip,
                    invisible=gs.tr in (3, 7), word_space=0.0 if metrics.two_byte else gs.word_space,
                    font_size=gs.size)
        if min(abs(gs.size) * abs(gs.hscale) * _scale(gs.ctm, frame.tm), size) < TINY_TEXT_PT and size > 0:
            show.hidden = "tiny"
        strings = operands[-1] if operands else None
        if frame.fresh and frame.last is not None and frame.last[0] == gs.font:
            tol = FAKE_BOLD_EM * max(size, 1.0)
            lx, ly = frame.last[2]
            show.duplicate = (abs(show.origin[0] - lx) <= tol and abs(show.origin[1] - ly) <= tol
                              and _same_strings(frame.last[1], strings))
        frame.last = (gs.font, strings, show.origin) if frame.fresh else None
        frame.fresh = False
        self.ink.shows.append(show)
        shift = (1.0, 0.0, 0.0, 1.0, 0.0, -advance) if metrics.vertical else (1.0, 0.0, 0.0, 1.0, advance, 0.0)
        frame.tm = mul(shift, frame.tm)

    def _metrics(self, name: str, frame: _Frame) -> FontMetrics:
        """The metrics of the font resource ``name`` of ``frame`` (kept in ``frame.fonts``); a
        font that is an indirect object is read once per document (``walk_page``'s ``metrics``)."""
        try:
            ref = frame.resources["/Font"].raw_get(name)
            font = ref.get_object()
        except Exception:  # noqa: BLE001 - an unknown font gets default widths
            frame.fonts[name] = FontMetrics()
            return frame.fonts[name]
        key = _key(ref, font)
        shared = self._metrics_by_number if hasattr(ref, "idnum") else {}
        if key not in shared:
            shared[key] = font_metrics(font)
        frame.fonts[name] = shared[key]
        self.ink.fonts.setdefault(key, font)
        return shared[key]


_COLOUR_OPS = {b"g", b"G", b"rg", b"RG", b"k", b"K", b"cs", b"CS", b"sc", b"SC", b"scn", b"SCN"}
_PATH_OPS = {b"re", b"m", b"l", b"c", b"v", b"y", b"h"}
_TEXT_STATE_OPS = {b"Tf", b"Tc", b"Tw", b"Tz", b"TL", b"Ts", b"Tr"}


def _text_state(gs: _State, frame: _Frame, operands, op, _i):
    if op == b"Tf" and len(operands) >= 2:
        gs.font = str(operands[0])
        v = nums(operands[1:2])
        gs.size = v[0] if v else 0.0
        return
    v = nums(operands)
    if not v:
        return
    if op == b"Tc":
        gs.char_space = v[0]
    elif op == b"Tw":
        gs.word_space = v[0]
    elif op == b"Tz":
        gs.hscale = v[0] / 100.0
    elif op == b"TL":
        gs.leading = v[0]
    elif op == b"Ts":
        gs.rise = v[0]
    elif op == b"Tr":
        gs.tr = int(v[0])


def _advance(gs: _State, metrics: FontMetrics, operands, op) -> tuple[float, Rect]:
    """How far the text matrix moves (text space units) and the text-space box of the glyphs."""
    items = list(operands[0]) if op == b"TJ" and operands else operands[-1:] if operands else []
    advance = 0.0
    for item in items:
        if isinstance(item, (bytes, str)) and not str(item).startswith("/"):
            raw = item if isinstance(item, bytes) else _raw_bytes(item)
            for code in metrics.codes(raw):
                step = metrics.width(code) * gs.size + gs.char_space
                if not metrics.two_byte and code == 32:
                    step += gs.word_space
                advance += step if metrics.vertical else step * gs.hscale
        else:
            v = nums([item])
            if v:
                shift = v[0] / 1000.0 * gs.size
                advance -= shift if metrics.vertical else shift * gs.hscale
    size = abs(gs.size)
    if metrics.vertical:
        return advance, (-0.5 * size, -max(advance, 0.0), 0.5 * size, 0.0)
    lo, hi = sorted((0.0, advance))
    return advance, (lo, gs.rise + DESCENT * size, hi, gs.rise + ASCENT * size)


def _same_strings(a: Any, b: Any) -> bool:
    """Whether two shows' string operands are the same glyphs (compared by ``repr``, which
    tells bytes from text strings and numbers by their written form; taken only for two
    shows of one font at almost one spot, so rarely); ``None`` (no operand) matches only ``None``."""
    if a is None or b is None:
        return a is b
    return a is b or repr(a) == repr(b)


def _raw_bytes(item: Any) -> bytes:
    try:
        return item.original_bytes
    except AttributeError:
        return str(item).encode("latin-1", "replace")


def _text_colours(gs: _State) -> tuple:
    """The colours a reader sees the glyphs in (fill, stroke or both by render mode); ``None``
    entries are unknown colours."""
    if gs.tr in (1, 5):
        return (gs.stroke,)
    if gs.tr in (2, 6):
        return (gs.fill, gs.stroke)
    return (gs.fill,)


def _scale(ctm, tm) -> float:
    m = mul(tm, ctm)
    return (m[0] ** 2 + m[1] ** 2) ** 0.5


def _tilt(m) -> float:
    return abs(m[1]) + abs(m[2])


def _key(ref: Any, obj: Any) -> int:
    try:
        return ref.idnum * 100_000 + ref.generation + 1
    except AttributeError:
        return id(obj)


def _resolve(obj: Any) -> Any:
    try:
        return obj.get_object() if obj is not None else {}
    except Exception:  # noqa: BLE001
        return {}


# ---------------------------------------------------------------- verdicts


def _judge(shows: list[Show], paints: list[_Paint], box: Rect) -> None:
    """Set ``hidden`` on each show (see the module docstring)."""
    images = [p.box for p in paints if p.image]
    budget = MAX_COMPARISONS
    occluders = [p for p in paints if p.occludes]
    seqs = [p.seq for p in paints]  # ascending: paints are recorded in drawing order
    occluder_seqs = [p.seq for p in occluders]
    backgrounds = {p.colour for p in paints if p.colour is not None} | {_WHITE}
    can_fade: dict[tuple, bool] = {}  # (colours, alpha) -> lost against one of the backgrounds
    for show in shows:
        if show.hidden:
            continue
        if show.invisible:
            if not any(overlaps(show.box, im) for im in images):
                show.hidden = "render mode"
            continue
        if not overlaps(show.box, box):
            show.hidden = "outside the page"
        elif show.clip is not None and not overlaps(show.box, show.clip):
            show.hidden = "clipped"
        elif budget > 0:
            budget -= len(paints)
            later = bisect_right(occluder_seqs, show.seq)
            if any(contains(p.box, show.box) for p in occluders[later:]):
                show.hidden = "covered"
            elif _may_fade(show, backgrounds, can_fade) and _faint(show, paints, bisect_left(seqs, show.seq)):
                show.hidden = "low contrast"


def _faint(show: Show, paints: list[_Paint], before: int) -> bool:
    """True when every colour of the show is lost against what lies beneath its centre
    (``paints[:before]`` are those painted before it)."""
    cx, cy = (show.box[0] + show.box[2]) / 2, (show.box[1] + show.box[3]) / 2
    beneath = _WHITE
    for i in range(before - 1, -1, -1):
        p = paints[i]
        if has_point(p.box, cx, cy):
            beneath = p.colour
            break
    if beneath is None or not show.colours or any(c is None for c in show.colours):
        return False
    return _lost(show.colours, show.alpha, beneath)


def _may_fade(show: Show, backgrounds: set, seen: dict[tuple, bool]) -> bool:
    """Whether the show's colours are lost against at least one of the page's ``backgrounds``
    (every known fill colour and the white page): when not, no paint beneath can make it
    faint and :func:`_faint` need not look for one. Answers are kept in ``seen``."""
    key = (show.colours, show.alpha)
    if key not in seen:
        seen[key] = (bool(show.colours) and all(c is not None for c in show.colours)
                     and any(_lost(show.colours, show.alpha, b) for b in backgrounds))
    return seen[key]


def _lost(colours: tuple, alpha: float, beneath: tuple) -> bool:
    """True when every one of ``colours``, blended by ``alpha``, is lost against ``beneath``."""
    a = max(0.0, min(1.0, alpha))
    for colour in colours:
        seen = tuple(a * f + (1 - a) * b for f, b in zip(colour, beneath))
        if not low_contrast(seen, beneath):
            return False
    return True
