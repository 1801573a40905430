"""What cannot be a document's title, whatever the format: the one place for the rule.

A title names the document in every anchor and citation, so a line that only looks like one is
refused and the next source is tried (metadata, a real title line, the first heading, else the
file name):

- a word-processor style name or placeholder left as text: "Heading 1", "Title", "Subtitle",
  "Normal", "Untitled", "Document" (python-docx's and LibreOffice's default style names; the
  corpus's example.docx has "Heading 1" as its first heading);
- a figure, table or chart caption: "Figure 3: ...", "Fig. 2.", "Table 1 -", "Abbildung 4",
  "图 1", "表 2" (a caption names a picture, not the document);
- a running page header's page number is no part of a title: :func:`without_page_number`
  takes it off ("THE SIEGE OF VICKSBURG. 49" -> "THE SIEGE OF VICKSBURG", corpus
  Seige_of_Vicksburg_Sample_OCR.pdf, whose pages each begin with the book's title and a
  page number).

And what a division line is -- the one place for it, used by the plain-text parser and the PDF
outline: :func:`division_level` ("Chapter 4", "PART IV", "TITLE II: ...", "Article 12",
"第五回 ...", "第三章", "第二节") and :func:`chapter_line`, its stricter form for a line of plain
text, where a wrapped sentence may start with "Chapter 3".

Three rules find or mend a title: :func:`plain_text_title` takes a plain-text file's own title
line, :func:`cover_title` the lines a cover page shows in its largest font, and :func:`once`
takes a title drawn twice ("Hello worldHello world") once.
"""

from __future__ import annotations

import re
from typing import Sequence

_PLACEHOLDER = re.compile(
    r"(?:heading|überschrift|titre|título|titolo)\s*\d?|title|subtitle|normal|default|body text|"
    r"untitled(?:\s+document)?|document\s*\d*|no title|slide\s*\d+|page\s*\d+|titel|untertitel",
    re.IGNORECASE,
)
_CAPTION = re.compile(
    r"(?i:fig(?:ure)?|tab(?:le)?|chart|plate|diagram|exhibit|abb(?:ildung)?|tabelle|image|photo)\.?\s*"
    r"(?:\d+|[IVXL]+)(?:[.\-–]\d+)*[a-z]?(?:[.:\-–—)]|\s|$)|[图表圖]\s*\d+"
)
_EDGE_NUMBER = re.compile(r"^\s*[\-–—]?\s*\d{1,4}\s*[\-–—]?\s+(?=\S)|(?<=\S)\s+[\-–—]?\s*\d{1,4}\s*[\-–—]?\s*$")


def title_problem(line: str) -> str:
    """Why ``line`` cannot be a title: ``""`` (it can), ``"placeholder"`` or ``"caption"``."""
    s = " ".join(line.split()).strip(" .:")
    if _PLACEHOLDER.fullmatch(s):
        return "placeholder"
    if _CAPTION.match(s):
        return "caption"
    return ""


MAX_PLAIN_TITLE_CHARS = 100
"""A longer first line of plain text is a paragraph, not a title (characters; as the PDF
outline's longest heading, ``ingest.parsers.pdf_outline.MAX_HEADING_CHARS``)."""
_NOT_TITLE_END = tuple(".,;:!?。，；：！？、")
"""A first line ending in these is a sentence, a clause or a label ("各位同事：", "Dear all,")."""


def plain_text_title(text: str) -> str:
    """The title line of a plain-text document, or ``""`` when it has none.

    A title line is the first non-blank line of ``text`` when a blank line follows it and more
    text after that, it has at most :data:`MAX_PLAIN_TITLE_CHARS` characters and a letter,
    does not end like a sentence or label (:data:`_NOT_TITLE_END`) and is no placeholder,
    caption (:func:`title_problem`) or chapter line (:func:`chapter_line`). Source: the layout of a memo or notice typed as plain
    text, title then a blank line (corpus cases a13_txt_gbk_chinese_no_spaces.txt,
    a17_txt_cp1252_french.txt); a first line that runs on into a paragraph is text.
    """
    lines = text.lstrip().split("\n", 2)
    if len(lines) < 3 or lines[1].strip() or not lines[2].strip():
        return ""
    line = " ".join(lines[0].split())
    if (len(line) > MAX_PLAIN_TITLE_CHARS or line.endswith(_NOT_TITLE_END) or title_problem(line)
            or chapter_line(line) or not re.search(r"[^\W\d_]", line)):
        return ""
    return line


COVER_TITLE_MIN_RATIO = 1.5
"""A cover line is a title line when its font is at least this many times the body text's.
Source: handbook-872p.docx's cover, "Handbook for / Chapter 13 / Standing Trustees" at 36 pt
over 12 pt body text; Word's default Heading 1 is 16 pt over 11 pt (1.45), so a heading-sized
line alone is no title line."""
COVER_LINES = 20
"""Non-empty paragraphs before the first heading looked at for a cover title (a cover page)."""


def cover_title(lines: Sequence[tuple[str, float]], body_pt: float) -> str:
    """The title a cover page shows in its largest font, or ``""``.

    Args:
        lines: the non-empty paragraphs before the document's first heading, at most
            :data:`COVER_LINES`, each with its largest font size (points).
        body_pt: the body text's font size (points).

    Returns:
        The first run of consecutive lines in the largest size, joined by spaces, when that
        size is at least :data:`COVER_TITLE_MIN_RATIO` times ``body_pt`` and the result has a
        letter, at most :data:`MAX_PLAIN_TITLE_CHARS` characters and no :func:`title_problem`,
        and does not head a division (:func:`division_level`); else ``""``.
    """
    top = max((size for _, size in lines), default=0.0)
    if top < COVER_TITLE_MIN_RATIO * body_pt:
        return ""
    run: list[str] = []
    for text, size in lines:
        if size == top:
            run.append(text)
        elif run:
            break
    title = " ".join(" ".join(run).split())
    if (len(title) > MAX_PLAIN_TITLE_CHARS or title_problem(title) or division_level(title)
            or not re.search(r"[^\W\d_]", title)):
        return ""
    return title


def once(title: str) -> str:
    """``title`` with a repetition taken once: text drawn twice on a PDF page (a form XObject
    painted twice) joins into "Hello worldHello world"; a title that is one string of two or
    more words twice, with or without whitespace between, is that string. A single word twice
    is a name ("Bora Bora", "Walla Walla") and stays."""
    s = title.strip()
    half = len(s) // 2
    for cut in (half, half + 1):
        head, tail = s[:cut].strip(), s[cut:].strip()
        if " " in head and head == tail:
            return head
    return title


def without_page_number(line: str) -> str:
    """``line`` without a page number at its start or end, and without the full stop or colon
    left before it ("50 THE SIEGE OF VICKSBURG." -> "THE SIEGE OF VICKSBURG"); unchanged when
    nothing but the number would remain."""
    rest = _EDGE_NUMBER.sub("", line).strip()
    if rest == line.strip() or not re.search(r"[^\W\d_]", rest):
        return line
    return rest.rstrip(" .:")


_DIVISION = re.compile(
    r"(title|chapter|part|book|appendix|annex|section|article|kapitel|teil|anhang|chapitre|titre|partie)"
    r"\s+(\d{1,3}|[IVXLC]{1,7}|[A-Z])\b\s*[:.\-–—]?", re.IGNORECASE)
_CJK_DIVISION = re.compile(r"第[〇零一二三四五六七八九十百千两\d]{1,8}([卷部篇集回章节])(?=[\s:：.、]|$)\s*[:：.、]?")
_LEVEL_TWO_DIVISIONS = {"section", "article", "节"}
"""Divisions inside a chapter; every other keyword is level 1. Source: the forms of statutes
(TITLE / Section), books (Part / Chapter) and Chinese novels and textbooks (第N回 or 第N章, then
第N节), as the PDF outline read them first (issue 15)."""
MAX_CHAPTER_LINE_CHARS = 100
"""A longer line of plain text is text, not a chapter line (characters; as
``ingest.parsers.pdf_outline.MAX_HEADING_CHARS``)."""
NOT_LAST = (",", ";", ".", "!", "?", "。", "！", "？", "；", "，")
"""A line ending in these is a sentence or a clause, not a heading."""


def division_level(line: str) -> int:
    """The heading level of a line that starts with a division keyword and its number: 1 for a
    title, part, chapter (第N回, 第N章, 第N卷), 2 for a section or article (第N节); 0 for none."""
    s = line.strip()
    m = _DIVISION.match(s) or _CJK_DIVISION.match(s)
    if not m:
        return 0
    return 2 if m.group(1).lower() in _LEVEL_TWO_DIVISIONS else 1


def chapter_line(line: str) -> int:
    """:func:`division_level` of one line of plain text that is a chapter line as a whole: at most
    :data:`MAX_CHAPTER_LINE_CHARS` characters, its title (what follows the number) not ending in
    sentence punctuation and not starting with a lower-case letter ("Chapter 3 shows that ..."
    is a sentence); 0 otherwise."""
    s = " ".join(line.split())
    level = division_level(s) if len(s) <= MAX_CHAPTER_LINE_CHARS else 0
    if not level:
        return 0
    m = _DIVISION.match(s) or _CJK_DIVISION.match(s)
    rest = s[m.end():].strip()
    return 0 if rest and (rest.endswith(NOT_LAST) or rest[0].islower()) else level
