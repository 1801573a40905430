"""A page that is a dense numeric table (../shared/corpus/pdf/nics-background-checks-2015-11-rotated.pdf:
FBI NICS checks by state, one page with ``/Rotate 90``) comes out one row per line with its cells
apart, and a question about one row finds that row.

pypdf's text of that page glues cells its producer draws close together ("HandgunLong Gun",
Texas "... 0 29 20 05,7485,331 ... 0146,982"), and the paragraph builder joined the rows into
2,000-character paragraphs. The expected rows were read with pdfminer.six's layout analysis
(the page's ``/Rotate`` left out, ``LAParams(char_margin=50)``) and checked by the table itself:
a row's last cell, its total, is the sum of its other cells (Texas 146,982, Florida 103,532). Its
cells are read by pdfplumber (ingest/parsers/pdf_cells.py) and each row names its columns.
pypdf's layout mode (``extract_text(extraction_mode="layout")``) glues them too
("0292005,7485,331").
"""

from __future__ import annotations

from pathlib import Path

import pypdf
import pytest

from docanchor.settings import Settings
from ingest.parsers import pdf_cells, pdf_miner
from ingest.parsers.pdf import parse_pdf
from ingest.parsers.pdf_table import TABLE_MIN_ROWS, is_table_page, separates_cells, table_span
from plugin.api import DocAnchor
from tests.conftest import CORPUS
from tests.fakes import HashEmbedder

NICS = CORPUS / "pdf" / "nics-background-checks-2015-11-rotated.pdf"
MULTI_COLUMN = CORPUS / "pdf" / "multi-column.pdf"
TEXAS = "Texas 21,550 56,941 51,670 2,532 3,048 0 29 20 0 5,748 5,331 21 1 2 1 42 36 4 1 5 0 146,982"


OHIO_HANDGUN = "Handgun: 34,878"  # the state's handgun checks (the column after Permit), read off the page


@pytest.fixture(scope="module")
def nics():
    return parse_pdf(NICS.read_bytes(), NICS.name)


def _lines(parsed) -> list[str]:
    return [" ".join(line.split()) for line in parsed.text.splitlines()]


def _rows(parsed) -> list[str]:
    return [parsed.text[b.start:b.end] for b in parsed.blocks if b.kind == "row"]


def _cells(row: str) -> dict[str, str]:
    return dict(cell.split(": ", 1) for cell in row.split(" | "))


def test_each_row_of_the_table_says_which_column_each_figure_is_in(nics):
    """Before pdfplumber the row read "Ohio 9,338 34,878 31,817 ..." with no column names."""
    rows = _rows(nics)
    ohio = next(r for r in rows if r.startswith("State / Territory: Ohio |"))
    assert f"Permit: 9,338 | {OHIO_HANDGUN} | Long Gun: 31,817" in ohio
    assert _cells(ohio)["Pre-Pawn Handgun"] == "24" and _cells(ohio)["Totals"] == "81,616"
    assert "HandgunLong" not in nics.text
    assert len(rows) == 56 and nics.flags.get("table_pages") == [1]


def test_the_column_group_line_is_no_heading(nics):
    headings = [nics.text[b.start:b.end] for b in nics.blocks if b.kind == "heading"]
    assert not any("Pre-Pawn" in h for h in headings), headings


def test_a_state_row_has_as_many_cells_as_the_header():
    """Empty Rentals cells stay empty cells in their columns: before, a state row had 22 figures
    where the header and the totals had 24, every later figure one column off."""
    (_, found), = pdf_cells.tables(NICS.read_bytes(), {1}, max_pages=10)
    header = next(i for i, row in enumerate(found.rows) if row[0] == "State / Territory")
    ohio = next(row for row in found.rows if row[0] == "Ohio")
    assert len(ohio) == len(found.rows[header]) == 25
    assert ohio[16:18] == ["", ""] and found.rows[header][16] == "Handgun"  # Rentals: empty in Ohio


def test_each_rows_total_is_the_sum_of_its_cells(nics):
    """The table checks its own reading: a cell glued to its neighbour or split in two breaks the
    sum. California's thousands are grouped with spaces ("98 452"); pdfplumber keeps them one cell."""
    summed = []
    for row in _rows(nics):
        cells = _cells(row)
        figures = [int(v.replace(",", "")) for k, v in cells.items() if k not in ("State / Territory", "Totals")]
        if sum(figures) == int(cells["Totals"].replace(",", "")):
            summed.append(cells["State / Territory"])
    assert len(summed) == 56 and "California" in summed and "Totals" in summed, summed


def test_the_table_keeps_every_digit(nics):
    plain = pypdf.PdfReader(NICS).pages[0].extract_text()
    assert sum(c.isdigit() for c in nics.text) >= sum(c.isdigit() for c in plain)


def test_a_question_about_a_states_handgun_checks_finds_its_row_labelled(tmp_path: Path):
    da = DocAnchor(Settings(data_dir=tmp_path / "data"), embedder=HashEmbedder())
    da.ingest_file(NICS)
    res = da.retrieve("Ohio handgun", 300)
    assert any("Ohio" in s.text and OHIO_HANDGUN in s.text for s in res.sections), [s.text[:80] for s in res.sections]


def test_pdfminer_reads_the_rotated_page_in_the_orientation_its_text_is_upright():
    text = dict(pdf_miner.rows(NICS.read_bytes(), {1}, max_pages=10))[1]
    assert TEXAS in [" ".join(line.split()) for line in text.splitlines()]


def test_pdfminer_keeps_the_turn_of_a_rotated_page_whose_text_it_sets_upright():
    zen = CORPUS / "pdf" / "zen_of_python_corrupted.pdf"  # /Rotate 90, strings drawn sideways
    text = dict(pdf_miner.rows(zen.read_bytes(), {1}, max_pages=10))[1]
    assert "Beautiful is better than ugly." in text.splitlines()


# ---------------------------------------------------------------- the rule (ingest.parsers.pdf_table)


def test_a_page_of_numeric_rows_is_a_table_page():
    rows = [f"Region {i} 1,234 5,678 {i} 90 12.5%" for i in range(TABLE_MIN_ROWS)]
    assert is_table_page("\n".join(["Checks by region", *rows]))
    assert not is_table_page("\n".join(rows[:-1]))  # too few rows
    prose = ["The reader scored 39.8 exact match on NQ and 41.5 on TriviaQA in 2020."] * 20
    assert not is_table_page("\n".join(prose + rows))  # rows a small share of the page's lines


def test_pages_of_prose_with_a_table_are_not_table_pages():
    reader = pypdf.PdfReader(MULTI_COLUMN)
    for number in (4, 5, 6, 8, 12):  # DPR paper pages holding result tables (most numeric rows of the corpus after NICS)
        assert not is_table_page(reader.pages[number - 1].extract_text()), number


def test_the_table_is_the_longest_run_of_rows_under_its_header_line():
    rows = [f"Region {i} 1,234 5,678 {i} 90" for i in range(TABLE_MIN_ROWS)]
    lines = ["Checks by region", "Region Permit Handgun Long Gun Other", *rows, "Notes: counts, not sales"]
    assert table_span(lines) == (1, 1 + 1 + TABLE_MIN_ROWS)
    assert table_span(rows) == (0, TABLE_MIN_ROWS)  # no header line above
    assert table_span(lines[:4]) is None  # too few rows


def test_the_other_reading_is_taken_only_when_it_separates_cells_and_loses_nothing():
    glued = "Texas 0 29 20 05,7485,331 21"
    apart = "Texas 0 29 20 0 5,748 5,331 21"
    assert separates_cells(glued, apart)
    assert not separates_cells(apart, apart)  # no better: keep the first reading
    assert not separates_cells(glued, "Texas 0 29 20 0 5,748 21")  # lost a cell
