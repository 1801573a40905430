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

import re
import unicodedata

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
_PLACEHOLDERS = {"untitled", "title", "document", "no title", "slide 1"}


def line_problem(line: str) -> str:
    """Why ``line`` cannot be a title: ``""`` (it can), ``"length"``, ``"unmapped glyphs"``,
    ``"symbols"`` or ``"few letters"``. Only the middle two are quality problems. Private-use
    characters are icons and are left out (a line of nothing else is unmapped glyphs)."""
    s = " ".join(line.split())
    if _CID.search(s):
        return "unmapped glyphs"
    icons = sum(1 for c in s if unicodedata.category(c) == "Co")
    s = clean_line(s)
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
    if line_problem(title) or title.lower() in _PLACEHOLDERS:
        return ""
    if re.search(r"\.(?:docx?|pdf|dvi|tex|pptx?|xlsx?|rtf|txt|indd|qxd)$", title, re.I):
        return ""
    return title[:200]


def first_line_title(pages: list[tuple[int, str]]) -> tuple[str, dict[int, str]]:
    """The first line that can be a title in the first :data:`TITLE_PAGES` ``(number, text)``
    pages, and ``{page: reason}`` for the pages whose first line was refused as unmapped
    glyphs or symbols (``("", {...})`` when no line qualifies)."""
    doubtful: dict[int, str] = {}
    for number, text in pages[:TITLE_PAGES]:
        for i, line in enumerate(ln for ln in text.splitlines() if ln.strip()):
            problem = line_problem(line)
            if not problem:
                return clean_line(line), doubtful
            if i == 0 and problem in ("unmapped glyphs", "symbols"):
                doubtful[number] = f"first line is {problem}, not text (font without a Unicode map)"
    return "", doubtful
