"""The cells of a PDF table page, by pdfplumber (a table extractor built on pdfminer.six).

Used only for pages already judged table pages (:func:`ingest.parsers.pdf_table.is_table_page`).
pdfplumber finds the table's ruled frame (its ``lines`` strategy: the drawn rules and rectangle
edges) and then cuts it into one row per line of text (its ``text`` horizontal strategy) between
the frame's column rules, so a cell left empty stays an empty cell in its own column and no
figure moves into its neighbour's column. On
../shared/corpus/pdf/nics-background-checks-2015-11-rotated.pdf that gives every row of the
table 25 cells (a state, 23 counts with the two empty Rentals cells, its total), where a reading
of text lines gives 22 figures for a state and 24 for the totals.

The page is read in the orientation its characters stand upright
(:func:`ingest.parsers.pdf_miner.unturn_sideways`), as pdfminer's row reading does.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any, NamedTuple

from ingest.parsers import pdf_miner

LEFT_RULE_REACH = 15.0
"""``intersection_x_tolerance`` (PDF points) of the row cutting: a row's line of text may start
this far right of the frame's left rule and still close its first cell. pdfplumber's text rows
start at their first word; the NICS table's state names start 10 points right of its left rule
(43.2 and 33.15, measured), and with the default 3 the state column was left out of the table."""


class PageTable(NamedTuple):
    """A page's largest ruled table and the page's text lines above and below its frame."""

    above: list[str]
    rows: list[list[str | None]]
    """Rows of cell texts, every row as many cells as the table has columns (``""`` for an
    empty cell, ``None`` for one that a cell to its left spans)."""
    below: list[str]


def tables(data: bytes, wanted: set[int], *, max_pages: int) -> Iterator[tuple[int, PageTable]]:
    """Yield ``(page number, table)`` for the ``wanted`` pages that hold a ruled table, in page
    order: the largest table of the page (by cells).

    Raises:
        pdf_miner.TooManyPages: the file has more than ``max_pages`` pages; pdfplumber's and
            pdfminer's own exceptions pass through.
    """
    import pdfplumber
    from pdfminer.pdfpage import PDFPage
    from pdfplumber.page import Page

    with pdfplumber.open(io.BytesIO(data)) as pdf:
        for index, page_obj in enumerate(PDFPage.create_pages(pdf.doc)):
            number = index + 1
            if number > max_pages:
                raise pdf_miner.TooManyPages(number)
            if number > max(wanted, default=0):
                break
            if number not in wanted:
                continue
            pdf_miner.unturn_sideways(pdf.rsrcmgr, page_obj)
            table = _largest_table(Page(pdf, page_obj, page_number=number))
            if table is not None:
                yield number, table


def _largest_table(page: Any) -> PageTable | None:
    """The page's largest ruled table, cut one row per line of text; ``None`` when the page has
    no ruled table."""
    found = page.find_tables()
    if not found:
        return None
    frame = max(found, key=lambda t: len(t.cells))
    settings = {"vertical_strategy": "lines", "horizontal_strategy": "text",
                "intersection_x_tolerance": LEFT_RULE_REACH}
    rows = page.crop(frame.bbox).extract_table(settings) or []
    x0, top, x1, bottom = page.bbox
    above = page.crop((x0, top, x1, frame.bbox[1])).extract_text() if frame.bbox[1] > top else ""
    below = page.crop((x0, frame.bbox[3], x1, bottom)).extract_text() if frame.bbox[3] < bottom else ""
    return PageTable(above.splitlines(), rows, below.splitlines()) if rows else None
