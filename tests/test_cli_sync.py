"""``docanchor ingest`` keeps a folder in sync: documents remember their sources, edited files
replace their document, ``--sync`` removes what is gone, ``--dry-run`` and ``--json`` say what
happens. Through click's runner with an injected DocAnchor (fake embedder) on real files."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from docanchor.display import counted
from plugin.cli import main
from tests.conftest import CASES, CORPUS

OWNERSHIP = CORPUS / "md" / "ch04-01-what-is-ownership.md"


@pytest.fixture
def run(da):
    def invoke(*args: str, input: str | None = None):
        return CliRunner().invoke(main, list(args), obj=da, catch_exceptions=False, input=input)

    return invoke


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    f = tmp_path / "notes"
    (f / "sub").mkdir(parents=True)
    (f / "alpha.md").write_text("# Alpha\n\nThe alpha note talks about kiwis and their orchards.\n")
    (f / "sub" / "beta.md").write_text("# Beta\n\nThe beta note talks about lighthouses on the coast.\n")
    return f


def docs_by_title(da) -> dict[str, object]:
    return {d.title: d for d in da.list_documents()}


def test_every_document_records_its_source_and_list_shows_it(run, da, folder, tmp_path, monkeypatch):
    """Regression: `docanchor list` did not say where a document came from."""
    assert run("ingest", str(folder)).exit_code == 0
    alpha = docs_by_title(da)["Alpha"]
    assert alpha.sources == [str(folder / "alpha.md")]
    monkeypatch.chdir(tmp_path)
    listing = run("list").stdout
    assert "(notes/alpha.md)" in listing and os.path.join("(notes", "sub", "beta.md)") in listing
    listed = json.loads(run("list", "--json").stdout)
    assert {d["title"]: d["sources"] for d in listed}["Beta"] == [str(folder / "sub" / "beta.md")]
    assert "anchor" not in listed[0]  # the list's fields, as GET /v1/documents gives them


def test_an_edited_file_replaces_its_document(run, da, folder):
    """Regression: re-ingesting an edited file added a second document and left the stale one searchable."""
    note = folder / "alpha.md"
    run("ingest", str(note))
    old = docs_by_title(da)["Alpha"].doc_id
    note.write_text("# Alpha\n\nThe alpha note now talks about pelicans instead.\n")
    result = run("ingest", str(folder))
    assert result.exit_code == 0, result.output
    new = docs_by_title(da)["Alpha"].doc_id
    assert new != old and [d.title for d in da.list_documents()].count("Alpha") == 1
    assert any(line.startswith(f"replaced {old} -> {new} Alpha (") and line.endswith(f"[{note}]")
               for line in result.stdout.splitlines()), result.stdout
    assert run("anchor", old).stderr.startswith("error document_not_found")
    assert "kiwis" not in json.loads(run("search", "kiwis orchards", "--json").stdout)["context"]
    again = run("ingest", str(note))
    assert again.stdout.startswith(f"skipped (unchanged) {new} Alpha [")


def test_identical_bytes_under_two_names_are_one_document_with_both_sources(run, da, folder):
    twin = folder / "alpha-copy.md"
    shutil.copy(folder / "alpha.md", twin)
    result = run("ingest", str(folder))
    assert result.exit_code == 0
    alpha = docs_by_title(da)["Alpha"]
    assert sorted(alpha.sources) == sorted([str(folder / "alpha.md"), str(twin)])
    assert len(da.list_documents()) == 2
    assert sum("same content as" in line for line in result.stdout.splitlines()) == 1
    # editing one name gives it a new document; the other name keeps the old one
    twin.write_text("# Alpha copy\n\nThe copy now talks about otters.\n")
    edited = run("ingest", str(twin))
    assert "stays: other files have it" in edited.stdout, edited.stdout
    docs = docs_by_title(da)
    assert docs["Alpha"].doc_id == alpha.doc_id and docs["Alpha"].sources == [str(folder / "alpha.md")]
    assert docs["Alpha copy"].sources == [str(twin)]


def test_sync_removes_documents_whose_file_is_gone_after_asking(run, da, folder):
    run("ingest", str(folder))
    beta = docs_by_title(da)["Beta"]
    (folder / "sub" / "beta.md").unlink()
    kept = run("ingest", "--sync", str(folder), input="n\n")
    assert kept.exit_code == 0 and "Remove them from the index?" in kept.stderr and beta.doc_id in kept.stderr
    assert "run again with --yes" in kept.stderr and "Beta" in docs_by_title(da)
    no_answer = run("ingest", "--sync", str(folder))  # no terminal to answer: nothing is removed
    assert "Beta" in docs_by_title(da) and "run again with --yes" in no_answer.stderr
    removed = run("ingest", "--sync", str(folder), input="y\n")
    assert f"remove {beta.doc_id} Beta ({counted(beta.n_chunks, 'chunk')}): its file is gone" in removed.stdout
    assert "Beta" not in docs_by_title(da) and "Alpha" in docs_by_title(da)
    assert "1 document removed" in removed.stdout


def test_sync_keeps_a_renamed_file_without_asking(run, da, folder):
    run("ingest", str(folder))
    alpha = docs_by_title(da)["Alpha"]
    (folder / "alpha.md").rename(folder / "alpha-renamed.md")
    result = run("ingest", "--sync", str(folder))
    assert result.exit_code == 0 and "Remove them" not in result.stderr
    after = docs_by_title(da)["Alpha"]
    assert after.doc_id == alpha.doc_id and after.sources == [str(folder / "alpha-renamed.md")]


def test_sync_with_yes_removes_without_asking_and_needs_a_folder(run, da, folder):
    run("ingest", str(folder))
    (folder / "alpha.md").unlink()
    result = run("ingest", "--sync", "--yes", str(folder))
    assert "Remove them" not in result.stderr and "Alpha" not in docs_by_title(da)
    usage = CliRunner().invoke(main, ["ingest", "--sync", str(folder / "sub" / "beta.md")], obj=da)
    assert usage.exit_code == 2 and "name at least one folder" in usage.output


def test_dry_run_says_what_it_would_do_and_changes_nothing(run, da, folder):
    run("ingest", str(folder))
    before = {d.doc_id: d.sources for d in da.list_documents()}
    (folder / "alpha.md").write_text("# Alpha\n\nEdited.\n")
    (folder / "sub" / "beta.md").unlink()
    (folder / "gamma.md").write_text("# Gamma\n\nNew.\n")
    result = run("ingest", "--sync", "--dry-run", str(folder))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    old_alpha = next(i for i, s in before.items() if s == [str(folder / "alpha.md")])
    assert f"would replace {old_alpha} [{folder / 'alpha.md'}]" in lines
    assert f"would add [{folder / 'gamma.md'}]" in lines
    assert any(line.startswith("would remove ") and line.endswith(f"[{folder / 'sub' / 'beta.md'}]") for line in lines)
    assert lines[-1].startswith("dry run, nothing changed: 2 files: 1 to add, 1 to replace, 0 unchanged, 0 failed; "
                                "1 document to remove")
    assert {d.doc_id: d.sources for d in da.list_documents()} == before


def test_dry_run_on_a_new_data_dir_creates_nothing(folder, tmp_path):
    data = tmp_path / "fresh-data"
    result = CliRunner().invoke(main, ["--data-dir", str(data), "ingest", "--dry-run", str(folder)])
    assert result.exit_code == 0, result.output
    assert result.stdout.count("would add [") == 2 and not data.exists()


def test_json_prints_one_object_per_file(run, da, folder):
    (folder / "script.py").write_text("print('not a document')\n")
    (folder / "empty.txt").write_bytes(b"")
    result = run("ingest", "--json", str(folder), str(folder / "missing.md"))
    assert result.exit_code == 1
    objs = [json.loads(line) for line in result.stdout.splitlines()]
    by_path = {Path(o["path"]).name: o for o in objs}
    assert set(by_path) == {"alpha.md", "beta.md", "script.py", "empty.txt", "missing.md"}
    assert by_path["alpha.md"]["action"] == "added" and by_path["alpha.md"]["doc_id"].startswith("doc_")
    assert by_path["alpha.md"]["source"] == str(folder / "alpha.md") and by_path["alpha.md"]["n_chunks"] >= 1
    assert by_path["empty.txt"]["action"] == "failed" and by_path["empty.txt"]["error"]["code"] == "empty_file"
    assert by_path["missing.md"]["error"]["code"] == "not_found"
    assert by_path["script.py"]["action"] == "not_a_document"
    assert "files:" in result.stderr  # the closing count stays off stdout
    again = [json.loads(line) for line in run("ingest", "--json", str(folder / "alpha.md")).stdout.splitlines()]
    assert [o["action"] for o in again] == ["unchanged"]


def test_quiet_prints_only_failures(run, folder):
    (folder / "empty.txt").write_bytes(b"")
    result = run("ingest", "--quiet", str(folder))
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [f"error empty_file: The file is empty (0 bytes); ingest a file with content. "
                                          f"[{folder / 'empty.txt'}]"]


def test_the_command_line_says_ingest_where_the_library_says_upload(run):
    """Regression: in an empty namespace `docanchor search` said "upload one" where it means docanchor ingest."""
    result = run("search", "anything at all")
    assert "docanchor ingest PATH" in result.stderr and "upload" not in result.stderr, result.stderr


def test_the_ingest_line_shows_quality_flags(run, tmp_path):
    """Regression: the CLI's line per file said nothing about hidden text (a prompt-injection path)."""
    pdf = tmp_path / "a08.pdf"
    shutil.copy(CASES / "a08_pdf_hidden_injection.pdf", pdf)
    line = run("ingest", str(pdf)).stdout.splitlines()[0]
    assert line.startswith("ok doc_") and line.endswith(f"[{pdf}]")
    assert "hidden text" in line and "skipped" in line, line


def test_python_api_records_paths_and_uploads_record_their_name(da, client, tmp_path):
    note = tmp_path / "note.md"
    note.write_text("# Note\n\nSomething to remember about harbours.\n")
    assert da.ingest_file(note).record.sources == [str(note)]
    up = client.post("/v1/documents", data={"file": (note.open("rb"), "renamed.md")},
                     content_type="multipart/form-data").get_json()
    assert up["duplicate"] and sorted(up["sources"]) == sorted([str(note), "renamed.md"])
    text = client.post("/v1/documents", json={"text": "# T\n\nPlain text has no source."}).get_json()
    assert text["sources"] == []
    listed = client.get("/v1/documents").get_json()["documents"]
    assert {d["doc_id"]: d["sources"] for d in listed}[up["doc_id"]] == up["sources"]
    gone = client.delete(f"/v1/documents/{up['doc_id']}/sources", query_string={"source": "renamed.md"}).get_json()
    assert gone == {"doc_id": up["doc_id"], "deleted": False, "chunks_removed": 0, "sources": [str(note)]}
    last = client.delete(f"/v1/documents/{up['doc_id']}/sources", query_string={"source": str(note)}).get_json()
    assert last["deleted"] and last["chunks_removed"] >= 1
    assert client.get(f"/v1/documents/{up['doc_id']}").status_code == 404


def test_records_stored_before_sources_existed_still_load(da, tmp_path):
    record = da.ingest_file(OWNERSHIP).record
    legacy = {k: v for k, v in record.to_dict().items() if k != "sources"}
    coll = da.ctx.store._collection(da.settings.namespace, "docs")
    coll.upsert(ids=[record.doc_id], embeddings=[[1.0]], documents=[record.anchor],
                metadatas=[{"record": json.dumps(legacy)}])
    assert da.get_document(record.doc_id).sources == []
    listed = CliRunner().invoke(main, ["list"], obj=da)
    assert listed.exit_code == 0 and record.doc_id in listed.stdout


def test_dry_run_says_which_files_would_fail(run, da, folder):
    """Regression: `ingest --dry-run` said "would add" for an empty file and a password-protected
    PDF, which the real run refuses; what can be checked without parsing or embedding is checked."""
    (folder / "empty.txt").write_bytes(b"")
    (folder / "blank.md").write_text("  \n\n ")
    shutil.copy(CORPUS / "pdf" / "libreoffice-writer-password.pdf", folder / "locked.pdf")
    result = run("ingest", "--dry-run", str(folder))
    lines = result.stdout.splitlines()
    for name, code in (("empty.txt", "empty_file"), ("blank.md", "empty_file"), ("locked.pdf", "pdf_encrypted")):
        line = next(x for x in lines if x.endswith(f"[{folder / name}]"))
        assert line.startswith(f"would fail: {code}: "), line
    assert f"would add [{folder / 'alpha.md'}]" in lines
    assert lines[-1].startswith("dry run, nothing changed: 5 files: 2 to add, 0 to replace, 0 unchanged, 3 failed")
    assert result.exit_code == 1 and da.list_documents() == []
    as_json = [json.loads(x) for x in run("ingest", "--dry-run", "--json", str(folder)).stdout.splitlines()]
    locked = next(o for o in as_json if o["path"].endswith("locked.pdf"))
    assert locked["action"] == "failed" and locked["error"]["code"] == "pdf_encrypted" and locked["dry_run"]
