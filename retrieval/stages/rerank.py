"""Rerank (optional): a cross-encoder reads the query with each top candidate's text.

The seam is :class:`Reranker`; :class:`PassThrough` (the default) changes nothing. With
``DOCANCHOR_RERANKER_PATH`` set to a local sentence-transformers ``CrossEncoder`` folder,
:class:`CrossEncoderReranker` scores the :data:`RERANK_TOP` best candidates that have evidence
of their own; each one's final score becomes its reranker score (squashed to [0, 1]) times the
best final score before reranking, so the cut-off and packing keep their scale. Neighbours keep
the scores the context stage gave them. No weights ship with DocAnchor and nothing is
downloaded: the folder must hold the model.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Sequence

from docanchor.context import Context
from docanchor.errors import ConfigError
from retrieval.candidate import Pool, ranked

RERANK_TOP = 20
"""Candidates (with evidence of their own, best first) the reranker reads per query. Source: a
round value, not tuned (no reranker ships offline, so the bench cannot measure one): it bounds a
cross-encoder's cost to 20 query-passage pairs per retrieve."""


class Reranker(ABC):
    """Scores ``(query, text)`` pairs; higher is more relevant, each score in [0, 1]."""

    name: str = "none"
    enabled: bool = True

    @abstractmethod
    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """One relevance score in [0, 1] per text, in order."""


class PassThrough(Reranker):
    """No reranking: the stage leaves every score as the earlier stages set it."""

    enabled = False

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        return [0.0] * len(texts)


class CrossEncoderReranker(Reranker):
    """A sentence-transformers ``CrossEncoder`` loaded from a local folder on first use.

    Args:
        path: the model folder (``config.json`` and weights).

    Raises:
        ConfigError: the folder does not exist or does not hold a loadable model.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        if not self.path.is_dir():
            raise ConfigError(f"DOCANCHOR_RERANKER_PATH must be a local CrossEncoder model folder; "
                              f"{str(self.path)!r} is not a folder.")
        self.name = self.path.name
        self._model = None
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._model is None:
                try:
                    import torch
                    from sentence_transformers import CrossEncoder

                    self._model = CrossEncoder(str(self.path), local_files_only=True, device="cpu",
                                               activation_fn=torch.nn.Sigmoid())
                except (OSError, ValueError) as exc:
                    raise ConfigError(f"The reranker at {str(self.path)!r} could not be loaded "
                                      f"({exc.__class__.__name__}); check DOCANCHOR_RERANKER_PATH.") from exc
        return self._model

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        model = self._load()
        return [float(s) for s in model.predict([(query, t) for t in texts], show_progress_bar=False)]


_LOADED: dict[str, Reranker] = {}
_LOCK = threading.Lock()


def get_reranker(path: str | None) -> Reranker:
    """The reranker configured by ``path`` (shared per process); :class:`PassThrough` when empty."""
    if not path:
        return PassThrough()
    with _LOCK:
        if path not in _LOADED:
            _LOADED[path] = CrossEncoderReranker(path)
        return _LOADED[path]


def reranker_for(ctx: Context) -> Reranker:
    """The instance's reranker: the one it was built with (tests pass a fake), else the one
    ``settings.reranker_path`` names."""
    return ctx.reranker if ctx.reranker is not None else get_reranker(ctx.settings.reranker_path)


def rerank(pool: Pool, query: str, reranker: Reranker) -> None:
    """Rescore the :data:`RERANK_TOP` best undecided candidates with evidence of their own."""
    if not reranker.enabled:
        return
    top = [c for c in ranked(pool) if c.placement is None and c.has_own_evidence and c.chunk][:RERANK_TOP]
    if not top:
        return
    scale = top[0].score
    for cand, s in zip(top, reranker.score(query, [c.chunk.text for c in top])):
        cand.rerank_score = round(s, 6)
        cand.score = round(scale * s, 8)
