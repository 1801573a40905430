"""Records = Chroma = lexical index: failed and killed ingests leave nothing behind, a damaged or
diverged lexical index is mended when a namespace is opened, a first document without lexical
terms is stored whole, reads create no namespace, and the audit behind ``docanchor check``."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from docanchor.display import counted
from docanchor.errors import StoreUnavailable
from docanchor.integrity import audit
from docanchor.settings import Settings
from plugin.api import DocAnchor
from tests.conftest import CORPUS
from tests.fakes import HashEmbedder

OWNERSHIP = CORPUS / "md" / "ch04-01-what-is-ownership.md"
NOTES = "# Release notes\n\nThe frobnicator component changed. Operators read the frobnicator notes first.\n"


def lexical_ids(da: DocAnchor, query: str, namespace: str | None = None) -> set[str]:
    """Documents with a BM25 hit for ``query`` (what the lexical index serves)."""
    return {cid.split(":")[0] for cid, _ in da.ctx.lexical.search(namespace or da.settings.namespace, query, 50)}


def chroma_doc_ids(da: DocAnchor, namespace: str | None = None) -> set[str]:
    coll = da.ctx.store.client.get_collection(f"{_chunks_collection(namespace or da.settings.namespace)}")
    return {m["doc_id"] for m in coll.get(include=["metadatas"])["metadatas"]}


def _chunks_collection(namespace: str) -> str:
    from docanchor.store import collection_name

    return collection_name(namespace, "chunks")


def test_a_failed_ingest_leaves_no_chunks_in_chroma_or_the_lexical_index(da: DocAnchor, monkeypatch):
    kept = da.ingest_file(OWNERSHIP).record

    def refuse(*args, **kwargs):
        raise StoreUnavailable("the record could not be written")

    monkeypatch.setattr(da.ctx.store, "put_document", refuse)
    with pytest.raises(StoreUnavailable):
        da.ingest_text(NOTES, title="notes.md")
    monkeypatch.undo()
    assert lexical_ids(da, "frobnicator") == set()  # no rows take top-k slots or IDF weight
    assert chroma_doc_ids(da) == {kept.doc_id}
    assert audit(da.ctx, da.settings.namespace).ok


class Killed(BaseException):
    """Stands for SIGKILL: nothing of the process runs after it (no clean-up in an except)."""


def killed(*args, **kwargs):
    """A store write killed by :class:`Killed`."""
    raise Killed()


def test_start_up_removes_what_a_killed_ingest_wrote_from_both_stores(settings: Settings, monkeypatch):
    """A process killed between its chunks and its record: the next start removes both."""
    from ingest.stream import ingest_document

    first = DocAnchor(settings, embedder=HashEmbedder())
    kept = first.ingest_file(OWNERSHIP).record
    ns = settings.namespace
    monkeypatch.setattr(first.ctx.store, "put_document", killed)
    with pytest.raises(Killed):
        ingest_document(first.ctx, NOTES.encode(), namespace=ns, filename="notes.md")
    assert len(chroma_doc_ids(first)) == 2  # left behind in Chroma (and in the lexical index)
    first.close()

    second = DocAnchor(settings, embedder=HashEmbedder())
    second.resume_jobs()  # what `docanchor serve` runs at start-up
    assert lexical_ids(second, "frobnicator") == set()
    assert chroma_doc_ids(second) == {kept.doc_id}
    assert audit(second.ctx, ns).ok
    second.close()


def _data_files(data: Path) -> dict[Path, bytes]:
    """Every file of the data dir except Chroma's, by path (the lexical index and its kin)."""
    return {p: p.read_bytes() for p in data.rglob("*") if p.is_file() and "chroma" not in p.relative_to(data).parts}


def _restore(data: Path, files: dict[Path, bytes]) -> None:
    for p in [p for p in data.rglob("*") if p.is_file() and "chroma" not in p.relative_to(data).parts]:
        if p not in files:
            p.unlink()
    for p, content in files.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content)


def test_a_lexical_index_missing_a_document_is_repaired_when_opened(settings: Settings, caplog):
    first = DocAnchor(settings, embedder=HashEmbedder())
    first.ingest_file(OWNERSHIP)
    first.close()
    before = _data_files(settings.data_dir)  # the lexical index as it was before the second document
    first = DocAnchor(settings, embedder=HashEmbedder())
    notes = first.ingest_text(NOTES, title="notes.md").record
    first.close()
    _restore(settings.data_dir, before)

    second = DocAnchor(settings, embedder=HashEmbedder())
    with caplog.at_level(logging.WARNING, logger="docanchor"):
        assert lexical_ids(second, "frobnicator") == {notes.doc_id}
    assert any("lexical index" in r.getMessage() for r in caplog.records)
    assert audit(second.ctx, settings.namespace).ok
    second.close()


@pytest.mark.parametrize("damage", ["garbage", "truncate", "delete"])
def test_a_damaged_lexical_index_is_rebuilt_from_the_store_and_logged(settings: Settings, caplog, damage: str):
    first = DocAnchor(settings, embedder=HashEmbedder())
    own = first.ingest_file(OWNERSHIP).record
    notes = first.ingest_text(NOTES, title="notes.md").record
    first.close()
    files = [p for p in settings.data_dir.rglob("*") if p.is_file() and "chroma" not in p.relative_to(settings.data_dir).parts
             and p.suffix not in (".json", ".lock") and p.stat().st_size > 0]
    assert files
    for p in files:
        if damage == "garbage":
            p.write_bytes(b"\x00garbage\xff" * 64)
        elif damage == "truncate":
            p.write_bytes(p.read_bytes()[: p.stat().st_size // 3])
        else:
            p.unlink()

    second = DocAnchor(settings, embedder=HashEmbedder())
    with caplog.at_level(logging.WARNING, logger="docanchor"):
        for _ in range(2):  # never one error and then answers with BM25 silently off
            assert lexical_ids(second, "frobnicator") == {notes.doc_id}
            assert own.doc_id in lexical_ids(second, "ownership borrow heap stack")
    assert any("lexical index" in r.getMessage() for r in caplog.records)
    assert audit(second.ctx, settings.namespace).ok
    second.close()


@pytest.mark.parametrize("text", ["the of and to", "... !!! ???", "🙂🙂 🎉"])
def test_a_first_document_without_lexical_terms_is_stored_whole(da: DocAnchor, text: str):
    ns = "fresh namespace"
    res = da.ingest_text(text, title="t.md", namespace=ns)
    assert da.get_document(res.record.doc_id, ns).n_chunks == res.record.n_chunks > 0
    assert chroma_doc_ids(da, ns) == {res.record.doc_id}
    assert da.retrieve("of the", budget_tokens=200, namespace=ns).context_tokens_used <= 200
    assert audit(da.ctx, ns).ok
    after = da.ingest_file(OWNERSHIP, namespace=ns).record  # a later document is indexed as usual
    assert lexical_ids(da, "ownership borrow heap stack", ns) == {after.doc_id}


def _collections(da: DocAnchor) -> set[str]:
    return {c if isinstance(c, str) else c.name for c in da.ctx.store.client.list_collections()}


def test_reads_of_a_namespace_that_does_not_exist_create_nothing(da: DocAnchor):
    from plugin.app import create_app

    da.ingest_file(OWNERSHIP)
    before = _collections(da)
    lexical_before = sorted(p.name for p in (da.settings.data_dir / "lexical").iterdir()) \
        if (da.settings.data_dir / "lexical").exists() else []
    client = create_app(da.settings, da).test_client()
    for i in range(5):
        ns = f"never written {i}"
        assert da.list_documents(ns) == []
        assert da.retrieve("ownership", namespace=ns).sections == []
        with pytest.raises(Exception):
            da.get_document("doc_0000000000000000", ns)
        headers = {"X-DocAnchor-Namespace": f"http reader {i}"}
        assert client.get("/v1/documents", headers=headers).status_code == 200
        assert client.post("/v1/retrieve", json={"query": "ownership"}, headers=headers).status_code == 200
        assert client.get("/v1/documents/doc_0000000000000000", headers=headers).status_code == 404
    assert _collections(da) == before
    lexical_after = sorted(p.name for p in (da.settings.data_dir / "lexical").iterdir()) \
        if (da.settings.data_dir / "lexical").exists() else []
    assert lexical_after == lexical_before


def test_audit_reports_each_disagreement_per_document(da: DocAnchor):
    ns = da.settings.namespace
    own = da.ingest_file(OWNERSHIP).record
    notes = da.ingest_text(NOTES, title="notes.md").record
    assert audit(da.ctx, ns).ok and len(audit(da.ctx, ns).documents) == 2
    # chunks lost from Chroma, and a lexical index missing a document
    coll = da.ctx.store.client.get_collection(_chunks_collection(ns))
    coll.delete(ids=[f"{own.doc_id}:000000"])
    da.ctx.lexical.delete(ns, notes.doc_id)
    report = {d.doc_id: d for d in audit(da.ctx, ns).problems}
    assert report[own.doc_id].chroma == own.n_chunks - 1 and report[own.doc_id].lexical == own.n_chunks
    assert report[notes.doc_id].lexical == 0 and report[notes.doc_id].chroma == notes.n_chunks
    shutil.rmtree(da.settings.data_dir / "pending", ignore_errors=True)


def test_docanchor_check_prints_the_audit_and_repairs(da: DocAnchor):
    from click.testing import CliRunner

    from plugin.cli import main

    ns = da.settings.namespace
    own = da.ingest_file(OWNERSHIP).record
    runner = CliRunner()
    ok = runner.invoke(main, ["check"], obj=da, catch_exceptions=False)
    assert ok.exit_code == 0 and f"{ns!r}: 1 document, {counted(own.n_chunks, 'chunk')}: ok" in ok.output
    stray = da.ingest_text(NOTES, title="notes.md").record  # then its record goes, its chunks stay
    da.ctx.store.client.get_collection(
        __import__("docanchor.store", fromlist=["collection_name"]).collection_name(ns, "docs")).delete(ids=[stray.doc_id])
    bad = runner.invoke(main, ["check"], obj=da, catch_exceptions=False)
    assert bad.exit_code == 1
    assert f"{stray.doc_id}: no record, Chroma {stray.n_chunks}, lexical {stray.n_chunks}" in bad.output
    fixed = runner.invoke(main, ["check", "--repair"], obj=da, catch_exceptions=False)
    assert fixed.exit_code == 0, fixed.output
    assert chroma_doc_ids(da) == {own.doc_id} and lexical_ids(da, "frobnicator") == set()


def test_docanchor_check_all_reports_orphan_chunks_and_repair_removes_them(settings: Settings, monkeypatch):
    """A process killed while storing the first document of a namespace (the trial of 3df9211, its
    defect 4): its chunks sat in Chroma and the lexical index without a record, and ``check --all``
    said ok, for it listed only namespaces with a record collection. Now it names the orphan chunks
    with their count and what to do, and ``--repair`` removes them with the start-up's clean-up."""
    from click.testing import CliRunner

    from ingest.stream import ingest_document
    from plugin.cli import main

    first = DocAnchor(settings, embedder=HashEmbedder())
    own = first.ingest_file(OWNERSHIP).record
    monkeypatch.setattr(first.ctx.store, "put_document", killed)
    with pytest.raises(Killed):
        ingest_document(first.ctx, NOTES.encode() * 20, namespace="fresh", filename="notes.md")
    first.close()
    monkeypatch.undo()

    da = DocAnchor(settings, embedder=HashEmbedder())
    try:
        orphans = chroma_doc_ids(da, "fresh")
        assert len(orphans) == 1
        n = da.ctx.store.count_chunks("fresh")
        bad = CliRunner().invoke(main, ["check", "--all"], obj=da, catch_exceptions=False)
        assert bad.exit_code == 1, bad.output
        assert f"'fresh': 0 documents, 0 chunks: {counted(n, 'orphan chunk')} (of 1 document without a record)" \
            in bad.output, bad.output
        assert f"{orphans.pop()}: no record, Chroma {n}, lexical {n}" in bad.output
        assert "'docanchor check --repair' removes them" in bad.output
        assert f"{settings.namespace!r}: 1 document, {counted(own.n_chunks, 'chunk')}: ok" in bad.output
        fixed = CliRunner().invoke(main, ["check", "--all", "--repair"], obj=da, catch_exceptions=False)
        assert fixed.exit_code == 0, fixed.output
        assert "'fresh': 0 documents, 0 chunks: ok" in fixed.output
        # before (the trial of 3d88e0c, its defect 3): the removal was only a WARNING log line
        assert f"'fresh': repaired: removed {counted(n, 'chunk')} without a document record" in fixed.output
        assert da.ctx.store.count_chunks("fresh") == 0 and lexical_ids(da, "frobnicator", "fresh") == set()
    finally:
        da.close()


class _OtherModel(HashEmbedder):
    """Another "model": a different name and vector length."""

    name = "hash-64-test-embedder"
    dimension = 64


@pytest.mark.parametrize("lexical", ["kept", "gone"])
def test_a_namespace_of_another_model_does_not_stop_the_start_up(settings: Settings, caplog, lexical: str):
    """Start-up checks every namespace's lexical index and chunk count; one indexed with another
    embedding model is logged and skipped, and the process starts and serves its own namespace.
    With its lexical index gone, checking the index reads its chunks; with the index kept, the
    chunk count is the first to open them (how a worker met another test's namespace on a shared
    ``chroma run``)."""
    old = DocAnchor(settings, embedder=HashEmbedder())
    old.ingest_file(OWNERSHIP, namespace="older model")
    old.close()
    if lexical == "gone":
        shutil.rmtree(settings.data_dir / "lexical")

    new = DocAnchor(settings, embedder=_OtherModel())
    with caplog.at_level(logging.WARNING, logger="docanchor"):
        new.start_up(resume_jobs=False)
    assert any("older model" in r.getMessage() and "not checked" in r.getMessage() for r in caplog.records)
    notes = new.ingest_text(NOTES, title="notes.md").record
    assert lexical_ids(new, "frobnicator") == {notes.doc_id}
    new.close()


def test_docanchor_check_all_names_a_namespace_of_another_model_and_checks_the_others(settings: Settings):
    from click.testing import CliRunner

    from plugin.cli import main

    old = DocAnchor(settings, embedder=HashEmbedder())
    old.ingest_file(OWNERSHIP, namespace="older model")
    old.close()
    da = DocAnchor(settings, embedder=_OtherModel())
    try:
        own = da.ingest_text(NOTES, title="notes.md").record
        got = CliRunner().invoke(main, ["check", "--all"], obj=da, catch_exceptions=False)
    finally:
        da.close()
    assert got.exit_code == 1
    assert "'older model': not checked: This namespace was indexed with the embedding model" in got.output
    assert f"{settings.namespace!r}: 1 document, {counted(own.n_chunks, 'chunk')}: ok" in got.output
