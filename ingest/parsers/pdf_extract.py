"""pypdf text of a chosen part of a page: the page's visible text without hidden or repeated
draws, its hidden text alone, and vertical CJK columns in reading order.

pypdf extracts whole pages. To leave operators out, their strings are emptied in a rewritten
copy of the page's content stream (and of each Form XObject that :mod:`ingest.parsers.pdf_visibility`
walked), pypdf extracts that, and the originals are put back: positions, fonts and every other
operator stay, so pypdf lays out the rest exactly as it would have.

Vertical writing (ISO 32000-1 9.7.4.3, fonts in writing mode 1) is read top to bottom in
columns that follow each other right to left (the convention of Chinese, Japanese and Korean
vertical text). pypdf lays out text by rows, so vertical strings are left out of the page's
text and written again as one row per column, columns ordered right to left and strings top
to bottom within a column (:data:`COLUMN_TOLERANCE_EM`).

Word spacing: pypdf (7.x) measures a shown string without the word spacing ``Tw`` its spaces
get (ISO 32000-1 9.3.3), so where a producer starts a new string inside a word after a line
set with ``Tw`` (../shared/corpus/pdf/dmca.pdf: "(... computer programs i) Tj 326.64 0 TD (n) Tj"
with ``1.2863 Tw``), the next string seems to start further right than the last one ended and
pypdf writes a space inside the word ("i n", "sect ion", "copyrigh t"). The copy pypdf reads
shows such strings as ``TJ`` arrays with the word spacing written as an offset after each space
(:func:`_word_spaced`): the glyphs land where they are drawn, and pypdf counts the offsets.
"""

from __future__ import annotations

import re
from typing import Any

from ingest.parsers.pdf_visibility import PageInk, Show

COLUMN_TOLERANCE_EM = 0.6
"""Vertical strings whose x positions differ by less than this fraction of their font size
belong to one column (full-width CJK glyphs are one em wide, so neighbouring columns sit
at least about 1 em apart)."""

_SHOW_OPS = {b"Tj", b"TJ", b"'", b'"'}
_SPACE_END = re.compile(b"(?<= )")


def plain(pobj: Any) -> str:
    """pypdf's text of the page as its content stands."""
    return pobj.extract_text() or ""


def text_without(reader: Any, pobj: Any, ink: PageInk, drop: set[tuple[int, int]]) -> str:
    """The page's text with the shows in ``drop`` (``(stream, index)`` pairs) emptied.

    The page's content and every walked Form XObject are handed to pypdf already parsed
    (pypdf reuses a ``ContentStream`` it is given instead of parsing the bytes again), with
    their original bytes (:func:`_parsed_stream`), and the page and its resources are put back
    as they were afterwards."""
    undo: list[tuple[Any, str, Any]] = []
    spaced = _spaced_shows(ink)
    try:
        ops = _word_spaced(_blanked(ink.page_ops, {i for s, i in drop if s == 0}), spaced.get(0, {}))
        _set_contents(pobj, reader, ops, ink.page_data)
        for key, sites in ink.form_sites.items():
            ops = ink.form_ops.get(key)
            if ops is None:
                continue
            ops = _word_spaced(_blanked(ops, {i for s, i in drop if s == key}), spaced.get(key, {}))
            stream = _form_stream(ink.forms[key], reader, ops, ink.form_data.get(key, b""))
            for xobjects, name in sites:
                undo.append((xobjects, name, xobjects.raw_get(name)))
                xobjects[_name(name)] = stream
        return plain(pobj)
    finally:
        for xobjects, name, original in reversed(undo):
            xobjects[_name(name)] = original
        _set_contents(pobj, reader, ink.page_ops, ink.page_data)


def only(ink: PageInk, keep: list[Show]) -> set[tuple[int, int]]:
    """The ``drop`` set that leaves just ``keep`` (for :func:`text_without`)."""
    wanted = {(s.stream, s.index) for s in keep}
    return {(s.stream, s.index) for s in ink.shows} - wanted


def vertical_text(reader: Any, pobj: Any, ink: PageInk, shows: list[Show]) -> str:
    """Text of the page-level vertical ``shows``, one line per column, columns right to left."""
    from pypdf.generic import FloatObject, NameObject

    ops: list = []
    for n, column in enumerate(_columns(shows)):
        ops.append(([], b"BT"))
        ops.append(([FloatObject(v) for v in (1, 0, 0, 1, 0, 10_000 - 100 * n)], b"Tm"))
        font = None
        for show in column:
            operands, op = ink.page_ops[show.index]
            if show.font != font:
                ops.append(([NameObject(show.font), FloatObject(max(show.size, 1.0))], b"Tf"))
                font = show.font
            ops += [([raw], b"Tj") for raw in _strings(operands, op)]
        ops.append(([], b"ET"))
    try:
        _set_contents(pobj, reader, ops)
        return plain(pobj)
    finally:
        _set_contents(pobj, reader, ink.page_ops, ink.page_data)


def _columns(shows: list[Show]) -> list[list[Show]]:
    """Vertical shows grouped into columns (x within :data:`COLUMN_TOLERANCE_EM`), columns right
    to left, each top to bottom."""
    columns: list[list[Show]] = []
    for show in sorted(shows, key=lambda s: (-s.origin[0], -s.origin[1], s.seq)):
        if columns:
            head = columns[-1][0]
            if abs(head.origin[0] - show.origin[0]) < COLUMN_TOLERANCE_EM * max(head.size, show.size, 1.0):
                columns[-1].append(show)
                continue
        columns.append([show])
    for column in columns:
        column.sort(key=lambda s: (-s.origin[1], s.seq))
    return columns


def _strings(operands: list, op: bytes) -> list:
    if op == b"TJ" and operands:
        return [item for item in operands[0] if isinstance(item, (bytes, str)) and not str(item).startswith("/")]
    return list(operands[-1:])


def _blanked(ops: list, indexes: set[int]) -> list:
    """``ops`` with the strings of the text-showing operators at ``indexes`` emptied (a new
    list when any is; ``ops`` itself is never changed)."""
    from pypdf.generic import ArrayObject, ByteStringObject

    if not indexes:
        return ops
    out = list(ops)
    for i in indexes:
        operands, op = out[i]
        if op not in _SHOW_OPS:
            continue
        if op == b"TJ":
            operands = [ArrayObject()]
        elif op == b'"':
            operands = list(operands[:2]) + [ByteStringObject(b"")]
        else:
            operands = [ByteStringObject(b"")]
        out[i] = (operands, op)
    return out


def _spaced_shows(ink: PageInk) -> dict[int, dict[int, float]]:
    """stream -> operator index -> ``TJ`` offset (thousandths of a text space unit) that moves
    as far as the word spacing of one space, for the shows drawn with a word spacing."""
    out: dict[int, dict[int, float]] = {}
    for show in ink.shows:
        if show.word_space and show.font_size:
            out.setdefault(show.stream, {})[show.index] = -1000.0 * show.word_space / show.font_size
    return out


def _word_spaced(ops: list, offsets: dict[int, float]) -> list:
    """``ops`` with each ``Tj`` or ``TJ`` at an index of ``offsets`` written as a ``TJ`` array
    whose strings are cut after every space byte (code 32), each cut followed by that offset
    (a new list when any is; ``ops`` itself is never changed). ``'`` and ``"`` stay as they are.
    """
    from pypdf.generic import ArrayObject

    out = None
    for i, offset in offsets.items():
        operands, op = ops[i]
        if op not in (b"Tj", b"TJ") or not operands:
            continue
        shown = operands[0] if op == b"TJ" else operands[-1]
        if not isinstance(shown, (list, bytes)):
            continue
        spaced = _cut_at_spaces(list(shown) if op == b"TJ" else [shown], offset)
        if spaced is None:
            continue
        out = out if out is not None else list(ops)
        out[i] = ([ArrayObject(spaced)], b"TJ")
    return ops if out is None else out


def _cut_at_spaces(items: list, offset: float) -> list | None:
    """``items`` (strings and numbers of a ``TJ`` array) with every byte string cut after each
    space and ``offset`` put after each cut; ``None`` when no string has a space."""
    from pypdf.generic import ByteStringObject, FloatObject

    out: list = []
    cut = False
    for item in items:
        if not isinstance(item, bytes) or b" " not in item:
            out.append(item)
            continue
        cut = True
        for piece in _SPACE_END.split(bytes(item)):
            if piece:
                out.append(ByteStringObject(piece))
                if piece.endswith(b" "):
                    out.append(FloatObject(offset))
    return out if cut else None


def _set_contents(pobj: Any, reader: Any, ops: list, data: bytes = b"") -> None:
    """Make ``ops`` the page's content (a parsed stream: pypdf does not parse it again)."""
    from pypdf.generic import NameObject

    pobj[NameObject("/Contents")] = _parsed_stream(reader, ops, data)


def _form_stream(xobj: Any, reader: Any, ops: list, data: bytes) -> Any:
    """A parsed copy of a Form XObject (its dictionary entries, operators ``ops``)."""
    stream = _parsed_stream(reader, ops, data)
    for k, v in xobj.items():
        if k not in ("/Length", "/Filter", "/DecodeParms"):
            stream[_name(k)] = v
    return stream


def _parsed_stream(reader: Any, ops: list, data: bytes) -> Any:
    """A ``ContentStream`` holding both the operators ``ops`` and ``data``, the bytes they were
    parsed from (before any were emptied by :func:`_blanked`).

    pypdf's text extraction reads a stream's bytes only to look for an operator that can add
    text (``Tj``, ``TJ``, ``'``, ``"``, ``Do``: ``_get_content_stream_for_text`` in pypdf 7)
    and skips the stream when there is none; given operators alone, it first writes every
    operand back out to bytes for that look. Emptying strings keeps every operator, so the
    original bytes give the same answer. ``ContentStream.set_data`` would drop the operators,
    hence the base class's (pypdf documents that a ``ContentStream`` may hold both). Without
    ``data`` pypdf writes the bytes itself, as before.
    """
    from pypdf.generic import ContentStream, DecodedStreamObject

    stream = ContentStream(None, reader)
    stream.operations = ops
    if data and ops:
        DecodedStreamObject.set_data(stream, data)
    return stream


def _name(text: str) -> Any:
    from pypdf.generic import NameObject

    return NameObject(text)
