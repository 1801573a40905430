"""Packing ranked chunks into cited sections under a token budget (pure; the counter is passed in).

Rules, in order:

1. Chunks are taken in rank order. A chunk adjacent to (next ordinal, no unindexed text between,
   :attr:`Piece.joins_next`) or overlapping a chunk already taken from the same document, under the
   same headings (:func:`section_break`: a section never runs on across a heading), joins its section: the overlap is written once, and the text between two chunks is the document's
   own (:attr:`Piece.gap_after`), so a section's text is the document's from its start to its end. A chunk
   that joins two sections (it fills the gap between them) makes them one section, in document
   order, under one citation line.
2. After each addition the rendered context (citation lines + texts, see :mod:`retrieval.render`;
   the doc id is on the first section of each document only)
   is sized with the budget tokenizer -- the habit of canopy's context builder, which measures
   the rendered context rather than estimating it -- but incrementally: every part (citation
   line, section text) is counted once and the sizes are summed with one token per newline run.
   An addition that would take the sum over ``budget_tokens`` is undone.
3. A chunk that would start a new section but does not fit whole is trimmed to the contiguous
   sentences around the one that carries most query terms (:func:`trim_to_match`), if at least
   :data:`MIN_TRIM_TOKENS` budget tokens of text remain; otherwise it is dropped for budget.
4. A chunk whose text equals one already packed (the same bytes twice in one document, or in two
   documents) is a duplicate. Within a document, search has already ranked the first copy first
   (see :mod:`retrieval.stages.dedupe`).
5. A piece marked ``joins_only`` (a neighbour that is there only to complete its match's sentence,
   a chunk that is a heading alone, or a single word) never starts a section of its own. Ranked
   above every chunk next to it, it waits: it joins right after one of them is packed (before the
   pieces ranked below that one), and is dropped if none is. A heading alone joins only the chunk
   after it: a section never ends on the heading that opens the next part (:attr:`Piece.opens_part`).
   Source: bench/budget_recall.py --cjk: issue-67-example.pdf (../shared/corpus), whose heading
   "二、报告期末股东总数及前十名股东持股情况表" was a phrase query's best match, ranked above the
   chunk after it, and was never returned.
6. The evidence wins over the heading: a new section whose text costs fewer tokens than the heading
   path adds to its citation line (a chunk of a few words under a chapter heading such as
   "第十一回 刘皇叔北海救孔融 吕温侯濮阳破曹操", or one trimmed to a clause at a small budget) gets a
   citation line without it (:attr:`docanchor.types.Section.cites_heading` is False; its
   ``heading_path`` stays whole); the room goes to its text and its neighbours. Source: a new-user trial (searchDocuments at 150 tokens answered "允曰:…" and
   "布自收军。" under a 40-token chapter heading).

The final ``context`` is counted exactly; BPE merges across a boundary only lower the real count,
and in the rare case the sum was short the packing is redone with that many tokens held back, so
``context_tokens_used == counter.count(context) <= budget_tokens`` always holds (a test checks it
on random inputs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Protocol, Sequence

from docanchor.fit import least_budget
from docanchor.formats import PAGE, Unit
from docanchor.offsets import Runs, source_offset
from docanchor.tokens import least_tokens
from docanchor.text import (
    CJK_STOP, CLAUSE_END, FULL_STOP, HEADING_MARK, NO_SPACE, SENTENCE_STOP, ends_list_number, ends_passage,
    ends_sentence, has_words, starts_sentence, strip_span, url_start, wraps_url,
)
from docanchor.types import Section
from retrieval.candidate import Fate, Placement
from retrieval.render import citation_line, render_context

_NO_SPACE_CHAR = re.compile(f"[{NO_SPACE}]")
MIN_TRIM_TOKENS = 24
"""Fewer text tokens than this are not worth a trimmed section. Source: a citation line alone is
about 20 budget tokens (:func:`retrieval.render.citation_line`), so less text than that would cost
more in citation than it brings."""

_CANDIDATE_END = re.compile(rf"{FULL_STOP}|{CJK_STOP}|\S(?=[^\S\n]*\n)")
"""Where a sentence may end: after a sentence stop (:data:`docanchor.text.SENTENCE_STOP`) or at a
line's last character. Whether it does is :func:`docanchor.text.ends_sentence`'s decision."""


class HasHeadings(Protocol):
    """A chunk or a piece: what :func:`section_break` reads."""

    heading_path: Sequence[str]


@dataclass(frozen=True)
class Piece:
    """One ranked candidate chunk with what a citation needs.

    ``text == normalised_text[start_char:end_char]`` (characters); ``score`` is its fused score.
    """

    chunk_id: str
    doc_id: str
    ordinal: int
    title: str
    text: str
    start_char: int
    end_char: int
    page_start: int | None = None
    page_end: int | None = None
    heading_path: tuple[str, ...] = ()
    score: float = 0.0
    unit: Unit | None = PAGE
    """What ``page_start``/``page_end`` count (the document format's citation unit)."""
    ends_line: bool = True
    """Whether a line break follows ``end_char`` (False: the piece stops inside a line); used
    only to guess the text up to the next chunk when ``gap_after`` is unknown."""
    joins_only: bool = False
    """The piece only completes a neighbouring chunk's passage (or is a heading alone): it may join
    a section, never start one."""
    lead: str = ""
    """The chunk's text before the piece (a piece cut to a span of its chunk starts later)."""
    gap_after: str | None = None
    """The document's exact text from ``end_char`` to the next chunk's start (the rest of a cut
    chunk, then :attr:`docanchor.types.Chunk.gap_after`); ``None``: unknown, guessed."""
    joins_next: bool = True
    """The next chunk may join this one's section (:attr:`docanchor.types.Chunk.joins_next`)."""
    source_runs: Runs = ()
    """The chunk's offset runs into the decoded file text (:mod:`docanchor.offsets`)."""
    before: str | None = None
    """The document's text just before ``start_char`` (at least the end of the sentence or line
    before; "" at the document's start); ``None``: unknown, the start is taken as a sentence start."""
    after: str | None = None
    """The document's text just after ``end_char``: the gap, then at least the first word of the
    next chunk ("" at the document's end); ``None``: unknown, :attr:`gap_after` alone is judged."""
    page_break_after: bool = True
    """Whether a page break may lie right after ``end_char`` (False: the text after it is known
    to be on the same page, :func:`retrieval.stages.expand.texts_beside`); only a unit counted in
    pages has page breaks at all (:attr:`unit`)."""

    @cached_property
    def opens_part(self) -> bool:
        """The piece is a heading alone (:func:`opens_part`): it may join the piece after it, never
        close the section of the piece before it (:func:`_adjacent`)."""
        return opens_part(self.text, self.heading_path)


@dataclass
class PackedSection(Section):
    """A packed :class:`docanchor.types.Section` that also says whether its text was trimmed."""

    trimmed: bool = False


@dataclass
class PackResult:
    """Sections, the rendered context and each candidate's fate.

    Attributes:
        context_tokens_used: budget tokens of exactly ``context``.
        fates: chunk id -> its :class:`~retrieval.candidate.Placement`: kept in, merged into
            or trimmed into section N, or dropped for budget or as duplicate.
        text_tokens, citation_tokens: tokens of the section texts and of the citation lines,
            each counted alone (their sum may differ from the total by the separators).
    """

    sections: list[PackedSection]
    context: str
    context_tokens_used: int
    fates: dict[str, Placement] = field(default_factory=dict)
    text_tokens: int = 0
    citation_tokens: int = 0


@dataclass
class _Unit:
    """A section under construction: chunks of one document, or one trimmed chunk."""

    doc_id: str
    pieces: list[Piece]
    trim: tuple[int, int] | None = None  # kept character span within the single piece's text
    bare: bool = False  # its citation line leaves out the heading path (rule 6)
    sizes: dict[tuple[int, bool], int] = field(default_factory=dict, compare=False, repr=False)
    """Budget tokens of its citation line and text by ``(section number, doc id shown)``, filled
    by :meth:`_Sizer.total` (a unit is never changed once made: a merge makes a new one)."""

    @cached_property
    def rank_key(self) -> float:
        return max(p.score for p in self.pieces)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences (and lines) of ``text``, whitespace between them excluded:
    ``text`` is cut after a sentence stop or at a line's end where
    :func:`docanchor.text.ends_sentence` says a sentence ends (so "vs." or "e.g." ends none, a
    line break after a colon, before a lowercase letter, inside a URL or at a hard wrap ends none,
    and a table row ends at its line's end)."""
    spans, start = [], 0
    for m in _CANDIDATE_END.finditer(text):
        end = m.end()
        if end <= start or not ends_sentence(text, end):
            continue
        if text[start:end].strip():
            spans.append(strip_span(text, start, end))
        start = end
    if start < len(text) and text[start:].strip():
        spans.append(strip_span(text, start, len(text)))
    return spans


_MARKDOWN_HEADING = re.compile(rf"{HEADING_MARK} [^\n]*")


def is_heading(text: str, heading_path: Sequence[str] = ()) -> bool:
    """Whether ``text`` is a heading alone: a Markdown heading line, or equal (whitespace aside) to
    one of ``heading_path``, the headings its chunk sits under (a PDF's outline entry, a novel's
    chapter line "第十九回 下邳城曹操鏖兵 白门楼吕布殒命"). Such a text names its section -- the
    citation line carries it -- and answers nothing alone (new-user trials over dmca.pdf and the
    novel)."""
    stripped = text.strip()
    if _MARKDOWN_HEADING.fullmatch(stripped):
        return True
    joined = " ".join(stripped.split())
    return any(joined == " ".join(h.split()) for h in heading_path)


def opens_part(text: str, heading_path: Sequence[str] = ()) -> bool:
    """Whether ``text`` (a piece, or the last sentence of a read window) is a heading alone
    (:func:`is_heading`, ``heading_path`` the headings of the chunk holding it), which opens the
    text after it: no passage ends on it, neither a search section (:attr:`Piece.opens_part`) nor
    a read window (:func:`retrieval.read.read_document`), so a reader meets a part under its
    heading. Source: the novel repeats "第三十五回 ..." after that chapter's last sentence, and a
    read window ended on "第九十四回 ..." (new-user trials)."""
    return is_heading(text, heading_path)


def trim_to_match(
    text: str, terms: set[str], max_tokens: int, count: Callable[[str], int], tokenize: Callable[[str], list[str]],
    headings: Sequence[str] = (),
) -> tuple[int, int] | None:
    """The contiguous run of sentences of ``text`` that best carries ``terms`` within ``max_tokens``.

    Starts from the sentence with the most distinct query terms (the first on ties), then grows
    one sentence at a time, after it first, then before it, while the run fits. If the best
    sentence alone is too long, a window of its words is kept (:func:`_cut_around`): the one
    holding the most distinct query terms, starting at the sentence or at the clause or table
    cell of a term. Each sentence
    is counted once and runs are sized by summing; the chosen run is counted exactly and shrunk
    if the sum was short.

    A heading alone (:func:`is_heading`: a Markdown heading, a line equal to one of
    ``headings``) is never the sentence the run starts from: a chapter heading repeats the
    chapter's key words, and a passage of it alone answers nothing (the novel's "吕布 白门楼").

    Args:
        terms: query tokens (as made by ``tokenize``).
        max_tokens: budget tokens the kept text may use.
        count: the budget token counter's ``count``.
        headings: the headings the text's chunk sits under (:attr:`Piece.heading_path`).

    Returns:
        ``(start, end)`` character offsets into ``text``, or ``None`` when nothing of at least
        a few words fits. The kept text always holds a letter or digit.
    """
    spans = sentence_spans(text)
    if not spans or max_tokens <= 0:
        return None
    hits = [len(terms.intersection(tokenize(text[s:e]))) for s, e in spans]
    # text, not a lone "|" or "---", nor a heading alone (the citation line names it)
    worded = [any(ch.isalnum() for ch in text[s:e]) and not is_heading(text[s:e], headings) for s, e in spans]
    if not any(worded):
        return None
    best = max(range(len(spans)), key=lambda i: (worded[i], hits[i], -i))
    sizes = [count(text[s:e]) for s, e in spans]
    if sizes[best] > max_tokens:
        return _cut_around(text, spans[best][0], spans[best][1], max_tokens, count, terms, tokenize)
    lo = hi = best
    total = sizes[best]
    grew = True
    while grew:
        grew = False
        for cand in (hi + 1, lo - 1):
            if 0 <= cand < len(spans) and total + sizes[cand] <= max_tokens:
                lo, hi, total, grew = min(lo, cand), max(hi, cand), total + sizes[cand], True
    while count(text[spans[lo][0] : spans[hi][1]]) > max_tokens and hi > lo:
        if hi - best >= best - lo:
            hi -= 1
        else:
            lo += 1
    return spans[lo][0], spans[hi][1]


_WORD = re.compile(r"\S+")
MAX_WINDOW_STARTS = 12
"""Most window starts tried in one over-long sentence (each costs a binary search of counts).
Source: a bound on work per trimmed piece, not tuned."""


def _cut_around(
    text: str, s: int, e: int, max_tokens: int, count: Callable[[str], int], terms: set[str],
    tokenize: Callable[[str], list[str]],
) -> tuple[int, int] | None:
    """The window of ``text[s:e]`` (one sentence longer than ``max_tokens`` budget tokens) that
    holds the most distinct query terms: tried from the sentence start and from the start of the
    clause or table cell (``, ; |`` ...) of each word carrying a term (or the start of the URL
    that clause starts inside, :func:`docanchor.text.url_start`), cut at a word end under the
    limit; the earliest wins a tie. A long unpunctuated paragraph or a wide CSV row thus keeps the
    words around the match, not its first words."""
    starts = [s]
    for m in _WORD.finditer(text, s, e):
        if len(starts) > MAX_WINDOW_STARTS:
            break
        if terms.intersection(tokenize(m.group())):
            last = None
            for b in _FIELD_BREAK.finditer(text, s, m.start()):
                last = b
            start = m.start() if last is None else strip_span(text, last.end(), m.end())[0]
            in_url = url_start(text, start)
            start = in_url if in_url is not None and in_url >= s else start  # never inside a URL
            if start not in starts:
                starts.append(start)
    best, best_hits = None, -1
    for start in starts:
        span = _cut_words(text, start, e, max_tokens, count)
        if span is None:
            continue
        hits = len(terms.intersection(tokenize(text[span[0]:span[1]])))
        if hits > best_hits:
            best, best_hits = span, hits
    if best is not None and best[0] > s and strip_span(text, best[1], e)[0] == e:
        best = (_fill_back(text, s, best, max_tokens, count), best[1])  # room left before the match
    return best


def _fill_back(text: str, s: int, span: tuple[int, int], max_tokens: int, count: Callable[[str], int]) -> int:
    """The earliest word start in ``text[s:span[0]]`` from which ``text[start:span[1]]`` still fits
    ``max_tokens`` budget tokens (``span[0]`` itself when none does)."""
    lo, hi = s, span[0]  # binary search: text[hi:end] fits; find the smallest such start
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if count(text[mid:span[1]]) <= max_tokens:
            hi = mid
        else:
            lo = mid
    start = hi if count(text[lo:span[1]]) > max_tokens else lo
    while start < span[0] and start > s and not text[start - 1].isspace():  # to a word start
        start += 1
    return strip_span(text, start, span[1])[0]


def _cut_words(text: str, s: int, e: int, max_tokens: int, count: Callable[[str], int]) -> tuple[int, int] | None:
    """The longest start of ``text[s:e]`` that fits ``max_tokens`` budget tokens with the
    :data:`ELLIPSIS` a cut mid-sentence gets (:func:`cut_end`), or ``None`` under 20 characters."""
    if count(text[s:e]) <= max_tokens:  # the rest fits whole (a window started inside the sentence)
        return strip_span(text, s, e) if e - s >= 20 else None
    lo, hi = s, e  # binary search for the longest prefix that fits, then back to a boundary
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if count(text[s:mid] + ELLIPSIS) <= max_tokens:
            lo = mid
        else:
            hi = mid
    end = strip_span(text, s, cut_end(text, s, lo))[1]
    end = _before_dangling_label(text, s, end)
    if end - s < 20:
        return None
    return s, end


ELLIPSIS = "…"
"""Written after a trimmed passage that stops inside a sentence (counted in the budget)."""


MIN_CUT_WORDS = 4
"""A sentence or clause end closer than this many words to a passage's start is not where it is
cut (:func:`cut_end`), so a cut keeps more than a label. Counted with
:func:`docanchor.text.word_count` (a CJK character is one word). Source: the 20 characters of
English the rule was first written with are about 4 words, while 20 characters of Chinese are 20
words and passed over the clause marks of a short sentence ("昔我三人桃园结义,誓同生死;...",
tests/test_pack.py)."""


def cut_end(text: str, s: int, limit: int) -> int:
    """Where a passage ``text[s:...]`` that may not pass ``limit`` (a character offset) ends: after
    the last sentence end in ``text[s:limit]`` (:data:`docanchor.text.SENTENCE_STOP`, not a list
    item's number: :func:`docanchor.text.ends_list_number`); if none,
    after the last clause boundary (:data:`docanchor.text.CLAUSE_END`); if none, at the last space (a word
    end); else at ``limit`` (CJK text without punctuation) -- but never inside a word or URL
    (:func:`_inside_word`): then at the space before it, or at ``s`` (nothing) when there is none.
    Sentence and clause ends closer than :data:`MIN_CUT_WORDS` words to ``s``, and spaces closer
    than 20 characters, are not used.
    Only a sentence end leaves no :data:`ELLIPSIS` (:func:`docanchor.text.ends_sentence`)."""
    for pattern in (SENTENCE_STOP, CLAUSE_END):
        last = None
        for m in pattern.finditer(text, s, min(len(text), limit + 1)):  # one more: what follows
            if m.end() <= limit and not ends_list_number(text, m.end()):
                last = m
        if last is not None and has_words(text[s:last.end()], MIN_CUT_WORDS):
            return last.end()
    cut = text.rfind(" ", s, limit + 1)
    if cut - s >= 20:
        return cut
    return max(cut, s) if _inside_word(text, limit) else limit


def _inside_word(text: str, i: int) -> bool:
    """Whether offset ``i`` falls inside a run of non-space characters that are not Chinese or
    Japanese (a word or a URL; CJK text has no spaces and may be cut between any two characters),
    or at a line break inside a URL the text wraps (:func:`docanchor.text.wraps_url`: a URL is one
    unit, "independent.co.uk/s" / "port/football/...", norwich-city.txt)."""
    if not 0 < i < len(text):
        return False
    if text[i] == "\n" or text[i - 1] == "\n":
        return wraps_url(text, i if text[i] == "\n" else i - 1)
    return (not text[i - 1].isspace() and not text[i].isspace()
            and not (_NO_SPACE_CHAR.match(text[i - 1]) and _NO_SPACE_CHAR.match(text[i])))


_LABEL_TAIL = re.compile(r"[:：]$")
_FIELD_BREAK = re.compile(r"[.!?;,。！？；，、](?=\s)|\s\|\s|\n")


def _before_dangling_label(text: str, s: int, end: int) -> int:
    """``end``, or an earlier end when ``text[s:end]`` stops on a label or cell separator with its
    value cut off ("... | qty: 14 | postcode:", "Status:"): the last clause or table-cell boundary
    before it, if at least 20 characters remain. Unchanged when there is no such boundary."""
    while end > s and text[end - 1] in "|│ \t":  # a trailing cell separator goes first
        end -= 1
    if not _LABEL_TAIL.search(text[s:end]):
        return end
    last = None
    for m in _FIELD_BREAK.finditer(text, s, end - 1):
        last = m
    if last is None:
        return end
    new_end = last.end() if last.group()[0] in ".!?;,。！？；，、" else last.start()
    new_end = strip_span(text, s, new_end)[1]
    return new_end if new_end - s >= 20 else end


def section_break(a: HasHeadings, b: HasHeadings) -> bool:
    """Whether a heading separates the neighbouring chunks (or pieces) ``a`` and ``b``: their
    heading paths (the headings each sits under) differ. Chunking never lets a chunk cross a
    heading (:mod:`ingest.chunking`), so a chunk that opens a section has that section's path;
    this holds for every format with headings (Markdown, DOCX, PDF outlines, slides, sheets).
    Neither expansion (:mod:`retrieval.stages.expand`) nor packing (:func:`_adjacent`) joins
    text across one (the README: "not across headings")."""
    return tuple(a.heading_path) != tuple(b.heading_path)


def _adjacent(unit: _Unit, p: Piece) -> bool:
    """``p`` continues or precedes a piece of ``unit`` (next ordinal, with no unindexed text
    between them, :attr:`Piece.joins_next`) or overlaps one, under the same headings
    (:func:`section_break`: a section never runs on across a heading; each side is cited under
    its own). Source: case a14, a section from the end of "## Yard procedures" across
    "## Contacts" cited under "Yard procedures" alone. A heading alone (:attr:`Piece.opens_part`)
    is never continued from the piece before it, even under the same headings: a section never
    ends on the heading that opens the next part (the novel repeats "第三十五回 玄德南漳逢隐沧
    单福新野遇英主" after that chapter's last sentence)."""
    if unit.doc_id != p.doc_id:
        return False
    return any(
        not section_break(q, p) and (
            (q.ordinal + 1 == p.ordinal and q.joins_next and not p.opens_part)
            or (p.ordinal + 1 == q.ordinal and p.joins_next and not q.opens_part)
            or (p.start_char < q.end_char and q.start_char < p.end_char))
        for q in unit.pieces
    )


def _between(before: Piece, after: Piece) -> str:
    """The document's text between two pieces of one section: exact from ``gap_after`` and
    ``lead`` when known, else guessed (chunks stored before those existed)."""
    n = after.start_char - before.end_char
    if before.gap_after is not None and before.ordinal + 1 == after.ordinal:
        exact = before.gap_after + after.lead
        if len(exact) == n:
            return exact
    return "" if not n else " " if not before.ends_line else "\n" if n == 1 else "\n\n"


def _unit_text(unit: _Unit) -> tuple[str, int, int, str, str]:
    """Text and character span of a unit: the document's text from its first piece's start (past
    a word's tail, :func:`_word_tail`) to its last piece's end (overlapping chunks written once),
    between the ellipses of :func:`_head` and :func:`_tail`; then those two (the context holds
    them, the section's text does not)."""
    if unit.trim is not None:
        p = unit.pieces[0]
        s, e = unit.trim
        head, tail = _head(unit, p.text), _tail(unit, p.text)
        return head + p.text[s:e] + tail, p.start_char + s, p.start_char + e, head, tail
    text, start, end = _joined(unit)
    skip = _word_tail(unit, text)
    head, tail = _head(unit, text, skip), _tail(unit, text)
    return head + text[skip:] + tail, start + skip, end, head, tail


def _joined(unit: _Unit) -> tuple[str, int, int]:
    """The document's text from an untrimmed unit's first piece's start to its last piece's end,
    and that span (character offsets)."""
    pieces = sorted(unit.pieces, key=lambda p: (p.start_char, p.ordinal))
    text, last = pieces[0].text, pieces[0]
    for p in pieces[1:]:
        if p.end_char <= last.end_char:
            continue
        if p.start_char >= last.end_char:
            text += _between(last, p) + p.text
        else:
            text += p.text[last.end_char - p.start_char :]
        last = p
    return text, pieces[0].start_char, last.end_char


_HYPHEN_BREAK = re.compile(r"[^\W\d_]-\s*\n\s*$")
"""Text that ends with a word hyphenated across a line break ("Develop-\\n\\n")."""
_TAIL_START = re.compile(r"[a-z]")


def _word_tail(unit: _Unit, text: str) -> int:
    """Characters at the start of an untrimmed unit's ``text`` to leave out, up to the next
    sentence (:func:`sentence_spans`), so a passage never starts on a scrap of the sentence before:

    - the tail of a word hyphenated across a line break ("Develop-\\n\\nment", dmca.pdf: a
      heading that the PDF's text glued to the paragraph before it, then split over a page break);
    - the tail of a sentence begun before the unit (the text before it ends no sentence,
      :func:`docanchor.text.ends_sentence`, and it starts no block, :func:`docanchor.text.starts_sentence`)
      that is shorter than :data:`MIN_CUT_WORDS` words ("…兵。", "…近前。", the
      novel): the same measure a cut's end keeps (:func:`cut_end`).

    0 when it does not start on one, when the text before it is unknown, or when no sentence
    follows."""
    first = min(unit.pieces, key=lambda p: (p.start_char, p.ordinal))
    if not first.before:
        return 0
    hyphen = _HYPHEN_BREAK.search(first.before) is not None and _TAIL_START.match(text) is not None
    end = len(first.before.rstrip())
    whole = first.before + text
    if not hyphen and (not end or ends_sentence(whole, end) or starts_sentence(whole, len(first.before))):
        return 0  # it starts a sentence, a block (a heading, a list item), or a list entry's next sentence
    spans = sentence_spans(text)
    if len(spans) < 2 or (not hyphen and has_words(text[:spans[0][1]], MIN_CUT_WORDS)):
        return 0
    return spans[1][0]


def _head(unit: _Unit, text: str, skip: int | None = None) -> str:
    """:data:`ELLIPSIS` for a unit that starts inside a sentence (the document's text before it,
    :attr:`Piece.before`, ends none, or it resumes one: :func:`docanchor.text.starts_sentence`), else ``""``; like
    :func:`_tail`, in the context and its budget, not in the section's text. ``text`` is the unit's
    span text (its single piece's text when trimmed, else :func:`_joined`'s); it is judged with the document's text before and after it (a start inside
    a numbered entry is known by the next entry's number, :func:`docanchor.text.in_list_entry`).
    ``skip``: the untrimmed unit's :func:`_word_tail` of ``text``, when known."""
    first = min(unit.pieces, key=lambda p: (p.start_char, p.ordinal))
    if first.before is None:
        return ""
    at = unit.trim[0] if unit.trim is not None else _word_tail(unit, text) if skip is None else skip
    last = max(unit.pieces, key=lambda p: (p.end_char, p.ordinal))
    return "" if starts_sentence(first.before + text + _after(last), len(first.before) + at) else ELLIPSIS


def _tail(unit: _Unit, text: str) -> str:
    """:data:`ELLIPSIS` for a unit that stops inside a sentence (trimmed, or at a chunk's end at a
    hard-wrapped line or inside a wrapped URL) or inside an open quotation, else ``""``
    (:func:`docanchor.text.ends_passage`, judged with the document's text before and after the
    unit). It is part of the unit's text in the context (and its budget), not of the section's
    text, which stays the document's text between its offsets. ``text`` is the unit's
    span text, as :func:`_head`'s. Only where a page break may lie after the unit
    (:func:`_pages_after`: a document counted in pages, :data:`docanchor.formats.PAGE`, and the
    text after it not known to be on the same page) is prose broken off there taken for cut; else
    a blank line there ends its paragraph, with or without a final stop (nothing is cut)."""
    first = min(unit.pieces, key=lambda p: (p.start_char, p.ordinal))
    last = max(unit.pieces, key=lambda p: (p.end_char, p.ordinal))
    before = first.before or ""
    end = len(before) + (unit.trim[1] if unit.trim is not None else len(text))
    return "" if ends_passage(before + text + _after(last), end, pages=_pages_after(unit, last)) else ELLIPSIS


def _pages_after(unit: _Unit, last: Piece) -> bool:
    """Whether a page break may lie right after ``unit``'s text, whose last piece is ``last``: in
    a document counted in pages, after a piece that may have one after it
    (:attr:`Piece.page_break_after`), or inside a piece trimmed short of its end that spans pages."""
    if last.unit != PAGE:
        return False
    if unit.trim is not None and last.text[unit.trim[1]:].strip():
        return last.page_start is None or last.page_start != last.page_end
    return last.page_break_after


def _after(p: Piece) -> str:
    """The document's text after piece ``p`` as far as it is known: :attr:`Piece.after` (the gap
    and the next chunk's first words), else :attr:`Piece.gap_after`, else a line break or a space
    (:attr:`Piece.ends_line`); empty only at the document's end."""
    if p.after is not None:
        return p.after
    if p.gap_after:
        return p.gap_after
    return "\n" if p.ends_line else " "


def _holds_text(p: Piece, start: int) -> bool:
    """Whether piece ``p`` holds text of a section starting at character offset ``start`` (not a
    word's tail left out before it, :func:`_word_tail`)."""
    return p.end_char > start


def _source_span(unit: _Unit, start: int, end: int) -> tuple[int | None, int | None]:
    """``(source_start, source_end)`` of a unit's span, from the runs of the pieces holding its
    start (its first piece, or the next one when a word's tail is left out) and its end;
    ``(None, None)`` when either has none."""
    first = min([p for p in unit.pieces if _holds_text(p, start)] or unit.pieces, key=lambda p: (p.start_char, p.ordinal))
    last = max(unit.pieces, key=lambda p: (p.end_char, p.ordinal))
    a, b = source_offset(first.source_runs, start), source_offset(last.source_runs, end)
    return (a, b) if a is not None and b is not None else (None, None)


def _pages(pieces: Sequence[Piece]) -> tuple[int | None, int | None]:
    starts = [p.page_start for p in pieces if p.page_start is not None]
    ends = [p.page_end if p.page_end is not None else p.page_start for p in pieces if p.page_start is not None]
    return (min(starts), max(ends)) if starts else (None, None)


def _heading(pieces: Sequence[Piece]) -> tuple[str, ...]:
    """The heading path of the section: the one its pieces share (:func:`_adjacent` joins no
    piece across a heading)."""
    return min(pieces, key=lambda p: (p.start_char, p.ordinal)).heading_path


def _citations(parts: Sequence[tuple[str, str, int | None, int | None, tuple[str, ...], Unit | None]]) -> list[str]:
    """Citation lines for sections' ``(title, doc_id, page_start, page_end, heading_path, unit)``
    in context order: numbered from 1, the doc id on each document's first section only."""
    lines: list[str] = []
    cited: set[str] = set()
    for n, (title, doc_id, page_start, page_end, heading, unit) in enumerate(parts, 1):
        lines.append(citation_line(n, title, doc_id, page_start, page_end, heading,
                                   show_doc_id=doc_id not in cited, unit=unit))
        cited.add(doc_id)
    return lines


def _materialise(units: list[_Unit], sizer: "_Sizer") -> tuple[list[PackedSection], str]:
    parts = [sizer.unit_parts(unit) for unit in units]
    sections = []
    shown = []
    for unit, ((text, start, end, head, tail), (title, _, page_start, page_end, heading, page_unit)), cite in zip(
        units, parts, _citations([cite_parts for _, cite_parts in parts])
    ):
        source_start, source_end = _source_span(unit, start, end)
        shown.append((cite, text))
        text = text[len(head):len(text) - len(tail)]
        sections.append(PackedSection(
            doc_id=unit.doc_id, title=title, text=text, start_char=start, end_char=end,
            page_start=page_start, page_end=page_end, heading_path=_heading(unit.pieces), unit=page_unit,
            score=max(p.score for p in unit.pieces), cites_heading=not unit.bare,
            chunk_ids=[p.chunk_id for p in sorted(unit.pieces, key=lambda p: p.ordinal) if _holds_text(p, start)],
            citation=cite, n_tokens=0, source_start=source_start, source_end=source_end,
            trimmed=unit.trim is not None, tail=tail, head=head,
        ))
    return sections, render_context(shown)


class _Sizer:
    """Budget tokens of a rendered context, summed from its parts (each part counted once).

    The context is ``cite_1 + "\n" + text_1 + "\n\n" + cite_2 + ...``; its size is estimated
    as the sum of the parts' counts plus one token per newline run. BPE merges across a
    boundary only make the real count smaller, so the estimate is almost always an upper
    bound; :func:`pack` checks the final context exactly and repacks with a margin if not.
    """

    def __init__(self, count: Callable[[str], int]) -> None:
        self.count = count
        self._memo: dict[str, int] = {}
        self._units: dict[tuple, tuple[tuple[str, int, int, str, str], tuple]] = {}

    def of(self, text: str) -> int:
        n = self._memo.get(text)
        if n is None:
            n = self._memo[text] = self.count(text)
        return n

    def unit_parts(self, unit: _Unit) -> tuple[tuple[str, int, int, str, str], tuple]:
        """The unit's :func:`_unit_text` and what its citation line is made of
        (cached per unit content)."""
        key = (tuple(p.chunk_id for p in unit.pieces), unit.trim, unit.bare)
        got = self._units.get(key)
        if got is None:
            page_start, page_end = _pages(unit.pieces)
            first = unit.pieces[0]
            heading = () if unit.bare else _heading(unit.pieces)
            got = (_unit_text(unit), (first.title, unit.doc_id, page_start, page_end, heading, first.unit))
            self._units[key] = got
        return got

    def total(self, units: Sequence[_Unit]) -> int:
        """The estimated size of the context of ``units``: in rank order, numbered from 1, the
        doc id on each document's first section (as :func:`_citations` writes them)."""
        size = max(0, len(units) - 1)  # the "\n\n" separators
        for unit, number, show_doc_id in _places(units):
            size += self.section(unit, number, show_doc_id) + 1
        return size

    def section(self, unit: _Unit, number: int, show_doc_id: bool) -> int:
        """Budget tokens of the unit's citation line as section ``number`` and of its text
        (remembered on the unit: the same sections are sized for every piece tried)."""
        key = (number, show_doc_id)
        size = unit.sizes.get(key)
        if size is None:
            (text, *_), (title, doc_id, page_start, page_end, heading, page_unit) = self.unit_parts(unit)
            cite = citation_line(number, title, doc_id, page_start, page_end, heading, show_doc_id=show_doc_id,
                                 unit=page_unit)
            size = unit.sizes[key] = self.of(cite) + self.of(text)
        return size


def _places(units: Sequence[_Unit]) -> list[tuple[_Unit, int, bool]]:
    """``(unit, section number, doc id shown)`` in context order: by rank (stable), numbered from
    1, the doc id on each document's first section."""
    cited: set[str] = set()
    out = []
    for number, unit in enumerate(sorted(units, key=lambda u: -u.rank_key), 1):
        out.append((unit, number, unit.doc_id not in cited))
        cited.add(unit.doc_id)
    return out


def pack(
    pieces: Sequence[Piece],
    budget_tokens: int,
    count: Callable[[str], int],
    *,
    query_terms: set[str] | None = None,
    tokenize: Callable[[str], list[str]] = lambda t: t.lower().split(),
) -> PackResult:
    """Pack ``pieces`` (best first) into sections whose rendered context fits ``budget_tokens``.

    Args:
        pieces: ranked candidates; ``score`` should fall with rank.
        budget_tokens: the most budget tokens the rendered context may use.
        count: the budget tokenizer's ``count`` (``TokenCounter.count``); a byte-level BPE
            count, so never more than the text's UTF-8 bytes and never less than
            :func:`docanchor.tokens.least_tokens` (the packer skips counting a piece that fits
            by its bytes, or cannot fit by its words).
        query_terms: query tokens used to pick the sentences kept when trimming.
        tokenize: the tokenizer that made ``query_terms``, applied to sentences.

    Returns:
        A :class:`PackResult`; no sections and ``context == ""`` when nothing fits.
        ``context_tokens_used == count(context) <= budget_tokens`` always.
    """
    margin = 0
    for _ in range(4):
        result = _pack_once(pieces, budget_tokens, budget_tokens - margin, count, query_terms or set(),
                            tokenize)
        if result.context_tokens_used <= budget_tokens:
            return result
        margin += result.context_tokens_used - (budget_tokens - margin) + 2
    return PackResult([], "", 0, {p.chunk_id: Placement(Fate.DROPPED_FOR_BUDGET) for p in pieces})


def least_budget_for(
    pieces: Sequence[Piece], above: int, count: Callable[[str], int], *, query_terms: set[str] | None = None,
    tokenize: Callable[[str], list[str]] = lambda t: t.lower().split(),
) -> int:
    """The least budget (budget tokens) above ``above`` at which :func:`pack` returns a section of
    ``pieces`` (non-empty), searched by :func:`docanchor.fit.least_budget` from the guess "the
    best piece's citation line, a newline and :data:`MIN_TRIM_TOKENS` tokens of text"."""
    p = pieces[0]
    cite = citation_line(1, p.title, p.doc_id, p.page_start, p.page_end, p.heading_path, unit=p.unit)
    near = count(cite) + 1 + MIN_TRIM_TOKENS
    return least_budget(lambda budget: bool(pack(pieces, budget, count, query_terms=query_terms,
                                                 tokenize=tokenize).sections), near, above)


def _pack_once(
    pieces: Sequence[Piece], budget_tokens: int, limit: int, count: Callable[[str], int], terms: set[str],
    tokenize: Callable[[str], list[str]],
) -> PackResult:
    """One packing pass against ``limit`` (estimated sizes); the result is counted exactly."""
    packer = _Packer(limit, count, terms, tokenize)
    fates: dict[str, Fate] = {}
    waiting: list[Piece] = []  # joins-only pieces ranked above every piece next to them (rule 5)
    for p in pieces:
        if packer.alone(p):
            waiting.append(p)
            fates[p.chunk_id] = Fate.DROPPED_FOR_BUDGET  # unless a piece next to it is packed
            continue
        fates[p.chunk_id] = packer.try_add(p)
        if waiting and fates[p.chunk_id] is Fate.KEPT:
            _join_waiting(packer, waiting, fates)
    sizer = packer.sizer
    sections, context = _materialise(sorted(packer.units, key=lambda u: -u.rank_key), sizer)
    used = count(context)
    if used > budget_tokens:  # the summed estimate was short: the caller repacks with a margin
        return PackResult([], "", used, {cid: Placement(f) for cid, f in fates.items()})
    for s in sections:
        s.n_tokens = sizer.of(s.text)
    return PackResult(
        sections=sections, context=context, context_tokens_used=used, fates=_placements(fates, sections, pieces),
        text_tokens=sum(s.n_tokens for s in sections),
        citation_tokens=sum(sizer.of(s.citation) for s in sections),
    )


def _join_waiting(packer: _Packer, waiting: list[Piece], fates: dict[str, Fate]) -> None:
    """Add the ``waiting`` pieces (best first) that a packed piece is next to now, each as soon as
    one is (a joined piece may be next to another waiting one); they leave ``waiting``."""
    joined = True
    while joined:
        joined = False
        for p in list(waiting):
            if not packer.alone(p):
                waiting.remove(p)
                fates[p.chunk_id] = packer.try_add(p)
                joined = joined or fates[p.chunk_id] is Fate.KEPT


class _Packer:
    """The sections of one packing pass, grown one piece at a time (rules 1-5 of the module)."""

    def __init__(self, limit: int, count: Callable[[str], int], terms: set[str],
                 tokenize: Callable[[str], list[str]]) -> None:
        self.sizer = _Sizer(count)
        self.limit, self.terms, self.tokenize = limit, terms, tokenize
        self.units: list[_Unit] = []
        self.used = 0
        self.seen_text: set[str] = set()
        self.places: dict[int, tuple[int, bool]] = {}  # id(unit) -> (section number, doc id shown)
        self.docs: set[str] = set()
        self.lowest = 0.0  # the least rank key of the units

    def alone(self, p: Piece) -> bool:
        """``p`` joins only (rule 5) and no packed piece is next to it (nor is its text packed)."""
        return (p.joins_only and p.text.strip() not in self.seen_text
                and not any(u.doc_id == p.doc_id and _adjacent(u, p) for u in self.units))

    def try_add(self, p: Piece) -> Fate:
        """Add ``p`` to the sections if it fits (whole, or trimmed as a new section)."""
        if p.text.strip() in self.seen_text:
            return Fate.DUPLICATE
        hosts = [u for u in self.units if u.doc_id == p.doc_id and _adjacent(u, p)]
        if p.joins_only and not hosts:
            return Fate.DROPPED_FOR_BUDGET  # its match did not fit, and it means nothing alone
        if any(h.trim is not None for h in hosts):
            return Fate.DROPPED_FOR_BUDGET
        # too large whole: decided before any trial is built (its text is counted only when
        # neither its UTF-8 bytes, more than its tokens, nor its words, fewer, settle it)
        most = self.limit + 24 - self.used
        if len(p.text.encode("utf-8")) > most and (least_tokens(p.text) > most or self.sizer.of(p.text) > most):
            return Fate.DROPPED_FOR_BUDGET if hosts else self._try_trimmed(p)
        if hosts:  # joins its section; a chunk that bridges two sections makes them one
            new = _Unit(p.doc_id, [q for h in hosts for q in h.pieces] + [p], bare=any(h.bare for h in hosts))
            bridged = {id(h) for h in hosts[1:]}
            trial = [new if u is hosts[0] else u for u in self.units if id(u) not in bridged]
        else:
            new = _Unit(p.doc_id, [p], bare=self._bare(p))
            trial = self.units + [new]
        total = self._total(trial, new, hosts)
        if total <= self.limit:
            self._take(p, trial, total, new, hosts)
            return Fate.KEPT
        if hosts:
            return Fate.DROPPED_FOR_BUDGET
        return self._try_trimmed(p)

    def _try_trimmed(self, p: Piece) -> Fate:
        """A new section that does not fit whole keeps the sentences that carry the match; when
        they come to fewer tokens than its heading path costs in the citation line, it is trimmed
        again without the heading (rule 6), which leaves that much more room for them."""
        if self._no_room(p, bare=False) and (not p.heading_path or self._no_room(p, bare=True)):
            return Fate.DROPPED_FOR_BUDGET  # as below, without trying: neither citation line leaves room
        got = self._trimmed(p, bare=False)
        heading = self._heading_tokens(p)
        if heading and (got is None or self.sizer.of(self.sizer.unit_parts(got[0][-1])[0][0]) < heading):
            got = self._trimmed(p, bare=True) or got
        if got is None:
            return Fate.DROPPED_FOR_BUDGET
        self._take(p, *got, [])
        return Fate.TRIMMED

    def _trimmed(self, p: Piece, bare: bool) -> tuple[list[_Unit], int, _Unit] | None:
        """The sections with ``p`` added trimmed to fit, their size and the new unit; ``None`` if
        nothing of it fits. ``bare``: its citation line leaves out the heading path."""
        room = self._room(p, bare)
        while room >= MIN_TRIM_TOKENS:
            span = trim_to_match(p.text, self.terms, room, self.sizer.of, self.tokenize, p.heading_path)
            if span is None:
                break
            new = _Unit(p.doc_id, [p], trim=span, bare=bare)
            trial = self.units + [new]
            total = self._total(trial, new, [])
            if total <= self.limit:
                return trial, total, new
            room -= max(total - self.limit, 4)
        return None

    def _room(self, p: Piece, bare: bool) -> int:
        """Budget tokens left for ``p``'s text as a new section after its citation line (without
        the heading path when ``bare``), the newline after it and the separator before it."""
        return self._spare() - self.sizer.of(self._new_cite(p, bare))

    def _no_room(self, p: Piece, bare: bool) -> bool:
        """``_room(p, bare) < MIN_TRIM_TOKENS``, the citation line counted only when its words
        (:func:`docanchor.tokens.least_tokens`) do not settle it."""
        cite = self._new_cite(p, bare)
        most = self._spare() - MIN_TRIM_TOKENS
        return least_tokens(cite) > most or self.sizer.of(cite) > most

    def _new_cite(self, p: Piece, bare: bool) -> str:
        """``p``'s citation line as a new section (without the heading path when ``bare``)."""
        return citation_line(len(self.units) + 1, p.title, p.doc_id, p.page_start, p.page_end,
                             () if bare else p.heading_path, unit=p.unit)

    def _spare(self) -> int:
        """Budget tokens left for a new section's citation line and text (after the separator
        before it and the newline between them)."""
        return self.limit - self.used - (1 if self.units else 0) - 1

    def _bare(self, p: Piece) -> bool:
        """Whether ``p`` as a new section costs fewer tokens than its heading path adds to its
        citation line (rule 6). The heading adds at most the whole line, so a text at least that
        long is settled without the line that leaves the heading out."""
        if not p.heading_path:
            return False
        n = len(self.units) + 1
        full = self.sizer.of(citation_line(n, p.title, p.doc_id, p.page_start, p.page_end, p.heading_path,
                                           unit=p.unit))
        if least_tokens(p.text) >= full:  # settled by its words, without counting it
            return False
        text = self.sizer.of(p.text)
        return text < full and text < full - self.sizer.of(
            citation_line(n, p.title, p.doc_id, p.page_start, p.page_end, unit=p.unit))

    def _heading_tokens(self, p: Piece) -> int:
        """Budget tokens the heading path adds to ``p``'s citation line (0 without one)."""
        if not p.heading_path:
            return 0
        n = len(self.units) + 1
        full = citation_line(n, p.title, p.doc_id, p.page_start, p.page_end, p.heading_path, unit=p.unit)
        return self.sizer.of(full) - self.sizer.of(citation_line(n, p.title, p.doc_id, p.page_start, p.page_end,
                                                                 unit=p.unit))

    def _ranks_last(self, new: _Unit, hosts: list[_Unit]) -> bool:
        """``new`` is added after every unit in context order (sorting is stable: a tie goes last)."""
        return not hosts and (not self.units or new.rank_key <= self.lowest)

    def _total(self, trial: list[_Unit], new: _Unit, hosts: list[_Unit]) -> int:
        """``sizer.total(trial)``, where ``trial`` is the units with ``new`` added or in place of
        ``hosts``: from the current size when no other unit's section number or doc id changes
        (``new`` ranks last, or takes its one host's place and rank key), else summed anew."""
        if self._ranks_last(new, hosts):
            size = self.sizer.section(new, len(self.units) + 1, new.doc_id not in self.docs) + 1
            return self.used + 1 + size if self.units else size
        if len(hosts) == 1 and new.rank_key == hosts[0].rank_key:
            number, shown = self.places[id(hosts[0])]
            return self.used - self.sizer.section(hosts[0], number, shown) + self.sizer.section(new, number, shown)
        return self.sizer.total(trial)

    def _take(self, p: Piece, units: list[_Unit], total: int, new: _Unit, hosts: list[_Unit]) -> None:
        """Make ``units`` (the units with ``new`` added or in place of ``hosts``) the sections."""
        if self._ranks_last(new, hosts):
            self.places[id(new)] = (len(self.units) + 1, new.doc_id not in self.docs)
            self.lowest = new.rank_key
        elif len(hosts) == 1 and new.rank_key == hosts[0].rank_key:
            self.places[id(new)] = self.places.pop(id(hosts[0]))
        else:
            self.places = {id(unit): (number, shown) for unit, number, shown in _places(units)}
            self.lowest = min(unit.rank_key for unit in units)
        self.docs.add(new.doc_id)
        self.units, self.used = units, total
        self.seen_text.add(p.text.strip())


def _placements(fates: dict[str, Fate], sections: list[PackedSection], pieces: Sequence[Piece]) -> dict[str, Placement]:
    """Fates with their section numbers: a section's best-scored chunk is kept in it, the others
    merged into it; a chunk packed but left out of its section's text (a word's tail,
    :func:`_word_tail`) is :attr:`Fate.WORD_TAIL`."""
    index = {cid: n for n, s in enumerate(sections, 1) for cid in s.chunk_ids}
    key = {p.chunk_id: (p.score, -i) for i, p in enumerate(pieces)}  # on a tie the earlier piece
    out: dict[str, Placement] = {}
    for cid, fate in fates.items():
        if fate is Fate.KEPT and cid not in index:
            out[cid] = Placement(Fate.WORD_TAIL)
        elif fate is Fate.KEPT:
            n = index[cid]
            best = max(sections[n - 1].chunk_ids, key=lambda c: key[c])
            out[cid] = Placement(Fate.KEPT if cid == best else Fate.MERGED, n)
        elif fate is Fate.TRIMMED:
            out[cid] = Placement(Fate.TRIMMED, index[cid])
        else:
            out[cid] = Placement(fate)
    return out
