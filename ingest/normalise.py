"""Text normalisation: Unicode NFKC (ligatures such as U+FB01 become "fi"), control characters
out (tab and newline kept), CRLF and CR to LF. ``normalise_map`` also returns, for every
character of the result, the offset of the original character it came from, so offsets into
normalised text can be mapped back to the source."""

from __future__ import annotations

import re
import unicodedata

from docanchor.offsets import Runs, runs_from_origin

_KEEP = {"\n", "\t"}
_SPACE_RUN = re.compile(r"[ \t\u00a0\u2000-\u200b\u3000]+")
_BLANK_LINES = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")

SPACING_DIACRITICS = {
    "\u00b4": "\u0301",  # acute
    "\u02ca": "\u0301",
    "`": "\u0300",  # grave
    "\u02cb": "\u0300",
    "\u02c6": "\u0302",  # circumflex
    "\u02dc": "\u0303",  # tilde
    "\u00af": "\u0304",  # macron
    "\u02c9": "\u0304",
    "\u02d8": "\u0306",  # breve
    "\u02d9": "\u0307",  # dot above
    "\u00a8": "\u0308",  # diaeresis
    "\u02da": "\u030a",  # ring above
    "\u02dd": "\u030b",  # double acute
    "\u02c7": "\u030c",  # caron
    "\u00b8": "\u0327",  # cedilla
    "\u02db": "\u0328",  # ogonek
}
"""Spacing (stand-alone) accents -> the combining mark they draw (Unicode's decompositions of
U+00B4, U+02C6 ... name the same marks). PDF producers that build accented letters from a base
glyph and an accent glyph leave text such as "e\u02c6" (ê) or "c\u00b8" (ç)."""
_VOWEL_ONLY = frozenset("\u00b4\u02ca`\u02cb")
"""Acute and grave accents are composed onto vowels only: the acute also stands in for an
apostrophe ("don\u00b4t", "Frenchman\u00b4s") and the grave is a backtick in code."""
_VOWELS = frozenset("aeiouyAEIOUY")
_ACCENT = "[" + "".join(SPACING_DIACRITICS) + "]"
_LETTER = "[^\\W\\d_]"
_ACCENT_IN_TEXT = re.compile(f"({_LETTER}?)({_ACCENT})({_LETTER}?)")


def _clusters(text: str):
    """Yield (offset, cluster): a base character with the combining marks that follow it."""
    i, n = 0, len(text)
    while i < n:
        j = i + 1
        while j < n and unicodedata.combining(text[j]):
            j += 1
        yield i, text[i:j]
        i = j


def normalise_map(text: str) -> tuple[str, list[int]]:
    """NFKC + control characters removed + line ends unified, with an offset map.

    Returns:
        ``(normalised, origin)`` where ``origin[i]`` is the character offset in ``text`` that
        produced ``normalised[i]``; ``origin`` has one extra final entry equal to ``len(text)``.
    """
    text = text.replace("\r\n", "\n\x00") if "\r\n" in text else text  # keep offsets: \x00 is dropped below
    out: list[str] = []
    origin: list[int] = []
    for off, cluster in _clusters(text):
        if cluster == "\r":
            cluster = "\n"
        norm = unicodedata.normalize("NFKC", cluster) if not cluster.isascii() else cluster
        for ch in norm:
            if ch in _KEEP or not _is_control(ch):
                out.append(ch)
                origin.append(off)
    origin.append(len(text))
    return "".join(out), origin


def normalise(text: str) -> str:
    """The normalised text alone (see :func:`normalise_map`)."""
    return text if _already_normal(text) else normalise_map(text)[0]


def normalise_runs(text: str) -> tuple[str, Runs]:
    """The normalised text and the :mod:`docanchor.offsets` runs that map its offsets back to
    offsets into ``text``."""
    if _already_normal(text):
        return text, ((0, 0),)
    normalised, origin = normalise_map(text)
    return normalised, runs_from_origin(origin)


def _already_normal(text: str) -> bool:
    return text.isascii() and "\r" not in text and not any(_is_control(c) for c in text if c not in _KEEP)


def spacing_accent_side(text: str) -> str:
    """Where this text's producer puts a spacing accent: ``"after"`` its letter (an accent
    ending a word, "cafe\u00b4") or ``"before"`` it (an accent starting a word, TeX's
    "\u02c7Sedivy"), by majority of the accents whose side is plain; ``"after"`` on a tie."""
    votes = {"after": 0, "before": 0}
    for m in _ACCENT_IN_TEXT.finditer(text):
        left, _accent, right = m.groups()
        if left and not right:
            votes["after"] += 1
        elif right and not left:
            votes["before"] += 1
    return "before" if votes["before"] > votes["after"] else "after"


def compose_spacing_diacritics(text: str, side: str = "after") -> str:
    """Compose spacing accents with the letter they belong to ("e\u02c6" -> "ê", "c\u00b8" ->
    "ç", "a\u02da" -> "å"): the letter on ``side`` of the accent (:func:`spacing_accent_side`),
    or the one on the other side when only that one exists or composes. Only where Unicode
    has the composed letter (NFC) and, for acute and grave, the letter is a vowel
    (:data:`_VOWEL_ONLY`); other accents stay. Offsets shift by one per composed pair.

    NFKC alone does not do it: it leaves U+02C6 as it is and turns U+00B8 into a space and a
    combining cedilla ("c \u0327")."""
    if not any(c in SPACING_DIACRITICS for c in text):
        return text

    def compose(m: re.Match) -> str:
        left, accent, right = m.groups()
        tries = [(left, "l"), (right, "r")] if side == "after" else [(right, "r"), (left, "l")]
        for letter, where in tries:
            composed = _composed(letter, accent)
            if composed:
                return composed + right if where == "l" else left + composed
        return m.group()

    return _ACCENT_IN_TEXT.sub(compose, text)


def _composed(letter: str, accent: str) -> str:
    if not letter or (accent in _VOWEL_ONLY and letter not in _VOWELS):
        return ""
    composed = unicodedata.normalize("NFC", letter + SPACING_DIACRITICS[accent])
    return composed if len(composed) == 1 else ""


def tidy(text: str) -> str:
    """Normalise, then collapse runs of spaces and blank lines (for extracted PDF/DOCX/HTML text)."""
    text = normalise(text)
    text = _SPACE_RUN.sub(" ", text)
    text = _BLANK_LINES.sub("\n\n", text)
    return "\n".join(line.strip() for line in text.split("\n")).strip()


def _is_control(ch: str) -> bool:
    cat = unicodedata.category(ch)
    return cat in ("Cc", "Cf", "Cs") and ch not in ("\u200d",)  # keep ZWJ (emoji, Indic scripts)
