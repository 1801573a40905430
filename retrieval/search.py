"""Hybrid retrieval under a token budget: an orchestrator of named stages over typed candidates.

query --NFKC--> gather (dense top-k from Chroma, BM25 top-k from :mod:`docanchor.lexical`)
      --> fuse (relative score fusion) --> coverage (share of the query's terms held)
      --> references (reference lists weigh less) --> context (neighbours in the document)
      --> cut-off --> expand (neighbours read, run-on sentences) --> dedupe (first copies)
      --> rerank (optional) --> novelty (what each match adds to its document's matches above it)
      --> shape (what each candidate brings) --> :func:`retrieval.pack.pack`

Each stage is a module of :mod:`retrieval.stages` that owns its constants and documents its rule;
they read and write :class:`retrieval.candidate.Candidate` fields, and the explain trace
(:mod:`retrieval.trace`) shows those fields for every candidate. bench/budget_recall.py's
``--ablate STAGE`` measures what each stage adds.
"""

from __future__ import annotations

from typing import Any, Sequence

from docanchor import formats
from docanchor.context import Context
from docanchor.display import counted
from docanchor.lexical import tokenize
from docanchor.text import normalise_query
from docanchor.types import DocumentRecord, RetrievalResult, Section
from retrieval.candidate import Fate, Pool, ranked
from retrieval.pack import MIN_TRIM_TOKENS, PackResult, Piece, least_budget_for, pack
from retrieval.stages import (
    context,
    coverage,
    cutoff,
    dedupe,
    expand,
    fuse,
    gather,
    novelty,
    references,
    rerank,
)
from retrieval.trace import candidate_row

ABLATABLE = ("cjk_weight", "coverage", "references", "context", "context_cap", "neighbours", "section_break",
             "cutoff", "run_on", "boundary", "focus", "dedupe", "joins_only", "weak_cap", "evidence_floor", "novelty")
"""Rules bench/budget_recall.py's ``--ablate`` can switch off one at a time, to measure each one."""
ABLATED: frozenset[str] = frozenset()
"""The rules of :data:`ABLATABLE` switched off (benchmark experiments only; always empty in service)."""


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
    wanted = list(dict.fromkeys(doc_ids)) if doc_ids else None
    qnorm = normalise_query(query)
    records = gather.records(ctx, namespace)
    dense_weight = fuse.DENSE_WEIGHT if "cjk_weight" in ABLATED else fuse.query_dense_weight(qnorm)
    terms = set(tokenize(qnorm))
    freqs = ctx.lexical.doc_freqs(namespace, terms) if records else (0, {})
    pool, records = _candidates(ctx, namespace, qnorm, wanted, records, dense_weight, terms, freqs)
    weak = _weak(ctx, namespace, pool, terms, freqs, wanted)
    room = min(budget_tokens, cutoff.WEAK_BUDGET_TOKENS) if weak and "weak_cap" not in ABLATED else budget_tokens
    _select(ctx, namespace, qnorm, pool, records, room, evidence_floor=not weak and "evidence_floor" not in ABLATED,
            terms=terms, freqs=freqs)
    order = ranked(pool)
    todo = [c for c in order if c.placement is None]
    before, after, breaks = expand.texts_beside(ctx, namespace, pool, todo)
    pieces = [_piece(c, records, before[c.chunk_id], after[c.chunk_id], breaks[c.chunk_id]) for c in todo]
    packed = pack(pieces, room, ctx.counter.count, query_terms=terms, tokenize=tokenize)
    for cid, placement in packed.fates.items():
        pool[cid].placement = placement
    least = None
    if pieces and not packed.sections and room == budget_tokens:  # say which budget would return one
        least = least_budget_for(pieces, budget_tokens, ctx.counter.count, query_terms=terms, tokenize=tokenize)
    trace = None
    if explain:
        trace = _trace(ctx, namespace, qnorm, budget_tokens, budget_source, wanted, dense_weight, order, packed)
        trace["no_strong_match"] = weak
    return RetrievalResult(
        query=query, budget_tokens=budget_tokens, sections=[_section(s) for s in packed.sections],
        context=packed.context, context_tokens_used=packed.context_tokens_used,
        message=_message(namespace, records, wanted, pieces, packed, budget_tokens, weak, least), trace=trace,
        no_strong_match=weak, least_budget_tokens=least,
    )


def _candidates(
    ctx: Context, namespace: str, qnorm: str, wanted: list[str] | None, records: dict[str, DocumentRecord],
    dense_weight: float, terms: set[str], freqs: tuple[int, dict[str, int]],
) -> tuple[Pool, dict[str, DocumentRecord]]:
    """Gather, fuse and coverage; candidates of documents not visible are decided at once."""
    lists = gather.gather(ctx, namespace, qnorm, wanted, records) if records else gather.Lists()
    pool = fuse.fuse(lists, dense_weight, cjk_chunks="cjk_weight" not in ABLATED)
    if any(c.doc_id not in records for c in lists.chunks.values()):  # written since the records were cached
        records = gather.records(ctx, namespace, fresh=True)
    for cand in pool.values():
        if cand.chunk is None or cand.doc_id not in records or (wanted and cand.doc_id not in wanted):
            cand.decide(Fate.NOT_VISIBLE)
    if "coverage" not in ABLATED:
        coverage.add_coverage(pool, terms, freqs, tokenize)
    if "references" not in ABLATED:
        references.weigh_references(pool)
    return pool, records


def _weak(ctx: Context, namespace: str, pool: Pool, terms: set[str], freqs: tuple[int, dict[str, int]],
          wanted: list[str] | None) -> bool:
    """No candidate is a strong match (:func:`retrieval.stages.cutoff.strong_match`), its query terms
    counted over the documents searched: with ``wanted``, a term only other documents hold is absent.
    The cosines it asks for are the embedder's (:attr:`docanchor.embedder.Embedder.dense`), as are
    those of the evidence floor and of shape's whole matches (:func:`_select`)."""
    if not pool:
        return False
    searched = ctx.lexical.doc_freqs(namespace, terms, wanted) if wanted else freqs
    return not cutoff.strong_match(pool, terms, tokenize, searched, ctx.embedder.dense)


def _select(
    ctx: Context, namespace: str, qnorm: str, pool: Pool, records: dict[str, DocumentRecord], budget_tokens: int,
    evidence_floor: bool = False, terms: set[str] | None = None, freqs: tuple[int, dict[str, int]] | None = None,
) -> float:
    """Context, cut-off, expand, dedupe, rerank, novelty and shape: the pool's undecided candidates are
    then the ones to pack. Returns the relevance floor. With ``evidence_floor`` a passage
    without evidence of its own near it is not packed either
    (:func:`retrieval.stages.cutoff.mark_without_evidence`).

    With no strong match (:func:`retrieval.stages.cutoff.strong_match`) the budget packed is at
    most :data:`retrieval.stages.cutoff.WEAK_BUDGET_TOKENS`: the closest passage, flagged
    ``no_strong_match``, not a full budget of weak ones."""
    off = ABLATED
    if "context" not in off:
        context.add_context(pool, records, lift="neighbours" not in off, cap="context_cap" not in off)
    floor = 0.0 if "cutoff" in off else cutoff.relevance_floor(pool)
    cutoff.drop_unread_below(pool, floor)
    expand.read_neighbours(ctx, namespace, pool)
    if "section_break" not in off:
        expand.keep_lifts_in_section(pool, floor)
    if "run_on" not in off:
        expand.follow_run_on(ctx, namespace, pool, records, floor, budget_tokens)
    if "dedupe" not in off:
        dedupe.first_copies(pool)
    rerank.rerank(pool, qnorm, rerank.reranker_for(ctx))
    cutoff.mark_below(pool, floor)
    if evidence_floor:
        cutoff.mark_without_evidence(pool, ctx.embedder.dense)
    if "novelty" not in off and novelty.NOVELTY_WEIGHT > 0:
        terms = set(tokenize(qnorm)) if terms is None else terms
        freqs = ctx.lexical.doc_freqs(namespace, terms) if freqs is None else freqs
        novelty.rank_by_novelty(pool, terms, freqs, tokenize)
    expand.shape([c for c in ranked(pool) if c.placement is None], pool, records, floor,
                 boundary="boundary" not in off, small_joins="joins_only" not in off, focus="focus" not in off,
                 terms=set(tokenize(qnorm)) if terms is None else terms, tokenize=tokenize,
                 dense=ctx.embedder.dense)
    return floor


def _piece(cand, records: dict[str, DocumentRecord], before: str | None = None, after: str | None = None,
           page_break_after: bool = True) -> Piece:
    """The packer's :class:`~retrieval.pack.Piece` of a candidate; ``after`` is "" (the document's
    end) for one that runs to the end of the document's last chunk, where nothing more is known
    after it, so its end is not mistaken for a cut (an unpunctuated last paragraph)."""
    c = cand.chunk
    a, b = cand.span or (0, len(c.text))
    if after is None and b == len(c.text) and c.ordinal == records[c.doc_id].n_chunks - 1:
        after = ""
    return Piece(
        chunk_id=cand.chunk_id, doc_id=c.doc_id, ordinal=c.ordinal, title=records[c.doc_id].title,
        text=c.text[a:b], start_char=c.start_char + a, end_char=c.start_char + b, page_start=c.page_start,
        page_end=c.page_end, heading_path=tuple(c.heading_path), score=cand.score,
        unit=formats.unit_of(records[c.doc_id].doc_type),
        ends_line=c.ends_line if b == len(c.text) else True, joins_only=cand.joins_only, lead=c.text[:a],
        gap_after=None if c.gap_after is None else c.text[b:] + c.gap_after, joins_next=c.joins_next,
        source_runs=c.source_runs, before=before, after=after, page_break_after=page_break_after,
    )


def _section(s) -> Section:
    return Section(
        doc_id=s.doc_id, title=s.title, text=s.text, start_char=s.start_char, end_char=s.end_char,
        page_start=s.page_start, page_end=s.page_end, heading_path=s.heading_path, score=s.score,
        n_tokens=s.n_tokens, chunk_ids=s.chunk_ids, citation=s.citation, unit=s.unit,
        source_start=s.source_start, source_end=s.source_end, tail=s.tail, head=s.head,
        cites_heading=s.cites_heading,
    )


WEAK_MATCH_MESSAGE = ("No passage is a strong match for the query: these are the closest ones and may not "
                      "answer it.")
"""The message of a result flagged ``no_strong_match`` (every door shows it: the CLI on stderr,
the LobeChat/MCP answer before the passages)."""


def _message(namespace: str, records: dict, wanted: list[str] | None, pieces: list[Piece], packed: PackResult,
             budget_tokens: int, weak: bool, least: int | None = None) -> str:
    if not records:
        return f"The namespace {namespace!r} holds no documents yet; upload one, then search again."
    if not pieces and wanted is None:
        return (f"No passage of the {counted(len(records), 'document')} in the namespace {namespace!r} matched the "
                "query; try other words.")
    if not pieces:
        return (f"No passage of the {counted(len(wanted), 'document')} searched matched the query; try other words, or "
                "search more documents (the doc_ids or the filter named only these).")
    if not packed.sections:
        return (f"The budget of {counted(budget_tokens, 'token')} is too small for any section (a citation line and "
                f"{MIN_TRIM_TOKENS} tokens of text are the least returned); raise budget_tokens"
                + (f" to {least} or more." if least else "."))
    return WEAK_MATCH_MESSAGE if weak else ""


def _trace(
    ctx: Context, namespace: str, qnorm: str, budget_tokens: int, budget_source: str, wanted: list[str] | None,
    dense_weight: float, order: list, packed: PackResult,
) -> dict[str, Any]:
    return {
        "query": qnorm,
        "namespace": namespace,
        "budget_tokens": budget_tokens,
        "budget_source": budget_source,
        "doc_ids": wanted,
        "parameters": {
            "dense_k": gather.DENSE_K, "lexical_k": gather.LEXICAL_K, "fusion": "relative score (min-max per list)",
            "dense_weight": dense_weight, "coverage_weight": coverage.COVERAGE_WEIGHT,
            "relevance_cutoff": cutoff.RELEVANCE_CUTOFF,
            "context_window": context.CONTEXT_WINDOW, "context_weight": context.CONTEXT_WEIGHT,
            "neighbour_weight": context.NEIGHBOUR_WEIGHT, "run_on_decay": expand.RUN_ON_DECAY,
            "novelty_weight": novelty.NOVELTY_WEIGHT,
            "min_trim_tokens": MIN_TRIM_TOKENS,
            "budget_encoding": ctx.counter.name, "embedding_model": ctx.embedder.name,
            "reranker": rerank.reranker_for(ctx).name,
        },
        "candidates": [candidate_row(c, ctx.counter.count) for c in order],
        "tokens": {
            "text": packed.text_tokens,
            "citations": packed.citation_tokens,
            "separators": packed.context_tokens_used - packed.text_tokens - packed.citation_tokens,
            "total": packed.context_tokens_used,
        },
    }
