"""Read more: a contiguous window of one document under a token budget, with a cursor.

The document's text is rebuilt from its chunks in ordinal order using their character offsets
(overlaps are written once; the text between chunks is the document's own, :attr:`Chunk.gap_after`,
except where unindexed text lies between them, which reads as line breaks). A window rebuilds
only the part around it, from the chunks it reads by id (:class:`_Chunks`): a few before its
start and on to past the furthest end it may take, never the whole document. A window starts at the beginning,
a heading, a page, a chunk ordinal or a cursor, and its rendered form -- one header line, a
newline, the text (:func:`render_window`) -- is at most ``budget_tokens`` budget tokens, counted
on the exact returned string. The window ends, in order of preference:

1. after the most whole sentences that fit (and, when those fill less than half the budget
   because the next sentence is long, or are a heading alone, after the most whole words of
   that sentence that fit: a word ends at whitespace, but not at a line break hard-wrapping
   Chinese or Japanese text, and after a clause's comma or semicolon),
   but never on a heading alone that opens the next part (:func:`retrieval.pack.opens_part`, the
   rule search sections follow): the window stops before it and the next one starts at it;
2. when not even one sentence fits, after the most whole words (cut at whitespace) that fit;
3. when not even one word fits (a long URL, path or unspaced CJK run), inside the first word:
   after its last ``/``, ``.``, ``-``, ``，``... (any character that is not a letter, digit or
   space) that fits, or else after its last character that fits.

A window that stops inside a sentence (or inside an open quotation) is marked: its context ends
with "…" after the text (:func:`render_window`), as a search section cut there does; its
``text`` stays exactly the document's.

So a read always moves on unless the header line and one character of text are already over
budget; only then is the window empty, with ``next_cursor`` at the same place and a message
naming the least budget that reads on. A window always holds a letter or digit: a lone ``>``
or code fence is never returned on its own. Consecutive windows tile the document: the next
starts where the last ended, after any whitespace, so nothing is skipped or read twice.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import asdict, dataclass, field, fields
from functools import lru_cache
from typing import Any, Callable

from docanchor.context import Context
from docanchor.display import counted
from docanchor.errors import InvalidRequest
from docanchor.fit import least_budget
from docanchor.formats import PAGE
from docanchor.text import CLAUSE_END, ends_passage, wraps
from docanchor.types import Chunk, DocumentRecord, chunk_id, stored_text
from retrieval.pack import ELLIPSIS, opens_part, sentence_spans
from docanchor import formats
from retrieval.render import MAX_TITLE_CHARS, _cut, pages_label, shown_headings
from docanchor.text import normalise_query
from retrieval.stages.gather import read_chunks

CHARS_PER_TOKEN_CAP = 12
"""A window looks at most ``budget_tokens * 12`` characters ahead (a generous upper bound on
characters per budget token), so a large document is never counted whole."""
_WORD = re.compile(r"[^\W_]")
"""A letter or digit in any script: a window without one (a lone ``>``, a code fence) is not text."""
_WORD_END = re.compile(r"\S(?=\s)")
"""The last character of a whitespace-delimited word that is followed by whitespace."""
_RUN = re.compile(r"\S+")
_PATH_SEPARATORS = "/\\"


INTERNAL = "internal"
"""Metadata key of a :class:`ReadResult` field kept for the answers written in this process and
never sent (:meth:`ReadResult.to_dict`, and the response model built from the dataclass)."""


@dataclass
class ReadResult:
    """One window of a document.

    Attributes:
        text: the window's text: exactly the normalised text from ``start_char`` to ``end_char``.
        context: ``header + "\\n" + text + tail``, the string to paste; ``""`` when nothing fits.
        start_char, end_char: the window's character offsets in the normalised text.
        context_tokens_used: budget tokens of exactly ``context`` (never above ``budget_tokens``).
        next_cursor: pass as ``start`` to read on; ``None`` at the end of the document.
        n_chars: characters of the whole normalised text, as in the document record and the
            header's "of N" (the text rebuilt from chunks can be shorter: a final line break is in
            no chunk).
        message: a sentence when nothing fits, else "".
        note: a sentence when the window starts later than ``start`` asked because what it asked
            holds no indexed text (:func:`unindexed_page_note`: ``page:1`` of a PDF whose page 1
            was garbled and skipped at ingest), else "". Every door shows it with the window.
        headings: every heading the window's chunks sit under, in order (the heading lines a
            model-facing answer keeps on their own line: :func:`plugin.answers.compact_passage`);
            not in :meth:`to_dict`, where ``heading_path`` says where the window starts.
        tail: what ``context`` writes after ``text``: an ellipsis ("…") when the window stops
            inside a sentence or an open quotation (:func:`render_window`), else ""; every rendering
            of the window shows it. Not in :meth:`to_dict` (``context`` shows it).
    """

    doc_id: str
    title: str
    header: str
    text: str
    context: str
    start_char: int
    end_char: int
    page_start: int | None
    page_end: int | None
    heading_path: list[str]
    context_tokens_used: int
    budget_tokens: int
    next_cursor: str | None
    n_chars: int
    message: str = ""
    note: str = ""
    chunk_ordinals: list[int] = field(default_factory=list)
    headings: tuple[str, ...] = field(default=(), metadata={INTERNAL: True})
    tail: str = field(default="", metadata={INTERNAL: True})

    def to_dict(self) -> dict[str, Any]:
        """The fields the API sends: all but the :data:`INTERNAL` ones."""
        internal = {f.name for f in fields(self) if f.metadata.get(INTERNAL)}
        return {k: v for k, v in asdict(self).items() if k not in internal}


def reword_start(message: str, name: str, assign: str) -> str:
    """``message`` of :func:`read_document` in an interface's words for its ``start`` argument.

    Args:
        name: the argument as the interface writes it alone, e.g. ``'from'`` (HTTP), ```from```
            (plugin) or ``--from`` (command line).
        assign: how the interface writes it before a value, e.g. ``from=`` or ``--from ``.
    """
    return message.replace("start = nothing", f"no {name}").replace("start=", assign).replace("'start'", name)


def start_error(err: InvalidRequest, name: str, assign: str, sent_as: str = "from") -> InvalidRequest:
    """``err`` raised by :func:`read_document` as an interface gives it: its message reworded by
    :func:`reword_start` (``name``, ``assign``) and ``details.field`` ``"start"`` (the reader's
    argument) named ``sent_as``, the argument as the interface's caller sent it (HTTP's and the
    command line's ``from``)."""
    details = {**err.details, "field": sent_as} if err.details.get("field") == "start" else err.details
    return InvalidRequest(reword_start(err.message, name, assign), code=err.code, **details)


MAX_NAMED_HEADINGS = 8
"""Most headings a refused ``start`` names as examples (the outline's first ones). Source: the
number the message named before it was cut to fit the budget; not tuned."""


def _accepted(record: DocumentRecord, heads: int) -> str:
    """What ``start`` accepts, naming the outline's first ``heads`` headings and how many more."""
    named = record.outline[:heads]
    more = max(record.outline_total or len(record.outline), len(record.outline)) - len(named)
    examples = ""
    if named:
        examples = " such as " + ", ".join(repr(h) for h in named) + (f" ({more:,} more)" if more else "")
    pages = f"{_positions('page', 1, record.n_pages)}, " if record.n_pages else ""
    last = max(record.n_chunks - 1, 0)
    return (
        f"Use start = nothing (the beginning), a heading's text{examples}, "
        f"{pages}{_positions('chunk', 0, last)} (or {'that number' if last else 'the number 0'}), "
        "or a next_cursor returned by an earlier read."
    )


def _positions(kind: str, first: int, last: int) -> str:
    """``'page:1' to 'page:12'``, or the one position when there is one (``'page:1'``)."""
    return f"'{kind}:{first}'" if first == last else f"'{kind}:{first}' to '{kind}:{last}'"


def start_refusal(record: DocumentRecord, count: Callable[[str], int], budget_tokens: int
                  ) -> Callable[[str], InvalidRequest]:
    """How :func:`read_document` refuses a ``start``: ``lead`` (what is wrong) and what ``start``
    accepts, naming as many of :data:`MAX_NAMED_HEADINGS` headings as keep the message within
    ``budget_tokens`` budget tokens (a refusal goes back into the caller's context like a window,
    so it is held to the same budget); none when even that is over, and then the lead alone."""
    def refuse(lead: str) -> InvalidRequest:
        message = lead
        for heads in range(min(MAX_NAMED_HEADINGS, len(record.outline)), -1, -1):
            wanted = f"{lead} {_accepted(record, heads)}"
            if count(wanted) <= budget_tokens:
                message = wanted
                break
        return InvalidRequest(message, code="invalid_argument", field="start")
    return refuse


LOOK_BACK_CHUNKS = 4
"""Chunks a window reads before the one it starts in, so that what decides its ends sees the
paragraph it starts in (a quotation opened earlier in the paragraph is still open:
:func:`docanchor.text.in_quotation`); a paragraph that began before them is taken to begin
there. Source: a round value, not tuned (a chunk is about 100 tokens)."""
LOOK_AHEAD_CHARS = 200
"""Characters a window reads past the furthest end it may take, so that what decides its end
(a closing quotation mark, the next line's first character) sees the text after it. Source: a
round value above the longest look-ahead of :mod:`docanchor.text` (a line's first word)."""
HEADING_CANDIDATES = 50
"""Chunks of the document, the best BM25 matches for a heading ``start``, whose headings are
compared with it (:func:`_by_heading`). Source: a round value, not tuned."""


class _Chunks:
    """One document's chunks, read by position on demand: a window reads the chunks around it,
    never the whole document (trial D4: every window read all 11,241 chunks of the novel).

    Positions are ordinals (chunk ids are derived from them, :func:`docanchor.types.chunk_id`),
    read in batches through :func:`retrieval.stages.gather.read_chunks` (the lexical index's
    chunks on disk, the rest from Chroma). Ingest numbers chunks in reading order
    (:func:`ingest.chunking.chunk_document`), so ``start_char``, ``end_char`` and pages grow with
    the position, which the binary searches here rely on. Should a chunk be missing (a store
    that disagrees with the record), every stored chunk is read once, as before, and positions
    index that list."""

    def __init__(self, ctx: Context, namespace: str, record: DocumentRecord) -> None:
        self.ctx, self.namespace, self.doc_id, self.doc_type = ctx, namespace, record.doc_id, record.doc_type
        self.n = record.n_chunks
        self._got: dict[int, Chunk] = {}
        self._all: list[Chunk] | None = None
        if self.n <= 0:
            self._read_all()

    def _read_all(self) -> None:
        self._all = self.ctx.store.get_chunks(self.namespace, self.doc_id)
        self.n = len(self._all)

    def load(self, lo: int, hi: int) -> None:
        """Read positions ``lo`` to ``hi - 1`` (clipped to the document) not read yet."""
        if self.listed:
            return
        want = [i for i in range(max(lo, 0), min(hi, self.n)) if i not in self._got]
        if not want:
            return
        got = read_chunks(self.ctx, self.namespace, [chunk_id(self.doc_id, i) for i in want])
        for c in got.values():
            self._got[c.ordinal] = c
        if any(i not in self._got for i in want):
            self._read_all()

    def at(self, i: int) -> Chunk:
        """The chunk at position ``i`` (``0 <= i < n``)."""
        if self._all is None:
            self.load(i, i + 1)
        return self._all[i] if self._all is not None else self._got[i]

    def run(self, lo: int, hi: int) -> list[Chunk]:
        """The chunks at positions ``lo`` to ``hi - 1`` (clipped), in order."""
        self.load(lo, hi)
        return [self.at(i) for i in range(max(lo, 0), min(hi, self.n))]  # n is the list's after a fallback

    @property
    def listed(self) -> bool:
        """Whether every chunk was read (positions index the stored chunks, not ordinals)."""
        return self._all is not None

    def first(self, after: Callable[[Chunk], bool], lo: int = 0, hi: int | None = None) -> int:
        """The first position in ``lo`` to ``hi - 1`` (default: to the end) whose chunk is ``after``
        (false, then true, along those positions), by bisection; ``hi`` when none is."""
        hi = self.n if hi is None else hi
        while lo < hi:
            mid = (lo + hi) // 2
            if after(self.at(mid)):
                hi = mid
            else:
                lo = mid + 1
        return lo

    def by_ordinal(self, n: int) -> Chunk | None:
        """The chunk numbered ``n``, or ``None``."""
        if self._all is not None:
            return next((c for c in self._all if c.ordinal == n), None)
        return self.at(n) if 0 <= n < self.n else None

    def every(self) -> list[Chunk]:
        """All of the document's chunks (a heading no BM25 match finds, :func:`_by_heading`)."""
        if self._all is None:
            self._read_all()
        return list(self._all or [])


Refuse = Callable[[str], InvalidRequest]
"""How :func:`read_document` refuses a ``start`` (:func:`start_refusal`): a lead sentence in, the error out."""


def _resolve_start(start: str | int | None, chunks: _Chunks, refuse: Refuse) -> tuple[int, str]:
    """``(offset, note)``: the character a window from ``start`` starts at, and the
    :attr:`ReadResult.note` that goes with it ("" unless the start asked for something with no
    indexed text)."""
    if start is None or start == "":
        return chunks.at(0).start_char, ""
    if isinstance(start, bool):
        raise refuse("'start' cannot be a boolean.")
    if isinstance(start, int) or (isinstance(start, str) and start.strip().isdecimal()):  # int() reads them all
        return _by_ordinal(int(start), chunks, refuse), ""
    if not isinstance(start, str):
        raise refuse("'start' must be text or a number.")
    key = start.strip()
    low = key.lower()
    for position in _POSITIONS:
        if low.startswith(position.prefix):
            number = key[len(position.prefix):]
            number = number.lstrip() if position.spaced else number
            if number.isdecimal():  # not isdigit: int() refuses a superscript '²'
                return position.resolve(int(number), key, chunks, refuse)
    found = _by_heading(key, chunks)
    if found is not None:
        return found, ""
    wrong = next((p for p in _POSITIONS if p.follows and low.startswith(p.prefix)), None)
    if wrong is not None:  # a position written wrong, not a heading that is missing
        raise refuse(f"{key!r} is no position: after {wrong.prefix!r} comes {wrong.follows}.")
    raise refuse(f"Nothing in the document matches start={key!r}.")


def _at_char(offset: int, key: str, chunks: _Chunks, refuse: Refuse) -> tuple[int, str]:
    if offset <= chunks.at(chunks.n - 1).end_char:  # the last chunk ends last
        # text before the first chunk was not indexed (a garbled page): read on from it
        return max(offset, chunks.at(0).start_char), ""
    raise refuse(f"The cursor {key!r} is past the end of the document.")


def _at_chunk(n: int, key: str, chunks: _Chunks, refuse: Refuse) -> tuple[int, str]:
    return _by_ordinal(n, chunks, refuse), ""


def _at_page(page: int, key: str, chunks: _Chunks, refuse: Refuse) -> tuple[int, str]:
    if page < 1:
        raise refuse(f"Pages are numbered from 1; the document has no page {page}.")
    # the first chunk that reaches the page: on it, or else on the next page that has text
    at = chunks.first(lambda c: c.page_start is not None and (c.page_end or c.page_start) >= page)
    if at < chunks.n:
        c = chunks.at(at)
        later = c.page_start is not None and c.page_start > page
        return c.start_char, unindexed_page_note(formats.unit_of(chunks.doc_type), page, c.page_start) if later else ""
    raise refuse(f"The document has no page {page}.")


def unindexed_page_note(unit: formats.Unit | None, asked: int, at: int) -> str:
    """The :attr:`ReadResult.note` of a read asked to start on page ``asked`` (slide, sheet...:
    ``unit``, the format's, :func:`docanchor.formats.unit_of`) that starts on page ``at`` instead,
    the next one with indexed text (a page flagged garbled or without a text layer is not
    indexed: DESIGN.md, "Normalise"). The one place of this sentence; every door shows it."""
    noun = (unit or PAGE).noun[0]
    return f"{noun.capitalize()} {asked} has no indexed text; this read starts at {noun} {at}, the next one that has."


@dataclass(frozen=True)
class _Position:
    """A position :func:`_resolve_start` reads besides headings: a prefix, then a whole number.

    Attributes:
        prefix: how it starts, lower case (compared case-insensitively).
        resolve: ``(number, start as sent, chunks, refuse)`` to ``(the character the window starts
            at, its note)`` (as :func:`_resolve_start`).
        follows: what comes after the prefix, for the refusal of one written wrong (``'page:x'``);
            ``None`` when text so written may be a heading (``'Page one'``) and a missing one is
            refused as a heading is.
        spaced: spaces may come between the prefix and the number.
    """

    prefix: str
    resolve: Callable[[int, str, _Chunks, Refuse], tuple[int, str]]
    follows: str | None
    spaced: bool = True


_CURSOR_WORDS = "a whole number of characters from 0 (the next_cursor a read gave)"
_POSITIONS = (
    _Position("char:", _at_char, _CURSOR_WORDS, spaced=False),
    _Position("cursor:", _at_char, _CURSOR_WORDS, spaced=False),
    _Position("chunk:", _at_chunk, "a chunk number from 0"),
    _Position("page:", _at_page, "a page number from 1"),
    _Position("p.", _at_page, None),
    _Position("page ", _at_page, None),
)
"""Every position :func:`_resolve_start` reads besides headings, the one place that knows their prefixes."""


def _heading_tests(key: str) -> list[Callable[[str], bool]]:
    """How a heading matches ``key``, in order of preference: equal, starting with it, holding it;
    both sides normalised as ingested text is (:func:`docanchor.text.normalise_query`: NFKC, so an
    ideographic space is a space, and whitespace runs collapsed) and case-folded, so a heading line
    copied from the uploaded file or from a window's text matches its stored heading."""
    low = _folded(key)
    return [lambda h: _folded(h) == low, lambda h: _folded(h).startswith(low), lambda h: low in _folded(h)]


@lru_cache(maxsize=4096)
def _folded(text: str) -> str:
    """``text`` as :func:`_heading_tests` compares it; cached, for a document repeats each heading
    in every chunk's path and a miss compares every chunk's."""
    return normalise_query(text).casefold()


def _by_heading(key: str, chunks: _Chunks) -> int | None:
    """Where the first chunk under a heading matching ``key`` (:func:`_heading_tests`) starts, or
    ``None``: among the document's :data:`HEADING_CANDIDATES` best BM25 matches for ``key`` (a
    heading's first chunk holds its line), the earliest under the most preferred match, then back
    to the first chunk of its run under that heading. When no candidate matches, every chunk is
    compared, in reading order."""
    ctx = chunks.ctx
    hits = ctx.lexical.search(chunks.namespace, key, HEADING_CANDIDATES, doc_ids=[chunks.doc_id])
    found = read_chunks(ctx, chunks.namespace, [cid for cid, _ in hits])
    candidates = sorted((c for c in found.values() if c.doc_id == chunks.doc_id), key=lambda c: c.ordinal)
    for test in _heading_tests(key):
        for c in candidates:
            heading = next((h for h in c.heading_path if test(h)), None)
            if heading is None or chunks.by_ordinal(c.ordinal) is None or chunks.listed:
                continue
            under = lambda x, heading=heading: heading in x.heading_path  # noqa: E731
            step, lo = 1, c.ordinal  # gallop back to a chunk outside the run, then bisect
            while lo > 0 and under(chunks.at(lo - 1)):
                lo, step = max(lo - step, 0), step * 2
            return chunks.at(chunks.first(under, lo, c.ordinal)).start_char
    for test in _heading_tests(key):
        for c in chunks.every():
            if any(test(h) for h in c.heading_path):
                return c.start_char
    return None


def _by_ordinal(n: int, chunks: _Chunks, refuse: Refuse) -> int:
    c = chunks.by_ordinal(n)
    if c is not None:
        return c.start_char
    raise refuse(f"The document has no chunk {n}.")


def read_document(
    ctx: Context, namespace: str, record: DocumentRecord, *, start: str | int | None = None, budget_tokens: int
) -> ReadResult:
    """A contiguous window of ``record``'s document from ``start``, at most ``budget_tokens``.

    Args:
        start: ``None`` (the beginning), a heading's text (exact, then prefix, then substring,
            case-insensitive), ``"page:N"``, ``"chunk:N"`` or an int ordinal, or a
            ``next_cursor`` from an earlier read (``"char:N"``, from 0 to the document's
            ``n_chars``); a ``char:N`` inside text that was not indexed (a garbled page, hidden
            text) reads from the next indexed text.
        budget_tokens: the most budget tokens the rendered ``context`` may use.

    Returns:
        A :class:`ReadResult` whose text always holds a letter or digit and ends at a sentence,
        else a word, else inside a word (see the module docstring), so that ``next_cursor``
        moves on. Only when the header line and one character of text are over budget, an
        empty window whose message names the least budget that returns text from ``start``
        (``next_cursor`` stays at ``start``: a caller paging on should stop on an empty
        ``text``). ``next_cursor`` is ``None`` once only whitespace and punctuation are left.

    Raises:
        InvalidRequest: ``start`` names no heading, page, chunk or position of the document.
    """
    chunks = _Chunks(ctx, namespace, record)
    if not chunks.n:
        raise InvalidRequest(f"The document {record.doc_id} has no stored text to read.", code="invalid_argument")
    count = ctx.counter.count
    s, note = _resolve_start(start, chunks, start_refusal(record, count, budget_tokens))
    part, full, base, to_end = _around(chunks, s, max(budget_tokens, 1) * CHARS_PER_TOKEN_CAP)
    n_chars = record.n_chars or chunks.at(chunks.n - 1).end_char
    while s - base < len(full) and full[s - base].isspace():
        s += 1
    if not _word_after(chunks, full, base, s, to_end):
        return _empty(record, s, n_chars, budget_tokens, next_cursor=None,
                      message="Nothing is left to read from here: the rest of the document has no letters or digits.")

    def render(e: int) -> tuple[str, str, str]:
        return render_window(record, part, full, s, s + e, base)

    at = s - base  # the window's start in `full`
    best_e = _window_end(full, at, budget_tokens, render, count, _opens_part_at(part, full, s, base))
    if best_e == 0:
        least = _least_budget(full, at, budget_tokens, render, count)
        return _empty(
            record, s, n_chars, budget_tokens, next_cursor=f"char:{s}",
            message=(
                f"The budget of {counted(budget_tokens, 'token')} is too small for any text of this document from here "
                f"(its header line and one character of text do not fit); raise budget_tokens to {least} or more."
            ),
        )
    header, text, context = render(len(render(best_e)[1]))  # ends at the text's end: the document's text exactly
    end = s + len(text)
    nxt = end
    while nxt - base < len(full) and full[nxt - base].isspace():
        nxt += 1
    covered = [c for c in part if c.start_char < end and c.end_char > s]
    first = covered[0] if covered else part[0]
    page_start, page_end = _pages(covered)
    return ReadResult(
        doc_id=record.doc_id, title=record.title, header=header, text=text, context=context,
        start_char=s, end_char=end, page_start=page_start, page_end=page_end,
        heading_path=list(first.heading_path), context_tokens_used=count(context),
        budget_tokens=budget_tokens,
        next_cursor=f"char:{nxt}" if _word_after(chunks, full, base, nxt, to_end) else None,
        n_chars=n_chars, note=note, chunk_ordinals=[c.ordinal for c in covered],
        headings=tuple(dict.fromkeys(h for c in covered for h in c.heading_path)),
        tail=context[len(header) + 1 + len(text):],
    )


def _around(chunks: _Chunks, s: int, ahead: int) -> tuple[list[Chunk], str, int, bool]:
    """``(part, full, base, to_end)``: the chunks a window from character offset ``s`` that looks
    ``ahead`` characters may need, in order -- :data:`LOOK_BACK_CHUNKS` before the one holding
    ``s`` (or the next one) and on until :data:`LOOK_AHEAD_CHARS` past ``s + ahead`` -- and their
    text ``full`` (:func:`docanchor.types.stored_text`), which starts at character offset
    ``base``; ``to_end``: ``full`` runs to the end of the document's last chunk."""
    at = min(chunks.first(lambda c: c.end_char > s), chunks.n - 1)
    lo = max(at - LOOK_BACK_CHUNKS, 0)
    want = s + ahead + LOOK_AHEAD_CHARS
    per_chunk = max(chunks.at(chunks.n - 1).end_char // chunks.n, 1)  # characters, on average
    hi = at + 1
    part = chunks.run(lo, hi)
    while hi < chunks.n and part[-1].end_char < want:
        hi = min(hi + (want - part[-1].end_char) // per_chunk + 2, chunks.n)
        part = chunks.run(lo, hi)
    base = part[0].start_char
    return part, stored_text(part, base), base, hi >= chunks.n


def _word_after(chunks: _Chunks, full: str, base: int, i: int, to_end: bool) -> bool:
    """Whether the document holds a letter or digit after character offset ``i``, where ``full`` is
    its text from offset ``base`` on, up to its last chunk's end when ``to_end``: in ``full``,
    else in the chunks that end after it."""
    if _has_word(full, i - base):
        return True
    if to_end:
        return False
    later = chunks.first(lambda c: c.end_char > base + len(full))
    return any(_has_word(c.text, max(i - c.start_char, 0)) for c in chunks.run(later, chunks.n))


def render_window(record: DocumentRecord, chunks: list[Chunk], full: str, s: int, e: int, base: int = 0
                  ) -> tuple[str, str, str]:
    """``(header, text, context)`` of the window from character offset ``s`` to ``e``, where
    ``full`` is the document's text from offset ``base`` on (the whole of it by default) and
    ``chunks`` the chunks under it.

    ``text`` is the document's text from ``s`` to ``e`` with trailing whitespace off (``s`` starts at
    a non-space): exactly the document's normalised text between the window's offsets (issue 15),
    blank-line runs kept; ``context`` is ``header + "\\n" + text`` and the window's tail (:func:`_tail`:
    "…" when the text stops inside a passage), the string whose budget tokens a window may not exceed.
    """
    text = full[s - base : e - base].rstrip()
    header = _header(record, chunks, s, e, text)
    return header, text, f"{header}\n{text}{_tail(record, full, s - base + len(text))}"


def _tail(record: DocumentRecord, full: str, end: int) -> str:
    """What the context writes after a window's text ending at character offset ``end``:
    :data:`retrieval.pack.ELLIPSIS` when it stops inside a passage (:func:`docanchor.text.ends_passage`:
    inside a sentence, or inside an open quotation), as a search section cut there does; else ""."""
    pages = formats.unit_of(record.doc_type) == PAGE
    return "" if ends_passage(full, end, pages) else ELLIPSIS


def _has_word(text: str, start: int = 0) -> bool:
    """Whether ``text[start:]`` holds a letter or digit (any script)."""
    return _WORD.search(text, start) is not None


def _opens_part_at(chunks: list[Chunk], full: str, s: int, base: int = 0) -> Callable[[int, int], bool]:
    """Whether the document's text from offset ``s + a`` to ``s + b`` is a heading alone that opens
    the next part (:func:`retrieval.pack.opens_part`, under the headings of the chunk holding offset
    ``s + a``); ``full`` is the text from offset ``base`` on."""
    return lambda a, b: opens_part(full[s - base + a : s - base + b], _heading_path_at(chunks, s + a))


def _heading_path_at(chunks: list[Chunk], i: int) -> tuple[str, ...]:
    """The headings of the chunk holding character offset ``i`` (of the next chunk when ``i`` is
    in a gap between chunks)."""
    at = bisect.bisect_right(chunks, i, key=lambda c: c.start_char) - 1
    if at < 0 or chunks[at].end_char <= i:
        at += 1
    return tuple(chunks[min(at, len(chunks) - 1)].heading_path)


def _window_end(
    full: str, s: int, budget_tokens: int, render: Callable[[int], tuple[str, str, str]], count: Callable[[str], int],
    opens: Callable[[int, int], bool],
) -> int:
    """Characters after ``s`` the window takes at ``budget_tokens``; 0 when nothing with a letter or digit fits.

    In the order of the module docstring: whole sentences (the most that fit, not ending on one
    that ``opens(a, b)``, :func:`_before_headings`; a long next sentence is then filled with its
    words when they fill less than half the budget or are a heading alone); else whole words of
    the sentences up to the first one with a letter or digit; else the first word with a letter or
    digit cut inside, after its last separator or, failing that, its last character that fits.
    """
    window = full[s : s + max(budget_tokens, 1) * CHARS_PER_TOKEN_CAP]
    spans = sentence_spans(window)
    if not spans:
        return 0

    sizes: dict[int, int] = {}  # window end -> tokens of its rendered form, each counted once

    def size(e: int) -> int:
        if e not in sizes:
            sizes[e] = count(render(e)[2])
        return sizes[e]

    def fits(e: int) -> bool:
        return size(e) <= budget_tokens

    lo, hi = 0, len(spans)  # largest k so that the first k sentences fit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(spans[mid - 1][1]):
            lo = mid
        else:
            hi = mid - 1
    lo, backed = _before_headings(window, spans, lo, opens)
    if lo and _has_word(window[: spans[lo - 1][1]]):
        end = spans[lo - 1][1]
        if not backed and lo < len(spans) and (size(end) < budget_tokens // 2 or opens(*spans[lo - 1])):
            # the next sentence is too long to fit whole (an unpunctuated paragraph, a long table
            # row): take its words up to the budget rather than stop at less than half of it
            cut = _last_fitting(_word_ends(full, s, len(window), end, spans[lo][1]), fits)
            if cut > end:
                return cut
        return end
    first_word = next((i for i, (a, b) in enumerate(spans) if _has_word(window[a:b])), None)
    if first_word is None:  # the window shows no letter or digit; a larger budget looks further
        return 0
    a, b = spans[0][0], spans[first_word][1]
    ends = [e for e in _word_ends(full, s, len(window), a, b) if _has_word(window[:e])]
    cut = _last_fitting(ends, fits)
    if cut:
        return cut
    # not one word fits: cut inside the first word that holds a letter or digit
    run = next(m for m in _RUN.finditer(window, a, b) if _has_word(m.group()))
    letter = _WORD.search(window, run.start()).start()
    inner = [e for e in range(letter + 1, run.end()) if not unicodedata.combining(window[e])]
    at_char = _last_fitting(inner, fits)
    # after a path's '/' is the best place, then after any other separator ('-', '.', a CJK
    # comma), each unless it keeps under half of what a cut at a character would
    for after in (_PATH_SEPARATORS.__contains__, lambda c: not c.isalnum()):
        at_sep = _last_fitting([e for e in inner if after(window[e - 1])], fits)
        if at_sep and 2 * (at_sep - run.start()) >= at_char - run.start():
            return at_sep
    return at_char


def _before_headings(window: str, spans: list[tuple[int, int]], lo: int, opens: Callable[[int, int], bool]
                     ) -> tuple[int, bool]:
    """``(k, backed)``: the first ``lo`` sentences of ``window`` without the headings alone that end
    them (``opens``), so that the window ends before the part they open and the next one starts at
    it (at least one sentence with a letter or digit stays); ``backed``: any was left out."""
    k = lo
    while k > 1 and opens(*spans[k - 1]) and _has_word(window[: spans[k - 2][1]]):
        k -= 1
    return k, k < lo


def _word_ends(full: str, s: int, n: int, a: int, b: int) -> list[int]:
    """Ends of the words of ``full[s + a : s + b]``, relative to ``s``, in order: before whitespace,
    except a line break that hard-wraps Chinese or Japanese text (:func:`docanchor.text.wraps`: no
    word gap, "我等今可" / "据住险阻", the novel), and after a clause boundary inside such text
    (:data:`docanchor.text.CLAUSE_END`: it has no spaces, its words end at its commas; "rust,ignore"
    stays one word).

    ``b`` (a sentence end) counts as a word end unless it is the cut-off end ``n`` of the
    window looked at and the document goes on there inside a word.
    """
    ends = sorted({m.end() for m in _WORD_END.finditer(full, s + a, s + b) if not wraps(full, m.end(), m.end() + 1)}
                  | {m.end() for m in CLAUSE_END.finditer(full, s + a, s + b) if wraps(full, m.end(), m.end())})
    ends = [e - s for e in ends]
    if b > a and not full[s + b - 1].isspace() and (b < n or s + b >= len(full) or full[s + b].isspace()):
        ends.append(b)
    return ends


def _last_fitting(ends: list[int], fits: Callable[[int], bool]) -> int:
    """The last of ``ends`` (ascending) whose window fits, by bisection (a window's tokens grow
    with its end, save a token where the header's character range changes); 0 when none does.
    Only a checked end is returned."""
    best, lo, hi = 0, 0, len(ends) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if fits(ends[mid]):
            best, lo = ends[mid], mid + 1
        else:
            hi = mid - 1
    return best


def _least_budget(
    full: str, s: int, budget_tokens: int, render: Callable[[int], tuple[str, str, str]], count: Callable[[str], int]
) -> int:
    """The least budget above ``budget_tokens`` at which a window from ``s`` holds text
    (:func:`docanchor.fit.least_budget`). Every window from ``s`` holding text reaches at least
    the first letter or digit, so the tokens of the window ending just after it are the guess.
    The caller has checked that ``full[s:]`` holds a letter or digit, so some budget does."""
    near = count(render(_WORD.search(full, s).end() - s)[2])
    return least_budget(lambda budget: bool(_window_end(full, s, budget, render, count, lambda a, b: False)), near,
                        budget_tokens)


def _empty(record: DocumentRecord, s: int, n_chars: int, budget_tokens: int, *, next_cursor: str | None,
           message: str) -> ReadResult:
    return ReadResult(
        doc_id=record.doc_id, title=record.title, header="", text="", context="", start_char=s,
        end_char=s, page_start=None, page_end=None, heading_path=[], context_tokens_used=0,
        budget_tokens=budget_tokens, next_cursor=next_cursor, n_chars=n_chars, message=message,
    )


def _pages(chunks: list[Chunk]) -> tuple[int | None, int | None]:
    starts = [c.page_start for c in chunks if c.page_start is not None]
    ends = [c.page_end or c.page_start for c in chunks if c.page_start is not None]
    return (min(starts), max(ends)) if starts else (None, None)


def _header(record: DocumentRecord, chunks: list[Chunk], s: int, e: int, text: str = "") -> str:
    """``Title — p. 3–4 — Heading › Sub — doc_id — chars s–e of N`` for the window [s, e) whose
    text is ``text``; a heading the text starts with (:func:`_opens_with`) is left out, as the text
    shows it (trial D2: the novel's chapter line, about 25 tokens, spent twice at 150 tokens)."""
    covered = [c for c in chunks if c.start_char < e and c.end_char > s] or chunks[:1]
    pages = pages_label(*_pages(covered), formats.unit_of(record.doc_type))
    path = covered[0].heading_path
    if path and _opens_with(text, path[-1]):
        path = path[:-1]
    heads = shown_headings(record.title, path)
    parts = [_cut(record.title, MAX_TITLE_CHARS) or "Untitled"]
    if pages:
        parts.append(pages)
    if heads:
        parts.append(" › ".join(heads))
    parts.append(record.doc_id)
    parts.append(f"chars {s}–{e} of {record.n_chars or chunks[-1].end_char}")
    return " — ".join(parts)


_MARKDOWN_MARKS = re.compile(r"^#{1,6}[ \t]+|[ \t]+#+$")


def _opens_with(text: str, heading: str) -> bool:
    """Whether the first line of ``text`` is ``heading`` (whitespace aside; a Markdown heading's
    ``#`` marks aside)."""
    line = _MARKDOWN_MARKS.sub("", text.split("\n", 1)[0].strip())
    return bool(line) and " ".join(line.split()) == " ".join(heading.split())
