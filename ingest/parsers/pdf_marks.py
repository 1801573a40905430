"""Footnote marks of a PDF page: small raised strings that number a note, left out of its text.

``footnote_marks(ink) -> set of (stream, index)``. A footnote mark is drawn smaller than the text
it follows and above its baseline ("signed into law by¹ President Clinton"), and the note at the
foot of the page starts with the same mark ("¹ Pub. L. No. 105-304 ..."). pypdf writes a mark as
an ordinary character glued to the word before it ("by1", "that2", "create3" on
../shared/corpus/pdf/dmca.pdf pages 1, 4 and 8), so the word is not found by its own name, and
it writes the note's mark where the producer drew it (dmca.pdf draws it after the note's first
line: "112 Stat. 2827,3 2830-34", "the exclus-2 / ive rights"). Both are left out of the page's
text, as hidden text is (:mod:`ingest.parsers.pdf`): the words before marks stay searchable and
no stray number enters a sentence or a citation; a note keeps its text, without its number.

The rule (this module's own; checked on every PDF in ../shared/corpus/pdf and ../shared/cases):

- A *raised* show is an upright, visible show of at most :data:`MAX_MARK_BYTES` bytes, at most
  :data:`MARK_SIZE_SHARE` of the size of a *host* show beside it, whose baseline sits between
  :data:`RAISE_MIN_EM` and :data:`RAISE_MAX_EM` host sizes above the host's.
- It is a *mark in the text* when a host ends where it starts, and a *note label* when a host
  starts where it ends and nothing on its line ends within :data:`LABEL_GAP_EM` to its left
  ("where": within :data:`ADJACENT_EM` host sizes).
- Marks go only in pairs: a mark in the text is a footnote mark when a note label on the same
  page shows the same bytes in the same font, and that label goes with it. An exponent has no
  label ("R²", "cos²" in GeoTopo-komprimiert.pdf) and stays, as does a mark whose note is on
  another page (pypdf's "word1" then remains).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Any

from ingest.parsers.pdf_visibility import DESCENT, PageInk, Show

MAX_MARK_BYTES = 6
"""Bytes of a mark's string at most (three digits or symbols of a two-byte font)."""
MARK_SIZE_SHARE = 0.8
"""A mark is at most this share of its host's size (dmca.pdf: 7.2 pt marks on 11-12 pt text;
LaTeX: 8 on 10-11 pt)."""
RAISE_MIN_EM = 0.15
RAISE_MAX_EM = 0.8
"""A mark's baseline is this many host sizes above the host's (dmca.pdf 0.38-0.41, LaTeX
about 0.36): above a subscript or a baseline wobble, below the next line."""
ADJACENT_EM = 0.5
"""Host and mark touch: the gap between them is at most this many host sizes."""
LABEL_GAP_EM = 1.0
"""A note label starts its line: nothing on the line ends closer than this to its left (a
column gap is wider)."""


def footnote_marks(ink: PageInk) -> set[tuple[int, int]]:
    """The ``(stream, index)`` of the page's footnote marks and note labels (see the module
    docstring); empty when the page has none."""
    shows = [s for s in ink.shows if not s.hidden and not s.duplicate and not s.vertical and _upright(s)]
    if len(shows) < 2:
        return set()
    lines = _Lines(shows)
    marks: dict[tuple, list[Show]] = {}
    labels: dict[tuple, list[Show]] = {}
    for show in shows:
        raw = _raw(ink, show)
        if not raw or len(raw) > MAX_MARK_BYTES:
            continue
        key = (show.font, raw)
        if lines.host(show, before=True):
            marks.setdefault(key, []).append(show)
        elif lines.host(show, before=False) and not lines.left_of(show):
            labels.setdefault(key, []).append(show)
    found: set[tuple[int, int]] = set()
    for key in marks.keys() & labels.keys():
        if len(labels[key]) == 1 and all(_base(m) > _base(labels[key][0]) for m in marks[key]):
            found |= {(s.stream, s.index) for s in marks[key] + labels[key]}
    return found


def _upright(show: Show) -> bool:
    x0, y0, x1, y1 = show.box
    return show.size > 0 and y1 - y0 <= 1.5 * show.size


def _base(show: Show) -> float:
    """The baseline (device units) of an upright show, its rise included."""
    return show.box[1] - DESCENT * show.size


def _raw(ink: PageInk, show: Show) -> bytes:
    ops = ink.page_ops if show.stream == 0 else ink.form_ops.get(show.stream, [])
    if show.index >= len(ops):
        return b""
    operands, op = ops[show.index]
    items: list[Any] = list(operands[0]) if op == b"TJ" and operands else operands[-1:]
    return b"".join(bytes(i) for i in items if isinstance(i, bytes)).strip()


class _Lines:
    """The page's shows by baseline, for looking up neighbours."""

    def __init__(self, shows: list[Show]) -> None:
        self.shows = sorted(shows, key=_base)
        self.bases = [_base(s) for s in self.shows]
        self.tallest = max(s.size for s in shows)

    def _near(self, lo: float, hi: float) -> list[Show]:
        return self.shows[bisect_left(self.bases, lo) : bisect_right(self.bases, hi)]

    def host(self, mark: Show, *, before: bool) -> bool:
        """Whether a larger show ends where ``mark`` starts (``before``) or starts where it ends,
        with ``mark`` raised above it."""
        base = _base(mark)
        for h in self._near(base - RAISE_MAX_EM * self.tallest, base - RAISE_MIN_EM * mark.size):
            if h is mark or mark.size > MARK_SIZE_SHARE * h.size:
                continue
            if not RAISE_MIN_EM * h.size <= base - _base(h) <= RAISE_MAX_EM * h.size:
                continue
            gap = mark.box[0] - h.box[2] if before else h.box[0] - mark.box[2]
            if abs(gap) <= ADJACENT_EM * h.size:
                return True
        return False

    def left_of(self, mark: Show) -> bool:
        """Whether something on ``mark``'s line ends within :data:`LABEL_GAP_EM` to its left."""
        base = _base(mark)
        for s in self._near(base - self.tallest, base + self.tallest):
            if s is mark or s.box[3] < mark.box[1] or s.box[1] > mark.box[3]:
                continue
            if s.box[2] <= mark.box[0] + 0.1 * s.size and mark.box[0] - s.box[2] < LABEL_GAP_EM * s.size:
                return True
        return False
