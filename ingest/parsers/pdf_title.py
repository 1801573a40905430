"""A PDF's title: its metadata ``/Title`` when that is a real title, else the first line of the
first two pages that reads as one.

A line is not a title when it is mostly glyphs without a Unicode mapping (control characters,
U+FFFD, private-use or unassigned code points, pdfminer's ``(cid:N)``), or mostly digits and
symbols: a font without a ToUnicode map turns a heading into such a line, and it must not
become the name every anchor and citation shows (issue 17). A first line refused for
unmapped glyphs or symbols is reported with its page, so the page can be flagged
``text_quality``. Metadata titles that name the file or a placeholder ("Untitled",
"Microsoft Word - x.docx") are ignored as before.
"""

from __future__ import annotations

import difflib
import re
import unicodedata

from ingest.titles import title_problem, without_page_number

MIN_TITLE_CHARS = 3
MAX_TITLE_CHARS = 150
"""A first line of more characters is a paragraph, not a title."""
MIN_LETTER_SHARE = 0.5
"""A title is at least this share letters (of its non-space characters)."""
SYMBOL_SHARE = 0.3
"""A line whose non-space characters are at least this share symbols and unusual punctuation
(outside ``.,:;!?'"()-/&%``) is unmapped glyph codes rendered as characters."""
TITLE_PAGES = 2
"""Pages searched for a first-line title."""

_CID = re.compile(r"\(cid:\d+\)")
_PLAIN_PUNCT = set(".,:;!?'\"()-/&%–—’‘“”«»")


def line_problem(line: str) -> str:
    """Why ``line`` cannot be a title: ``""`` (it can), ``"length"``, ``"unmapped glyphs"``,
    ``"placeholder"`` or ``"caption"`` (:func:`ingest.titles.title_problem`), ``"symbols"`` or
    ``"few letters"``. Only unmapped glyphs and symbols are quality problems. Private-use
    characters are icons and are left out (a line of nothing else is unmapped glyphs)."""
    s = " ".join(line.split())
    if _CID.search(s):
        return "unmapped glyphs"
    icons = sum(1 for c in s if unicodedata.category(c) == "Co")
    s = clean_line(s)
    if title_problem(s):
        return title_problem(s)
    chars = [c for c in s if not c.isspace()]
    if icons and icons >= len(chars):
        return "unmapped glyphs"
    if not chars:
        return "length"
    if any(unicodedata.category(c) in ("Cc", "Cf", "Cn", "Cs") or c == "\ufffd" for c in chars):
        return "unmapped glyphs"
    if not MIN_TITLE_CHARS <= len(s) <= MAX_TITLE_CHARS:
        return "length"
    symbols = sum(1 for c in chars if not c.isalnum() and c not in _PLAIN_PUNCT)
    if symbols >= SYMBOL_SHARE * len(chars):
        return "symbols"
    letters = sum(1 for c in chars if c.isalpha())
    if letters < MIN_TITLE_CHARS or letters < MIN_LETTER_SHARE * len(chars):
        return "few letters"
    return ""


def clean_line(line: str) -> str:
    """``line`` without private-use characters (icons such as bullets) and extra whitespace."""
    return " ".join("".join(c for c in line if unicodedata.category(c) != "Co").split())


def metadata_title(raw: str) -> str:
    """The metadata ``/Title`` cleaned, or ``""`` when it is no title."""
    title = re.sub(r"^Microsoft (?:Word|PowerPoint|Excel) - ", "", " ".join(raw.split()))
    if line_problem(title):
        return ""
    if re.search(r"\.(?:docx?|pdf|dvi|tex|pptx?|xlsx?|rtf|txt|indd|qxd)$", title, re.I):
        return ""
    return title[:200]


def first_line_title(pages: list[tuple[int, str]]) -> tuple[str, dict[int, str]]:
    """The first line that can be a title in the first :data:`TITLE_PAGES` ``(number, text)``
    pages, and ``{page: reason}`` for the pages whose first line was refused as unmapped
    glyphs or symbols (``("", {...})`` when no line qualifies). A running header (its words
    also begin another page, :func:`_runs_on`) loses its page number
    (:func:`ingest.titles.without_page_number`)."""
    doubtful: dict[int, str] = {}
    for number, text in pages[:TITLE_PAGES]:
        for i, line in enumerate(ln for ln in text.splitlines() if ln.strip()):
            problem = line_problem(line)
            if not problem:
                line = clean_line(line)
                return (without_page_number(line) if _runs_on(line, number, pages) else line), doubtful
            if i == 0 and problem in ("unmapped glyphs", "symbols"):
                doubtful[number] = f"first line is {problem}, not text (font without a Unicode map)"
    return "", doubtful


RUNNING_SIMILARITY = 0.8
"""Two page-top lines whose letters match at least this closely (difflib ratio) are one
running header read twice: OCR misreads letters ("VICKSBURG" / "VICKSBUEG", "OF" / "OP")."""
RUNNING_PAGES = 12
"""Pages whose tops are compared: a running header tops most pages, so the first few show it."""


def _runs_on(line: str, number: int, pages: list[tuple[int, str]]) -> bool:
    """``line`` has the letters of one of the first two lines of another page."""
    key = _letters(line)
    if not key:
        return False
    for other, text in pages[:RUNNING_PAGES]:
        if other == number:
            continue
        tops = [ln for ln in text.splitlines() if ln.strip()][:2]
        if any(difflib.SequenceMatcher(None, key, _letters(t)).ratio() >= RUNNING_SIMILARITY for t in tops):
            return True
    return False


def _letters(line: str) -> str:
    return "".join(c for c in line.casefold() if c.isalpha())
