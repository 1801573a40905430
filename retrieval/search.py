"""Hybrid retrieval under a token budget: dense + BM25 candidates, fused, cut, merged, packed, cited.

query --NFKC--> dense top-k (Chroma) + BM25 top-k (:mod:`docanchor.lexical`)
      --> relative score fusion --> context score (neighbours in the document)
      --> relevance cut-off --> only chunks of visible documents --> :func:`retrieval.pack.pack`

Relative score fusion: each list's scores are min-max normalised over that list's own top-k
(the best candidate of a list gets 1, its k-th 0) and a chunk's fused score is
``w * dense + (1 - w) * bm25`` (a chunk missing from a list gets 0 there). This is the
"relativeScoreFusion" of Weaviate's hybrid search; unlike reciprocal rank fusion (Cormack et al.,
SIGIR 2009) it keeps how far apart the scores are, which the cut-off needs. Measured on the
chunking_eval bench (bench/budget_recall.py) it also ranks slightly better than RRF with k = 60.
The two lists weigh the same (``w = 0.5``), except that all-MiniLM-L6-v2 maps most CJK
characters to ``[UNK]``: for a query that is mostly CJK the dense list weighs
:data:`CJK_DENSE_WEIGHT` and BM25's character bigrams carry the match; and a mostly-CJK chunk's
dense similarity weighs :data:`CJK_DENSE_WEIGHT` for any query, because its mostly-``[UNK]``
vector is weakly similar to everything (measured: with the Chinese novel in the namespace, a
quarter of the dense top-40 for English chatlog questions were Chinese chunks, and English
recall at 1000 tokens fell from 87.4 % to 84.3 %).

Context score: the evidence for a question is often spread over consecutive passages, and a
100-token chunk that answers it may not repeat the words that the passages around it share with
the question. So each chunk's final score is its fused score plus :data:`CONTEXT_WEIGHT` times
the mean fused score of the :data:`CONTEXT_WINDOW` chunks on either side of it (a box kernel
along the document; positions past the document's ends are not counted). Neighbours that matched
neither list become candidates this way; and a chunk right next to a match scores at least
:data:`NEIGHBOUR_WEIGHT` of the match (a sentence cut by a chunk boundary comes back whole: CJK
phrase recall at 1000 tokens 87.6 % without this rule, 95.7 % with it). Measured with
bench/budget_recall.py (cut-off 0.3 before and after), the context score took recall at
250/500/1000/2000 tokens from 69.4/78.0/85.2/89.1 % to 70.5/81.9/89.9/93.7 %. The window and
weight are round values, not fitted: in a simulation on the same index, windows 1-4 and weights
0.3-0.7 all gained 3-5 points at 1000 and 2000 tokens. A neighbour that matched neither list
itself brings only that boundary sentence (its first sentence after the match, its last before
it), not its whole text: recall / IoU at 1000 tokens 91.5 / 6.9 % -> 92.0 / 7.4 %, at 2000
tokens 95.9 / 5.9 % -> 95.6 / 6.5 %.

Run-on sentences: a neighbour that holds only the middle of the match's sentence (a long table
row, a CJK line without 。) passes the sentence on to the next chunk, and so on to the sentence's
end (:func:`_follow_run_on`). On the CJK part of bench/budget_recall.py (phrases from 50 random
passages; the misses were long table rows of issue-67-example.pdf) recall at 1000 tokens went
from 93.1 % to 97.4 %; English recall at 250/500/1000/2000 tokens moved from 72.9/84.5/92.0/95.6 %
to 72.8/84.6/92.2/95.7 %.

Relevance cut-off: a candidate whose final score is below :data:`RELEVANCE_CUTOFF` times the best
one's is not packed, so a large budget is a ceiling, not a quota: weak matches do not dilute
the context. It trades recall for precision (bench/budget_recall.py, recall / IoU at 1000 and
2000 tokens): 0.3 -> 89.9 / 8.0 % and 93.7 / 7.2 %; 0.25 -> 91.1 / 7.2 % and 95.7 / 6.0 %; 0.2 ->
91.1 / 6.6 % and 95.9 / 4.9 %.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Sequence

from docanchor.context import Context
from docanchor.lexical import _CJK, tokenize
from docanchor.types import Chunk, DocumentRecord, RetrievalResult, Section, chunk_id
from retrieval.pack import MIN_TRIM_TOKENS, Piece, pack

DENSE_K = 40
"""Dense candidates per query (chunks)."""
LEXICAL_K = 40
"""BM25 candidates per query (chunks)."""
DENSE_WEIGHT = 0.5
"""Weight of the dense list in the fused score (BM25 gets the rest): neither list is preferred."""
CJK_DENSE_WEIGHT = 0.2
"""Weight of the dense similarity when at least half of the letters of the query, or of the
chunk, are CJK."""
RELEVANCE_CUTOFF = 0.25
"""Candidates whose final score is below this share of the best candidate's are not packed."""
CONTEXT_WINDOW = 2
"""Chunks on each side of a chunk (same document, by ordinal) whose fused scores make its context."""
CONTEXT_WEIGHT = 0.5
"""Weight of the context score (the mean fused score of the neighbours) in a chunk's final score."""
NEIGHBOUR_WEIGHT = 0.5
"""A chunk right next to a match (same document, ordinal +-1) scores at least this share of the
match's final score: a passage that runs over a chunk boundary comes back whole."""
RUN_ON_DECAY = 0.99
"""Each further chunk of a run-on sentence (see :func:`_follow_run_on`) scores this share of the
chunk before it: a run is packed in reading order outward from its match."""
_CLOSERS = r"[\"'”’)\]」』]*"
_RUN_BREAK = re.compile(rf"(?:(?<=[^\W\d_])\.|[!?]){_CLOSERS}(?=\s|$)|[。！？]{_CLOSERS}|\n")
_RUN_END = re.compile(rf"(?:(?<=[^\W\d_])\.|[!?。！？]){_CLOSERS}\s*$")
"""Where a run-on sentence ends: a line break, 。！？!? or a full stop after a letter (one after a
digit is a list number or a decimal point, as in the table rows of financial reports)."""
_HEADING_ONLY = re.compile(r"#{1,6} [^\n]*")
MIN_SECTION_WORDS = 2
"""Fewer words than this (letters/digits runs; each CJK character counts as one) and a chunk
never makes a section alone: a lone "(" or "ist." answers nothing (two words can: a DOCX page
header such as "Header text" is a whole chunk)."""
_WORDS = re.compile(r"[^\W_]+")
DOC_CAP_SHARE = 0.6
"""The largest share of the budget one document takes on the first packing pass when several
documents compete (see :func:`retrieval.pack.pack`)."""


def normalise_query(query: str) -> str:
    """The query normalised like ingested text: NFKC, control characters out, spaces collapsed."""
    text = unicodedata.normalize("NFKC", query)
    text = "".join(ch for ch in text if ch in "\n\t" or unicodedata.category(ch) not in ("Cc", "Cf", "Cs"))
    return " ".join(text.split())


_CJK_CHAR = re.compile(f"[{_CJK}]")


def _cjk_share(text: str) -> float:
    """The share of ``text``'s letters that are CJK (0.0 for no letters)."""
    letters = sum(1 for ch in text if ch.isalpha())
    if not letters:
        return 0.0
    return len(_CJK_CHAR.findall(text)) / letters


def retrieve(
    ctx: Context,
    namespace: str,
    query: str,
    budget_tokens: int,
    doc_ids: Sequence[str] | None = None,
    explain: bool = False,
    budget_source: str = "request",
) -> RetrievalResult:
    """The best sections for ``query`` whose rendered context fits ``budget_tokens``.

    Args:
        ctx: the instance's embedder, counter, store and lexical index.
        namespace: where to search.
        query: the question (non-empty; checked by the caller).
        budget_tokens: the most budget tokens the returned ``context`` may use.
        doc_ids: restrict the search to these documents.
        explain: attach a deterministic trace of every candidate's fate.
        budget_source: how the caller set ``budget_tokens``, for the trace: ``"request"``,
            ``"model"`` (derived from the caller's model) or ``"default"`` (the configured one).

    Returns:
        A :class:`RetrievalResult`; ``context_tokens_used == ctx.counter.count(context) <=
        budget_tokens``. With no match, or a budget too small for any section, no sections,
        ``context == ""`` and a ``message`` saying which.

    Raises:
        StoreUnavailable: Chroma or the lexical index cannot be read.
    """
    records = _records(ctx, namespace)
    wanted = list(dict.fromkeys(doc_ids)) if doc_ids else None
    qnorm = normalise_query(query)
    dense_weight = CJK_DENSE_WEIGHT if _cjk_share(qnorm) >= 0.5 else DENSE_WEIGHT

    dense = ctx.store.query(namespace, ctx.embedder.embed_query(qnorm), DENSE_K, wanted) if records else []
    dense = sorted(dense, key=lambda cs: (-cs[1], cs[0].chunk_id))
    lexical = ctx.lexical.search(namespace, qnorm, LEXICAL_K, wanted) if records else []

    rows: dict[str, dict[str, Any]] = {}
    dense_norm = _minmax([score for _, score in dense])
    # fewer BM25 hits than asked for means every other chunk scores 0: that is the list's floor
    lexical_norm = _minmax([score for _, score in lexical], floor=0.0 if len(lexical) < LEXICAL_K else None)
    for rank, ((c, score), norm) in enumerate(zip(dense, dense_norm), 1):
        weight = CJK_DENSE_WEIGHT if _cjk_share(c.text) >= 0.5 else dense_weight
        rows[c.chunk_id] = _row(rank, round(score, 6), None, None, weight * norm)
    for rank, ((cid, score), norm) in enumerate(zip(lexical, lexical_norm), 1):
        row = rows.setdefault(cid, _row(None, None, None, None, 0.0))
        row.update(bm25_rank=rank, bm25_score=round(score, 6))
        row["fused_score"] += (1.0 - dense_weight) * norm
    for row in rows.values():
        row["fused_score"] = round(row["fused_score"], 8)

    chunks: dict[str, Chunk] = {c.chunk_id: c for c, _ in dense}
    chunks.update(_chunks(ctx, namespace, [cid for cid, _ in lexical if cid not in chunks]))
    if any(c.doc_id not in records for c in chunks.values()):  # written since the records were cached
        records = _records(ctx, namespace, fresh=True)
    fates: dict[str, str] = {}

    def visible(cid: str) -> bool:
        c = chunks.get(cid)
        return c is not None and c.doc_id in records and not (wanted and c.doc_id not in wanted)

    for cid in rows:
        if not visible(cid):
            fates[cid] = "not visible (no stored document)"

    # context: a chunk's score gains the mean fused score of its neighbours in the document
    ctx_scores = _context_scores(rows, chunks, records, [cid for cid in rows if cid not in fates])
    for cid, (ctx_score, final, parent) in ctx_scores.items():
        row = rows.setdefault(cid, _row(None, None, None, None, 0.0))
        row["context_score"], row["score"], row["neighbour_of"] = ctx_score, final, parent
    floor = RELEVANCE_CUTOFF * max((rows[cid]["score"] for cid in ctx_scores), default=0.0)
    # neighbours that matched neither list enter only when their context lifts them over the cut-off
    for cid in [cid for cid in rows if cid not in chunks]:
        if rows[cid]["score"] < floor:
            del rows[cid]
    missing = sorted(cid for cid in rows if cid not in chunks)
    if missing:
        chunks.update(_chunks(ctx, namespace, missing))
        for cid in missing:
            if cid not in chunks:  # a neighbour position with no stored chunk
                del rows[cid]
    _follow_run_on(ctx, namespace, rows, chunks, records, floor, budget_tokens)
    _first_copies(rows, chunks, fates)
    order = sorted(rows, key=lambda cid: (-rows[cid]["score"], cid))

    pieces: list[Piece] = []
    for cid in order:
        if cid in fates:
            continue
        if rows[cid]["score"] < floor:
            fates[cid] = "below relevance cut-off"
            continue
        c, record = chunks[cid], records[chunks[cid].doc_id]
        a, b = 0, len(c.text)
        parent = rows[cid]["neighbour_of"]
        completes = bool(parent) and rows[cid]["fused_score"] == 0  # here only to complete its match
        if completes:  # so it brings the match's boundary sentence
            after = chunks[parent].ordinal < c.ordinal
            beyond = rows.get(chunk_id(c.doc_id, c.ordinal + (1 if after else -1)))
            if beyond is None or beyond["score"] < floor:  # (between two kept chunks it comes whole)
                a, b = boundary_sentence(c.text, after=after)
        pieces.append(Piece(
            chunk_id=cid, doc_id=c.doc_id, ordinal=c.ordinal, title=record.title, text=c.text[a:b],
            start_char=c.start_char + a, end_char=c.start_char + b, page_start=c.page_start, page_end=c.page_end,
            heading_path=tuple(c.heading_path), score=rows[cid]["score"],
            ends_line=c.ends_line if b == len(c.text) else True,
            # a neighbour that only completes its match, a chunk that is a heading alone, or one of a
            # single word ("(", "ist.", "Karten:" from a formula-heavy PDF page) unless it is the whole
            # document, is no section by itself: it may only join the chunk next to it
            joins_only=(completes or bool(_HEADING_ONLY.fullmatch(c.text.strip()))
                        or (_too_small(c.text) and record.n_chunks > 1)),
        ))

    count = ctx.counter.count
    packed = pack(
        pieces, budget_tokens, count, query_terms=set(tokenize(qnorm)), tokenize=tokenize,
        doc_cap_share=DOC_CAP_SHARE,
    )
    fates.update(packed.fates)
    sections = [
        Section(
            doc_id=s.doc_id, title=s.title, text=s.text, start_char=s.start_char, end_char=s.end_char,
            page_start=s.page_start, page_end=s.page_end, heading_path=s.heading_path, score=s.score,
            n_tokens=s.n_tokens, chunk_ids=s.chunk_ids, citation=s.citation,
        )
        for s in packed.sections
    ]
    message = ""
    if not records:
        message = f"The namespace {namespace!r} holds no documents yet; upload one, then search again."
    elif not pieces:
        message = "No passage matched the query in the searched documents; try other words or check the doc_ids."
    elif not sections:
        message = (
            f"The budget of {budget_tokens} tokens is too small for any section (a citation line and "
            f"{MIN_TRIM_TOKENS} tokens of text are the least returned); raise budget_tokens."
        )

    trace = None
    if explain:
        trace = {
            "query": qnorm,
            "namespace": namespace,
            "budget_tokens": budget_tokens,
            "budget_source": budget_source,
            "doc_ids": wanted,
            "parameters": {
                "dense_k": DENSE_K, "lexical_k": LEXICAL_K, "fusion": "relative score (min-max per list)",
                "dense_weight": dense_weight, "relevance_cutoff": RELEVANCE_CUTOFF,
                "context_window": CONTEXT_WINDOW, "context_weight": CONTEXT_WEIGHT,
                "neighbour_weight": NEIGHBOUR_WEIGHT, "run_on_decay": RUN_ON_DECAY,
                "doc_cap_share": DOC_CAP_SHARE, "min_trim_tokens": MIN_TRIM_TOKENS,
                "budget_encoding": ctx.counter.name, "embedding_model": ctx.embedder.name,
            },
            "candidates": [
                {
                    "chunk_id": cid,
                    "doc_id": chunks[cid].doc_id if cid in chunks else None,
                    **{k: rows[cid][k] for k in ("dense_rank", "dense_score", "bm25_rank", "bm25_score", "fused_score",
                                                 "context_score", "neighbour_of", "same_text_as", "score")},
                    "tokens": _chunk_tokens(chunks.get(cid), count),
                    "fate": fates.get(cid, "dropped for budget"),
                }
                for cid in order
            ],
            "tokens": {
                "text": packed.text_tokens,
                "citations": packed.citation_tokens,
                "separators": packed.context_tokens_used - packed.text_tokens - packed.citation_tokens,
                "total": packed.context_tokens_used,
            },
        }
    return RetrievalResult(
        query=query, budget_tokens=budget_tokens, sections=sections, context=packed.context,
        context_tokens_used=packed.context_tokens_used, message=message, trace=trace,
    )


def _records(ctx: Context, namespace: str, fresh: bool = False) -> dict[str, DocumentRecord]:
    """The namespace's visible document records, cached per lexical-index generation.

    Every write of this instance goes through the lexical index, which bumps its generation; a
    document another writer stored is caught by the caller, which asks again with ``fresh`` when
    a candidate's document is missing from the cached records (an ingest indexes its chunks
    before it stores the record, so a search in between can cache the list without it), and an
    empty list is never cached: with no records there is no search, so no candidate could reveal a
    new document. With a Chroma server other processes write too: ``refresh`` follows their change
    log and bumps the generation when they wrote, so no request reads every record.
    """
    memo, generation = ctx.lexical.memo, ctx.lexical.refresh(namespace)
    hit = memo.get(("records", namespace))
    if hit is not None and hit[0] == generation and not fresh:
        return hit[1]
    records = {r.doc_id: r for r in ctx.store.list_documents(namespace)}
    if records:  # an empty namespace is not cached: with no candidates nothing would refresh it
        memo[("records", namespace)] = (generation, records)
    return records


def _chunks(ctx: Context, namespace: str, chunk_ids: Sequence[str]) -> dict[str, Chunk]:
    """Chunks by id: from the lexical index's memory, the rest read from Chroma."""
    if not chunk_ids:
        return {}
    got = ctx.lexical.get_chunks(namespace, chunk_ids)
    rest = [cid for cid in chunk_ids if cid not in got]
    if rest:
        got.update(ctx.store.get_chunks_by_id(namespace, rest))
    return got


def _row(dense_rank, dense_score, bm25_rank, bm25_score, fused) -> dict[str, Any]:
    return {"dense_rank": dense_rank, "dense_score": dense_score, "bm25_rank": bm25_rank,
            "bm25_score": bm25_score, "fused_score": fused, "context_score": 0.0, "score": fused,
            "neighbour_of": None, "same_text_as": None}


def _own_score(fused: float, context: float) -> float:
    """A chunk's score from its own match and its context, before any lift by a neighbour."""
    return round(fused + CONTEXT_WEIGHT * context, 8)


def _too_small(text: str) -> bool:
    """``text`` holds fewer than :data:`MIN_SECTION_WORDS` words (CJK characters count one each)."""
    cjk = len(_CJK_CHAR.findall(text))
    return cjk + len(_WORDS.findall(_CJK_CHAR.sub(" ", text))) < MIN_SECTION_WORDS


def _first_copies(rows: dict[str, dict[str, Any]], chunks: dict[str, Chunk], fates: dict[str, str]) -> None:
    """A passage a document repeats word for word is cited at its first occurrence.

    Copies of one text within one document are one piece of evidence (packing returns a text
    once). Among the copies that matched a list themselves (identical text has the same dense and
    BM25 scores; only context differs), the one with the lowest ordinal takes the best copy's
    score, and ``same_text_as`` names the copy the score came from. Reports and filings repeat passages (a summary table
    restated in the notes); citing the first occurrence is where a reader meets it first, and it
    keeps the citation stable when a later copy's surroundings happen to match the query better.
    Copies in different documents are left to packing (the better-ranked one is kept). A chunk
    lifted by a later copy (``neighbour_of`` it) keeps only its own score: the copy is not returned
    there, so it must not bring its surroundings as a section of their own.
    """
    copies: dict[tuple[str, str], list[str]] = {}
    dropped: set[str] = set()
    for cid in rows:
        direct = rows[cid]["dense_rank"] is not None or rows[cid]["bm25_rank"] is not None
        if direct and cid in chunks and cid not in fates:
            copies.setdefault((chunks[cid].doc_id, chunks[cid].text.strip()), []).append(cid)
    for group in copies.values():
        if len(group) < 2:
            continue
        first = min(group, key=lambda cid: chunks[cid].ordinal)
        best = min(group, key=lambda cid: (-rows[cid]["score"], chunks[cid].ordinal))
        if best != first:
            rows[first]["score"], rows[first]["same_text_as"] = rows[best]["score"], best
        dropped.update(cid for cid in group if cid != first)
    # a later copy is returned as its first copy: chunks lifted by it fall back to their own score
    for cid, row in rows.items():
        if row["neighbour_of"] in dropped and cid not in dropped:
            row["score"] = _own_score(row["fused_score"], row["context_score"])
            row["neighbour_of"] = None


def _context_scores(
    rows: dict[str, dict[str, Any]], chunks: dict[str, Chunk], records: dict[str, DocumentRecord],
    candidates: Sequence[str],
) -> dict[str, tuple[float, float, str | None]]:
    """``chunk id -> (context score, final score, neighbour_of)`` for the candidates and their neighbours.

    A chunk's context score is the mean fused score of the chunks within :data:`CONTEXT_WINDOW`
    ordinals of it in its document (positions past either end of the document are not counted;
    chunks that matched neither list count 0); its final score is ``fused + CONTEXT_WEIGHT *
    context``, or :data:`NEIGHBOUR_WEIGHT` times the final score of a chunk right next to it if
    that is more (``neighbour_of`` names that chunk). Neighbours of candidates are included with a
    fused score of 0, so a passage between two matches, or one that a strong match runs into, can
    enter on its neighbours alone.
    """
    fused: dict[tuple[str, int], float] = {}
    for cid in candidates:
        c = chunks[cid]
        fused[(c.doc_id, c.ordinal)] = rows[cid]["fused_score"]
    positions = set(fused)
    for doc_id, ordinal in list(fused):
        n = records[doc_id].n_chunks
        for o in range(max(0, ordinal - CONTEXT_WINDOW), min(n, ordinal + CONTEXT_WINDOW + 1)):
            positions.add((doc_id, o))
    own: dict[tuple[str, int], tuple[float, float]] = {}
    for doc_id, ordinal in positions:
        n = records[doc_id].n_chunks
        around = [o for o in range(ordinal - CONTEXT_WINDOW, ordinal + CONTEXT_WINDOW + 1)
                  if o != ordinal and 0 <= o < n]
        ctx_score = round(sum(fused.get((doc_id, o), 0.0) for o in around) / len(around), 8) if around else 0.0
        own[(doc_id, ordinal)] = (ctx_score, _own_score(fused.get((doc_id, ordinal), 0.0), ctx_score))
    out: dict[str, tuple[float, float, str | None]] = {}
    for (doc_id, ordinal), (ctx_score, final) in own.items():
        best, parent = final, None
        for o in (ordinal - 1, ordinal + 1):  # on a tie the earlier chunk is named
            if (doc_id, o) in fused:  # a match right next to this chunk
                lifted = round(NEIGHBOUR_WEIGHT * own[(doc_id, o)][1], 8)
                if lifted > best:
                    best, parent = lifted, chunk_id(doc_id, o)
        out[chunk_id(doc_id, ordinal)] = (ctx_score, best, parent)
    return out


def boundary_sentence(text: str, after: bool) -> tuple[int, int]:
    """The character span of ``text``'s first sentence (``after`` a match) or its last (before one).

    Sentences end at :data:`_RUN_BREAK` (a line break, 。！？!?, a full stop after a letter);
    ``:`` and ``;`` do not end one, so a table row's ``column: value`` cells or a clause after a
    colon stay with their sentence. The whole text when it holds no sentence end. Unlike
    :func:`retrieval.pack.sentence_spans` (which packing trims by), a full stop after a digit ends
    nothing here (a list number or a decimal inside a table row, which run-on rows must pass),
    and every line break ends one. (Splitting at ``: `` cut a wide CSV row's neighbours
    into single cells that were then glued to other cells. Bench cost of the longer boundary
    sentences: recall at 1000 tokens 92.2 -> 92.0 %, at 250/500/2000 unchanged.)
    """
    if after:
        m = _RUN_BREAK.search(text)
        b = m.end() if m else len(text)
        while b > 0 and text[b - 1].isspace():
            b -= 1
        if not any(ch.isalnum() for ch in text[:b]):  # never a lone "|" or quote
            return 0, len(text)
        return 0, b
    a, body = 0, text.rstrip()
    for m in _RUN_BREAK.finditer(body):
        if m.end() < len(body):  # a break before the last sentence, not the one that ends it
            a = m.end()
    while a < len(text) and text[a].isspace():
        a += 1
    if a >= len(text) or not any(ch.isalnum() for ch in text[a:]):  # never a lone "|" or quote
        return 0, len(text)
    return a, len(text)


def _follow_run_on(
    ctx: Context, namespace: str, rows: dict[str, dict[str, Any]], chunks: dict[str, Chunk],
    records: dict[str, DocumentRecord], floor: float, budget_tokens: int,
) -> None:
    """Carry a match's sentence on through the chunks it runs over.

    A chunk that is in the context as a match's neighbour (``neighbour_of`` set) and holds one
    unfinished sentence -- no sentence end or line break inside it, and its line goes on in the
    next chunk (:attr:`Chunk.ends_line` False): a table row, a CJK line without 。, an
    unpunctuated paragraph longer than a chunk -- passes the sentence on. The chunk beyond it,
    away from the match, becomes a candidate too, scored :data:`RUN_ON_DECAY` times the link
    before it (so a run is packed outward from its match) and naming that link in
    ``neighbour_of``; when it matched neither list it brings only the sentence's end (or
    start). Going backward, a chunk whose line or sentence ends at its end is not part of the
    run. A run also stops at the document's ends, below the relevance cut-off (``floor``), at a
    chunk already scored as high on its own, and once it holds ``budget_tokens`` tokens.
    ``rows`` and ``chunks`` are updated in place.
    """
    def unfinished(c: Chunk) -> bool:  # one sentence that goes on in the next chunk
        return not c.ends_line and not _RUN_BREAK.search(c.text)

    starts = sorted(
        (cid for cid, row in rows.items() if row["neighbour_of"] and row["score"] >= floor and cid in chunks),
        key=lambda cid: (-rows[cid]["score"], cid),
    )
    for cid in starts:
        link, tokens = chunks[cid], 0
        step = 1 if chunks[rows[cid]["neighbour_of"]].ordinal < link.ordinal else -1
        score = rows[cid]["score"]
        while unfinished(link) and tokens < budget_tokens:
            tokens += _chunk_tokens(link, ctx.counter.count) or 0
            ordinal, score = link.ordinal + step, round(score * RUN_ON_DECAY, 8)
            if score < floor or not 0 <= ordinal < records[link.doc_id].n_chunks:
                break
            nid = chunk_id(link.doc_id, ordinal)
            if nid not in chunks:
                chunks.update(_chunks(ctx, namespace, [nid]))
            nxt = chunks.get(nid)
            if nxt is None or (step < 0 and (nxt.ends_line or _RUN_END.search(nxt.text))):
                break
            row = rows.setdefault(nid, _row(None, None, None, None, 0.0))
            if row["score"] >= score:  # here on its own merit (or another run's) already
                break
            row["score"], row["neighbour_of"] = score, link.chunk_id
            link = nxt


def _minmax(scores: Sequence[float], floor: float | None = None) -> list[float]:
    """Scores rescaled to [0, 1] over the list (all 1.0 when they are equal); ``floor``, when
    given, is the score that maps to 0 instead of the list's lowest."""
    if not scores:
        return []
    hi, lo = max(scores), (min(scores) if floor is None else floor)
    if hi - lo <= 1e-12:
        return [1.0] * len(scores)
    return [(s - lo) / (hi - lo) for s in scores]


def _chunk_tokens(chunk: Chunk | None, count) -> int | None:
    if chunk is None:
        return None
    return chunk.n_tokens or count(chunk.text)
