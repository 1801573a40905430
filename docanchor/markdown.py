"""Whether text given without a file name (a spilled tool result) reads as Markdown.

A file name says its format; a tool result or a message does not. Read as Markdown, a plain-text
log's ``# shift 3`` and ``* checked`` lines would become its outline, so text counts as Markdown
only when it shows at least :data:`MIN_KINDS` different kinds of Markdown structure
(:data:`SIGNS`): a ``#`` line alone is as often a comment (shell, Python, config files) as a
heading, and a ``*``/``-`` line is a plain bullet either way. The kinds are CommonMark's
(https://spec.commonmark.org: ATX headings §4.2, fenced code §4.5, links and images §6.3-6.4 to a
URL, ``#anchor`` or file, ``**strong**`` emphasis §6.2 -- not ``__x__``, Python's ``__init__``) and
the GFM table delimiter row (https://github.github.com/gfm/ §4.10).
"""

from __future__ import annotations

import re

SIGNS = {
    "heading": re.compile(r"^ {0,3}#{1,6}[ \t]+\S", re.M),
    "fence": re.compile(r"^ {0,3}(?:```|~~~)", re.M),
    "link": re.compile(r"\[[^\]\n]+\]\((?:https?://|mailto:|#|\.{0,2}/)[^)\s]*\)|\[[^\]\n]+\]\([\w-][\w./-]*\.\w{1,5}\)"),
    "strong": re.compile(r"(?<![*\w])\*\*[^\s*][^*\n]*?[^\s*]\*\*(?![*\w])"),
    "table": re.compile(r"^ {0,3}\|?[ \t]*:?-{3,}:?[ \t]*\|[ \t]*:?-{3,}", re.M),
}
"""The kinds of Markdown structure looked for."""
MIN_KINDS = 2
"""Fewest different kinds (:data:`SIGNS`) that make text Markdown."""


def looks_like_markdown(text: str) -> bool:
    """True when ``text`` shows at least :data:`MIN_KINDS` kinds of Markdown structure."""
    return sum(1 for sign in SIGNS.values() if sign.search(text)) >= MIN_KINDS
