"""Which PDF pages are numeric tables, and when their second reading is the better one.

A page that is mostly rows of figures (../shared/corpus/pdf/nics-background-checks-2015-11-rotated.pdf:
FBI NICS checks, 55 rows of states and territories and a totals row, 22 figures each) is read twice. pypdf lays out text in content order
and decides a space from the gap to the previous string; this producer draws each cell as its own
string in a narrow font, and pypdf glued neighbouring cells ("HandgunLong Gun", Texas
"... 0 29 20 05,7485,331 ... 0146,982" for "0 29 20 0 5,748 5,331 ... 0 146,982"). pdfminer.six
groups characters by position (:func:`ingest.parsers.pdf_miner.rows`), so cells are apart.
pypdf's layout mode (``extract_text(extraction_mode="layout")``) was tried too and glues
some of the same cells ("1,95712189").

- :func:`is_table_page`: the rule that picks the pages read twice, from pypdf's text alone.
- :func:`separates_cells`: the second reading is kept only when it loses no letter or digit and
  splits more cells apart, so a table page pypdf already reads well keeps pypdf's text.
- :func:`table_span`: the lines of a table page that are its table, a header line and the run
  of rows under it. They become one ``table`` block, one row per line, so the chunker cuts it
  between rows and gives the chunks after the first the header as context
  (:mod:`ingest.row_context`): a chunk holding "Texas 21,550 56,941 ..." is found by "Texas
  handgun". The page's other lines are paragraphs of their own.
- :func:`labelled_table`: the better reading when pdfplumber finds the page's cells
  (:mod:`ingest.parsers.pdf_cells`): each row of figures names the column of each of its values
  (``State / Territory: Ohio | Permit: 9,338 | Handgun: 34,878 | ...``), the way a CSV row does
  (:mod:`ingest.parsers.rows`). A reading of text lines cannot tell columns: an empty cell
  vanishes and moves every later figure one column left, and California's thousands grouped
  with spaces ("98 452") read as two cells.
"""

from __future__ import annotations

import re

from ingest.parsers.rows import column_names, labelled_row

TABLE_ROW_CELLS = 4
"""A line holding at least this many numeric cells is a row of figures (a state and its 22
counts; multi-column.pdf's "Single ORQA (Lee et al., 2019) 33.3 45.0 36.4 30.1 20.2"). Prose
mentions fewer numbers per line."""
TABLE_MIN_ROWS = 5
"""A table page has at least this many rows of figures..."""
TABLE_ROW_SHARE = 0.5
"""... making at least this share of its non-empty lines. Measured with pypdf over
../shared/corpus/pdf and ../shared/cases: the NICS page 56 of 66 lines (0.85); the most numeric
other pages, multi-column.pdf's result tables in two-column prose, at most 8 of 78 (0.10)."""

_NUMBER = re.compile(r"[(+\-$€£¥]?\d[\d.,%]*[)%]?")
"""A numeric cell: digits with thousands separators, decimals, a sign, currency or per cent."""


def is_row(line: str) -> bool:
    """True when ``line`` holds at least :data:`TABLE_ROW_CELLS` whitespace-separated numeric cells."""
    return sum(1 for w in line.split() if _NUMBER.fullmatch(w)) >= TABLE_ROW_CELLS


def numeric_rows(text: str) -> tuple[int, int]:
    """``(rows of figures, non-empty lines)`` of a page's text (:func:`is_row`)."""
    lines = [line for line in text.splitlines() if line.strip()]
    return sum(1 for line in lines if is_row(line)), len(lines)


def table_span(lines: list[str]) -> tuple[int, int] | None:
    """``(start, end)``: the slice of ``lines`` that is the table, the longest run of rows
    (:func:`is_row`; the first on a tie) with the line before it when that is not a row (the
    column headers); ``None`` when no run has :data:`TABLE_MIN_ROWS` rows."""
    best: tuple[int, int] | None = None
    start = None
    for i, line in enumerate([*lines, ""]):
        if is_row(line):
            start = i if start is None else start
            continue
        if start is not None and i - start >= TABLE_MIN_ROWS and (best is None or i - start > best[1] - best[0]):
            best = (start, i)
        start = None
    if best is None:
        return None
    head = best[0] - 1
    return (head if head >= 0 and lines[head].strip() else best[0]), best[1]


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


def labelled_table(cells: list[list[str | None]]) -> tuple[list[str], list[str], list[str]] | None:
    """A table page's cells (:func:`ingest.parsers.pdf_cells.tables`: rows of equal length,
    ``None`` for a cell spanned by the one to its left) as
    ``(lines before, labelled rows, lines after)``; ``None`` when they hold no run of
    :data:`TABLE_MIN_ROWS` rows of figures (:func:`is_row`) under a header row.

    The labelled rows are the run's rows, each ``column: value | ...``
    (:func:`ingest.parsers.rows.labelled_row`), the columns named by the header row, the row
    just above the run, and by the group row above that when it has a cell over several columns
    (the NICS table's "Pre-Pawn" over "Handgun Long Gun *Other": "Pre-Pawn Handgun"). The
    other rows are lines of their non-empty cells.
    """
    rows = [[cell or "" for cell in row] for row in cells]
    lines = [" ".join(cell for cell in row if cell.strip()) for row in rows]
    span = table_span(lines)
    if span is None or span[0] == _first_row(lines, span):
        return None
    head, end = span
    start = head + 1
    groups = _groups(cells[head - 1]) if head > 0 and _is_group_row(cells[head - 1]) else [""] * len(rows[head])
    header = [" ".join(f"{group} {name}".split()) for group, name in zip(groups, rows[head])]
    names = column_names(header, len(rows[head]))
    labelled = [labelled_row(zip(names, row)) for row in rows[start:end]]
    before = lines[:head - 1] if groups != [""] * len(rows[head]) else lines[:head]
    return [ln for ln in before if ln], labelled, [ln for ln in lines[end:] if ln]


def _first_row(lines: list[str], span: tuple[int, int]) -> int:
    """The first line of ``span`` that is a row of figures (``span`` starts at its header
    line when it has one)."""
    return span[0] if is_row(lines[span[0]]) else span[0] + 1


def _is_group_row(row: list[str | None]) -> bool:
    """True when ``row`` has at least two non-empty cells, one of them spanning the next."""
    filled = [i for i, cell in enumerate(row) if cell and cell.strip()]
    return len(filled) >= 2 and any(i + 1 < len(row) and row[i + 1] is None for i in filled)


def _groups(row: list[str | None]) -> list[str]:
    """For each column, the group row's cell over it: its own cell, or the cell that spans it
    (``None`` cells continue the one to their left)."""
    groups, current = [], ""
    for cell in row:
        current = current if cell is None else " ".join(cell.split())
        groups.append(current)
    return groups
