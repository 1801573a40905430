"""The few most central sentences of a document, chosen with the chunk embeddings from ingest.

1. Chunk centrality: each chunk's cosine similarity to the centroid (mean) of all chunk
   embeddings; chunks are then picked by maximal marginal relevance (Carbonell & Goldstein,
   1998: ``λ·centrality − (1−λ)·max similarity to already picked``, λ = 0.7) so the picks
   cover different parts of the document.
2. Sentence choice: inside each picked chunk, the readable sentence sharing the most terms with
   the most central chunks (terms: Latin words of 3+ letters, CJK character pairs); a whole
   sentence (ending like one, not starting mid-sentence) while any picked chunk has one.

No text is embedded again. Scores are rounded to 6 decimals and ties broken by ordinal or
position, so the result does not change with floating-point noise in the last bits.
"""

from __future__ import annotations

import math
import re
from typing import Sequence

import numpy as np

from docanchor.text import CJK as _CJK, CJK_CHAR as _CJK_RUN, CJK_STOP, FULL_STOP, collapse_space, starts_sentence
from docanchor.types import Chunk

MMR_LAMBDA = 0.7
VOCAB_CHUNKS = 10
"""The most central chunks whose shared terms score sentences."""

# Where a sentence ends for the anchor: a sentence end (docanchor.text.SENTENCE_STOP; "vs.", "e.g."
# and "Fig." end none) before whitespace and a capital, digit, quote or CJK letter; a CJK sentence
# end with its closing quotes (docanchor.text.CJK_STOP); blank lines. A single line break is a wrapped line (joined)
# unless a list item, quote, table row, heading or markup starts the next line.
_SENTENCE_END = re.compile(
    rf"(?P<stop>{FULL_STOP})\s+(?=[\"'“‘(\[A-Z0-9{_CJK}])|(?P<cjk>{CJK_STOP})"
    r"|\n[ \t]*\n\s*|\n\s*(?=[-*+>#|<•]|\d+[.)]\s)"
)
_ENDS_SENTENCE = re.compile(rf"(?:[.!?…][\"'”’)\]」』]*|{CJK_STOP})$")
_WORD = re.compile(r"[a-z][a-z'\-]{2,}")
_STOP = frozenset(
    "the and for are was were with that this from have has had not but all any can its into "
    "may must shall will would should could been being their there them they than then these "
    "those such also which who whom what when where while each other more most some only over "
    "under upon our your his her him she you out off per via etc one two use used".split()
)


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``, whitespace collapsed, empty ones dropped."""
    parts, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        end = m.end("stop") if m.group("stop") else m.end("cjk") if m.group("cjk") else m.start()
        parts.append(text[start:end])
        start = m.end()
    parts.append(text[start:])
    return [s for s in (collapse_space(p) for p in parts) if s]


def terms(text: str) -> list[str]:
    """Distinct content terms of ``text`` in first-seen order: lower-cased Latin words of three
    or more letters outside a small stop list, and pairs of adjacent CJK characters."""
    out: list[str] = []
    for w in _WORD.findall(text.lower()):
        if w not in _STOP and w not in out:
            out.append(w)
    cjk = "".join(ch if _CJK_RUN.match(ch) else " " for ch in text)
    for run in cjk.split():
        for i in range(len(run) - 1):
            pair = run[i:i + 2]
            if pair not in out:
                out.append(pair)
    return out


_NOT_CENTRAL = re.compile(
    r"https?://|www\.|\bdoi\b|\bdoi\.org|\bISBN\b|\barXiv\b"  # links and identifiers
    r"|\bet al\.|\(\d{4}[a-z]?\)|\b(?:19|20)\d\d[a-z]?\)?[.,]\s+\S.*\b(?:pp?\.|vol\.|[Ii]n:?)\s"  # reference entries
    r"|all rights reserved|copyright|©|intentionally left blank|\bpage \d+ of \d+",  # boilerplate
    re.IGNORECASE,
)
"""Sentences the anchor never quotes as central: links, reference-list entries ("et al." and a year,
a year in brackets, "pp."/"vol."/"In:" after a year) and page boilerplate (copyright, "page N of M")."""


_CODE_WORD = re.compile(r"[`_{}=<>\\]|[A-Za-z0-9]\(")
"""A word that is code, not prose: a code span's backtick, an identifier's underscore, braces,
operators, a backslash or a call's parenthesis after a Latin letter or digit (a CJK character
before a bracket is prose: "合同(样本)") (``docanchor_chunks_embedded_total``,
``{method,route}``, ``count()``)."""
CODE_SHARE = 0.5
"""Share of a sentence's characters (outside whitespace) in code words (:data:`_CODE_WORD`) from
which it is a list of identifiers, not a sentence to quote as central. Counted in characters, not
words: identifiers are long and the prose around a list of them is short words ("and", "the").
Source: the new-user trial of 8b12ae1, where the guide's anchor led with its list of Prometheus
metric names (about three quarters code); prose naming a setting or two stays well under it (the
test's examples; the guide's other sentences naming settings are under a half too)."""


def readable(sentence: str, strict: bool = True, before: str = "") -> bool:
    """Worth quoting: long enough, mostly letters, not shouting (headings, tables of contents),
    not markup, code (:data:`CODE_SHARE`), links, references or boilerplate
    (:data:`_NOT_CENTRAL`); when ``strict``, also a whole sentence: ending like one and not
    starting mid-sentence (:func:`starts_mid_sentence`, with the document's text ``before`` it
    when known)."""
    if sentence.startswith(("<", "```", ">", "|")) or "</" in sentence or _NOT_CENTRAL.search(sentence):
        return False
    if strict and (not _ENDS_SENTENCE.search(sentence) or starts_mid_sentence(sentence, before)):
        return False
    cjk = len(_CJK_RUN.findall(sentence))
    if cjk >= 10:
        return len(sentence) <= 240
    words = sentence.split()
    if not 6 <= len(words) <= 80 or len(sentence) < 40 or _code_share(words) >= CODE_SHARE:
        return False
    letters = [c for c in sentence if c.isalpha()]
    if len(letters) < 0.6 * len(sentence.replace(" ", "")):
        return False
    upper = sum(1 for c in letters if c.isupper())
    return upper <= 0.5 * len(letters) and ".." not in sentence and "|" not in sentence


def _code_share(words: Sequence[str]) -> float:
    """The share of the characters of ``words`` (a sentence split at whitespace; a CJK sentence
    is checked by its own rule in :func:`readable`) in code words (:data:`_CODE_WORD`)."""
    total = sum(len(w) for w in words)
    return sum(len(w) for w in words if _CODE_WORD.search(w)) / total if total else 0.0


def central_chunks(chunks: Sequence[Chunk], embeddings: Sequence[Sequence[float]], k: int) -> list[int]:
    """Indices of up to ``k`` chunks, most central first, picked by maximal marginal relevance
    among chunks that are not bare headings (all chunks when every one is)."""
    if not chunks or k <= 0:
        return []
    pool = [i for i, c in enumerate(chunks) if c.kind != "heading" and len(c.text) >= 40]
    pool = pool or list(range(len(chunks)))
    vectors = np.asarray([embeddings[i] for i in pool], dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1)
    norms[norms == 0] = 1.0
    vectors = vectors / norms[:, None]
    centroid = vectors.mean(axis=0)
    length = float(np.linalg.norm(centroid)) or 1.0
    central = np.round(vectors @ (centroid / length), 6)
    picked: list[int] = []
    redundancy = np.full(len(pool), -1.0)
    for _ in range(min(k, len(pool))):
        score = np.round(MMR_LAMBDA * central - (1 - MMR_LAMBDA) * np.maximum(redundancy, 0.0), 6)
        score[picked] = -np.inf
        best = max(range(len(pool)), key=lambda j: (score[j], -chunks[pool[j]].ordinal))
        picked.append(best)
        redundancy = np.maximum(redundancy, vectors @ vectors[best])
    return [pool[j] for j in picked]


def central_sentences(chunks: Sequence[Chunk], embeddings: Sequence[Sequence[float]], limit: int = 4) -> list[str]:
    """Up to ``limit`` sentences, most central first, at most one per chunk, no repeats.

    Args:
        chunks: the document's chunks in ordinal order.
        embeddings: one vector per chunk (the ones stored at ingest).
        limit: most sentences returned.
    """
    if len(chunks) != len(embeddings):
        raise ValueError("central_sentences needs one embedding per chunk")
    order = central_chunks(chunks, embeddings, max(limit * 3, VOCAB_CHUNKS))
    weight: dict[str, int] = {}
    for i in order[:VOCAB_CHUNKS]:
        for t in terms(chunks[i].text):
            weight[t] = weight.get(t, 0) + 1
    out: list[str] = []
    for strict in (True, False):  # whole sentences; else (unpunctuated documents) any readable piece
        for i in order:
            best = _marked(*_best_sentence(chunks[i].text, weight, strict, text_before(chunks, i)))
            if best and best not in out and len(out) < limit:
                out.append(best)
        if out:
            break
    return out


def starts_mid_sentence(passage: str, before: str = "") -> bool:
    """``passage`` starts with a lower-case letter, read as the rest of a sentence that a chunk
    boundary cut: :func:`split_sentences` starts a sentence after a sentence end only before a
    capital, digit, quote or CJK letter, and a list item with its marker (a paragraph that starts
    in lower case, such as a command, reads the same). A passage starting with a CJK letter
    (which has no case) starts mid-sentence when ``before``, the document's text just before it
    (``""``: unknown), does not end a sentence there (:func:`docanchor.text.starts_sentence`):
    a chunk cut inside "...すべて固" / "有表現であるとは限らない。" begins inside a word."""
    if passage[:1].islower():
        return True
    return bool(before) and _CJK_RUN.match(passage[:1]) is not None and not starts_sentence(
        before + passage, len(before))


def text_before(chunks: Sequence[Chunk], i: int) -> str:
    """The document's text just before chunk ``chunks[i]`` as its neighbour ``chunks[i - 1]``
    holds it (its text and :attr:`docanchor.types.Chunk.gap_after`, less any overlap), or ``""``
    when that is unknown: the first chunk, a neighbour that is not the previous ordinal or does not
    join this one (``joins_next``), a gap the neighbour does not record. In characters."""
    if i <= 0:
        return ""
    prev, cur = chunks[i - 1], chunks[i]
    if prev.ordinal != cur.ordinal - 1 or not prev.joins_next:
        return ""
    overlap = prev.end_char - cur.start_char
    if overlap > 0:
        return prev.text[:max(0, len(prev.text) - overlap)]
    gap = prev.gap_after or ""
    return prev.text + gap if prev.end_char + len(gap) == cur.start_char else ""


def _marked(passage: str, before: str = "") -> str:
    """``passage`` with a leading "…" when it starts mid-sentence (:func:`starts_mid_sentence`,
    ``before`` the document's text before it when known; only the second, unpunctuated pass of
    :func:`central_sentences` quotes one, e.g. case a14's 5,533-character paragraph), as a cut end
    gets one."""
    return f"…{passage}" if passage and starts_mid_sentence(passage, before) else passage


def _best_sentence(text: str, weight: dict[str, int], strict: bool, before: str = "") -> tuple[str, str]:
    """The best readable sentence of a chunk's ``text`` and the document's text known before it:
    ``before`` (the text before the chunk, :func:`text_before`) for the chunk's first sentence, else
    ``""``; ``("", "")`` for none."""
    scored = []
    for pos, s in enumerate(split_sentences(text)):
        if not readable(s, strict, before if pos == 0 else ""):
            continue
        ts = terms(s)
        shared = sum(1 for t in ts if weight.get(t, 0) >= 2)
        scored.append((-round(shared / math.sqrt(len(ts) or 1), 6), pos, s))
    if not scored:
        return "", ""
    _, pos, best = min(scored)
    return best, before if pos == 0 else ""
