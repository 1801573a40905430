"""A page's content stream operators, the same as pypdf parses them, in less CPU.

``operations(data, content) -> list[(operands, operator)]`` gives exactly what
``pypdf.generic.ContentStream(..., forced_encoding="bytes").operations`` gives for the bytes
``data`` (pypdf 7: ``ContentStream._parse_content_stream`` and ``read_object``): the same
operators, operand types (``NumberObject``, ``FloatObject``, ``NameObject``,
``ByteStringObject``, ``ArrayObject`` ...) and values, the same exceptions (``LimitReachedError``
past pypdf's token budgets). pypdf reads a stream one byte at a time through ``BytesIO``; here
the common tokens -- whitespace, operators, numbers, plain names, literal strings without
escapes or nested parentheses, hex strings without whitespace, arrays of those -- are matched
by regular expressions on the bytes, and every other token (a dictionary, an escaped string, a
name with ``#`` codes, an indirect reference, an inline image, a comment inside an array,
anything malformed) is handed to pypdf's own reader at that offset; the rare token whose reading
depends on how pypdf steps through the stream (an operator longer than
:data:`_LONGEST_WORD` bytes, a comment inside an array) has pypdf parse the whole stream.
pypdf's text extraction takes these operators as they are (:mod:`ingest.parsers.pdf_extract`);
``bench/parse_cpu.py`` measures the CPU.
"""

from __future__ import annotations

import re
from io import BytesIO
from typing import Any

_TOKEN = re.compile(
    rb"[\x00\t\n\f\r ]*(?:"
    rb"([0-9+\-.][+,\-.0-9]*)"  # 1 number: up to pypdf's NumberPattern (its range +-. holds a comma)
    rb"|([A-Za-z'\"][^\s()<>\[\]{}/%]*)"  # 2 operator: up to NameObject.delimiter_pattern
    rb"|(/[^\s()<>\[\]{}/%]*)"  # 3 name
    rb"|\(([^()\\]*)\)"  # 4 literal string without escapes or nested parentheses
    rb"|<([0-9A-Fa-f]*)>"  # 5 hex string without whitespace
    rb"|(\[)|(\])"  # 6, 7 array
    rb"|(%[^\r\n]*[\r\n]?)"  # 8 comment (outside arrays)
    rb"|()\Z"  # 9 end
    rb")")
"""One token after the whitespace pypdf skips between operands (its ``WHITESPACES``); what
matches none of the groups is read by pypdf (``read_object``)."""
_REFERENCE = re.compile(rb"\d\s+\d+\s+R[^a-zA-Z]")
"""Where pypdf's ``IndirectPattern`` could match: a reference, which pypdf refuses in a content
stream (the whole stream is left to pypdf)."""
_PEEK = 20
"""Bytes pypdf looks ahead to end a number; a longer one is left to pypdf."""
_LONGEST_WORD = 100
"""Operators and names longer than this are left to pypdf (its limits, 128 and 4,096 bytes, are
checked in 16-byte steps)."""


def operations(data: bytes, content: Any) -> list[tuple[Any, bytes]]:
    """The operators of the decoded content bytes ``data`` of ``content`` (the pypdf
    ``ContentStream`` that holds them, used for inline images), as pypdf would parse them.

    Raises:
        What pypdf raises for the same bytes (``LimitReachedError``, ``PdfReadError`` ...).
    """
    try:
        if _REFERENCE.search(data):
            raise _Unsure()
        return _Parser(data, content).run()
    except _Unsure:
        return list(content.operations)


class _Unsure(Exception):
    """A token whose reading by pypdf depends on how it steps through the stream (an operator
    near its length limit, a long number, a comment or an unusual token inside an array, a
    reference): pypdf parses the whole stream instead."""


class _Parser:
    def __init__(self, data: bytes, content: Any) -> None:
        from pypdf._configuration import get_configuration
        from pypdf.generic import FloatObject, NumberObject

        self.data = data
        self.content = content
        self.budget = get_configuration().stream_parsing_work_maximum_count
        self.max_array = get_configuration().array_maximum_element_count
        self._stream: BytesIO | None = None
        self._integer, self._real = _number_maker(NumberObject), _number_maker(FloatObject)

    def run(self) -> list[tuple[Any, bytes]]:
        from pypdf.generic import ArrayObject, ByteStringObject

        data, match, number = self.data, _TOKEN.match, self._number
        out: list = []
        operands: list = []
        arrays: list = []  # the arrays being read, innermost last
        into = operands  # where the next operand goes
        spent = 0  # tokens, as pypdf counts them against its budget (checked at each operator)
        pos = 0
        while True:
            m = match(data, pos)
            if m is None:  # an operand pypdf reads (a dictionary, an escaped string ...)
                if arrays and data[_skip(data, pos)] not in b"(<":
                    raise _Unsure()
                value, pos, spent = self._pypdf_object(pos, spent + 1)
                into.append(value)
                continue
            kind, pos = m.lastindex, m.end()
            if kind == 1:
                into.append(number(m[1]))
            elif kind == 2:
                word = m[2]
                if arrays or len(word) > _LONGEST_WORD or spent >= self.budget:
                    raise _Unsure()
                if word == b"BI":
                    assert operands == []  # as pypdf asserts
                    image, pos, spent = self._inline_image(pos, spent + 2)
                    out.append((image, b"INLINE IMAGE"))
                    continue
                out.append((operands, word))
                operands = into = []
            elif kind == 3:
                into.append(self._name(m[3]))
            elif kind in (4, 5):
                into.append(ByteStringObject(m[4] if kind == 4 else _hex(m[5])))
            elif kind == 6:
                arrays.append(ArrayObject())
                into.append(arrays[-1])
                into = arrays[-1]
            elif kind == 7:
                if not arrays or len(arrays.pop()) > self.max_array:  # a stray "]" is pypdf's error
                    raise _Unsure()
                into = arrays[-1] if arrays else operands
                continue
            elif kind == 8:
                if arrays:
                    raise _Unsure()
                continue
            else:  # the end: an array left open, or past the budget, is pypdf's to read
                if arrays or spent > self.budget:
                    raise _Unsure()
                return out
            spent += 1

    def _number(self, raw: bytes) -> Any:
        """A ``NumberObject`` or ``FloatObject`` (``.`` in ``raw``), made as pypdf makes it."""
        if len(raw) >= _PEEK:
            raise _Unsure()
        return self._real(raw) if b"." in raw else self._integer(raw)

    def _name(self, raw: bytes) -> Any:
        from pypdf.generic import NameObject

        if len(raw) > _LONGEST_WORD:
            raise _Unsure()
        try:
            return NameObject(NameObject.unnumber(raw).decode("utf-8"))
        except UnicodeDecodeError:
            raise _Unsure() from None

    def _stream_at(self, pos: int) -> BytesIO:
        if self._stream is None:
            self._stream = BytesIO(self.data)
        self._stream.seek(pos)
        return self._stream

    def _pypdf_object(self, pos: int, spent: int) -> tuple[Any, int, int]:
        """pypdf's ``read_object`` at ``pos``: the value, the offset after it, the tokens spent."""
        from pypdf.generic import read_object
        from pypdf.generic._utils import StreamParsingBudget

        budget = StreamParsingBudget(remaining_budget=self.budget - spent)
        stream = self._stream_at(_skip(self.data, pos))
        value = read_object(stream, None, "bytes", parsing_budget=budget)
        return value, stream.tell(), self.budget - budget.remaining_budget

    def _inline_image(self, pos: int, spent: int) -> tuple[Any, int, int]:
        from pypdf.generic._image_inline import read_inline_image
        from pypdf.generic._utils import StreamParsingBudget

        budget = StreamParsingBudget(remaining_budget=self.budget - spent)
        stream = self._stream_at(pos)
        image = read_inline_image(content_stream=self.content, stream=stream, parsing_budget=budget)
        return image, stream.tell(), self.budget - budget.remaining_budget


_SPACE = re.compile(rb"[\x00\t\n\f\r ]*")


def _hex(digits: bytes) -> bytes:
    """The bytes of a hex string's digits (an odd last digit is followed by 0, as in pypdf)."""
    return bytes.fromhex((digits + b"0" if len(digits) % 2 else digits).decode())


def _number_maker(cls: type) -> Any:
    """``cls(raw)`` for pypdf's ``NumberObject`` or ``FloatObject`` without their Python-level
    constructor where the text is a valid number (the same value and type); an invalid one
    goes through the constructor (pypdf's warning and 0)."""
    base = int if issubclass(cls, int) else float
    new = base.__new__

    def make(raw: bytes) -> Any:
        try:
            return new(cls, base(raw))
        except ValueError:
            return cls(raw)

    return make


def _skip(data: bytes, pos: int) -> int:
    """The offset of the next byte that is not whitespace (pypdf's ``WHITESPACES``)."""
    return _SPACE.match(data, pos).end()
