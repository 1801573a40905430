"""Chunking: a parsed document's blocks become embeddable chunks that keep its structure.

Two hard limits hold for every chunk, each checked exactly on the final text:

- at most ``settings.chunk_tokens`` budget tokens (:class:`~docanchor.tokens.TokenCounter`);
- at most ``embedder.token_limit`` word pieces in the embedder's own tokenizer
  (all-MiniLM-L6-v2 silently truncates past 256 word pieces, 254 without ``[CLS]``/``[SEP]``).

How (see :func:`chunk_document`):

1. **Pack.** Consecutive small blocks with the same page and heading path are packed into one
   chunk while both limits hold. A heading starts a new chunk and stays at its start; a run of
   ever deeper headings stays together and takes the content that follows, even on the next
   page (the only case where a chunk crosses a page: a heading alone would be a useless chunk).
   Blocks with any flag (``garbled``, ``hidden_text`` ...) are never chunked and break packing.
2. **Split.** A block over the limits goes to langchain-text-splitters'
   ``RecursiveCharacterTextSplitter`` with :data:`PROSE_SEPARATORS` or :data:`SEPARATORS`
   (paragraphs, lines, sentence ends — CJK and Latin —, clauses, spaces, then fixed character
   windows; all regular expressions kept in the text, never re-inserted), ``keep_separator="end"``
   so punctuation ends a chunk, and one length function that measures both limits at once
   (:class:`_Measure`). Splits are contiguous pieces of the block, so nothing is inserted or
   dropped and offsets are found exactly. A CSV row (``column: value | …``) is split between its
   cells instead, into chunks of about one size (:func:`_split_row`).
3. **Verify.** Every chunk is trimmed of outer whitespace (by moving its offsets) and re-counted
   with both tokenizers on its exact text; one over either limit is split again at a smaller size
   (the word-piece count is skipped when an upper bound, :func:`_max_pieces`, already fits).
4. **CJK rule.** No chunk starts with closing punctuation (:data:`NO_START`); such characters
   move to the end of the previous chunk when it can take them.
   **Small chunks.** A chunk under :data:`MIN_CHUNK_TOKENS` is joined to a neighbour of the same
   page and headings (:func:`_join_small`).
5. **Joins.** Each chunk records the document's exact text up to the next chunk
   (``gap_after``) and whether the next one continues its passage (``joins_next``: no flagged
   block and at most :data:`GAP_MAX_CHARS` characters between them), so sections that join
   chunks read exactly as the document; and the offset runs that map its offsets back to the
   decoded file (``source_runs``, :mod:`docanchor.offsets`).
6. **Row context.** A chunk holding part of a CSV ``row`` block (a row too wide for one chunk)
   gets :attr:`~docanchor.types.Chunk.context`, the row's label, and a chunk that starts in a
   ``table`` block after its header row gets the header, unless its text already holds it (see
   :mod:`ingest.row_context`), so its embedding and BM25 terms say which row or columns it
   belongs to; its ``text`` is unchanged.

Sizes are summed per piece while splitting (counting each piece once, never re-counting a
growing chunk), which is why step 3 exists.

**Bounded work per step.** A block longer than :data:`WINDOW_CHARS` characters (a 40 MB text
without paragraph breaks is one block) is split one window at a time, each window ending at the
last paragraph, line, sentence or word break before its limit (:func:`_window_end`), so the
splitter's lists and the tokenizers' inputs stay window-sized; a text too long to fit a chunk
by its length alone is never tokenized whole (:meth:`_Measure.__call__`). ``progress`` is called
with the characters done after every run of blocks and every window, and every
:data:`STEP_SPANS` spans of the passes after the first (steps 2 to 6), so a ``progress`` that
raises (a cancelled job) stops chunking in any pass; the passes after the first report the
furthest position again (steps 2 and 3 split again text already reported: progress never goes back).
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from typing import Callable, Sequence

from langchain_text_splitters import RecursiveCharacterTextSplitter

from docanchor.embedder import Embedder
from docanchor.offsets import slice_runs
from docanchor.settings import Settings
from docanchor.text import CELL_SEP, CJK as _CJK, FULL_STOP, SENTENCE_STOP
from docanchor.tokens import TokenCounter
from docanchor.types import Block, Chunk, ParsedDocument
from ingest.row_context import header_end, name_column, row_context, table_context

# Closing quotes and brackets that belong with the punctuation before them.
_CLOSE = "\"'”’」』）》〉】〕)\\]"
# NFKC (ingest.normalise) turns full-width ！？；：， into ASCII !?;:, while 。、 stay, so
# CJK sentence ends are matched both ways: full-width, or ASCII next to a CJK letter.
_PARAGRAPH = r"\n[ \t]*\n\s*"
_LINE = r"\n\s*"
# A line end that is also a sentence or list-item end (hard-wrapped prose breaks lines
# mid-sentence; those breaks are left to the later levels).
_LINE_END = (r"(?<=[。！？；…．.!?;:」』”’)\]])[ \t]*\n\s*"
             r"|\n\s*(?=(?:[-*+•·▪]|\d{1,3}[.)、]|[a-zA-Z][.)])\s)")
_SENTENCE = (  # CJK 。！？；… / NFKC'd !?; beside CJK / Latin ". " "! " "? "
    rf"[。！？；…．]+[{_CLOSE}]*\s*"
    rf"|(?<=[{_CJK}])[.!?;]+[{_CLOSE}]*\s*"
    rf"|[.!?;]+[{_CLOSE}]*(?=[{_CJK}“‘「『（《])"
    rf"|(?:{FULL_STOP})\s+"  # docanchor.text's Latin sentence end: not after "vs.", "e.g.", "Fig."
)
_CLAUSE = r";\s+"  # Latin clauses
_COMMA = rf",\s+|[，、]\s*|(?<=[{_CJK}])[,:]\s*"  # Latin ", ", CJK ，、 and NFKC'd , :
_SPACE = r"\s+"
_GAP = re.compile(r"\s*")
# Characters no chunk may start with: CJK closing punctuation (full-width and NFKC'd forms).
NO_START = "。．！？，、；：!?,;:…」』）》〉】〕”’)"
# Last resorts for a run with no separator (a word or a CJK run over the limit): windows of 32
# characters, then single characters, each taking the closing punctuation that follows it.
_WINDOW = rf"[\s\S]{{1,32}}[{re.escape(NO_START)}]*"
_CHAR = rf"[\s\S][{re.escape(NO_START)}]*"

SEPARATORS: list[str] = [_PARAGRAPH, _LINE, _SENTENCE, _CLAUSE, _COMMA, _SPACE, _WINDOW, _CHAR]
"""Separators (regular expressions, most preferred first) for lines-first blocks: tables,
lists, code, rows, headings."""
PROSE_SEPARATORS: list[str] = [_PARAGRAPH, _LINE_END, _SENTENCE, _LINE, _CLAUSE, _COMMA, _SPACE, _WINDOW, _CHAR]
"""Separators for prose (paragraph and text blocks): a line break that ends a sentence or
starts a list item counts as a line; other line breaks rank below sentence ends."""
_LINES_FIRST = {"table", "list", "code", "row", "heading", "header", "footer"}
_SHRINK = (1.0, 0.9, 0.75, 0.5, 0.25)
WINDOW_CHARS = 50_000
"""Longest stretch of one block handed to the splitter at once, in characters (see the module
docstring). A window ends at a break, so at most one chunk per window comes out shorter than it
would otherwise; far above the blocks of ordinary documents."""
_WINDOW_BREAKS = ("\n\n", "\n", "。", ". ", "! ", "? ", " ")
"""Where a window may end, most preferred first (the break stays with the window before it)."""

STEP_SPANS = 64
"""Spans a pass after the first goes through between two calls of ``progress`` (:meth:`_Measure.step`):
a cancel is seen within that many spans. Source: a bound on the calls (the novel's 11,241 chunks
make about 180 per pass), not tuned."""

ChunkProgress = Callable[[int, int], None]
"""``progress(done, total)``: characters of the document's text chunked so far, of all."""


def chunk_document(
    parsed: ParsedDocument, doc_id: str, *, counter: TokenCounter, embedder: Embedder, settings: Settings,
    progress: ChunkProgress | None = None,
) -> list[Chunk]:
    """Cut a parsed document into chunks in reading order.

    Args:
        parsed: normalised text and blocks; flagged blocks are skipped.
        doc_id: written on every chunk.
        counter: the budget tokenizer (``n_tokens`` and the ``chunk_tokens`` limit).
        embedder: its ``count_tokens`` and ``token_limit`` (word pieces) bound every chunk.
        settings: ``chunk_tokens`` (size limit, budget tokens) and ``chunk_overlap_tokens``.
        progress: called with (characters done, characters in all) as chunking advances, never
            lower than before (the passes after the first repeat the last figure); it may raise
            to stop chunking (a cancelled job), in any pass.

    Returns:
        Chunks with ``ordinal`` 0..n-1, ``text == parsed.text[start_char:end_char]`` (no outer
        whitespace), ``n_tokens <= settings.chunk_tokens`` and
        ``embedder.count_tokens(text) <= embedder.token_limit``. Empty when no unflagged block
        has text.
    """
    text = parsed.text
    measure = _Measure(counter, embedder, settings.chunk_tokens,
                       (lambda done: progress(done, len(text))) if progress else None)
    overlap = settings.chunk_overlap_tokens * measure.weight_budget
    blocks = sorted((b for b in parsed.blocks if b.end > b.start), key=lambda b: (b.start, b.end))
    spans: list[tuple[int, int]] = []
    for group in _runs(blocks, text):
        spans.extend(_pack(group, text, measure, overlap))
        measure.reached(group[-1].end)
    spans = _verify(spans, text, measure, overlap)
    spans = _fix_starts(spans, text, measure)
    good = [b for b in blocks if not b.flags and text[b.start:b.end].strip()]
    flagged = [(b.start, b.end) for b in blocks if b.flags]
    starts = [b.start for b in good]
    spans = _join_small(spans, text, measure, lambda s, e: _meta(good, starts, s, e))
    chunks = []
    name: tuple[str | None] | None = None  # the table's name column, found when first needed
    for ordinal, (start, end) in enumerate(spans):
        measure.step()
        piece = text[start:end]
        meta = _meta(good, starts, start, end)
        row, context = _row_of(good, starts, start, end, text), ""
        if row is not None and row.kind == "table":
            context = table_context(_head(text, row), piece, counter, embedder)
        elif row is not None:
            if name is None:
                name = (name_column([text[b.start:b.end] for b in good if b.kind == "row"]),)
            context = row_context(text[row.start:row.end], piece, name[0], counter, embedder)
        gap_after, joins_next = _gap(text, spans, ordinal, flagged)
        chunks.append(Chunk(
            doc_id=doc_id, ordinal=ordinal, text=piece, start_char=start, end_char=end,
            page_start=meta[0], page_end=meta[1], heading_path=meta[2],
            n_tokens=counter.count(piece), kind=meta[3], ends_line=_ends_line(text, end),
            context=context, gap_after=gap_after, joins_next=joins_next,
            source_runs=slice_runs(parsed.source_runs, start, end),
        ))
    return chunks


GAP_MAX_CHARS = 200
"""Chunks further apart than this many characters are not joined into one section: the text
between them was left out of the index on purpose (Markdown front matter, a skipped part), and
a section should not bring it back. Whitespace and the punctuation :func:`_fix_starts` leaves
out of the index are a few characters."""


def _gap(text: str, spans: list[tuple[int, int]], i: int, flagged: list[tuple[int, int]]) -> tuple[str, bool]:
    """``(gap_after, joins_next)`` of span ``i`` (see :class:`~docanchor.types.Chunk`)."""
    if i + 1 >= len(spans):
        return "", False
    end, nxt = spans[i][1], spans[i + 1][0]
    if nxt <= end:
        return "", True
    if nxt - end > GAP_MAX_CHARS or any(s < nxt and end < e for s, e in flagged):
        return "", False
    return text[end:nxt], True


def _row_of(blocks: list[Block], starts: list[int], start: int, end: int, text: str) -> Block | None:
    """The block whose label or header the span ``[start, end)`` needs: the ``row`` block it
    starts in when it does not hold it whole (a piece of a row too wide for one chunk), or the
    ``table`` block it starts in after the table's header row; else ``None``."""
    i = bisect.bisect_right(starts, start) - 1
    if i < 0:
        return None
    b = blocks[i]
    if start >= b.end:
        return None
    if b.kind == "row":
        return b if not (start <= b.start and b.end <= end) else None
    if b.kind == "table":
        return b if start >= b.start + header_end(_head(text, b)) else None
    return None


def _head(text: str, b: Block) -> str:
    """The first two lines of block ``b`` (a table's header and delimiter rows), without copying
    the rest of a long table."""
    first = text.find("\n", b.start, b.end)
    second = text.find("\n", first + 1, b.end) if first >= 0 else -1
    return text[b.start:second if second >= 0 else b.end]


def _ends_line(text: str, end: int) -> bool:
    """Whether the whitespace after ``text[:end]`` holds a line break (or the text ends there)."""
    gap = _GAP.match(text, end).group()  # match at ``end``: no copy of the rest of the text
    return end + len(gap) >= len(text) or "\n" in gap


class _Measure:
    """One length for both limits: ``max(budget_tokens * L, word_pieces * C)`` where ``C`` is
    the chunk size in budget tokens and ``L`` the embedder's word-piece limit, so a text fits
    exactly when its measure is at most ``C * L`` (the limit). Results are cached per string.

    Also the document's chunking progress: :meth:`reached` reports the characters done, which
    never go back (the passes after the first re-split spans at their own, earlier positions)."""

    def __init__(self, counter: TokenCounter, embedder: Embedder, chunk_tokens: int,
                 report: Callable[[int], None] | None = None) -> None:
        self.counter = counter
        self.embedder = embedder
        self.chunk_tokens = chunk_tokens
        self.token_limit = int(embedder.token_limit)
        self.weight_budget = self.token_limit  # one budget token, in measure units
        self.limit = chunk_tokens * self.token_limit
        self._cache: dict[str, int] = {}
        self._report = report
        self._done = 0  # the furthest position reported
        self._steps = 0  # spans since the last report of a pass after the first (:meth:`step`)
        self._sure_over_chars = chunk_tokens * counter.max_token_bytes

    def reached(self, position: int) -> None:
        """Chunking has reached character ``position`` of the document's text: reported when it is
        further than any before, else the furthest position is reported again (:func:`_verify` and
        :func:`_split_under_headings` split again text already reported), so the callback, which
        may raise to stop chunking (a cancelled job), is still called in those passes."""
        if self._report is not None:
            self._done = max(self._done, position)
            self._report(self._done)

    def step(self) -> None:
        """One span done by a pass over the spans after the first (:func:`_verify`,
        :func:`_fix_starts`, :func:`_join_small`, the chunks' making): every :data:`STEP_SPANS`
        spans the furthest position is reported again (:meth:`reached`), so a callback that
        raises stops chunking in those passes too."""
        self._steps += 1
        if self._steps >= STEP_SPANS:
            self._steps = 0
            self.reached(self._done)

    def __call__(self, text: str) -> int:
        if len(text) > self._sure_over_chars:
            # Over the limit by its length alone (a budget token covers at most max_token_bytes
            # characters): an estimate above the limit, without tokenizing megabytes.
            return max(self.limit + 1, len(text) * self.limit // self._sure_over_chars)
        value = self._cache.get(text)
        if value is None:
            budget = _summable_count(self.counter, text) * self.token_limit
            if _max_pieces(text) * self.chunk_tokens <= budget:
                value = budget  # the word pieces cannot be the binding limit: skip counting them
            else:
                value = max(budget, self.embedder.count_tokens(text) * self.chunk_tokens)
            if len(self._cache) > 200_000:
                self._cache.clear()
            self._cache[text] = value
        return value

    def fits(self, text: str) -> bool:
        """Exact check of both hard limits on ``text`` (no cache, no summing)."""
        if self.counter.count(text) > self.chunk_tokens:
            return False
        return _max_pieces(text) <= self.token_limit or self.embedder.count_tokens(text) <= self.token_limit


def _summable_count(counter: TokenCounter, text: str) -> int:
    """Budget tokens of a piece as it counts inside the longer text it came from, so that sums
    over consecutive pieces track the count of their concatenation.

    BPE encodings attach a space to the word after it: a piece's trailing spaces belong to the
    next piece, which is counted with one leading space when it starts with a Latin letter or
    digit (``" when"`` is one token, ``" 128"`` two). A trailing line break stays a token of its
    own. The exact count of every final chunk is checked afterwards.
    """
    core = text.strip()
    if not core:
        return 1 if "\n" in text else 0
    lead = " " if core[0].isascii() and core[0].isalnum() else ""
    return counter.count(lead + core) + (1 if "\n" in text[len(text.rstrip()):] else 0)


def _max_pieces(text: str) -> int:
    """An upper bound on the word pieces of ``text`` in a BERT-style tokenizer: every piece
    covers at least one character of the NFD form (accents are stripped, never added), and a
    word it cannot cover is one ``[UNK]``. Tight for CJK (one piece per ideograph), where it
    saves the slow exact count."""
    return len(unicodedata.normalize("NFD", text)) if not text.isascii() else len(text)


def _runs(blocks: Sequence[Block], text: str) -> list[list[Block]]:
    """Maximal runs of unflagged, non-blank blocks; a flagged block ends a run."""
    runs: list[list[Block]] = [[]]
    for b in blocks:
        if b.flags:
            runs.append([])
        elif text[b.start:b.end].strip():
            runs[-1].append(b)
    return [r for r in runs if r]


def _can_join(cur: list[Block], b: Block) -> bool:
    """Structure only: may block ``b`` continue the chunk made of ``cur``?"""
    heads_only = all(x.kind == "heading" for x in cur)
    if b.kind == "heading":
        return heads_only and b.level > cur[-1].level
    if heads_only:
        return True
    last = cur[-1]
    if (b.kind == "row") != (last.kind == "row"):  # a CSV's rows never share a chunk with its schema
        return False
    return b.page == last.page and b.heading_path == last.heading_path


def _pack(group: list[Block], text: str, measure: _Measure, overlap: int) -> list[tuple[int, int]]:
    """Greedy packing of one run of blocks into ``(start, end)`` spans (blocks kept whole; a
    block over the limit is split on its own, or with the headings just before it)."""
    spans: list[tuple[int, int]] = []
    cur: list[Block] = []
    carried = 0  # how many blocks at the front of cur repeat the previous chunk (overlap)

    def total(blocks: list[Block]) -> int:
        return measure(text[blocks[0].start:blocks[0].end]) + sum(
            measure(text[a.end:b.start]) + measure(text[b.start:b.end]) for a, b in zip(blocks, blocks[1:]))

    def emit() -> None:
        if len(cur) > carried:
            spans.append((cur[0].start, cur[-1].end))

    for b in group:
        size = measure(text[b.start:b.end])
        if size >= measure.limit:
            if cur and carried == 0 and all(x.kind == "heading" for x in cur) and _can_join(cur, b):
                spans.extend(_split_under_headings(text, cur, b, measure, overlap))
            elif b.kind == "row":
                emit()
                spans.extend(_split_row(text, b.start, b.end, measure, overlap))
            else:
                emit()
                spans.extend(_split(text, b.start, b.end, measure, overlap, kind=b.kind))
            cur, carried = [], 0
            continue
        if cur and not _can_join(cur, b):
            emit()
            cur, carried = [], 0
        if cur and total(cur + [b]) > measure.limit:
            emit()
            cur = _tail(cur, measure, text, overlap)
            while cur and total(cur + [b]) > measure.limit:
                cur = cur[1:]
            carried = len(cur)
        cur.append(b)
    if cur:
        emit()
    return spans


def _split_under_headings(text: str, heads: list[Block], b: Block, measure: _Measure,
                          overlap: int) -> list[tuple[int, int]]:
    """Split a block over the limit so that the headings before it open its first chunk: the
    first piece is cut with the headings' size taken off the limit, the rest at full size. The
    first piece is cut from the block's first window alone (the one :func:`_split` would cut from
    the whole block), so a block of many windows is split once at full size, not also at the
    smaller one."""
    start = heads[0].start
    room = measure.limit - measure(text[start:b.start]) - measure.limit // 50
    if room < measure.limit // 4:  # long headings: they make a chunk of their own
        return [(start, heads[-1].end)] + _split(text, b.start, b.end, measure, overlap, kind=b.kind)
    # only the first window at the smaller size: its first piece is the one :func:`_split` would cut
    first = _split_window(text, b.start, _window_stop(text, b.start, b.end), measure, 0, room, b.kind)[0]
    rest = _split(text, first[1], b.end, measure, overlap, kind=b.kind) if first[1] < b.end else []
    return [(start, first[1])] + rest


def _tail(blocks: list[Block], measure: _Measure, text: str, overlap: int) -> list[Block]:
    """The last non-heading blocks of a chunk whose text is at most ``overlap`` (measure units)."""
    if overlap <= 0:
        return []
    for i in range(len(blocks) - 1, -1, -1):
        if blocks[i].kind == "heading" or measure(text[blocks[i].start:blocks[-1].end]) > overlap:
            return blocks[i + 1:]
    return list(blocks)


def _splitter(measure: _Measure, limit: int, overlap: int, kind: str) -> RecursiveCharacterTextSplitter:
    return RecursiveCharacterTextSplitter(
        separators=SEPARATORS if kind in _LINES_FIRST else PROSE_SEPARATORS, is_separator_regex=True, keep_separator="end",
        chunk_size=limit, chunk_overlap=min(overlap, limit // 2), length_function=measure,
        strip_whitespace=False,
    )


_CELL_BREAK = re.compile(re.escape(CELL_SEP))
ROW_FILL = 0.9
"""Share of the limit a row's chunk is planned to: summed cell sizes can fall short of the exact
count of the joined text (word pieces across scripts), and a chunk the exact check refuses is
re-split inside its cells."""


def _split_row(text: str, start: int, end: int, measure: _Measure, overlap: int) -> list[tuple[int, int]]:
    """Split a CSV row block (``column: value | column: value ...``) over the limits between
    cells, into chunks of about the same size: the fewest chunks the rest of the row needs, each
    planned at the rest's size divided by that number; a chunk closes where the next cell would
    take it further from that size than it is, or over the limit. A greedy split leaves the last
    cells as a chunk of a few tokens (``wikidata_id: …Q17``), and cutting inside a cell separates
    a label from its value. A chunk ends with its last cell's ``|`` (as the document's text runs
    on with a space, a section joining two chunks reads as the row). A cell over the limit on its
    own is split by :func:`_split`. Sizes are summed per cell (measure units); :func:`_verify`
    re-checks each chunk exactly."""
    cells, pos = [], start
    for m in _CELL_BREAK.finditer(text, start, end):
        cells.append((pos, m.start() + 2))  # a cell keeps its " |": only a space lies between chunks
        pos = m.end()
    cells.append((pos, end))
    sep = measure(" ")
    sizes = [measure(text[s:e]) for s, e in cells]
    limit = int(measure.limit * ROW_FILL)
    rest = sum(sizes) + sep * (len(cells) - 1)
    spans: list[tuple[int, int]] = []
    cur_start, cur_end, cur_size, target = None, start, 0, 0.0
    for (s, e), size in zip(cells, sizes):
        if cur_start is not None:
            grown = cur_size + sep + size
            if grown > limit or abs(grown - target) > abs(cur_size - target):
                spans.append((cur_start, cur_end))
                rest -= cur_size + sep
                cur_start = None
        if size > limit:  # one cell over the limit: split inside it
            spans.extend(_split(text, s, e, measure, overlap, kind="row"))
            rest -= size + sep
            continue
        if cur_start is None:
            cur_start, cur_size = s, size
            target = rest / max(1, -(-rest // limit))  # the rest's size / the fewest chunks it needs
        else:
            cur_size += sep + size
        cur_end = e
    if cur_start is not None:
        spans.append((cur_start, cur_end))
    return spans


def _split(text: str, start: int, end: int, measure: _Measure, overlap: int,
           limit: int | None = None, kind: str = "paragraph") -> list[tuple[int, int]]:
    """Split ``text[start:end]`` with the recursive splitter into contiguous spans, one window of
    at most :data:`WINDOW_CHARS` characters at a time."""
    spans: list[tuple[int, int]] = []
    while start < end:
        stop = _window_stop(text, start, end)
        spans.extend(_split_window(text, start, stop, measure, overlap, limit, kind))
        measure.reached(stop)
        start = stop
    return spans


def _window_stop(text: str, start: int, end: int) -> int:
    """Where the window of :func:`_split` that starts at ``start`` ends (``end`` when the rest fits one)."""
    return end if end - start <= WINDOW_CHARS else _window_end(text, start, start + WINDOW_CHARS)


def _window_end(text: str, start: int, hard: int) -> int:
    """Where a window from ``start`` ends: just after the last :data:`_WINDOW_BREAKS` break in its
    second half, else at ``hard``."""
    for brk in _WINDOW_BREAKS:
        at = text.rfind(brk, start + (hard - start) // 2, hard)
        if at >= 0:
            return at + len(brk)
    return hard


def _split_window(text: str, start: int, end: int, measure: _Measure, overlap: int,
                  limit: int | None, kind: str) -> list[tuple[int, int]]:
    part = text[start:end]
    pieces = _splitter(measure, limit or measure.limit, overlap, kind).split_text(part)
    spans, pos = [], 0
    for piece in pieces:
        at = part.find(piece, pos)
        if at < 0:  # cannot happen: pieces are substrings in order; stay safe anyway
            at = part.find(piece)
        spans.append((start + at, start + at + len(piece)))
        pos = at + 1 if overlap else at + len(piece)
    return spans


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _verify(spans: list[tuple[int, int]], text: str, measure: _Measure, overlap: int) -> list[tuple[int, int]]:
    """Strip, drop empty spans, and re-split any span over a hard limit (checked exactly)."""
    out: list[tuple[int, int]] = []
    for start, end in spans:
        measure.step()
        start, end = _strip(text, start, end)
        if start >= end:
            continue
        if measure.fits(text[start:end]):
            out.append((start, end))
            continue
        out.extend(_resplit(text, start, end, measure, overlap))
    return out


def _resplit(text: str, start: int, end: int, measure: _Measure, overlap: int) -> list[tuple[int, int]]:
    for factor in _SHRINK:
        parts = [_strip(text, s, e) for s, e in _split(text, start, end, measure, overlap,
                                                           max(1, int(measure.limit * factor)))]
        parts = [(s, e) for s, e in parts if s < e]
        if all(measure.fits(text[s:e]) for s, e in parts):
            return parts
    # Character by character as the very last resort (each character fits on its own).
    out, s = [], start
    for i in range(start + 1, end + 1):
        if i == end or not measure.fits(text[s:i + 1]):
            s2, e2 = _strip(text, s, i)
            if s2 < e2:
                out.append((s2, e2))
            s = i
    return out


def _fix_starts(spans: list[tuple[int, int]], text: str, measure: _Measure) -> list[tuple[int, int]]:
    """No chunk starts with :data:`NO_START`: move such characters to the previous chunk when it
    ends right before them and still fits, else leave them out of the index (punctuation only)."""
    out: list[tuple[int, int]] = []
    for start, end in spans:
        measure.step()
        lead = start
        while lead < end and (text[lead] in NO_START or (lead > start and text[lead].isspace())):
            lead += 1
        if lead > start:
            if out and out[-1][1] <= start and not text[out[-1][1]:start].strip():
                grown = _strip(text, out[-1][0], lead)
                if measure.fits(text[grown[0]:grown[1]]):
                    out[-1] = grown
            start, end = _strip(text, lead, end)
            if start >= end:
                continue
        out.append((start, end))
    return out


MIN_CHUNK_TOKENS = 8
"""A chunk of fewer budget tokens than this is joined to a neighbour (:func:`_join_small`). The
splitter emits the pieces before one over the limit as a chunk of their own, and at the default
chunk size it left speech tags cut off their speech ("允曰:", 5 tokens; "杨奉曰:", 7) and a
paragraph's last short sentence ("布自收军。", 6) as chunks, returned as whole passages that
answer nothing. Source: a new-user trial over the novel (../shared/corpus); such pieces were 3 to
7 tokens, and a citation line alone costs about 20 (:data:`retrieval.pack.MIN_TRIM_TOKENS`)."""
_SHIFT_SEPARATORS = [re.compile(sep) for sep in PROSE_SEPARATORS if sep not in (_WINDOW, _CHAR)]
"""Where a small chunk may take the start or end of its neighbour, most preferred first."""

Meta = Callable[[int, int], tuple]


def _join_small(spans: list[tuple[int, int]], text: str, measure: _Measure, meta: Meta) -> list[tuple[int, int]]:
    """Join each chunk under :data:`MIN_CHUNK_TOKENS` budget tokens to a neighbour: first the one
    it belongs with (the one before when it ends with a sentence stop, :func:`_stops`: a short
    last sentence; else the next: a speech tag, a label, a heading-like line), else the other. Only a neighbour with nothing but whitespace between them and the same page
    and heading path (``meta(start, end)``, :func:`_meta`) is joined, except that a chunk of
    headings alone joins the text that follows them. When the two do not fit one chunk, the
    small one takes the neighbour's nearest sentence, clause or word instead
    (:func:`_take_from`). A chunk with no such neighbour stays as it is."""
    out = list(spans)
    i = 0
    while i < len(out):
        measure.step()
        s, e = out[i]
        if measure.counter.count(text[s:e]) >= MIN_CHUNK_TOKENS:
            i += 1
            continue
        for j in ((i - 1, i + 1) if _stops(text[s:e]) else (i + 1, i - 1)):
            if 0 <= j < len(out) and _joinable(out[min(i, j)], out[max(i, j)], text, meta, small_first=j > i):
                got = _take_from(text, out[min(i, j)], out[max(i, j)], measure, small_first=j > i)
                if got:
                    out[min(i, j):max(i, j) + 1] = got
                    break
        i += 1
    return out


def _stops(piece: str) -> bool:
    """Whether ``piece`` ends with a sentence stop (:data:`docanchor.text.SENTENCE_STOP`)."""
    return any(m.end() == len(piece) for m in SENTENCE_STOP.finditer(piece, max(0, len(piece) - 8)))


def _joinable(a: tuple[int, int], b: tuple[int, int], text: str, meta: Meta, small_first: bool) -> bool:
    """Whether neighbouring spans ``a`` and ``b`` may share text (see :func:`_join_small`)."""
    if a[1] > b[0] or text[a[1]:b[0]].strip():
        return False
    ma, mb = meta(*a), meta(*b)
    return ma[:3] == mb[:3] or (small_first and ma[3] == "heading")


def _take_from(text: str, a: tuple[int, int], b: tuple[int, int], measure: _Measure,
               small_first: bool) -> list[tuple[int, int]] | None:
    """``a`` and ``b`` as one span when it fits both limits; else the two with the small one grown
    into the other up to its nearest break (:data:`_SHIFT_SEPARATORS`, best level first) where
    both parts keep :data:`MIN_CHUNK_TOKENS` and fit; ``None`` when there is no such break."""
    if measure.fits(text[a[0]:b[1]]):
        return [(a[0], b[1])]
    lo, hi = (b[0], b[1]) if small_first else (a[0], a[1])
    for sep in _SHIFT_SEPARATORS:
        cuts = [m.end() for m in sep.finditer(text, lo, hi) if lo < m.end() < hi]
        for cut in (cuts if small_first else reversed(cuts)):
            first, second = _strip(text, a[0], cut), _strip(text, cut, b[1])
            if first[0] >= first[1] or second[0] >= second[1] or text[second[0]] in NO_START:
                continue
            if min(measure.counter.count(text[x:y]) for x, y in (first, second)) < MIN_CHUNK_TOKENS:
                continue
            if measure.fits(text[first[0]:first[1]]) and measure.fits(text[second[0]:second[1]]):
                return [first, second]
    return None


def _meta(blocks: list[Block], starts: list[int], start: int, end: int
          ) -> tuple[int | None, int | None, tuple[str, ...], str]:
    """``(page_start, page_end, heading_path, kind)`` of the blocks a span covers.

    ``heading_path`` is the first block's; when the span opens with headings, the path of the
    deepest heading of that opening run (it includes the outer ones). ``kind`` is the first
    non-heading block's kind, or ``heading``.
    """
    i = max(0, bisect.bisect_right(starts, start) - 1)
    covered: list[Block] = []
    while i < len(blocks) and blocks[i].start < end:
        if blocks[i].end > start:
            covered.append(blocks[i])
        i += 1
    if not covered:
        return None, None, (), "text"
    pages = [b.page for b in covered if b.page is not None]
    path = covered[0].heading_path
    for b in covered:
        if b.kind != "heading":
            break
        path = b.heading_path
    kind = next((b.kind for b in covered if b.kind != "heading"), "heading")
    return (min(pages) if pages else None, max(pages) if pages else None, path, kind)


