"""CSV: a compact schema as the anchor, and one self-describing block per data row.

Parsing uses the standard :mod:`csv` module (RFC 4180 quoting: quoted commas, doubled quotes and
newlines inside fields), with the dialect sniffed from the start of the file. The schema goes to
:attr:`ParsedDocument.summary` as short lines::

    17,195 rows × 4 columns (comma-separated)
    Country Name:str(263 distinct)
    Year:int[1960–2018]
    Value:float[4.28K–7.59B]
    postcode:str(6 distinct) 1 null

Each data row becomes a ``row`` block rendered ``column: value | column: value``
(:func:`ingest.parsers.rows.labelled_row`: empty values left out, inner newlines as spaces), so
every retrieved row names its columns.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import PurePath

from docanchor.display import counted
from docanchor.errors import DocumentError
from docanchor.types import ParsedDocument
from ingest.builder import DocumentBuilder
from ingest.parsers.rows import column_names, labelled_row
from ingest.parsers.text import decode_text

SNIFF_CHARS = 64 * 1024
"""How much of the decoded text the dialect sniffer reads (characters)."""

FIELD_LIMIT_CHARS = 1024 * 1024
"""Largest single field accepted (characters); larger ones mean a broken quote."""

DISTINCT_CAP = 100_000
"""Distinct values tracked per column; above it the count is shown as ``>100000``."""

ENUM_MAX = 4
"""A text column with at most this many distinct short values lists them: ``str{paid,open}``."""

NULL_TOKENS = frozenset({"", "n/a", "null", "none", "nan", "-", "#n/a"})

_INT = re.compile(r"^[+-]?(?:0|[1-9]\d*)$")
_FLOAT = re.compile(r"^[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?$")
_GROUPED = re.compile(r"^[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?")


@dataclass
class _Column:
    name: str
    nulls: int = 0
    kind: str = "int"  # narrowed as values arrive: int -> float -> str; or date
    low: float | str | None = None
    high: float | str | None = None
    distinct: set[str] = field(default_factory=set)

    def see(self, value: str) -> None:
        v = value.strip()
        if v.lower() in NULL_TOKENS:
            self.nulls += 1
            return
        if len(self.distinct) <= DISTINCT_CAP:
            self.distinct.add(v)
        if self.kind == "str":
            return
        number = _number(v)
        if number is not None and self.kind in ("int", "float"):
            if self.kind == "int" and not _INT.match(v.replace(",", "")):
                self.kind = "float"
            self._range(number)
        elif _DATE.match(v) and (self.kind == "date" or self.low is None):
            self.kind = "date"
            self._range(v[:10])
        else:
            self.kind = "str"

    def _range(self, value: float | str) -> None:
        self.low = value if self.low is None or value < self.low else self.low
        self.high = value if self.high is None or value > self.high else self.high

    def describe(self) -> str:
        filled = len(self.distinct) > 0
        if not filled:
            text = f"{self.name}:empty"
        elif self.kind in ("int", "float", "date"):
            text = f"{self.name}:{self.kind}[{_human(self.low)}–{_human(self.high)}]"
        else:
            many = len(self.distinct) > DISTINCT_CAP
            values = sorted(self.distinct)
            if not many and len(values) <= ENUM_MAX and all(len(v) <= 20 for v in values):
                text = f"{self.name}:str{{{','.join(values)}}}"
            else:
                text = f"{self.name}:str({'>' + str(DISTINCT_CAP) if many else len(values)} distinct)"
        return text + (f" {self.nulls} null" if self.nulls else "")


def _number(v: str) -> float | None:
    """A number, or ``None``: leading-zero codes such as ``04412`` stay text; ``1,250.00`` is
    one grouped number."""
    digits = v.lstrip("+-")
    if len(digits) > 1 and digits[0] == "0" and digits[1].isdigit():
        return None
    if _FLOAT.match(v):
        return float(v)
    if _GROUPED.match(v):
        return float(v.replace(",", ""))
    return None


def _human(x: float | str | None) -> str:
    """1234567 -> ``1.23M``; below 10,000 plain (years stay ``1960``); dates as given."""
    if x is None or isinstance(x, str):
        return str(x)
    ax = abs(x)
    for size, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e4, "K")):
        if ax >= size:
            if suffix == "K" and ax < 1e6:
                size = 1e3
            return f"{x / size:.3g}{suffix}"
    if float(x).is_integer():
        return str(int(x))
    if ax < 1:
        return f"{x:.3g}"
    return f"{x:.2f}".rstrip("0").rstrip(".")


def parse_csv(data: bytes, filename: str | None = None) -> ParsedDocument:
    """Parse a CSV (or TSV) file.

    Returns:
        A :class:`ParsedDocument` with ``summary`` (schema lines), a first ``table`` block
        holding the schema, then one ``row`` block per data record.

    Raises:
        DocumentError: ``empty_file``; ``malformed`` when the file is not delimited text
            (an unterminated quote, a field over :data:`FIELD_LIMIT_CHARS`).
    """
    if not data:
        raise DocumentError("The file is empty (0 bytes); upload a file with content.", code="empty_file")
    text, encoding = decode_text(data)
    if text.startswith("\ufeff"):
        text = text[1:]
    dialect = _dialect(text, filename)
    rows = _read(text, dialect)
    if not rows:
        raise DocumentError("The CSV file has no rows; upload a file with a header and data.", code="no_text")

    header = rows[0]
    has_header = not all(_number(c.strip()) is not None or not c.strip() for c in header)
    width = max(len(r) for r in rows)
    names = column_names(header if has_header else [], width)
    body = rows[1:] if has_header else rows
    columns = [_Column(n) for n in names]
    for row in body:
        for col, value in zip(columns, row):
            col.see(value)
        for col in columns[len(row):]:
            col.nulls += 1

    delim = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}.get(dialect.delimiter, repr(dialect.delimiter))
    summary = [f"{counted(len(body), 'row')} × {counted(len(names), 'column')} ({delim}-separated)"]
    summary += [c.describe() for c in columns]

    title = PurePath(filename).stem[:200] if filename else "CSV table"
    b = DocumentBuilder("csv", title=title)
    b.add("Table schema: " + "\n".join(summary), "table", raw=True)
    for row in body:
        line = labelled_row(zip(names, row))
        if line:
            b.add(line, "row")
    parsed = b.build()
    parsed.summary = summary
    parsed.flags.update({"encoding": encoding, "rows": len(body), "columns": len(names)})
    return parsed


def _dialect(text: str, filename: str | None) -> type[csv.Dialect] | csv.Dialect:
    if filename and filename.lower().endswith(".tsv"):
        return csv.excel_tab
    sample = text[:SNIFF_CHARS]
    if len(text) > SNIFF_CHARS:
        sample = sample[: sample.rfind("\n") + 1] or sample
    try:
        sniffed = csv.Sniffer().sniff(sample, delimiters=",;\t|")
    except csv.Error:
        return csv.excel
    # The sniffer guesses quoting rules poorly; keep RFC 4180 quoting with its delimiter.
    class Sniffed(csv.excel):
        delimiter = sniffed.delimiter

    return Sniffed


def _read(text: str, dialect) -> list[list[str]]:
    old = csv.field_size_limit()
    try:
        csv.field_size_limit(FIELD_LIMIT_CHARS)
        return [r for r in csv.reader(io.StringIO(text, newline=""), dialect) if any(c.strip() for c in r)]
    except csv.Error as exc:
        raise DocumentError(
            f"The CSV file could not be read ({exc}); check its quoting and save it again as CSV.",
            code="malformed",
        ) from exc
    finally:
        csv.field_size_limit(old)
