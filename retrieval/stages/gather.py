"""Gather: the dense and BM25 candidate lists of a query, and the chunks they name.

Reads: one dense query (Chroma's ids and distances; within a few documents an exact search over
their cached vectors), one BM25 search, and one batched read of both lists' chunks (from the
lexical index on disk or its memory, the rest from Chroma). With a Chroma server, :func:`records`
reads the change log once per request (:meth:`docanchor.lexical.LexicalIndex.refresh`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from docanchor.context import Context
from docanchor.types import Chunk, DocumentRecord

DENSE_K = 40
"""Dense candidates per query (chunks). Source: a round value, not tuned: 40 chunks of at most
``chunk_tokens`` (100 by default) hold about twice the largest budget the bench asks for (2000
tokens), so the budget, not the list, limits what comes back."""
LEXICAL_K = 40
"""BM25 candidates per query (chunks). Source: as :data:`DENSE_K`."""


@dataclass
class Lists:
    """What the two retrievers returned, best first.

    Attributes:
        dense: ``(chunk, cosine similarity)``, sorted by similarity then chunk id.
        lexical: ``(chunk id, BM25 score)`` as the lexical index ranked them.
        chunks: every listed chunk by id (a chunk missing from both stores is absent).
    """

    dense: list[tuple[Chunk, float]] = field(default_factory=list)
    lexical: list[tuple[str, float]] = field(default_factory=list)
    chunks: dict[str, Chunk] = field(default_factory=dict)


def gather(ctx: Context, namespace: str, query: str, doc_ids: Sequence[str] | None,
           known: dict[str, DocumentRecord] | None = None) -> Lists:
    """The top :data:`DENSE_K` dense and :data:`LEXICAL_K` BM25 candidates for ``query``.

    Within documents whose records ``known`` holds (the cached records of :func:`records`), the
    dense list is the exact search over their cached vectors
    (:meth:`ChromaStore.nearest_in_documents`: no read of their records); otherwise it is
    :meth:`ChromaStore.nearest`. Either way its chunks are read in the BM25 hits' batch. Given
    ``known``, the lexical index has caught up with other processes' writes for this request
    (:func:`records` did), so the BM25 search does not read the change log again.

    Raises:
        StoreUnavailable: Chroma or the lexical index cannot be read.
    """
    embedding = ctx.embedder.embed_query(query)
    ranked = _exact(ctx, namespace, embedding, doc_ids, known or {})
    if ranked is None:
        ranked = ctx.store.nearest(namespace, embedding, DENSE_K, doc_ids)
    lexical = ctx.lexical.search(namespace, query, LEXICAL_K, doc_ids, catch_up=known is None)
    wanted = [cid for cid, _ in ranked] + [cid for cid, _ in lexical]
    chunks = read_chunks(ctx, namespace, list(dict.fromkeys(wanted)))
    dense = [(chunks[cid], score) for cid, score in ranked if cid in chunks]  # (one deleted meanwhile is not)
    dense = sorted(dense, key=lambda cs: (-cs[1], cs[0].chunk_id))
    return Lists(dense, lexical, chunks)


def _exact(ctx: Context, namespace: str, embedding, doc_ids: Sequence[str] | None,
           known: dict[str, DocumentRecord]) -> list[tuple[str, float]] | None:
    """``(chunk_id, similarity)`` of the exact search within ``doc_ids`` when their records are
    known and they are few enough (:data:`docanchor.doc_vectors.EXACT_MAX_CHUNKS`), else None."""
    if not doc_ids or not all(d in known for d in doc_ids):
        return None
    sizes = {d: known[d].n_chunks for d in doc_ids}
    return ctx.store.nearest_in_documents(namespace, embedding, DENSE_K, sizes)


def records(ctx: Context, namespace: str, fresh: bool = False) -> dict[str, DocumentRecord]:
    """The namespace's visible document records, cached per lexical-index generation.

    Every write of this instance goes through the lexical index, which bumps its generation; a
    document another writer stored is caught by the caller, which asks again with ``fresh`` when
    a candidate's document is missing from the cached records (an ingest indexes its chunks
    before it stores the record, so a search in between can cache the list without it), and an
    empty list is never cached: with no records there is no search, so no candidate could reveal
    a new document. With a Chroma server other processes write too: ``refresh`` follows their
    change log and bumps the generation when they wrote, so no request reads every record.
    """
    memo, generation = ctx.lexical.memo, ctx.lexical.refresh(namespace)
    hit = memo.get(("records", namespace))
    if hit is not None and hit[0] == generation and not fresh:
        return hit[1]
    found = {r.doc_id: r for r in ctx.store.list_documents(namespace)}
    if found:  # an empty namespace is not cached: with no candidates nothing would refresh it
        memo[("records", namespace)] = (generation, found)
    return found


def read_chunks(ctx: Context, namespace: str, chunk_ids: Sequence[str]) -> dict[str, Chunk]:
    """Chunks by id, in one batch: from the lexical index on disk, the rest read from Chroma."""
    if not chunk_ids:
        return {}
    got = ctx.lexical.get_chunks(namespace, chunk_ids)
    rest = [cid for cid in chunk_ids if cid not in got]
    if rest:
        got.update(ctx.store.get_chunks_by_id(namespace, rest))
    return got
