"""Embedding context for the chunks of a table cut over several chunks: a CSV row too wide for
one chunk, and a Markdown, HTML or DOCX table too long for one.

``ingest.parsers.csv`` renders each data row as one ``row`` block ``column: value | column: value``.
A row over the chunk size is cut into several chunks, and a chunk holding, say, ``M49: 578`` does
not say which country it belongs to. Such a chunk gets :attr:`docanchor.types.Chunk.context`: the
row's *label*, prepended to its text for its embedding and BM25 terms only
(:func:`docanchor.types.embedding_input`); its ``text`` and offsets stay exact.

A ``table`` block (Markdown ``| a | b |`` lines; HTML and DOCX rows ``cell | cell``, one per line)
over the chunk size is cut between its rows, and the chunks after the first do not hold its
header row: ``| Berth 5 | 240 | 2 |`` says nothing of length or cranes, so a question about berth
5's length found the table's introduction instead. Such a chunk gets the table's header row as
its context (:func:`table_context`), cut and fitted the same way.

The label (:func:`row_label`) is the row's cell in the table's name column (:func:`name_column`)
when there is one, else the row's first :data:`ROW_CONTEXT_CELLS` cells. A table's first column is
usually its key (``Country Name``, ``invoice_id``), but not always: country-codes.csv starts with
``FIFA: NOR | Dial: 47`` and says ``Norway`` only in its 21st column, so first cells alone left
"What is the M49 code of Norway?" answered with Svalbard's row (tests/test_row_context.py).
"""

from __future__ import annotations

import re
from typing import Sequence

from docanchor.embedder import Embedder
from docanchor.text import CELL_SEP
from docanchor.tokens import TokenCounter
from docanchor.types import embedding_input

ROW_CONTEXT_CELLS = 2
"""Without a name column, a label holds at most this many leading cells: a table's first column
or two are usually its key (``Country Name | Country Code``, ``invoice_id | customer``); more
cells would dilute the chunk's own cells in its vector."""
ROW_CONTEXT_TOKENS = 30
"""A label holds at most this many budget tokens (cut at a token boundary): under a third of a
100-token chunk, so the chunk's own text still dominates its vector."""
NAME_WORDS = frozenset({"name", "title"})
"""A column whose header has one of these words (``Country Name``, ``official_name_en``) may
name its rows."""
NAME_MIN_PRESENT = 0.9
"""A name column has a value in at least this share of rows (empty cells are left out of rows)."""
NAME_MIN_DISTINCT = 0.95
"""A name column's values are distinct in at least this share of the rows that have one (a
``Region Name`` with 5 values names no row)."""
_WORD = re.compile(r"[^\W\d_]+")


def cells(row: str) -> list[tuple[str, str]]:
    """``(column, value)`` pairs of a rendered row, in order; a piece without ``": "`` (a value
    holding ``" | "``) is left out."""
    out = []
    for cell in row.split(CELL_SEP):
        column, sep, value = cell.partition(": ")
        if sep:
            out.append((column, value))
    return out


def name_column(rows: Sequence[str]) -> str | None:
    """The column that names a table's rows, or ``None``.

    Candidates: a header with a word in :data:`NAME_WORDS`, a value in at least
    :data:`NAME_MIN_PRESENT` of ``rows``, distinct in at least :data:`NAME_MIN_DISTINCT` of them.
    Among candidates, the one with the largest share of ASCII values (the leftmost on a tie):
    the embedder (all-MiniLM-L6-v2) is an English model that reads most non-Latin letters as
    ``[UNK]``, so of ``official_name_en``/``_fr``/``_ar``/``_cn`` it picks ``_en`` (0.98 ASCII
    on country-codes.csv, ``_fr`` 0.59, ``_ar`` 0).

    Args:
        rows: the table's rendered rows (``column: value | ...``).
    """
    if not rows:
        return None
    values: dict[str, list[str]] = {}
    for row in rows:
        for column, value in cells(row):
            if NAME_WORDS & set(_WORD.findall(column.casefold())):
                values.setdefault(column, []).append(value)
    best, best_share = None, -1.0
    for column, vals in values.items():  # header order: dicts keep insertion order
        if len(vals) < NAME_MIN_PRESENT * len(rows) or len(set(vals)) < NAME_MIN_DISTINCT * len(vals):
            continue
        share = sum(v.isascii() for v in vals) / len(vals)
        if share > best_share:
            best, best_share = column, share
    return best


def row_label(row: str, name: str | None) -> list[str]:
    """The cells that name ``row``: its ``name`` cell when it has one, else its first
    :data:`ROW_CONTEXT_CELLS` cells (each ``column: value`` as rendered)."""
    if name is not None:
        hit = next((f"{c}: {v}" for c, v in cells(row) if c == name), None)
        if hit is not None:
            return [hit]
    return row.split(CELL_SEP)[:ROW_CONTEXT_CELLS]


def row_context(row: str, piece: str, name: str | None, counter: TokenCounter, embedder: Embedder) -> str:
    """The embedding context of ``piece``, a chunk cut from the rendered row ``row``.

    Args:
        row: the whole row block's text.
        piece: the chunk's text (part of ``row``).
        name: the table's name column (:func:`name_column`), or ``None``.
        counter: budget tokens (:data:`ROW_CONTEXT_TOKENS`).
        embedder: its ``count_tokens`` and ``token_limit`` (word pieces).

    Returns:
        The row's label (:func:`row_label`) fitted to ``piece`` by :func:`fit_label`.
    """
    return fit_label(row_label(row, name), piece, counter, embedder)


def header_cells(table: str) -> list[str]:
    """The cells of a table block's first line, its header row: ``| a | b |`` (Markdown) or
    ``a | b`` (HTML and DOCX rows) gives ``["a", "b"]``; empty cells are left out."""
    first = table.lstrip().split("\n", 1)[0].strip()
    return [c.strip() for c in first.strip("|").split("|") if c.strip()]


def header_end(table: str) -> int:
    """Characters of a table block up to the end of its header: the first line, and a Markdown
    delimiter row (``|---|:--:|``) right after it."""
    lines = table.split("\n")
    end = len(lines[0])
    if len(lines) > 1 and "-" in lines[1] and not lines[1].strip(" |:-\t"):
        end += 1 + len(lines[1])
    return end


def table_context(table: str, piece: str, counter: TokenCounter, embedder: Embedder) -> str:
    """The embedding context of ``piece``, a chunk cut from a ``table`` block after its header:
    the header row's cells fitted by :func:`fit_label` (``""`` when ``piece`` holds them)."""
    return fit_label(header_cells(table), piece, counter, embedder)


def fit_label(label: Sequence[str], piece: str, counter: TokenCounter, embedder: Embedder) -> str:
    """``label``'s cells joined by :data:`CELL_SEP` and cut to :data:`ROW_CONTEXT_TOKENS` budget
    tokens; "" when ``piece`` already holds it. Fewer cells, or "", when label, a line break and
    ``piece`` would exceed the embedder's word-piece limit (the model would silently drop the
    end of the chunk)."""
    for n in range(len(label), 0, -1):
        context = counter.truncate(CELL_SEP.join(label[:n]), ROW_CONTEXT_TOKENS).rstrip()
        if not context or context in piece:
            return ""
        if embedder.count_tokens(embedding_input(piece, context)) <= embedder.token_limit:
            return context
    return ""

