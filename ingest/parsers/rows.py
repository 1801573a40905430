"""The one rendering of a table's data row, shared by every format that reads cells: CSV
(:mod:`ingest.parsers.csv`), Excel (:mod:`ingest.parsers.xlsx`) and a PDF table page
(:mod:`ingest.parsers.pdf_table`).

A row is ``column: value | column: value`` (:data:`docanchor.text.CELL_SEP` between cells): each
value says which column it is in, so a retrieved row can be read without its header. Empty
values are left out; the columns of the others stay theirs (a value is named by its own
column, never by its position among the non-empty ones).
"""

from __future__ import annotations

from collections.abc import Iterable

from docanchor.text import CELL_SEP

NAME_CHARS = 60
"""A column name is cut to this many characters."""


def column_names(header: list[str], width: int) -> list[str]:
    """``width`` column names: the header's (whitespace collapsed, cut to :data:`NAME_CHARS`),
    ``column_N`` (1-based) for blanks and columns past the header, duplicates suffixed ``_2``,
    ``_3``."""
    names: list[str] = []
    seen: dict[str, int] = {}
    for i in range(width):
        name = " ".join(header[i].split())[:NAME_CHARS] if i < len(header) else ""
        name = name or f"column_{i + 1}"
        if name in seen:
            seen[name] += 1
            name = f"{name}_{seen[name]}"
        else:
            seen[name] = 1
        names.append(name)
    return names


def labelled_row(cells: Iterable[tuple[str, str]]) -> str:
    """``(column name, value)`` pairs as one line ``name: value | name: value``; values with
    inner whitespace made single spaces, empty ones left out (``""`` when all are)."""
    return CELL_SEP.join(f"{name}: {' '.join(value.split())}" for name, value in cells if value.strip())
