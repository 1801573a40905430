"""An outline for a PDF without bookmarks, read from its typography.

``typographic_outline(pages) -> [(page, title, level)]``, the shape of the bookmark outline, so
the parser places both the same way (a heading block where its paragraph starts). A paragraph
is a heading when it is short (at most :data:`MAX_HEADING_CHARS` characters, not ending in
sentence or clause punctuation, a possible title line by :func:`ingest.parsers.pdf_title.line_problem`) and

1. **numbered** as a section: "1 Introduction", "3.2 Training" (level = the number's depth),
   with numbers that go on in order (a top number one above the last one, or the same for a
   sub-section; the first at most 2), so table rows and list items ("3 cups of flour") do not
   count; or a division keyword with a number: "TITLE II: ...", "Chapter 4", "PART IV",
   "Article 12", "Appendix A", "第五回" (:func:`ingest.titles.division_level`); or
2. **styled**: the whole paragraph is drawn in a font at least :data:`LARGER` times the page's
   body size (level 1) or in a bold face on a page whose body is not bold (level 2)
   (:func:`styled_lines`, from the font sizes and names :mod:`ingest.parsers.pdf_visibility`
   records). A page with more than :data:`MAX_STYLED_PER_PAGE` styled paragraphs (a table's
   bold header row, a slide of large text) gives none.

Checked on ../shared/corpus/pdf: multi-column.pdf (a paper: "1 Introduction" ... "5.4 Run-time
Efficiency") and dmca.pdf ("TITLE I: WIPO TREATY IMPLEMENTATION" and its bold sub-heads).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, NamedTuple, Sequence

from ingest.parsers.pdf_extract import only, text_without
from ingest.parsers.pdf_title import line_problem
from ingest.titles import NOT_LAST, division_level

MAX_HEADING_CHARS = 100
"""A longer paragraph is text, not a heading."""
LARGER = 1.15
"""A font this many times the body size or more is a heading's (body 10 pt: 11.5 pt and up)."""
MAX_STYLED_PER_PAGE = 8
"""More styled paragraphs than this on one page are a table or a slide, not headings."""
MAX_STYLED_SHOWS = 60
"""A page with more larger (or bold) text operators than this, or with more than half its text so
drawn, is read without styled lines: a few heading lines take a few operators (one per glyph
for some producers), and each styled read costs one more text extraction of the page."""
HEADING_LINE_SHARE = 0.8
"""A line of the numbered or division form shorter than this share of the page's median line
stands alone as a paragraph (:func:`heading_form`; ``ingest.parsers.pdf`` splits paragraphs by
it): a body line that wraps is near the median. Source: the 0.8 the paragraph splitter already
uses for a short last line; multi-column.pdf's "5 Experiments: Passage Retrieval" is 32 of a
48-character median, and was joined to the text under it at the former 0.5."""
MAX_STYLES = 4
"""Fonts and sizes of one level read apart at most (one text extraction each); a page with
more is read in one extraction, without telling its styles apart (no wrapped headings)."""
MAX_HEADINGS = 5_000
"""As ``ingest.parsers.pdf.MAX_OUTLINE_ITEMS``: headings kept at most."""

class StyledLine(NamedTuple):
    """One line drawn in a heading's typography (:func:`styled_lines`)."""

    text: str
    level: int
    """1: larger than the body; 2: bold on a page whose body is not bold."""
    style: str = ""
    """Its font resource and size ("/F2 12.96"); ``""`` when not told apart."""


_NUMBERED = re.compile(r"(\d{1,2}(?:\.\d{1,2}){0,3})\.?\s+(?=[^\W\d_])\S")
_BOLD = re.compile(r"bold|black|heavy|semibold|demi", re.IGNORECASE)
_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?"
_DATE = re.compile(rf"(?:(?:\d{{1,2}}\s+)?{_MONTH}(?:\s+\d{{1,2}},?)?\s+\d{{4}}|\d{{1,4}}[-/.]\d{{1,2}}[-/.]\d{{1,4}})",
                   re.IGNORECASE)
"""A date alone on a line ("December 1998", "14 March 2024", "March 14, 2024", "2024-03-14"):
a cover or letter date, never a section heading."""


def typographic_outline(pages: Sequence[tuple[int, list[str], list[StyledLine]]]) -> list[tuple[int, str, int]]:
    """Headings found in ``(page number, paragraphs, styled lines)`` of each page (styled lines
    from :func:`styled_lines`), in reading order, as ``(page, title, level)``. A styled heading
    after a division heading ("TITLE IV: ...") is at least one level below it: the keyword
    names the document's top divisions (dmca.pdf draws the sub-head "Clarification of the
    Authority of the Copyright Office" as large as "TITLE IV: MISCELLANEOUS PROVISIONS")."""
    out: list[tuple[int, str, int]] = []
    last_top = 0
    division = 0
    for number, paras, styled in pages:
        styled_level = _styled_levels(paras, styled)
        for para in paras:
            if not short_line(para):
                continue
            level, top = _numbered(para, last_top)
            if level:
                last_top = top
            elif division_level(para):
                level = division = division_level(para)
            elif styled_key(para) in styled_level:
                level = max(styled_level[styled_key(para)], division + 1)
            if level:
                out.append((number, para, level))
                if len(out) >= MAX_HEADINGS:
                    return out
    return out


def heading_form(line: str) -> bool:
    """Whether one line of a page has the form of a numbered or division heading: "5 Experiments:
    Passage Retrieval", "6.1 End-to-end QA System", "Chapter 4" (its title starts upper-case),
    short and unpunctuated (:func:`_short_line`). Whether it is one is decided with the numbering
    order in :func:`typographic_outline`."""
    s = line.strip()
    m = _NUMBERED.match(s)
    numbered = m is not None and s[m.end() - 1].isupper()
    return (numbered or division_level(s) > 0) and short_line(s)


def short_line(para: str) -> bool:
    """Whether ``para`` may be a heading line: at most :data:`MAX_HEADING_CHARS` characters, not
    ending like a sentence or a clause (:data:`ingest.titles.NOT_LAST`) nor with ":" (a lead-in
    such as dmca.pdf's "Article 11 of the WCT states:"), not starting lower-case (the rest of a
    wrapped heading: dmca.pdf's "ment" of "Develop-/ment"), not a date alone (:data:`_DATE`: "December
    1998" under a cover title), and a possible title line (:func:`ingest.parsers.pdf_title.line_problem`)."""
    s = para.strip()
    return (len(s) <= MAX_HEADING_CHARS and not s.endswith((*NOT_LAST, ":")) and not s[:1].islower()
            and not _DATE.fullmatch(s) and not line_problem(s))


def _numbered(para: str, last_top: int) -> tuple[int, int]:
    """``(level, top number)`` of a numbered section heading that follows ``last_top`` in order,
    else ``(0, last_top)``."""
    m = _NUMBERED.match(para.strip())
    if not m:
        return 0, last_top
    parts = [int(x) for x in m.group(1).split(".")]
    top, depth = parts[0], len(parts)
    ok = top == last_top + 1 or (depth > 1 and top == last_top) if last_top else top <= 2
    return (depth, top) if ok else (0, last_top)


def _styled_levels(paras: list[str], styled: list[StyledLine]) -> dict[str, int]:
    """Paragraph key -> level, for the paragraphs that are a styled line whole, or two
    successive styled lines of one style (a wrapped heading, see :func:`wraps`)."""
    lines = {styled_key(line.text): line.level for line in styled if line.text.strip()}
    for first, second in zip(styled, styled[1:]):
        if wraps(first, second):
            head = styled_key(first.text)
            lines.setdefault(head + styled_key(second.text), first.level)
            if head.endswith("-"):
                lines.setdefault(head[:-1] + styled_key(second.text), first.level)
    hits = {styled_key(p): lines[styled_key(p)] for p in paras if styled_key(p) in lines}
    return hits if len(hits) <= MAX_STYLED_PER_PAGE else {}


def wraps(first: StyledLine, second: StyledLine) -> bool:
    """Whether ``second`` may be the rest of a heading that ``first`` begins: same level and
    the same font and size (dmca.pdf's wrapped heads; its heads that follow each other change
    face: "Circumvention of Technological Protection Measures" in bold italic, then "General
    approach" in bold)."""
    return bool(first.style) and first.level == second.level and first.style == second.style


def styled_key(text: str) -> str:
    """The form styled lines and page lines are compared in: casefolded, without whitespace
    (pypdf spaces a line drawn alone differently: dmca.pdf's bold "Rights i n")."""
    return "".join(text.split()).casefold()


def styled_lines(reader: Any, pobj: Any, ink: Any, text: str = "") -> list[StyledLine]:
    """Lines of one page drawn larger than its body text (level 1) or bold on a page whose body
    is not bold (level 2), as :class:`StyledLine`. The body size and face are those of most text
    operators on the page. A line's style (font and size) is told when its level has one, or
    when two of its lines follow each other in the page's ``text`` and the level has at most
    :data:`MAX_STYLES` (one more text extraction each: only then can a heading wrap, see
    :func:`wraps`). Never raises: a page whose fonts cannot be read gives ``[]``."""
    shows = [s for s in ink.shows if not s.hidden and not s.duplicate and not s.vertical and s.size > 0]
    if not shows:
        return []
    try:
        body = Counter(round(s.size, 1) for s in shows).most_common(1)[0][0]
        bold = _bold_fonts(pobj)
        body_bold = Counter(s.font in bold for s in shows if round(s.size, 1) == body).most_common(1)[0][0]
        large = [s for s in shows if s.size >= LARGER * body]
        heavy = [] if body_bold else [s for s in shows if s.stream == 0 and s.font in bold and s.size < LARGER * body
                                      and s.size >= body * 0.95]
        out: list[StyledLine] = []
        for level, keep in ((1, large), (2, heavy)):
            if keep and len(keep) <= min(len(shows) // 2, MAX_STYLED_SHOWS):
                out.extend(_lines_by_style(reader, pobj, ink, keep, level, text))
        return out
    except Exception:  # noqa: BLE001 - typography is a hint: a font that cannot be read gives none
        return []


def _lines_by_style(reader: Any, pobj: Any, ink: Any, keep: list, level: int, text: str) -> list[StyledLine]:
    """The lines of the shows ``keep``, with their style where :func:`styled_lines` tells it."""
    styles: dict[str, list] = {}
    for show in keep:
        styles.setdefault(f"{show.font} {round(show.size, 1)}", []).append(show)
    lines = _lines(text_without(reader, pobj, ink, only(ink, keep)))
    if len(styles) == 1:
        return [StyledLine(ln, level, next(iter(styles))) for ln in lines]
    if len(styles) > MAX_STYLES or not _adjacent({styled_key(ln) for ln in lines}, text):
        return [StyledLine(ln, level) for ln in lines]
    return [StyledLine(ln, level, style) for style, group in styles.items()
            for ln in _lines(text_without(reader, pobj, ink, only(ink, group)))]


def _lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


def _adjacent(keys: set[str], text: str) -> bool:
    """Whether two successive lines of ``text`` are both among the styled line ``keys``, the
    first one a possible heading (:func:`short_line`)."""
    lines = _lines(text)
    marks = [styled_key(ln) in keys for ln in lines]
    return any(a and b and short_line(ln) for ln, a, b in zip(lines, marks, marks[1:]))


def _bold_fonts(pobj: Any) -> set[str]:
    """Resource names (``/F1``) of the page's fonts whose base font name says bold."""
    fonts = pobj["/Resources"]["/Font"].get_object()
    out = set()
    for name, ref in fonts.items():
        base = str(ref.get_object().get("/BaseFont", ""))
        if _BOLD.search(base):
            out.add(str(name))
    return out
