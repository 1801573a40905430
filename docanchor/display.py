"""Text that DocAnchor shows on one line -- titles, file names -- made safe to print, and counts
in words (:func:`counted`, :func:`plural`, and the "not shown" line of a list cut short), and a
value a caller sent, as it was sent, for an error message (:func:`as_sent`).

A title comes from the user (``title``), from a file's name or from inside the document (PDF
metadata, an HTML ``<title>``); all are untrusted. Printed as they are, an ANSI escape sequence
(``ESC [ 31 m``) recolours or rewrites the terminal of ``docanchor list``, a bidi override
(U+202E) reverses what follows it, and a newline forges a second line. :func:`display_line` is the
one rule for all of them: every door stores and prints the result.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
"""ECMA-48 escape sequences: CSI (``ESC [ ... final``), OSC (``ESC ] ... BEL|ST``, e.g. a
terminal title or hyperlink) and two-character escapes. Removed whole, parameters included."""
_KEEP_FORMAT = frozenset({"\u200c", "\u200d"})
"""Format characters (Unicode category Cf) that words need: zero-width non-joiner and joiner
(Persian, Indic scripts, emoji sequences). Every other Cf character -- bidi overrides and
isolates (U+202A-202E, U+2066-2069), marks, zero-width spaces -- is removed."""
_LINE_BREAKS = frozenset({"\n", "\r", "\t", "\v", "\f", "\x85", "\u2028", "\u2029"})


def display_line(text: str | None, max_chars: int = 300) -> str:
    """``text`` as one printable line of at most ``max_chars`` characters.

    ANSI escape sequences are removed whole; line breaks and tabs become spaces; other control
    characters (Unicode category Cc), format characters (Cf, bidi controls included, except
    ZWNJ/ZWJ) and lone surrogates (Cs) are removed; runs of whitespace collapse to one space
    and the ends are trimmed.

    Returns:
        The cleaned line; ``""`` when nothing printable is left (or ``text`` is ``None``).
    """
    if not text:
        return ""
    text = _ANSI.sub("", text)
    kept = []
    for ch in text:
        if ch in _LINE_BREAKS:
            kept.append(" ")
        elif unicodedata.category(ch) in ("Cc", "Cs") or (
                unicodedata.category(ch) == "Cf" and ch not in _KEEP_FORMAT):
            continue
        else:
            kept.append(ch)
    return " ".join("".join(kept).split())[:max_chars].rstrip()


def counted(n: int, word: str, many: str | None = None) -> str:
    """``n`` and the noun ``word`` as a line shows a count: ``"1 chunk"``, ``"0 chunks"``,
    ``"1,204 chunks"`` (thousands separated by commas; the noun as :func:`plural` spells it)."""
    return f"{n:,} {plural(word, n, many)}"


def plural(word: str, n: int, many: str | None = None) -> str:
    """The noun ``word`` as it reads beside the number ``n``: ``word`` for 1, else ``many`` when
    given (``"matches"``), else ``word + "s"``. The one rule for counted words in CLI lines, tool
    answers, anchors and messages (no ``"(1 chunks)"``, no ``"file(s)"``).

    Not the ``inflect`` package (in the registry and well kept): importing it costs seconds of CPU
    (typeguard instruments it at import; the figure is in this rule's commit), more than a whole
    ``docanchor list``, and every noun DocAnchor counts is regular or names its plural here.
    """
    return word if n == 1 else many or word + "s"


NOT_SHOWN_START = "(+"
"""How a line counting the entries left out of a list starts: an anchor's outline and columns
(``summarize``) write it, an anchor cut to fit a reference (``retrieval.assembly``) recognises it."""


def not_shown(n: int, word: str, hint: str = "") -> str:
    """The last line of a list shown without its last ``n`` entries of kind ``word``:
    ``"(+3 more headings not shown)"``, ``hint`` (``"; readDocument shows every column"``) before
    the closing parenthesis."""
    return f"{NOT_SHOWN_START}{counted(n, 'more ' + word)} not shown{hint})"


def is_not_shown(line: str) -> bool:
    """Whether ``line`` is a :func:`not_shown` line."""
    return line.startswith(NOT_SHOWN_START) and " not shown" in line


def as_sent(value: Any, max_chars: int = 40) -> str:
    """``value`` as the caller sent it, for an error message: its JSON (``0``, ``1000``, ``2.5``,
    ``true``, ``"ten"``), so a refusal never shows what a door made of it (``0.0``, ``True``); at
    most ``max_chars`` characters (longer ends with "…"), or its type's name when it has no JSON.
    A whole float shows as a whole number: JSON's ``1e3`` and ``1000.0`` arrive as the float
    1000.0, which shows as ``1000``."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = type(value).__name__
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"
