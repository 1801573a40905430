"""Expand: read the neighbours that passed the cut-off, follow run-on sentences, and decide how
much of each candidate's text it brings.

- A neighbour that matched neither list itself brings only its boundary sentence (its first
  sentence after the match, its last before it), not its whole text -- unless it sits between
  two kept chunks, where it comes whole so the section reads as the document.
- A match other than the best whose evidence is the query terms it holds (dense similarity under
  the embedder's ``DenseScale.whole_match``) brings its sentences from the first holding a term to
  :data:`SENTENCES_AFTER_EVIDENCE` past the last (:func:`evidence_span`), not the sentences before
  or after them that hold none; one found by its embedding, and the best match, come whole. Only a section's ends are
  cut so: between two packed chunks the packer writes the document's text whole.
- Run-on sentences: a neighbour that holds only the middle of the match's sentence (a long table
  row, a CJK line without 。) passes the sentence on to the next chunk, and so on to the
  sentence's end (:func:`follow_run_on`).
- Section breaks (:func:`keep_lifts_in_section`): the lift a match gives the chunk next to it
  stops at a heading, so no neighbour or boundary sentence of one section is packed into a
  passage of another.
- A chunk that is a heading alone, or of fewer than :data:`MIN_SECTION_WORDS` words, never makes
  a section alone: it may only join the chunk next to it (unless it is the document's only one).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from docanchor.context import Context
from docanchor.embedder import MINILM_DENSE, DenseScale
from docanchor.text import LIST_ENTRY_MAX_CHARS, RUN_END, has_words, run_breaks
from docanchor.types import Chunk, DocumentRecord, chunk_id
from retrieval.candidate import Candidate, Fate, Pool, Why
from retrieval.pack import is_heading, section_break, sentence_spans
from retrieval.stages.context import lifted, own_score
from retrieval.stages.gather import read_chunks
from retrieval.stages.references import is_reference_scrap

RUN_ON_DECAY = 0.99
"""Each further chunk of a run-on sentence (see :func:`follow_run_on`) scores this share of the
chunk before it: a run is packed in reading order outward from its match. Source: any value just
under 1 keeps that order; the rule's effect is measured in commit 1b89d78 (bench/budget_recall.py
``--cjk``) and re-measured by ``--ablate run_on``."""
SENTENCES_AFTER_EVIDENCE = 2
"""Sentences a match brings past its last one holding a query term (:func:`evidence_span`): an
answer often goes on past the sentence naming its subject ("... I introduced a comprehensive bill
to fix our immigration system. Take a look at it. It has all these and more: secure the border,
..."). Source: as ``DenseScale.whole_match`` (:data:`docanchor.embedder.MINILM_DENSE`; 0 and 1
lost recall at 500 and 2000 tokens on the odd half; one sentence kept before the first as well
gained less IoU)."""
MIN_SECTION_WORDS = 2
"""Fewer words than this (letters/digits runs; each CJK character counts as one) and a chunk
never makes a section alone: a lone "(" or "ist." answers nothing (two words can: a DOCX page
header such as "Header text" is a whole chunk). Source: the punctuation-only sections seen in
tests/test_retrieval.py's small-budget test over the cases' text files."""


def read_neighbours(ctx: Context, namespace: str, pool: Pool) -> None:
    """Read the chunks of candidates that have none yet, in one batch; forget those not stored."""
    missing = sorted(cid for cid, c in pool.items() if c.chunk is None)
    if not missing:
        return
    got = read_chunks(ctx, namespace, missing)
    for cid in missing:
        if cid in got:
            pool[cid].chunk = got[cid]
        else:  # a neighbour position with no stored chunk
            del pool[cid]


def keep_lifts_in_section(pool: Pool, floor: float) -> None:
    """Stop the context stage's lift (:data:`retrieval.stages.context.NEIGHBOUR_WEIGHT`) at a
    section break (:func:`section_break`).

    A chunk lifted by a match on the other side of a heading belongs to another section and
    completes nothing there. It takes the lift of the match on its other side when that one is in
    its own section. Else, with no evidence of its own (fused score 0), it is decided as
    :attr:`Fate.SECTION_BREAK` (the trace keeps the lift that brought it); with some, it keeps
    only its own score (``fused + CONTEXT_WEIGHT * context``) and the cut-off decides it. Only
    candidates at or above ``floor`` are looked at (the others are cut anyway). Run after
    :func:`read_neighbours` (heading paths are needed) and before :func:`follow_run_on`. Source:
    the README's traced example, whose section under "## Token budgets" began with the last
    sentence of the section before it.
    """
    for cand in pool.values():
        parent = pool.get(cand.neighbour_of or "")
        if (cand.placement is not None or cand.score < floor or parent is None
                or not section_break(parent.chunk, cand.chunk)):
            continue
        other = pool.get(chunk_id(cand.doc_id, 2 * cand.chunk.ordinal - parent.chunk.ordinal))
        own = own_score(cand.fused_score, cand.context_score)
        if other is not None and other.listed and not section_break(other.chunk, cand.chunk):
            lift = lifted(own_score(other.fused_score, other.context_score))
            if lift > own:
                cand.score, cand.neighbour_of = lift, other.chunk_id
                continue
        if cand.has_own_evidence:
            cand.score, cand.neighbour_of = own, None
        else:
            cand.decide(Fate.SECTION_BREAK)


def follow_run_on(
    ctx: Context, namespace: str, pool: Pool, records: dict[str, DocumentRecord], floor: float,
    budget_tokens: int,
) -> None:
    """Carry a match's sentence on through the chunks it runs over.

    A chunk that is in the context as a match's neighbour (``neighbour_of`` set) and holds one
    unfinished sentence -- no break inside it (:func:`docanchor.text.run_breaks`: a sentence end, a
    line that ends; a hard wrap is none), and its line goes on in the
    next chunk (:attr:`Chunk.ends_line` False) -- passes the sentence on. The chunk beyond it,
    away from the match, becomes a candidate too (:attr:`Why.RUN_ON`), scored
    :data:`RUN_ON_DECAY` times the link before it and naming that link in ``neighbour_of``.
    Going backward, a chunk whose line or sentence ends at its end is not part of the run. A run
    also stops at the document's ends, below ``floor``, at a chunk already scored as high on its
    own, and once it holds ``budget_tokens`` tokens.
    """
    starts = sorted((c for c in pool.values() if c.neighbour_of and c.score >= floor and c.chunk is not None),
                    key=lambda c: (-c.score, c.chunk_id))
    for start in starts:
        link, tokens, score = start.chunk, 0, start.score
        step = 1 if pool[start.neighbour_of].chunk.ordinal < link.ordinal else -1
        while _unfinished(link) and tokens < budget_tokens:
            tokens += chunk_tokens(link, ctx.counter.count) or 0
            ordinal, score = link.ordinal + step, round(score * RUN_ON_DECAY, 8)
            if score < floor or not 0 <= ordinal < records[link.doc_id].n_chunks:
                break
            nxt = _chunk_at(ctx, namespace, pool, link.doc_id, ordinal)
            if nxt is None or (step < 0 and (nxt.ends_line or RUN_END.search(nxt.text))):
                break
            cand = pool.setdefault(nxt.chunk_id, Candidate(nxt.chunk_id, nxt, why=Why.RUN_ON))
            if cand.score >= score:  # here on its own merit (or another run's) already
                break
            cand.score, cand.neighbour_of = score, link.chunk_id
            if not cand.listed:
                cand.why = Why.RUN_ON
            link = nxt


def _unfinished(c: Chunk) -> bool:
    """``c`` holds one sentence that goes on in the next chunk."""
    return not c.ends_line and next(run_breaks(c.text), None) is None


def _chunk_at(ctx: Context, namespace: str, pool: Pool, doc_id: str, ordinal: int) -> Chunk | None:
    cid = chunk_id(doc_id, ordinal)
    if cid in pool and pool[cid].chunk is not None:
        return pool[cid].chunk
    return read_chunks(ctx, namespace, [cid]).get(cid)


def shape(
    ranked: list[Candidate], pool: Pool, records: dict[str, DocumentRecord], floor: float, *,
    boundary: bool = True, small_joins: bool = True, focus: bool = True, terms: set[str] | None = None,
    tokenize: Callable[[str], list[str]] | None = None, dense: DenseScale = MINILM_DENSE,
) -> None:
    """Set ``span`` and ``joins_only`` of the candidates that will be packed (``ranked``).

    A neighbour with no evidence of its own (``neighbour_of`` set, fused score 0) only completes
    its match: it brings its boundary sentence (:func:`boundary_sentence`) unless the chunk
    beyond it is packed too, and it joins only. So does a heading alone, a scrap of a reference
    list or a chunk of fewer than :data:`MIN_SECTION_WORDS` words, unless it is its document's only chunk.
    A match with evidence of its own (fused score above 0), other than the first of ``ranked``,
    whose dense similarity is under ``dense.whole_match`` (the embedder's
    :class:`~docanchor.embedder.DenseScale`) brings the span :func:`evidence_span` gives for the
    query's ``terms`` (made by ``tokenize``, the BM25 tokenizer). From that cosine a match comes
    whole: its embedding is its evidence, and an embedding does not say which of its sentences
    matched. The best match always comes whole: the answer is most often around it, in sentences
    that name the subject in other words ("I watched in horror as two of my heroes ... were
    assassinated. And their legacies inspired me to ... a career in service.", where only the
    second holds a query term). ``boundary``, ``small_joins`` and
    ``focus`` False, or no ``terms``, leave out those rules (ablations).
    """
    best_seen = False
    for cand in ranked:
        c = cand.chunk
        completes = cand.neighbour_of is not None and not cand.has_own_evidence
        if focus and terms and cand.has_own_evidence:
            if best_seen and (cand.dense_score or 0.0) < dense.whole_match:
                cand.span = evidence_span(c.text, terms, tokenize)
            best_seen = True
        if completes and boundary:
            after = pool[cand.neighbour_of].chunk.ordinal < c.ordinal
            beyond = pool.get(chunk_id(c.doc_id, c.ordinal + (1 if after else -1)))
            if beyond is None or beyond.score < floor:  # (between two kept chunks it comes whole)
                cand.span = boundary_sentence(c.text, after=after)
        cand.joins_only = completes or (small_joins and _small(c, records))


SHAPE_CACHE_TEXTS = 4096
"""Chunk texts whose sentence spans (:func:`_sentences`) and boundary sentences
(:func:`boundary_sentence`) :func:`shape` remembers, each (least recently used go first): both
are pure functions of the chunk's text, and the same chunks come back for query after query.
Source: a bound on memory (a chunk of the default 100 tokens is well under 1 kB), not tuned."""


@lru_cache(maxsize=SHAPE_CACHE_TEXTS)
def _sentences(text: str) -> tuple[tuple[int, int], ...]:
    """:func:`retrieval.pack.sentence_spans` of a chunk's ``text``, cached."""
    return tuple(sentence_spans(text))


def evidence_span(text: str, terms: set[str], tokenize: Callable[[str], list[str]],
                  after: int | None = None) -> tuple[int, int] | None:
    """The character span of ``text`` (a match's chunk) from its first sentence holding one of the
    query's ``terms`` to ``after`` (:data:`SENTENCES_AFTER_EVIDENCE`) sentences past its last
    one; ``None`` (the whole text) when no sentence holds one or the span would be the whole text.
    Sentences are :func:`retrieval.pack.sentence_spans`'; the span starts at its line's
    indentation, so a paragraph keeps its first characters. Sentences are tokenized from each end
    only until the first that holds a term.
    """
    after = SENTENCES_AFTER_EVIDENCE if after is None else after
    spans = _sentences(text)

    def holds(i: int) -> bool:
        a, b = spans[i]
        return not terms.isdisjoint(tokenize(text[a:b]))

    first = next((i for i in range(len(spans)) if holds(i)), None)
    if first is None:
        return None
    last = next(i for i in range(len(spans) - 1, first - 1, -1) if i == first or holds(i))
    hi = min(len(spans) - 1, last + after)
    if first == 0 and hi == len(spans) - 1:
        return None
    a = spans[first][0] if first else 0
    indent = a
    while indent > 0 and text[indent - 1] in " \t\u3000":
        indent -= 1
    if indent == 0 or text[indent - 1] == "\n":  # it starts a line: the line's indentation stays with it
        a = indent
    return a, spans[hi][1] if hi < len(spans) - 1 else len(text)


def _small(c: Chunk, records: dict[str, DocumentRecord]) -> bool:
    """A heading alone, a scrap of a reference list (:func:`retrieval.stages.references.is_reference_scrap`),
    or fewer than :data:`MIN_SECTION_WORDS` words, in a document of more than one chunk (asked only
    of a candidate that does not join only already)."""
    return heading_only(c) or (records[c.doc_id].n_chunks > 1 and (
        not has_words(c.text, MIN_SECTION_WORDS) or is_reference_scrap(c)))


def heading_only(c: Chunk) -> bool:
    """Whether chunk ``c`` is a heading alone: a Markdown heading line, or a text equal (spaces
    aside) to one of the headings it sits under (:attr:`Chunk.heading_path`: a PDF's outline
    entry, a novel's chapter line), such as dmca.pdf's "Circumvention of Technological Protection
    Measures", which a small budget answered alone (new-user trial)."""
    return is_heading(c.text, c.heading_path)


@lru_cache(maxsize=SHAPE_CACHE_TEXTS)
def boundary_sentence(text: str, after: bool) -> tuple[int, int]:
    """The character span of ``text``'s first sentence (``after`` a match) or its last (before one).

    Sentences end where :func:`docanchor.text.run_breaks` breaks a chunk's text (a line that
    ends, not a hard wrap; a sentence end not after a digit); ``:`` and ``;`` do not end one, so a
    table row's ``column: value`` cells stay with their sentence. The whole text when it holds no
    sentence end, or when the sentence holds no letter or digit.
    """
    if after:
        b = next(run_breaks(text), len(text))
        while b > 0 and text[b - 1].isspace():
            b -= 1
        if not any(ch.isalnum() for ch in text[:b]):  # never a lone "|" or quote
            return 0, len(text)
        return 0, b
    a, body = 0, text.rstrip()
    for end in run_breaks(body):
        if end < len(body):  # a break before the last sentence, not the one that ends it
            a = end
    while a < len(text) and text[a].isspace():
        a += 1
    if a >= len(text) or not any(ch.isalnum() for ch in text[a:]):  # never a lone "|" or quote
        return 0, len(text)
    return a, len(text)


def chunk_tokens(chunk: Chunk | None, count) -> int | None:
    """Budget tokens of ``chunk``'s text (its stored ``n_tokens`` when set); ``None`` for no chunk."""
    if chunk is None:
        return None
    return chunk.n_tokens or count(chunk.text)


BEFORE_CHARS = LIST_ENTRY_MAX_CHARS
"""Characters of the document's text before a passage kept to judge whether the passage starts a
sentence (:func:`texts_beside`). Source: the number line of a numbered entry the passage may start
inside (:func:`docanchor.text.in_list_entry`); longer than any sentence end with its closing
quotes and the blank lines after it."""
AFTER_CHARS = LIST_ENTRY_MAX_CHARS
"""Characters of the document's text after a passage kept to judge whether it stops at a sentence
end (:func:`texts_beside`): the gap after it and the next chunk's first words (a page break
inside a sentence is blank lines, then a lowercase word), and whether it starts inside a
numbered entry (the next entry's number line, :func:`docanchor.text.in_list_entry`). Source: as
:data:`BEFORE_CHARS`."""


def texts_beside(
    ctx: Context, namespace: str, pool: Pool, cands: list[Candidate],
) -> tuple[dict[str, str | None], dict[str, str | None], dict[str, bool]]:
    """The document's text just before and just after each candidate's text, in one batched store
    read of the neighbouring chunks the pool lacks (only those the answer depends on: not past the
    document's start, nor where a candidate's own chunk holds enough text beside its span, nor
    with nothing known after it). Used by the packer to mark a passage that starts or stops inside a sentence
    (:func:`docanchor.text.starts_sentence`, :func:`docanchor.text.ends_sentence`).

    Returns:
        ``(before, after, page_break)``: chunk id -> at most :data:`BEFORE_CHARS` characters
        before ("" at the document's start) and at most :data:`AFTER_CHARS` characters after (the
        rest of a chunk cut to a span, its gap, the next chunk's text; "" at the document's end),
        ``None`` when unknown (unindexed text or an unknown gap lies between); and whether a page
        break may lie right after its text (:func:`_page_break_after`).
    """
    wanted = {chunk_id(c.doc_id, c.chunk.ordinal - 1) for c in cands if _reads_before(c)}
    wanted.update(chunk_id(c.doc_id, c.chunk.ordinal + 1) for c in cands if _reads_after(c))
    missing = sorted(cid for cid in wanted if pool.get(cid) is None or pool[cid].chunk is None)
    read = read_chunks(ctx, namespace, missing)

    def chunk(c: Candidate, step: int) -> Chunk | None:
        got = pool.get(chunk_id(c.doc_id, c.chunk.ordinal + step))
        return got.chunk if got is not None and got.chunk is not None else read.get(
            chunk_id(c.doc_id, c.chunk.ordinal + step))

    before = {c.chunk_id: _text_before(c, chunk(c, -1) if _reads_before(c) else None) for c in cands}
    after = {c.chunk_id: _text_after(c, chunk(c, 1) if _reads_after(c) else None) for c in cands}
    breaks = {c.chunk_id: _page_break_after(c, chunk(c, 1) if _reads_after(c) else None) for c in cands}
    return before, after, breaks


def _page_break_after(c: Candidate, nxt: Chunk | None) -> bool:
    """Whether a page break may lie right after ``c``'s text: False only when the text after it
    is known to be on the same page -- it ends inside its chunk, which lies on one page, or it
    ends its chunk and the next chunk (``nxt``, looked at where :func:`_reads_after` holds) starts
    on the page the chunk ends on. The packer guesses a page break after prose broken off without
    a stop (:func:`docanchor.text.breaks_off`) only where one may be: a paragraph without a final
    stop before a heading on the same page is whole."""
    ch = c.chunk
    if ch.page_start is None:
        return True
    last_page = ch.page_end if ch.page_end is not None else ch.page_start
    if c.span and ch.text[c.span[1]:].strip():
        return ch.page_start != last_page
    return nxt is None or nxt.page_start is None or nxt.page_start != last_page


def _reads_before(c: Candidate) -> bool:
    """Whether :func:`_text_before` needs the chunk before ``c``'s: not at the document's start,
    nor when ``c``'s own chunk holds :data:`BEFORE_CHARS` characters before its span."""
    return c.chunk.ordinal != 0 and not (c.span and c.span[0] >= BEFORE_CHARS)


def _reads_after(c: Candidate) -> bool:
    """Whether :func:`_text_after` needs the chunk after ``c``'s: only when the gap after the chunk
    is known and joins the next, and less than :data:`AFTER_CHARS` characters of text follow its
    span in its own chunk."""
    rest = c.chunk.text[c.span[1]:] if c.span else ""
    enough = len(rest) >= AFTER_CHARS and rest.strip()
    return c.chunk.gap_after is not None and c.chunk.joins_next and not enough


def _text_before(c: Candidate, prev: Chunk | None) -> str | None:
    """At most :data:`BEFORE_CHARS` characters of the document before ``c``'s text (see
    :func:`texts_beside`); ``prev`` is the chunk before ``c``'s (looked at only where
    :func:`_reads_before` holds)."""
    own = c.chunk.text[:c.span[0]] if c.span else ""
    if c.chunk.ordinal == 0:
        return own[-BEFORE_CHARS:]
    known = prev is not None and prev.joins_next and prev.gap_after is not None
    if not known:
        return own[-BEFORE_CHARS:] if own else None
    return ((prev.text + prev.gap_after)[-BEFORE_CHARS:] + own)[-BEFORE_CHARS:]


def _text_after(c: Candidate, nxt: Chunk | None) -> str | None:
    """At most :data:`AFTER_CHARS` characters of the document after ``c``'s text (see
    :func:`texts_beside`); ``nxt`` is the chunk after ``c``'s (``None`` at the document's end;
    looked at only where :func:`_reads_after` holds)."""
    rest = c.chunk.text[c.span[1]:] if c.span else ""
    if c.chunk.gap_after is None or nxt is None or not c.chunk.joins_next:
        # unknown: the packer judges the gap alone (the document's end among these)
        return rest[:AFTER_CHARS] if rest.strip() else None
    skip = max(0, c.chunk.end_char - nxt.start_char)  # overlapping chunks: what follows the end
    return (rest + c.chunk.gap_after + nxt.text[skip:])[:AFTER_CHARS]
