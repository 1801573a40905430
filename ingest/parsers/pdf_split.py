"""Words that pypdf splits, re-joined where pdfminer.six confirms the word.

Some producers place the last glyph(s) of a word with a small gap; pypdf then emits a space
inside the word, and when the word ends a line the text reads "obligatin g", "copyrigh t",
"th e" (found on ../shared/corpus/pdf/dmca.pdf, 17 of 18 pages). The gap is pypdf's (7.x):
it measures a string without the word spacing ``Tw`` of its spaces, so when the producer
starts a new string inside a word (dmca.pdf: "( sect) Tj ... (ion 1201 ...) Tj" with
``2.733 Tw``) the next string seems to start a space later, inside a line too ("sect ion").
pdfminer.six groups glyphs by distance and reads those words whole, but its line layout
differs from pypdf's, and :mod:`ingest.parsers.pdf_running` needs pypdf's lines: so pypdf's text is kept and only the
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
- Inside a line, two letter runs separated by spaces are joined when the second starts with a
  lowercase letter, the reference has the joined word more often than the text (after the
  line-end joins) and never has the two as separate words (:func:`_join_inside_lines`):
  "New sect ion 1201", "jointly wi th NTIA", "signed into law b y1" (dmca.pdf pages 3, 8, 1,
  where a text segment of the producer starts inside a word, and "1" is a footnote mark).
  The count keeps real word pairs apart: "in to" stays when the reference has no more "into"
  than the text. A capital second run is joined only after a capital stem of two letters or
  more ("The WIP O Copyright", dmca.pdf page 2): pdfminer reads figure labels "A B" as "AB"
  (GeoTopo-komprimiert.pdf page 77), one-letter stems.
- Whole numbers split so inside a line are joined by the same count ("Under section 120 4
  penalties", "section 10 8 permitted", dmca.pdf pages 5 and 8): the reference has the joined
  number more often than the text and never the two numbers apart (a table's "10 8" stays).

Pure functions: text in, text out; a line keeps its place, so page and line layout do not
change. Letters are Unicode letters (``str.isalpha`` without digits or ``_``).
"""

from __future__ import annotations

import re
from collections import Counter

MAX_FRAGMENT_LETTERS = 2
"""Longest line-end fragment considered, in letters (dmca.pdf: one letter; two allowed for
a gap before the last two glyphs)."""

_LETTERS = r"[^\W\d_]"
_FRAGMENT = re.compile(
    rf"(?<!{_LETTERS})({_LETTERS}+)([ \t]+)({_LETTERS}{{1,{MAX_FRAGMENT_LETTERS}}})(?=[ \t]*$)", re.M
)
_WORD = re.compile(rf"{_LETTERS}+")
_NUMBER = re.compile(r"(?<![\w.,])\d+(?![\w.,])")
"""A whole number: digits with no letter, digit, point or comma against them ("1204", not the
"2" of "1.2" or "1,250", nor the "1" of a footnote mark "by1")."""


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
        followed by ``fragment`` as two words. Words split inside a line are joined after
        that (:func:`_join_inside_lines`) and counted in ``joins`` too.
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
    out, inner = _join_inside_lines(out, words, pairs)
    numbers, number_pairs = _words_and_pairs(reference, _NUMBER)
    out, split_numbers = _join_inside_lines(out, numbers, number_pairs, _NUMBER, lambda stem, frag: True)
    return out, joins + inner + split_numbers


def _join_inside_lines(text: str, words: Counter[str], pairs: set[tuple[str, str]], run: re.Pattern = _WORD,
                       continues=None) -> tuple[str, int]:
    """Join "stem frag" pairs inside a line of ``text`` that the reference confirms.

    Args:
        text: page text (lines separated by ``\\n``).
        words: whole words of the reference with their counts (:func:`_words_and_pairs`).
        pairs: the reference's pairs of words separated by whitespace only.
        run: what a word is: letter runs (:data:`_WORD`), or digit runs (:data:`_NUMBER`:
            "section 120 4", dmca.pdf page 5, whose "4" starts a string of its own).
        continues: whether a second run may go on the first (default :func:`_continues`).

    Returns:
        ``(text, joins)``: a pair separated by spaces or tabs only, whose second run may go on
        its first (:func:`_continues`), is written as one word when ``words`` counts the joined
        word more often than ``text`` does and ``pairs`` lacks the pair.
    """
    continues = continues or _continues
    have = Counter(run.findall(text))
    runs = list(run.finditer(text))
    out: list[str] = []
    pos = joins = i = 0
    while i < len(runs) - 1:
        stem, frag = runs[i], runs[i + 1]
        gap = text[stem.end() : frag.start()]
        joined = stem.group() + frag.group()
        if (not gap.strip(" \t") and continues(stem.group(), frag.group()) and words[joined] > have[joined]
                and (stem.group(), frag.group()) not in pairs):
            out.append(text[pos : stem.end()])
            pos, joins, i = frag.start(), joins + 1, i + 2
            have[joined] += 1
            continue
        i += 1
    out.append(text[pos:])
    return "".join(out), joins


def _continues(stem: str, frag: str) -> bool:
    """Whether ``frag`` may be the rest of the word ``stem`` begins: it starts lower-case
    ("sect ion"), or both are capitals and the stem has two letters or more ("WIP O")."""
    return frag[0].islower() or (len(stem) >= 2 and stem.isupper() and frag.isupper())


def _words_and_pairs(text: str, run: re.Pattern = _WORD) -> tuple[Counter[str], set[tuple[str, str]]]:
    """Whole words (``run``: letter runs, or digit runs) of ``text`` with their counts and the
    pairs of words separated by whitespace only."""
    words: Counter[str] = Counter()
    pairs: set[tuple[str, str]] = set()
    previous, previous_end = "", -1
    for m in run.finditer(text):
        word = m.group()
        words[word] += 1
        if previous and text[previous_end : m.start()].isspace():
            pairs.add((previous, word))
        previous, previous_end = word, m.end()
    return words, pairs
