"""Text normalisation: Unicode NFKC (ligatures such as U+FB01 become "fi"), control characters
out (tab and newline kept), CRLF and CR to LF. ``normalise_map`` also returns, for every
character of the result, the offset of the original character it came from, so offsets into
normalised text can be mapped back to the source."""

from __future__ import annotations

import re
import unicodedata

_KEEP = {"\n", "\t"}
_SPACE_RUN = re.compile(r"[ \t\u00a0\u2000-\u200b\u3000]+")
_BLANK_LINES = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")


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
    if text.isascii() and "\r" not in text and not any(_is_control(c) for c in text if c not in _KEEP):
        return text
    return normalise_map(text)[0]


def tidy(text: str) -> str:
    """Normalise, then collapse runs of spaces and blank lines (for extracted PDF/DOCX/HTML text)."""
    text = normalise(text)
    text = _SPACE_RUN.sub(" ", text)
    text = _BLANK_LINES.sub("\n\n", text)
    return "\n".join(line.strip() for line in text.split("\n")).strip()


def _is_control(ch: str) -> bool:
    cat = unicodedata.category(ch)
    return cat in ("Cc", "Cf", "Cs") and ch not in ("\u200d",)  # keep ZWJ (emoji, Indic scripts)
