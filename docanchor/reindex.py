"""Rebuild a namespace's chunk collection with the configured embedding model, then swap it in.

Why: Chroma stores vectors of one length per collection, and vectors of two models are not
comparable, so a namespace built with another model is refused (``embedding_model_mismatch``,
see :class:`docanchor.store.ChromaStore`) until it is rebuilt.

How (``<name>`` is the namespace's chunk collection, see :func:`docanchor.store.collection_name`):

1. Re-embed every stored chunk with the configured model into a fresh collection
   ``<name>-rebuild`` (ids, texts and metadata copied unchanged; the embedded string is
   :func:`docanchor.types.embedding_input` of the text and the ``context`` kept in the metadata,
   as at ingest). The old collection is only read.
2. Check the fresh collection holds as many chunks as the old one.
3. Swap by renaming: ``<name>`` -> ``<name>-old``, ``<name>-rebuild`` -> ``<name>``, then delete
   ``<name>-old``.

The document records (anchors included) and the BM25 index are kept as they are: chunk ids and
texts do not change, and an anchor already in a chat stays byte-identical. A crash before step 3
leaves the old collection untouched (the next run starts the rebuild over); a crash inside step 3
leaves ``<name>-old`` behind, which the next run renames back before rebuilding. Run it with no
other DocAnchor process using the namespace (the CLI holds the data-dir lock; with a Chroma server,
stop the other processes first -- they would otherwise keep a handle on the deleted collection).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from docanchor.context import Context
from docanchor.embedder import interchangeable
from docanchor.errors import StoreUnavailable
from docanchor.store import HNSW_CONFIG, collection_name, mapped
from docanchor.types import embedding_input

PAGE = 500
"""Chunks read from the old collection per request."""
EMBED_BATCH = 64
"""Chunk texts per embedder call."""

ReindexProgress = Callable[[int, int], None]
"""``progress(chunks_done, chunks_total)``."""


@dataclass
class ReindexResult:
    """What :func:`reindex_namespace` did.

    Attributes:
        namespace: the namespace.
        old_model: the model the chunks were embedded with (``None`` when there were none).
        new_model: the configured model they are embedded with now.
        n_chunks: chunks re-embedded (0 when skipped).
        skipped: True when the namespace already used the configured model in an interchangeable
            precision (and not forced) or has no chunk collection.
    """

    namespace: str
    old_model: str | None
    new_model: str
    n_chunks: int
    skipped: bool


def reindex_namespace(ctx: Context, namespace: str, *, force: bool = False,
                      progress: ReindexProgress | None = None) -> ReindexResult:
    """Re-embed every chunk of ``namespace`` with ``ctx.embedder`` and swap the collection in.

    Args:
        ctx: the configured embedder and the store.
        namespace: the namespace to rebuild.
        force: rebuild even when the collection already records the configured model.
        progress: called after each batch with chunks done and total.

    Returns:
        A :class:`ReindexResult`.

    Raises:
        StoreUnavailable: Chroma cannot be reached, or the rebuilt collection came out with a
            different number of chunks (the old one is then kept).
    """
    store, embedder = ctx.store, ctx.embedder
    client = store.client
    name = collection_name(namespace, "chunks")
    old_name, tmp_name = f"{name}-old", f"{name}-rebuild"
    with mapped(store.settings):
        existing = {c if isinstance(c, str) else c.name for c in client.list_collections()}
        if name not in existing and old_name in existing:  # a crash inside the swap: undo it
            client.get_collection(old_name).modify(name=name)
            existing.add(name)
        if name not in existing:
            return ReindexResult(namespace, None, embedder.name, 0, skipped=True)
        old = client.get_collection(name)
    meta = dict(old.metadata or {})
    old_model = meta.get("embedding_model")
    same_vectors = (old_model == embedder.name and meta.get("embedding_dimension") == embedder.dimension
                    and interchangeable(meta.get("embedding_precision", "fp32"), embedder.precision))
    if not force and same_vectors:
        return ReindexResult(namespace, old_model, embedder.name, 0, skipped=True)

    with mapped(store.settings):
        if tmp_name in existing:
            client.delete_collection(tmp_name)
        meta.update({"embedding_model": embedder.name, "embedding_dimension": embedder.dimension,
                     "embedding_precision": embedder.precision,
                     "docanchor_namespace": namespace[:200], "docanchor_kind": "chunks", "hnsw:space": "cosine"})
        fresh = client.create_collection(name=tmp_name, metadata=meta, configuration={"hnsw": HNSW_CONFIG},
                                         embedding_function=None)
        total = old.count()
    done = 0
    for offset in range(0, total, PAGE):
        with mapped(store.settings):
            got = old.get(include=["documents", "metadatas"], limit=PAGE, offset=offset)
        ids, texts, metas = got["ids"], got["documents"], got["metadatas"]
        inputs = [embedding_input(t, (m or {}).get("context", "")) for t, m in zip(texts, metas)]
        for i in range(0, len(ids), EMBED_BATCH):
            vectors = embedder.embed(inputs[i : i + EMBED_BATCH])
            with mapped(store.settings):
                fresh.upsert(ids=ids[i : i + EMBED_BATCH], documents=texts[i : i + EMBED_BATCH],
                             metadatas=metas[i : i + EMBED_BATCH],
                             embeddings=[list(map(float, v)) for v in vectors])
            done += len(vectors)
            if progress:
                progress(done, total)
    with mapped(store.settings):
        rebuilt = fresh.count()
    if rebuilt != total:
        with mapped(store.settings):
            client.delete_collection(tmp_name)
        raise StoreUnavailable(
            f"The rebuilt collection has {rebuilt} chunks instead of {total}; the old one was kept. "
            "Stop every other DocAnchor process using this namespace and run 'docanchor reindex' again."
        )
    with mapped(store.settings):
        old.modify(name=old_name)
        fresh.modify(name=name)
        client.delete_collection(old_name)
    store.forget_collections()
    return ReindexResult(namespace, old_model, embedder.name, total, skipped=False)
