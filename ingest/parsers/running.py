"""Running lines of any paged format: what makes two page headers or footers the same line.

A running header or footer repeats on many pages with only a changing number -- the page number,
a chapter number ("Page 3-7"), a date -- and sometimes a rule typed with underscores or dashes
whose length varies. :func:`line_key` is the one form they are compared in: the PDF parser's
running-line detection (:mod:`ingest.parsers.pdf_running`) and the DOCX parser's header and footer
parts (:mod:`ingest.parsers.docx`) both use it, and :class:`RunningLines` is the record both
report as the ``running_headers`` flag.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

MAX_EXAMPLES = 3
"""Distinct removed lines quoted in the flag."""
MAX_EXAMPLE_CHARS = 120
"""Characters of one quoted example at most."""

DIGITS = re.compile(r"\d+")
_DASHES = str.maketrans(dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"))
_RULE = re.compile(r"([_\-=])\1{2,}")
"""Three or more underscores, dashes or equals signs in a row: a rule typed as text."""


def flat(line: str) -> str:
    """``line`` in NFKC with its whitespace runs collapsed to one space."""
    return " ".join(unicodedata.normalize("NFKC", line).split())


def line_key(line: str) -> str:
    """The form running lines are compared in: NFKC, whitespace runs collapsed, digit runs as
    ``#``, dashes (hyphen, en and em dash, minus) as ``-``, a rule of three or more ``_``, ``-`` or
    ``=`` as three. "Page 3" and "Page 4", "October 1, 2012" and "October 2, 2013", a rule of 73
    underscores and one of 75 (handbook-872p.docx's footers) are one line."""
    key = DIGITS.sub("#", flat(line)).translate(_DASHES)
    return _RULE.sub(lambda m: m.group(1) * 3, key)


@dataclass
class RunningLines:
    """What was left out as running lines.

    Attributes:
        count: lines (PDF) or header and footer parts (DOCX) left out.
        pages: 0-based indexes of the pages that lost at least one line (PDF only).
        examples: up to :data:`MAX_EXAMPLES` distinct ones left out, as they first appeared
            (whitespace collapsed, a typed rule cut to three characters, at most
            :data:`MAX_EXAMPLE_CHARS` characters each).
    """

    count: int = 0
    pages: list[int] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)
    _shown: set[str] = field(default_factory=set, repr=False, compare=False)
    _kept: set[str] = field(default_factory=set, repr=False, compare=False)

    def keep_first(self, line: str) -> bool:
        """Whether ``line`` is the first of its running line (:func:`line_key`) met here, to be kept;
        a later one of the same key is counted as left out (:meth:`add`) and gets False. A line
        with an empty key (only whitespace) is neither kept nor counted. The DOCX parser keeps
        its header and footer parts so (each is one "line"); the PDF parser, which removes every
        running line of its pages, calls :meth:`add` alone."""
        key = line_key(line)
        if not key:
            return False
        if key in self._kept:
            self.add(line)
            return False
        self._kept.add(key)
        return True

    def add(self, line: str) -> None:
        """Count ``line`` as left out, quoting it when no line of its key is quoted yet."""
        self.count += 1
        key = line_key(line)
        if key in self._shown or len(self.examples) >= MAX_EXAMPLES:
            return
        self._shown.add(key)
        self.examples.append(_RULE.sub(lambda m: m.group(1) * 3, " ".join(line.split()))[:MAX_EXAMPLE_CHARS])

    def as_flag(self) -> dict:
        """The document flag ``running_headers``: ``{"count": n, "examples": [...]}``."""
        return {"count": self.count, "examples": list(self.examples)}
