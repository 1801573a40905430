"""The running parts of one DocAnchor instance, built once from settings and passed down."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from docanchor.embedder import Embedder, get_embedder
from docanchor.settings import Settings
from docanchor.store import ChromaStore
from docanchor.tokens import TokenCounter, get_counter


@dataclass
class Context:
    """Settings plus the shared embedder, budget token counter, Chroma store and BM25 index.

    Everything heavy is created lazily: building a Context loads no model and opens no database.

    Args:
        settings: the instance's settings.
        embedder: an embedder to use instead of the configured model (tests pass a fake).
        reranker: a reranker (``retrieval.stages.rerank.Reranker``) to use instead of the one
            ``settings.reranker_path`` names (tests pass a fake); ``None`` for the configured one.
    """

    settings: Settings
    embedder: Embedder = field(default=None)  # type: ignore[assignment]
    reranker: object = None
    write_lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)
    """Held around every write to the store and the BM25 index (an ingest's storing step, a delete,
    a reindex), so writes never interleave while the slow parts of ingests (parse, chunk, embed) run
    side by side."""

    def __post_init__(self) -> None:
        if self.embedder is None:
            s = self.settings
            cache_dir = Path(s.model_cache_dir).expanduser() if s.model_cache_dir else None
            self.embedder = get_embedder(s.embedding_model, s.embedding_precision, s.embedding_threads,
                                         s.query_runtime, cache_dir)

    @cached_property
    def counter(self) -> TokenCounter:
        return get_counter(self.settings.budget_encoding)

    @cached_property
    def store(self) -> ChromaStore:
        return ChromaStore(self.settings, self.embedder.name, self.embedder.dimension, self.embedder.precision)

    def close(self) -> None:
        """Release the lexical index and the store's connections (the embedder is shared per
        process and stays)."""
        if "lexical" in self.__dict__:
            self.lexical.close()
        if "store" in self.__dict__:
            self.store.close()

    @cached_property
    def lexical(self):
        from docanchor.lexical import LexicalIndex

        return LexicalIndex(self.settings, self.store)
