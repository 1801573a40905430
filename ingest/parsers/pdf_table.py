"""Which PDF pages are numeric tables, and when their second reading is the better one.

A page that is mostly rows of figures (../shared/corpus/pdf/nics-background-checks-2015-11-rotated.pdf:
FBI NICS checks, 56 state rows of 22 cells) is read twice. pypdf lays out text in content order
and decides a space from the gap to the previous string; this producer draws each cell as its own
string in a narrow font, and pypdf glued neighbouring cells ("HandgunLong Gun", Texas
"... 0 29 20 05,7485,331 ... 0146,982" for "0 29 20 0 5,748 5,331 ... 0 146,982"). pdfminer.six
groups characters by position (:func:`ingest.parsers.pdf_miner.rows`), so cells are apart.
pypdf's layout mode (``extract_text(extraction_mode="layout")``) was tried too and glues
some of the same cells ("1,95712189").

- :func:`is_table_page`: the rule that picks the pages read twice, from pypdf's text alone.
- :func:`separates_cells`: the second reading is kept only when it loses no letter or digit and
  splits more cells apart, so a table page pypdf already reads well keeps pypdf's text.

The lines of a table page are kept apart as paragraphs (:func:`ingest.parsers.pdf._paragraphs`):
one row, one line.
"""

from __future__ import annotations

import re

TABLE_ROW_CELLS = 4
"""A line holding at least this many numeric cells is a row of figures (a state and 22 counts;
a results table's "BM25 59.1 73.7 66.9 76.7 71.1"). Prose mentions fewer numbers per line."""
TABLE_MIN_ROWS = 5
"""A table page has at least this many rows of figures..."""
TABLE_ROW_SHARE = 0.5
"""... making at least this share of its non-empty lines. Measured with pypdf over
../shared/corpus/pdf and ../shared/cases: the NICS page 56 of 66 lines (0.85); the most numeric
other pages, multi-column.pdf's result tables in two-column prose, at most 8 of 78 (0.10)."""

_NUMBER = re.compile(r"[(+\-$€£¥]?\d[\d.,%]*[)%]?")
"""A numeric cell: digits with thousands separators, decimals, a sign, currency or per cent."""


def numeric_rows(text: str) -> tuple[int, int]:
    """``(rows of figures, non-empty lines)`` of a page's text: lines with at least
    :data:`TABLE_ROW_CELLS` whitespace-separated numeric cells."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    rows = sum(1 for words in lines if sum(1 for w in words if _NUMBER.fullmatch(w)) >= TABLE_ROW_CELLS)
    return rows, len(lines)


def is_table_page(text: str) -> bool:
    """True when at least :data:`TABLE_MIN_ROWS` lines of ``text`` are rows of figures
    (:func:`numeric_rows`) and they are at least :data:`TABLE_ROW_SHARE` of its lines."""
    rows, lines = numeric_rows(text)
    return rows >= TABLE_MIN_ROWS and rows >= TABLE_ROW_SHARE * lines


def separates_cells(first: str, second: str) -> bool:
    """True when ``second`` (pdfminer's rows) is the better text of a table page read as ``first``
    (pypdf): it has no fewer letters and digits, and more whitespace-separated words (cells
    pypdf glued are apart)."""
    return _alnum(second) >= _alnum(first) and len(second.split()) > len(first.split())


def _alnum(text: str) -> int:
    return sum(1 for c in text if c.isalnum())
