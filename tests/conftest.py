"""Shared fixtures: a temp data dir per test, settings, a Context with the fake or real embedder,
and paths to the read-only inputs in ../shared."""

from __future__ import annotations

from pathlib import Path

import pytest

from docanchor.context import Context
from docanchor.settings import Settings
from tests.fakes import HashEmbedder
from tests.waiting import BACKSTOP_S

REPO = Path(__file__).resolve().parents[1]
SHARED = (REPO / ".." / "shared").resolve()
CORPUS = SHARED / "corpus"
CASES = SHARED / "cases"


@pytest.fixture(autouse=True)
def _release_chroma_clients(tmp_path: Path):
    """Release the Chroma clients a test opened under its own tmp_path (each holds ~15 file
    descriptors until released; hundreds of tests would push sockets past select()'s 1024 limit
    and stall waitress), and the HTTP clients it opened. Module- and session-scoped fixtures keep
    theirs: their data lives under tmp_path_factory folders, not the test's tmp_path."""
    from chromadb.api.client import SharedSystemClient

    before = set(SharedSystemClient._identifier_to_system)
    yield
    own = str(tmp_path)
    for ident in set(SharedSystemClient._identifier_to_system) - before:
        if ident.startswith(own) or not ident.startswith("/"):
            system = SharedSystemClient._identifier_to_system.pop(ident, None)
            SharedSystemClient._identifier_to_refcount.pop(ident, None)
            if system is not None:
                system.stop()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """A temp data dir; an upload without ``wait_s`` waits for its job until the backstop (a test
    that wants a 202 sends ``wait_s=0``), so a busy machine never turns an expected 201 into a 202."""
    return Settings(data_dir=tmp_path / "data", sync_wait_s=BACKSTOP_S)


@pytest.fixture
def fake_embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture
def ctx(settings: Settings, fake_embedder: HashEmbedder) -> Context:
    return Context(settings, embedder=fake_embedder)


@pytest.fixture
def da(settings: Settings, fake_embedder: HashEmbedder):
    """A DocAnchor on a temp data dir with the fake embedder; closed after the test."""
    from plugin.api import DocAnchor

    inst = DocAnchor(settings, embedder=fake_embedder)
    yield inst
    inst.close()


@pytest.fixture
def client(da):
    """Flask's test client over :func:`da`."""
    from plugin.app import create_app

    return create_app(da.settings, da).test_client()


@pytest.fixture(scope="session")
def real_embedder():
    from docanchor.embedder import get_embedder

    return get_embedder()


@pytest.fixture
def real_ctx(settings: Settings, real_embedder) -> Context:
    return Context(settings, embedder=real_embedder)


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory):
    """A real ``chroma run`` on a free loopback port for the whole session."""
    from tests.chroma_server import running_chroma

    with running_chroma(tmp_path_factory.mktemp("chroma-server") / "db") as server:
        yield server


@pytest.fixture(params=["embedded", "chroma-server"])
def backend_settings(request, tmp_path: Path) -> Settings:
    """The same test body against embedded Chroma and a real Chroma server.

    On the shared server every test gets its own namespace, so tests never see each other's data.
    """
    if request.param == "embedded":
        return Settings(data_dir=tmp_path / "data", sync_wait_s=BACKSTOP_S)
    server = request.getfixturevalue("chroma_server")
    return Settings(data_dir=tmp_path / "data", chroma_host=server.host, chroma_port=server.port,
                    namespace=f"test {request.node.name[:40]} {tmp_path.name}", sync_wait_s=BACKSTOP_S)
