"""A deterministic fake embedder for fast unit tests (the end-to-end suite runs the real model)."""

from __future__ import annotations

import hashlib
import math
import re
from typing import Sequence

from docanchor.embedder import Embedder

_WORD = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]|\w+|[^\w\s]", re.UNICODE)


class HashEmbedder(Embedder):
    """Bag of hashed lower-cased words in 128 dimensions, unit length.

    ``count_tokens`` approximates word pieces: one per word, punctuation mark or CJK character,
    plus one per 6 letters beyond the first 6 of a long word.
    """

    name = "hash-test-embedder"
    dimension = 128
    token_limit = 254

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            raise ValueError("embed() needs at least one text")
        self.calls += 1
        return [self._vector(t) for t in texts]

    def _vector(self, text: str) -> list[float]:
        v = [0.0] * self.dimension
        for w in _WORD.findall(text.lower()):
            h = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=4).digest(), "little")
            v[h % self.dimension] += 1.0
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        if norm == 1.0 and not any(v):
            v[0] = 1.0
        return [x / norm for x in v]

    def count_tokens(self, text: str) -> int:
        return sum(1 + max(0, len(w) - 6) // 6 for w in _WORD.findall(text))


class ModelNamedEmbedder(HashEmbedder):
    """:class:`HashEmbedder` vectors under the default model's name and size: a data dir it builds
    opens in a real CLI or server subprocess, for the commands that embed nothing (``list``,
    ``anchor``, ``read``, ``delete``, an unchanged re-ingest)."""

    name = "all-MiniLM-L6-v2"
    dimension = 384
