"""Words that pypdf splits at a line end, re-joined where pdfminer.six confirms the word.

Some producers place the last glyph(s) of a word with a small gap; pypdf then emits a space
inside the word, and when the word ends a line the text reads "obligatin g", "copyrigh t",
"th e" (found on ../shared/corpus/pdf/dmca.pdf, 17 of 18 pages). pdfminer.six groups glyphs
by distance and reads those words whole, but its line layout differs from pypdf's, and
:mod:`ingest.parsers.pdf_running` needs pypdf's lines: so pypdf's text is kept and only the
fragment is moved back onto its word.

The rule (this module's own; checked on every PDF in ../shared/corpus/pdf and
../shared/cases):

- A *fragment* is a run of at most :data:`MAX_FRAGMENT_LETTERS` letters that ends a line
  after whitespace, directly after a run of letters (the *stem*): "th e", "WIP O".
- A page is a *candidate* (worth reading with pdfminer, which is slow) when it has a
  fragment of one letter (:func:`has_candidates`); two-letter endings ("of", "to") are
  ordinary words far too often to be worth a pdfminer read on their own.
- A fragment is joined to its stem only when the line has a word before the stem (a split
  word ends a line of running text; a line that is only "A B" is a figure's labels, as on
  GeoTopo-komprimiert.pdf page 77, where pdfminer does have a word "AB"), and the reference
  text of the same page (pdfminer's) has the joined word as a whole word (letters on neither
  side, same case) and does not have stem and fragment as two words separated by whitespace
  (:func:`join_confirmed`). So "von x" or "Geraden g" (GeoTopo-komprimiert.pdf, a variable
  after a word) stays: pdfminer has no word "vonx".

Pure functions: text in, text out; a line keeps its place, so page and line layout do not
change. Letters are Unicode letters (``str.isalpha`` without digits or ``_``).
"""

from __future__ import annotations

import re

MAX_FRAGMENT_LETTERS = 2
"""Longest line-end fragment considered, in letters (dmca.pdf: one letter; two allowed for
a gap before the last two glyphs)."""

_LETTERS = r"[^\W\d_]"
_FRAGMENT = re.compile(
    rf"(?<!{_LETTERS})({_LETTERS}+)([ \t]+)({_LETTERS}{{1,{MAX_FRAGMENT_LETTERS}}})(?=[ \t]*$)", re.M
)
_WORD = re.compile(rf"{_LETTERS}+")


def has_candidates(text: str) -> bool:
    """True when ``text`` has a one-letter fragment ending a line after a word ("th e")."""
    return any(len(m.group(3)) == 1 for m in _FRAGMENT.finditer(text))


def join_confirmed(text: str, reference: str) -> tuple[str, int]:
    """Join line-end fragments of ``text`` to their stems where ``reference`` confirms it.

    Args:
        text: one page's text as pypdf extracted it (lines separated by ``\\n``).
        reference: the same page's text from another extractor (pdfminer.six).

    Returns:
        ``(text, joins)``: the text with each confirmed "stem fragment" line end written as one
        word (the whitespace between them removed, nothing else changed) and the number of
        joins made. A fragment is confirmed when a letter precedes the stem on its line and
        ``reference`` has ``stem + fragment`` as a whole word and does not have ``stem``
        followed by ``fragment`` as two words.
    """
    if not reference:
        return text, 0
    words, pairs = _words_and_pairs(reference)
    joins = 0

    def repl(m: re.Match) -> str:
        nonlocal joins
        stem, gap, frag = m.groups()
        line_start = text.rfind("\n", 0, m.start()) + 1
        running = _WORD.search(text, line_start, m.start()) is not None
        if running and stem + frag in words and (stem, frag) not in pairs:
            joins += 1
            return stem + frag
        return stem + gap + frag

    out = _FRAGMENT.sub(repl, text)
    return out, joins


def _words_and_pairs(text: str) -> tuple[set[str], set[tuple[str, str]]]:
    """Whole words of ``text`` and the pairs of words separated by whitespace only."""
    words: set[str] = set()
    pairs: set[tuple[str, str]] = set()
    previous, previous_end = "", -1
    for m in _WORD.finditer(text):
        word = m.group()
        words.add(word)
        if previous and text[previous_end : m.start()].isspace():
            pairs.add((previous, word))
        previous, previous_end = word, m.end()
    return words, pairs
