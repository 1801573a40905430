"""The rerank seam: pass-through by default, a configured reranker's scores decide the order and
show in the trace; a CrossEncoder folder that does not exist is a clear configuration error."""

from __future__ import annotations

from typing import Sequence

import pytest

from docanchor.context import Context
from docanchor.errors import ConfigError
from retrieval.search import retrieve
from retrieval.stages.rerank import CrossEncoderReranker, PassThrough, Reranker, get_reranker
from tests.test_retrieval import NS, add_document

PARAGRAPHS = ("The red fox jumps over the lazy dog near the river.", "Foxes are red and quick; a fox is a small canid.",
              "The river has no fox today, only ducks.")


def _store(ctx: Context) -> None:
    for n, text in enumerate(PARAGRAPHS):
        add_document(ctx, f"doc_{n}", f"Note {n}", text)


class KeywordReranker(Reranker):
    """Deterministic fake: 1.0 for a text holding ``word``, else 0.1."""

    name = "keyword-fake"

    def __init__(self, word: str) -> None:
        self.word = word
        self.calls = 0

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        self.calls += 1
        return [1.0 if self.word in t else 0.1 for t in texts]


def test_pass_through_is_the_default(ctx: Context):
    assert isinstance(get_reranker(""), PassThrough)
    _store(ctx)
    r = retrieve(ctx, NS, "red fox river", 1000, explain=True)
    assert r.trace["parameters"]["reranker"] == "none"
    assert "ducks" not in r.sections[0].text
    assert all(c["rerank_score"] is None for c in r.trace["candidates"])


def test_a_reranker_decides_the_order_and_shows_in_the_trace(ctx: Context):
    _store(ctx)
    ctx.reranker = fake = KeywordReranker("ducks")
    r = retrieve(ctx, NS, "red fox river", 1000, explain=True)
    assert fake.calls == 1
    assert "ducks" in r.sections[0].text  # the reranker's favourite leads
    scored = [c for c in r.trace["candidates"] if c["rerank_score"] is not None]
    assert scored and r.trace["parameters"]["reranker"] == "keyword-fake"
    best = max(scored, key=lambda c: c["score"])
    assert best["rerank_score"] == 1.0 and "ducks" in best["preview"]


def test_a_missing_cross_encoder_folder_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="DOCANCHOR_RERANKER_PATH"):
        CrossEncoderReranker(tmp_path / "no-such-model")
