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
"""

from __future__ import annotations

import re

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


def without_page_number(line: str) -> str:
    """``line`` without a page number at its start or end, and without the full stop or colon
    left before it ("50 THE SIEGE OF VICKSBURG." -> "THE SIEGE OF VICKSBURG"); unchanged when
    nothing but the number would remain."""
    rest = _EDGE_NUMBER.sub("", line).strip()
    if rest == line.strip() or not re.search(r"[^\W\d_]", rest):
        return line
    return rest.rstrip(" .:")
