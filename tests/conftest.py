"""Shared fixtures: a temp data dir per test, settings, a Context with the fake or real embedder,
and paths to the read-only inputs in ../shared."""

from __future__ import annotations

from pathlib import Path

import pytest

from docanchor.context import Context
from docanchor.settings import Settings
from tests.fakes import HashEmbedder

REPO = Path(__file__).resolve().parents[1]
SHARED = (REPO / ".." / "shared").resolve()
CORPUS = SHARED / "corpus"
CASES = SHARED / "cases"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data")


@pytest.fixture
def fake_embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture
def ctx(settings: Settings, fake_embedder: HashEmbedder) -> Context:
    return Context(settings, embedder=fake_embedder)


@pytest.fixture(scope="session")
def real_embedder():
    from docanchor.embedder import get_embedder

    return get_embedder()


@pytest.fixture
def real_ctx(settings: Settings, real_embedder) -> Context:
    return Context(settings, embedder=real_embedder)
