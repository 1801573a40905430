"""Excel workbooks (XLSX, XLSM): each visible sheet like a CSV file, streamed with openpyxl.

openpyxl's read-only mode streams each sheet's XML row by row (its ``WorkSheetParser``), so a
sheet of 100,000 rows never becomes a cell grid in memory; only the text that is indexed is kept.
``data_only`` gives formulas' cached values (what Excel last showed), never the formulas.

Per visible sheet (its 1-based position among all sheets is the block's ``page``, cited as
"sheet N", and its name is a level-1 heading):

- the first non-empty visible row is the header when it holds text (else columns are
  ``column_N``); names and the typed schema come from the CSV parser's rules
  (``ingest.parsers.csv``: ``Year:int[1960–2018]``, ``Country:str(263 distinct)``);
- a ``table`` block with the sheet's schema, then one ``row`` block per data row, rendered
  ``row N | column: value | column: value`` (N is Excel's row number, empty cells left out);
- a merged range has its value in its first cell only (as Excel stores it), so it appears once.

Hidden and very hidden sheets, hidden rows and hidden columns are counted in
``flags["hidden_sheets"]``, ``flags["hidden_rows"]`` and ``flags["hidden_columns"]`` and not
indexed. The anchor's schema (``ParsedDocument.summary``) lists every visible sheet.
"""

from __future__ import annotations

import datetime as dt
import io
from pathlib import PurePath

from docanchor.display import counted
from docanchor.errors import DocumentError
from docanchor.text import CELL_SEP
from docanchor.types import ParsedDocument
from ingest.builder import DocumentBuilder
from ingest.parsers.csv import _Column
from ingest.parsers.rows import column_names, labelled_row
from ingest.parsers.package import malformed, open_package

LABEL = "Excel file"
MAX_CELL_CHARS = 2000
"""A cell's text beyond this many characters is cut (a cell holds at most 32,767 in Excel)."""


def parse_xlsx(data: bytes, filename: str | None = None) -> ParsedDocument:
    """Parse an Excel workbook.

    Returns:
        A :class:`ParsedDocument` of ``doc_type="xlsx"``: ``n_pages`` is the sheet count,
        ``summary`` the schema lines, ``flags["rows"]`` the data rows indexed.

    Raises:
        DocumentError: ``empty_file``; ``malformed`` for a damaged workbook; ``xml_entities`` (an
            XML bomb); ``no_text`` when no visible sheet has a value.
        TooLarge: ``too_large`` for a zip bomb.
    """
    open_package(data, LABEL).close()
    import openpyxl

    try:
        wb = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises KeyError, ValueError, zipfile and XML errors alike
        raise malformed(LABEL, f"openpyxl cannot open it ({type(exc).__name__})") from exc
    title = " ".join((wb.properties.title or "").split())[:200] if wb.properties else ""
    b = DocumentBuilder("xlsx", title=title or (PurePath(filename).stem[:200] if filename else ""))
    summary: list[str] = []
    hidden = {"sheets": 0, "rows": 0, "columns": 0}
    total_rows = 0
    try:
        sheets = wb.worksheets
        for number, ws in enumerate(sheets, 1):
            if ws.sheet_state != "visible":
                hidden["sheets"] += 1
                continue
            total_rows += _sheet(b, wb, ws, number, summary, hidden)
    except DocumentError:
        raise
    except Exception as exc:
        raise malformed(LABEL, f"a sheet cannot be read ({type(exc).__name__})") from exc
    finally:
        wb.close()
    parsed = b.build(n_pages=len(sheets))
    if not parsed.blocks:
        raise DocumentError("The workbook's visible sheets hold no values; nothing can be indexed.", code="no_text")
    visible = len(sheets) - hidden["sheets"]
    parsed.summary = [f"{counted(visible, 'sheet')}, {counted(total_rows, 'row')}"] + summary
    parsed.flags["rows"] = total_rows
    for kind, n in hidden.items():
        if n:
            parsed.flags[f"hidden_{kind}"] = n
    return parsed


def _sheet(b: DocumentBuilder, wb, ws, number: int, summary: list[str], hidden: dict) -> int:
    """Add one sheet's schema and rows; return its data rows. Rows are rendered as they stream
    in (only their text is kept), the schema is added before them once the sheet is read."""
    from openpyxl.worksheet._reader import WorkSheetParser

    names: list[str] = []
    columns: list[_Column] = []
    lines: list[str] = []
    with ws._get_source() as src:
        parser = WorkSheetParser(src, ws._shared_strings, data_only=True, epoch=wb.epoch,
                                 date_formats=wb._date_formats, timedelta_formats=wb._timedelta_formats)
        hidden_cols: set[int] | None = None
        for index, cells in parser.parse():
            if hidden_cols is None:
                hidden_cols = _hidden_columns(parser.column_dimensions)
                hidden["columns"] += len(hidden_cols)
            if (parser.row_dimensions.pop(str(index), None) or {}).get("hidden") in ("1", "true"):
                hidden["rows"] += 1
                continue
            values = {c["column"]: _text(c["value"]) for c in cells
                      if c["value"] is not None and c["column"] not in hidden_cols}
            values = {col: v for col, v in values.items() if v}
            if not values:
                continue
            if not names and not lines and any(not _is_number(v) for v in values.values()):
                width = max(values)
                names = column_names([values.get(i, "") for i in range(1, width + 1)], width)
                columns = [_Column(n) for n in names]
                continue
            while len(names) < max(values):
                names.append(f"column_{len(names) + 1}")
                columns.append(_Column(names[-1]))
                columns[-1].nulls = len(lines)
            for i, column in enumerate(columns, 1):
                column.see(values.get(i, ""))
            lines.append(f"row {index}{CELL_SEP}" + labelled_row((names[col - 1], v) for col, v in sorted(values.items())))
    if not names:
        return 0
    b.reset_headings()
    shape = f"{counted(len(lines), 'row')} × {counted(len(names), 'column')}"
    b.heading(ws.title, level=1, page=number)
    b.add(f"Sheet {ws.title} schema: {shape}\n" + "\n".join(c.describe() for c in columns), "table",
          page=number, raw=True)
    for line in lines:
        b.add(line, "row", page=number)
    summary.append(f"{ws.title}: {shape}")
    summary.extend(f"{ws.title}.{c.describe()}" for c in columns)
    return len(lines)


def _hidden_columns(dimensions: dict) -> set[int]:
    out: set[int] = set()
    for attrs in dimensions.values():
        if attrs.get("hidden") in ("1", "true"):
            out.update(range(int(attrs.get("min", 0)), int(attrs.get("max", 0)) + 1))
    return out


def _text(value) -> str:
    """A cell value as text: dates as ISO 8601, whole floats without ``.0``, text one line."""
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        text = value.isoformat()
        return text[:-9] if text.endswith("T00:00:00") else text
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return " ".join(str(value).split())[:MAX_CELL_CHARS]


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False
