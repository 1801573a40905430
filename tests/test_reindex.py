"""Changing the embedding model: a clear ``embedding_model_mismatch`` through HTTP and the CLI, and
``docanchor reindex`` rebuilding the namespace (embedded Chroma and a real Chroma server)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from docanchor.errors import Conflict
from docanchor.settings import Settings
from docanchor.store import collection_name
from plugin.api import DocAnchor
from plugin.app import create_app
from plugin.cli import main
from tests.conftest import CORPUS
from tests.fakes import HashEmbedder

OWNERSHIP = CORPUS / "md" / "ch04-01-what-is-ownership.md"
FRENCH = CORPUS / "txt" / "sample-french-1.txt"


class OtherEmbedder(HashEmbedder):
    """Another "model": a different name and vector length."""

    name = "hash-64-test-embedder"
    dimension = 64


def cli(da: DocAnchor, *args: str):
    return CliRunner().invoke(main, list(args), obj=da, catch_exceptions=False)


@pytest.fixture
def built(backend_settings: Settings):
    """A namespace indexed with HashEmbedder: (old instance, records)."""
    old = DocAnchor(backend_settings, embedder=HashEmbedder())
    records = [old.ingest_file(OWNERSHIP).record, old.ingest_file(FRENCH).record]
    return old, records


def test_model_change_is_a_clear_409_and_cli_error(built, backend_settings: Settings):
    new = DocAnchor(backend_settings, embedder=OtherEmbedder())
    client = create_app(backend_settings, new).test_client()
    resp = client.post("/v1/retrieve", json={"query": "ownership"})
    assert resp.status_code == 409, resp.get_json()
    err = resp.get_json()["error"]
    assert err["code"] == "embedding_model_mismatch"
    for needed in ("hash-test-embedder", "hash-64-test-embedder", "docanchor reindex", "128", "64"):
        assert needed in err["message"], needed
    upload = client.post("/v1/documents", json={"text": "# New\n\nA new document.", "title": "n.md"})
    assert upload.status_code == 409 and upload.get_json()["error"]["code"] == "embedding_model_mismatch"
    assert client.get("/v1/documents").get_json()["count"] == 2  # records stay listable

    result = cli(new, "search", "ownership")
    assert result.exit_code == 1
    assert "error embedding_model_mismatch:" in result.output and "hash-64-test-embedder" in result.output
    assert "Traceback" not in result.output


def test_reindex_rebuilds_with_the_configured_model(built, backend_settings: Settings):
    old, records = built
    ns = backend_settings.namespace
    before = {r.doc_id: (old.ctx.store.get_chunks(ns, r.doc_id), r.anchor) for r in records}
    new = DocAnchor(backend_settings, embedder=OtherEmbedder())

    result = cli(new, "reindex")
    assert result.exit_code == 0, result.output
    total = sum(r.n_chunks for r in records)
    assert f"reindexed {ns!r}: {total} chunks, hash-test-embedder -> hash-64-test-embedder" in result.output

    store = new.ctx.store
    meta = store.client.get_collection(collection_name(ns, "chunks")).metadata
    assert meta["embedding_model"] == "hash-64-test-embedder" and meta["embedding_dimension"] == 64
    assert store.count_chunks(ns) == total
    for doc_id, (chunks, anchor) in before.items():
        assert store.get_chunks(ns, doc_id) == chunks  # same ids, texts, metadata
        assert all(len(e) == 64 for e in store.get_chunk_embeddings(ns, doc_id))
        assert new.get_document(doc_id, ns).anchor == anchor  # anchors are kept byte for byte
    res = new.retrieve("ownership rules: each value has an owner, dropped when out of scope", budget_tokens=300)
    assert res.sections[0].doc_id == records[0].doc_id
    assert new.ingest_text("# New\n\nA brand new document about teapots.", title="t.md").record.n_chunks == 1
    names = {c if isinstance(c, str) else c.name for c in store.client.list_collections()}
    assert not {collection_name(ns, "chunks") + s for s in ("-old", "-rebuild")} & names

    again = cli(new, "reindex")
    assert again.exit_code == 0 and "already uses hash-64-test-embedder" in again.output
    with pytest.raises(Conflict) as info:  # the old model is now the mismatched one
        DocAnchor(backend_settings, embedder=HashEmbedder()).retrieve("ownership")
    assert info.value.code == "embedding_model_mismatch"


def test_reindex_recovers_from_a_crash_inside_the_swap(built, backend_settings: Settings):
    old, records = built
    ns = backend_settings.namespace
    name = collection_name(ns, "chunks")
    client = old.ctx.store.client
    client.get_collection(name).modify(name=name + "-old")  # as if killed between the two renames
    new = DocAnchor(backend_settings, embedder=OtherEmbedder())
    [result] = new.reindex()
    assert not result.skipped and result.n_chunks == sum(r.n_chunks for r in records)
    assert new.retrieve("ownership owner scope").sections


def test_reindex_all_namespaces(settings: Settings):
    old = DocAnchor(settings, embedder=HashEmbedder())
    old.ingest_file(OWNERSHIP, namespace="团队 甲")
    old.ingest_file(FRENCH, namespace="team b")
    new = DocAnchor(settings, embedder=OtherEmbedder())
    result = cli(new, "reindex", "--all")
    assert result.exit_code == 0, result.output
    assert "reindexed '团队 甲'" in result.output and "reindexed 'team b'" in result.output
    assert new.retrieve("ownership", namespace="团队 甲").sections
    assert new.retrieve("Molière", namespace="team b").sections
    assert cli(new, "reindex", "--all", "--namespace", "x").exit_code == 2


def _hnsw(da: DocAnchor, namespace: str) -> dict:
    coll = da.ctx.store.client.get_collection(collection_name(namespace, "chunks"))
    return dict(coll.configuration["hnsw"])


def test_chunk_collections_get_docanchors_hnsw_settings_and_reindex_upgrades_old_ones(backend_settings: Settings):
    from docanchor.store import HNSW_CONFIG

    da = DocAnchor(backend_settings, embedder=HashEmbedder())
    da.ingest_file(OWNERSHIP)
    ns = backend_settings.namespace
    assert {k: _hnsw(da, ns)[k] for k in HNSW_CONFIG} == HNSW_CONFIG

    # a data dir made by an earlier version: the chunk collection has Chroma's defaults
    old_ns = "made-before"
    client = da.ctx.store.client
    client.create_collection(collection_name(old_ns, "chunks"), metadata={
        "docanchor_namespace": old_ns, "docanchor_kind": "chunks", "hnsw:space": "cosine",
        "embedding_model": da.ctx.embedder.name, "embedding_dimension": da.ctx.embedder.dimension,
    }, embedding_function=None)
    assert _hnsw(da, old_ns)["ef_search"] < HNSW_CONFIG["ef_search"]
    da.ctx.store.forget_collections()
    rec = da.ingest_file(FRENCH, namespace=old_ns).record  # it still opens and takes documents
    assert {s.doc_id for s in da.retrieve("acheter", 300, namespace=old_ns).sections} == {rec.doc_id}
    cli(da, "reindex", "--namespace", old_ns, "--force")
    assert {k: _hnsw(da, old_ns)[k] for k in HNSW_CONFIG} == HNSW_CONFIG
    assert {s.doc_id for s in da.retrieve("acheter", 300, namespace=old_ns).sections} == {rec.doc_id}


class Bf16Embedder(HashEmbedder):
    """The same "model" computed in bfloat16 (the fake's vectors are the same: within tolerance)."""

    precision = "bf16"


class Int8Embedder(HashEmbedder):
    """The same "model" in a precision whose vectors do not mix with float32 ones."""

    precision = "int8"


def test_collections_record_the_precision_and_bf16_fp32_need_no_reindex(built, backend_settings: Settings):
    old, records = built
    ns = backend_settings.namespace
    meta = old.ctx.store.client.get_collection(collection_name(ns, "chunks")).metadata
    assert meta["embedding_model"] == "hash-test-embedder" and meta["embedding_precision"] == "fp32"

    new = DocAnchor(backend_settings, embedder=Bf16Embedder())  # fp32 -> bf16: within tolerance
    assert new.retrieve("ownership owner scope", 300).sections[0].doc_id == records[0].doc_id
    assert new.ingest_text("# Teapots\n\nA document about teapots.", title="t.md").record.n_chunks == 1
    [result] = new.reindex()
    assert result.skipped  # nothing to rebuild
    back = DocAnchor(backend_settings, embedder=HashEmbedder())  # and back again
    assert back.retrieve("teapots", 300).sections


def test_a_precision_that_does_not_mix_asks_for_reindex(built, backend_settings: Settings):
    ns = backend_settings.namespace
    new = DocAnchor(backend_settings, embedder=Int8Embedder())
    resp = create_app(backend_settings, new).test_client().post("/v1/retrieve", json={"query": "ownership"})
    assert resp.status_code == 409
    err = resp.get_json()["error"]
    assert err["code"] == "embedding_precision_mismatch"
    for needed in ("'fp32'", "'int8'", "DOCANCHOR_EMBEDDING_PRECISION=fp32", "docanchor reindex"):
        assert needed in err["message"], needed
    result = cli(new, "reindex")
    assert result.exit_code == 0 and "reindexed" in result.output, result.output
    meta = new.ctx.store.client.get_collection(collection_name(ns, "chunks")).metadata
    assert meta["embedding_precision"] == "int8"
    assert new.retrieve("ownership owner scope", 300).sections
