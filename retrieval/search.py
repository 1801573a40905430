"""Hybrid retrieval under a token budget: dense + BM25 candidates, fused, merged, packed, cited.

query --NFKC--> dense top-k (Chroma) + BM25 top-k (:mod:`docanchor.lexical`)
      --> reciprocal rank fusion --> only chunks of visible documents --> :func:`retrieval.pack.pack`

Reciprocal rank fusion scores a chunk ``sum(w / (RRF_K + rank))`` over the lists it appears in
(Cormack, Clarke & Buettcher, SIGIR 2009, who use k = 60). all-MiniLM-L6-v2 maps most CJK
characters to ``[UNK]``, so for a query that is mostly CJK the dense list gets a small weight
and BM25's character bigrams carry the match.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Sequence

from docanchor.context import Context
from docanchor.lexical import _CJK, tokenize
from docanchor.types import Chunk, RetrievalResult, Section
from retrieval.pack import MIN_TRIM_TOKENS, Piece, pack

DENSE_K = 40
"""Dense candidates per query (chunks)."""
LEXICAL_K = 40
"""BM25 candidates per query (chunks)."""
RRF_K = 60
"""The rank constant of reciprocal rank fusion (Cormack et al. 2009)."""
CJK_DENSE_WEIGHT = 0.2
"""Weight of the dense list when at least half of the query's letters are CJK."""
DOC_CAP_SHARE = 0.6
"""The largest share of the budget one document takes on the first packing pass when several
documents compete (see :func:`retrieval.pack.pack`)."""


def normalise_query(query: str) -> str:
    """The query normalised like ingested text: NFKC, control characters out, spaces collapsed."""
    text = unicodedata.normalize("NFKC", query)
    text = "".join(ch for ch in text if ch in "\n\t" or unicodedata.category(ch) not in ("Cc", "Cf", "Cs"))
    return " ".join(text.split())


def _cjk_share(text: str) -> float:
    letters = [ch for ch in text if ch.isalpha()]
    if not letters:
        return 0.0
    cjk = sum(1 for ch in letters if re.match(f"[{_CJK}]", ch))
    return cjk / len(letters)


def retrieve(
    ctx: Context,
    namespace: str,
    query: str,
    budget_tokens: int,
    doc_ids: Sequence[str] | None = None,
    explain: bool = False,
) -> RetrievalResult:
    """The best sections for ``query`` whose rendered context fits ``budget_tokens``.

    Args:
        ctx: the instance's embedder, counter, store and lexical index.
        namespace: where to search.
        query: the question (non-empty; checked by the caller).
        budget_tokens: the most budget tokens the returned ``context`` may use.
        doc_ids: restrict the search to these documents.
        explain: attach a deterministic trace of every candidate's fate.

    Returns:
        A :class:`RetrievalResult`; ``context_tokens_used == ctx.counter.count(context) <=
        budget_tokens``. With no match, or a budget too small for any section, no sections,
        ``context == ""`` and a ``message`` saying which.

    Raises:
        StoreUnavailable: Chroma or the lexical index cannot be read.
    """
    records = {r.doc_id: r for r in ctx.store.list_documents(namespace)}
    wanted = list(dict.fromkeys(doc_ids)) if doc_ids else None
    qnorm = normalise_query(query)
    dense_weight = CJK_DENSE_WEIGHT if _cjk_share(qnorm) >= 0.5 else 1.0

    dense = ctx.store.query(namespace, ctx.embedder.embed_query(qnorm), DENSE_K, wanted) if records else []
    dense = sorted(dense, key=lambda cs: (-cs[1], cs[0].chunk_id))
    lexical = ctx.lexical.search(namespace, qnorm, LEXICAL_K, wanted) if records else []

    chunks: dict[str, Chunk] = {c.chunk_id: c for c, _ in dense}
    missing = [cid for cid, _ in lexical if cid not in chunks]
    if missing:
        chunks.update(ctx.store.get_chunks_by_id(namespace, missing))

    rows: dict[str, dict[str, Any]] = {}
    for rank, (c, score) in enumerate(dense, 1):
        rows[c.chunk_id] = {"dense_rank": rank, "dense_score": round(score, 6), "bm25_rank": None, "bm25_score": None}
    for rank, (cid, score) in enumerate(lexical, 1):
        row = rows.setdefault(cid, {"dense_rank": None, "dense_score": None})
        row.update(bm25_rank=rank, bm25_score=round(score, 6))
    for row in rows.values():
        fused = 0.0
        if row["dense_rank"]:
            fused += dense_weight / (RRF_K + row["dense_rank"])
        if row["bm25_rank"]:
            fused += 1.0 / (RRF_K + row["bm25_rank"])
        row["fused_score"] = round(fused, 8)
    order = sorted(rows, key=lambda cid: (-rows[cid]["fused_score"], cid))

    pieces: list[Piece] = []
    fates: dict[str, str] = {}
    for cid in order:
        c = chunks.get(cid)
        record = records.get(c.doc_id) if c is not None else None
        if c is None or record is None or (wanted and c.doc_id not in wanted):
            fates[cid] = "not visible (no stored document)"
            continue
        pieces.append(Piece(
            chunk_id=cid, doc_id=c.doc_id, ordinal=c.ordinal, title=record.title, text=c.text,
            start_char=c.start_char, end_char=c.end_char, page_start=c.page_start, page_end=c.page_end,
            heading_path=tuple(c.heading_path), score=rows[cid]["fused_score"],
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
    if not pieces:
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
            "budget_source": "request",
            "doc_ids": wanted,
            "parameters": {
                "dense_k": DENSE_K, "lexical_k": LEXICAL_K, "rrf_k": RRF_K, "dense_weight": dense_weight,
                "doc_cap_share": DOC_CAP_SHARE, "min_trim_tokens": MIN_TRIM_TOKENS,
                "budget_encoding": ctx.counter.name, "embedding_model": ctx.embedder.name,
            },
            "candidates": [
                {
                    "chunk_id": cid,
                    "doc_id": chunks[cid].doc_id if cid in chunks else None,
                    **{k: rows[cid][k] for k in ("dense_rank", "dense_score", "bm25_rank", "bm25_score", "fused_score")},
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


def _chunk_tokens(chunk: Chunk | None, count) -> int | None:
    if chunk is None:
        return None
    return chunk.n_tokens or count(chunk.text)
