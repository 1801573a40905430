"""The ``docanchor`` CLI through click's runner with an injected DocAnchor (fake embedder), and
one real subprocess with the real model."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from docanchor.settings import Settings
from plugin.api import DocAnchor
from plugin.cli import main
from plugin.lock import DataDirLock, Holder, current_holder, hold, inherit
from tests.conftest import CASES, CORPUS, REPO
from tests.fakes import HashEmbedder
from tests.lock_holder import LockHolder
from tests.waiting import BACKSTOP_S

COMMANDS = ["serve", "ingest", "search", "read", "list", "anchor", "delete", "reindex", "mcp", "check", "status", "context"]
OWNERSHIP = CORPUS / "md" / "ch04-01-what-is-ownership.md"


@pytest.fixture
def run(da):
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(main, list(args), obj=da, catch_exceptions=False)

    return invoke


@pytest.fixture
def doc_id(da) -> str:
    return da.ingest_file(OWNERSHIP).record.doc_id


def test_every_command_is_known_and_documented_in_the_readme():
    assert sorted(main.commands) == sorted(COMMANDS)
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    for name in COMMANDS:
        assert f"docanchor {name}" in readme, name


def _long_options(command, path: tuple[str, ...] = ()):
    """``(command path, the option's long names)`` of every option of ``command`` and its subcommands."""
    import click

    for param in command.params:
        names = [o for o in param.opts + param.secondary_opts if o.startswith("--")]
        if isinstance(param, click.Option) and names and names != ["--help"]:
            yield " ".join(path), names
    for name, sub in getattr(command, "commands", {}).items():
        yield from _long_options(sub, (*path, name))


def test_every_option_is_in_the_readmes_command_line_section():
    """Before: the README's first command used `ingest --show-anchor`, which its Command line
    synopsis did not list (nor `serve --threads`, `--workers`). `docanchor`'s own options (the
    top-level `--verbose` is `-v` there) count when their name or short form is in the section."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Command line", 1)[1].split("\n## ", 1)[0]
    short = {"--verbose": "`-v`"}
    missing = [(cmd, names) for cmd, names in _long_options(main)
               if not any(n in section or short.get(n, n) in section for n in names)]
    assert not missing, missing


def test_help_for_every_command():
    runner = CliRunner()
    top = runner.invoke(main, ["--help"])
    assert top.exit_code == 0 and "--data-dir" in top.output
    version = runner.invoke(main, ["--version"])
    assert version.exit_code == 0 and version.output.startswith("docanchor ")
    for name in COMMANDS:
        assert name in top.output
        result = runner.invoke(main, [name, "--help"])
        assert result.exit_code == 0, result.output
        description = main.commands[name].help.strip()
        assert len(description.splitlines()) == 1 and description.endswith("."), (name, description)
        assert " ".join(result.output.split()).count(" ".join(description.split())) == 1


def test_ingest_folder_with_a_bad_file_goes_on_and_exits_1(run, tmp_path):
    folder = tmp_path / "in"
    (folder / "sub").mkdir(parents=True)
    shutil.copy(OWNERSHIP, folder / "ownership.md")
    shutil.copy(CORPUS / "txt" / "sample-french-1.txt", folder / "sub" / "french.txt")
    shutil.copy(CORPUS / "pdf" / "libreoffice-writer-password.pdf", folder / "locked.pdf")  # pdf_encrypted
    (folder / ".hidden.md").write_text("# hidden\n\nnot ingested\n")
    result = run("ingest", str(folder))
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert sum(line.startswith("ok doc_") for line in lines) == 2, result.stdout
    bad = [line for line in lines if line.startswith("error ")]
    assert len(bad) == 1 and bad[0].endswith(f"[{folder / 'locked.pdf'}]")
    assert "Traceback" not in result.output and ".hidden" not in result.output
    assert "3 files: 2 ok, 0 skipped (unchanged), 1 failed" in lines[-1]

    again = run("ingest", str(folder / "ownership.md"), str(folder / "missing.md"))
    assert again.exit_code == 1
    assert again.stdout.splitlines()[0].startswith("error not_found:")
    assert any(line.startswith("skipped (unchanged) doc_") for line in again.stdout.splitlines())


def test_ingest_ok_exits_0_and_shows_anchor(run, da):
    result = run("ingest", "--show-anchor", str(OWNERSHIP))
    assert result.exit_code == 0, result.output
    doc = da.list_documents()[0]
    assert f"ok {doc.doc_id}" in result.stdout and doc.anchor.strip() in result.stdout


def test_ingest_show_anchor_in_a_named_namespace_names_it(run):
    """Before: `docanchor --namespace team ingest --show-anchor FILE` printed the stored anchor,
    whose More line reads the default namespace, where `docanchor --namespace team anchor DOC`
    names it (new-user trial, issue 15)."""
    result = run("--namespace", "team", "ingest", "--show-anchor", str(OWNERSHIP))
    assert result.exit_code == 0, result.output
    more = [line for line in result.stdout.splitlines() if line.startswith("More:")]
    assert more and 'namespace="team"' in more[0], result.stdout
    doc_id = result.stdout.split()[1]
    assert run("--namespace", "team", "anchor", doc_id).stdout.strip() in result.stdout


def test_dry_run_predicts_the_zip_bomb_refusal_and_the_same_content_skip(run, tmp_path):
    """Before: `ingest --dry-run` said "would add" for case a12 (a zip bomb ingest refuses
    too_large, 413 over HTTP), and "would add this path to ... (same content)" for a copy of a
    stored file, then counted it "1 unchanged" (new-user trial, issue 15)."""
    bomb = run("ingest", "--dry-run", str(CASES / "a12_docx_zip_bomb_media.docx"))
    assert bomb.exit_code == 1 and "would fail: too_large:" in bomb.stdout, bomb.output
    assert "0 to add" in bomb.output and "1 failed" in bomb.output, bomb.output
    first, copy = tmp_path / "a.md", tmp_path / "b.md"
    shutil.copy(OWNERSHIP, first)
    shutil.copy(OWNERSHIP, copy)
    assert run("ingest", str(first)).exit_code == 0
    planned = run("ingest", "--dry-run", str(copy))
    assert planned.exit_code == 0, planned.output
    assert f"would skip (same content as {first})" in planned.stdout and "would add" not in planned.stdout, planned.stdout
    real = run("ingest", str(copy))
    assert f"skipped (same content as {first})" in real.stdout, real.stdout


def test_search(run, da, doc_id):
    result = run("search", "What are the ownership rules?", "--budget", "200")
    assert result.exit_code == 0
    assert "[1] " in result.stdout and doc_id in result.stdout
    assert da.ctx.counter.count(result.stdout.rstrip("\n")) <= 200
    as_json = json.loads(run("search", "ownership rules", "--budget", "150", "--doc", doc_id, "--json").stdout)
    assert as_json["context_tokens_used"] <= 150 and as_json["sections"][0]["doc_id"] == doc_id
    explained = run("search", "ownership", "--explain", "--json")
    assert "trace" in json.loads(explained.stdout)
    assert "explain:" in run("search", "ownership", "--explain").stdout


def test_list_anchor_read_delete(run, da, doc_id):
    listing = run("list")
    assert listing.exit_code == 0 and doc_id in listing.stdout
    assert json.loads(run("list", "--json").stdout)[0]["doc_id"] == doc_id
    assert run("anchor", doc_id).stdout.strip() == da.anchor(doc_id).strip()
    first = run("read", doc_id, "--budget", "100")
    assert first.exit_code == 0 and first.stdout.strip()
    cursor = first.stderr.split("--from ")[1].split()[0]
    second = run("read", doc_id, "--from", cursor, "--budget", "100")
    assert second.exit_code == 0 and second.stdout != first.stdout
    assert json.loads(run("read", doc_id, "--from", "chunk:1", "--json").stdout)["doc_id"] == doc_id
    deleted = run("delete", doc_id)
    assert deleted.exit_code == 0 and deleted.stdout.startswith(f"deleted {doc_id}")
    assert da.list_documents() == []


def test_read_errors_name_the_from_option(run, doc_id):
    result = run("read", doc_id, "--from", "no such heading anywhere")
    assert result.exit_code == 1 and result.stderr.startswith("error invalid_argument: ")
    assert "--from 'no such heading anywhere'" in result.stderr and "no --from" in result.stderr
    assert "start" not in result.stderr.replace("page_start", "").replace("restart", ""), result.stderr


def test_errors_are_one_line_without_traceback(run):
    result = run("anchor", "doc_missing")
    assert result.exit_code == 1
    assert result.stderr.startswith("error document_not_found: ") and "Traceback" not in result.output
    for blank in ("", "   "):  # a usage error, exit status 2 as every other one (it was 1)
        bad = run("search", blank)
        assert bad.exit_code == 2 and bad.stderr.startswith("error invalid_argument: "), bad.stderr
        assert "query" in bad.stderr and "Traceback" not in bad.output
    blank_doc = run("search", "ownership", "--doc", " ")
    assert blank_doc.exit_code == 2 and blank_doc.stderr.startswith("error invalid_argument: --doc needs"), blank_doc.stderr


class Broken(DocAnchor):
    def list_documents(self, namespace=None):
        raise RuntimeError("secret internals")


def test_crash_is_error_internal(settings):
    result = CliRunner().invoke(main, ["list"], obj=Broken(settings, embedder=HashEmbedder()))
    assert result.exit_code == 1 and result.stderr.startswith("error internal: ")
    assert "secret" not in result.output and "Traceback" not in result.output


def test_write_commands_are_refused_while_a_starting_server_holds_the_data_dir(run, da, doc_id):
    """A server that has not written its address yet (it is loading the model): writes are refused
    with what to do; reads go on in this process. (Once it answers, commands go through it: see
    tests/test_cli_warm.py.)"""
    da.close()  # the fixture's ingest held the data dir for this process
    with LockHolder(da.settings.data_dir, "server") as server:
        instead = {"ingest": "that is still starting; try again once it answers (docanchor ingest then goes through",
                   "delete": "that is still starting; try again once it answers (docanchor delete then goes through",
                   "reindex": "reindex needs the data dir to itself: stop the server."}
        for args in (("ingest", str(OWNERSHIP)), ("delete", doc_id), ("reindex",)):
            result = run(*args)
            assert result.exit_code == 1
            assert result.stderr.startswith("error store_locked: The data dir is in use by ")
            assert f"(pid {server.pid})" in result.stderr and instead[args[0]] in result.stderr, result.stderr
            assert result.stderr.count("stop the server") == 1, result.stderr  # said once
        assert run("list").exit_code == 0  # reads go on
    assert run("delete", doc_id).exit_code == 0  # released


def test_with_a_chroma_server_a_data_dir_still_has_one_writer(tmp_path):
    """A data dir's BM25 index and job log belong to one process whatever the store: with a Chroma
    server as with embedded Chroma, a writer beside a server is refused, and so is a second writer;
    a worker of ``serve --workers`` shares its supervisor's lock (plugin.lock.inherit)."""
    remote = Settings(data_dir=tmp_path / "d", chroma_host="127.0.0.1")
    assert current_holder(remote) is None
    with DataDirLock(remote, "ingest"):
        assert current_holder(remote) == Holder(str(os.getpid()), "ingest")
        with pytest.raises(Exception) as info:
            DataDirLock(remote, "python").acquire()
        assert info.value.code == "store_locked" and "another docanchor ingest" in info.value.message
    with DataDirLock(remote, "server") as server:
        server.advertise("http://127.0.0.1:8765")
        assert current_holder(remote) == Holder(str(os.getpid()), "server", "http://127.0.0.1:8765")
        for wanted in ("server", "mcp", "python"):
            with pytest.raises(Exception) as info:
                DataDirLock(remote, wanted).acquire()
            assert info.value.code == "store_locked" and "running server" in info.value.message
        worker = inherit(remote)
        shared = hold(remote, "python")
        try:
            assert shared.lock is worker.lock  # a worker's own writes share it instead of being refused
        finally:
            shared.release()
            worker.release()
    assert current_holder(remote) is None


def test_lock_holder_named_for_another_cli(tmp_path):
    settings = Settings(data_dir=tmp_path / "d")
    with DataDirLock(settings, "ingest"):
        with pytest.raises(Exception) as info:
            DataDirLock(settings, "server").acquire()
    assert info.value.code == "store_locked" and "another docanchor ingest" in info.value.message


@pytest.mark.e2e
def test_real_subprocess_ingest_and_search(tmp_path):
    """The installed entry point's code path end to end: real model, real files, real process."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "DOCANCHOR_DATA_DIR": str(tmp_path / "data")}
    cmd = [sys.executable, "-m", "plugin.cli"]
    ingest = subprocess.run([*cmd, "ingest", str(OWNERSHIP)], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=BACKSTOP_S)
    assert ingest.returncode == 0, ingest.stderr
    assert ingest.stdout.startswith("ok doc_")
    search = subprocess.run([*cmd, "search", "What are the ownership rules in Rust?", "--budget", "300", "--json"],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=BACKSTOP_S)
    assert search.returncode == 0, search.stderr
    res = json.loads(search.stdout)
    assert 0 < res["context_tokens_used"] <= 300
    assert "one owner at a time" in " ".join(res["context"].split())


def test_real_subprocess_folder_ingest_takes_only_document_types(tmp_path):
    """Regression: a folder's source code was ingested as text. Folders give only document types,
    with one line saying what was skipped and why; a file named on the command line is still tried."""
    folder = tmp_path / "in"
    (folder / "src").mkdir(parents=True)
    shutil.copy(CORPUS / "txt" / "sample-french-1.txt", folder / "french.txt")
    tool = folder / "src" / "tool.py"
    tool.write_text('"""Print a greeting."""\n\nprint("hello from a script that is not a document")\n')
    (folder / "src" / "helper.py").write_text("def helper():\n    return 42\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "DOCANCHOR_DATA_DIR": str(tmp_path / "data")}
    cmd = [sys.executable, "-m", "plugin.cli"]
    first = subprocess.run([*cmd, "ingest", str(folder)], cwd=REPO, env=env, capture_output=True, text=True,
                           timeout=BACKSTOP_S)
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert lines[0].startswith("skipped 2 files in folders that are not a document type") and "2 .py" in lines[0]
    assert "name a file itself to try it anyway" in lines[0]
    oks = [line for line in lines if line.startswith("ok doc_")]
    assert len(oks) == 1 and oks[0].endswith(f"[{folder / 'french.txt'}]"), first.stdout
    assert "tool.py" not in first.stdout and lines[-1].startswith("1 file: 1 ok")

    named = subprocess.run([*cmd, "ingest", str(folder), str(tool)], cwd=REPO, env=env, capture_output=True,
                           text=True, timeout=BACKSTOP_S)
    assert named.returncode == 0, named.stderr
    lines = named.stdout.splitlines()
    assert lines[0].startswith("skipped 1 file in") and "1 .py" in lines[0]  # helper.py only
    assert any(line.startswith("ok doc_") and line.endswith(f"[{tool}]") for line in lines), named.stdout
    assert any(line.startswith("skipped (unchanged) doc_") for line in lines)
    assert lines[-1].startswith("2 files: 1 ok, 1 skipped (unchanged)")


def test_search_with_an_empty_doc_says_to_omit_it(da, doc_id):
    result = CliRunner().invoke(main, ["search", "ownership rules", "--doc", " "], obj=da)
    assert result.exit_code == 2  # a usage error
    assert "invalid_argument" in result.output and "omit --doc to search all documents" in result.output


def test_budget_messages_name_the_budget_option(run, doc_id):
    """The library says "raise budget_tokens"; the command line's option is --budget."""
    for args in (("search", "What are the ownership rules?", "--budget", "3"), ("read", doc_id, "--budget", "3"),
                 ("search", "ownership", "--budget", "2000000"), ("read", doc_id, "--budget", "2000000")):
        result = run(*args)
        assert "--budget" in result.stderr and "budget_tokens" not in result.stderr, (args, result.stderr)
    assert "raise --budget" in run("search", "What are the ownership rules?", "--budget", "3").stderr


def test_search_names_the_least_budget_that_returns_a_passage(run, doc_id):
    """Before: `docanchor search --budget 20` said "raise --budget" with no number, while `read`
    names one (new-user trial)."""
    import re
    said = run("search", "What are the ownership rules?", "--budget", "20").stderr
    least = int(re.search(r"raise --budget to (\d+) or more", said).group(1))
    assert least > 20
    assert run("search", "What are the ownership rules?", "--budget", str(least)).stdout.strip()
    assert "raise --budget" in run("search", "What are the ownership rules?", "--budget", str(least - 1)).stderr


def test_counts_of_one_are_singular_in_cli_lines(run, tmp_path):
    """A trial read "ok doc_... (1 chunks)", "1 file(s): 1 ok" and "deleted doc_... (1 chunks)":
    every count the CLI prints goes through one helper (docanchor.display.counted)."""
    one = tmp_path / "one.md"
    one.write_text("# One\n\nA single short paragraph.\n")
    result = run("ingest", str(one))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("ok doc_") and "(1 chunk)" in lines[0], lines[0]
    assert lines[-1].startswith("1 file: 1 ok, 0 skipped (unchanged), 0 failed; 1 chunk in "), lines[-1]
    doc_id = lines[0].split()[1]
    assert run("delete", doc_id).stdout.strip() == f"deleted {doc_id} (1 chunk)"


def test_counted_words():
    from docanchor.display import counted

    assert [counted(n, "chunk") for n in (0, 1, 2, 1204)] == ["0 chunks", "1 chunk", "2 chunks", "1,204 chunks"]
    assert counted(1, "match", "matches") == "1 match" and counted(3, "match", "matches") == "3 matches"


def test_an_expected_store_error_during_ingest_logs_no_traceback(da, tmp_path):
    """Another process writing the BM25 index: the file fails with ``store_unavailable`` in one line,
    and the clean-up that cannot write either says why in one more, without a traceback (``-v`` shows it)."""
    (tmp_path / "first.md").write_text("# First\n\nApples are red and grow on trees in the orchard.\n")
    da.ingest_file(tmp_path / "first.md")
    da.close()
    (lexical,) = [p for p in (da.settings.data_dir / "lexical").iterdir() if p.is_dir()]
    script = ("import sys; from pathlib import Path; from docanchor.lexical_engine import Engine\n"
              "engine = Engine.open(Path(sys.argv[1]), create=False)\n"
              "engine.writer(); print('held', flush=True); sys.stdin.read()\n")
    note = da.settings.data_dir.parent / "note.md"
    note.write_text("# Note\n\nThe lighthouse keeper paints the railings every spring.\n")
    with DocAnchor(da.settings, embedder=HashEmbedder()) as fresh:
        holder = subprocess.Popen([sys.executable, "-c", script, str(lexical)], cwd=REPO, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline().strip() == "held"
            result = CliRunner().invoke(main, ["ingest", str(note)], obj=fresh, catch_exceptions=False)
        finally:
            holder.stdin.close()
            holder.wait(timeout=BACKSTOP_S)
    assert result.exit_code == 1 and "error store_unavailable: Another process is writing" in result.output, result.output
    assert "Traceback" not in result.output, result.output


def test_an_empty_file_gets_one_sentence_in_text_and_in_json(run, tmp_path):
    """Before (the trial of e07bdd7): an empty file's sentence said "upload a file with content" with
    --json and "ingest a file with content" in the text line. Now --json gives the text line's words."""
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    text = run("ingest", str(empty))
    as_json = run("ingest", "--json", str(empty))
    assert text.exit_code == as_json.exit_code == 1, (text.output, as_json.output)
    line = next(x for x in text.stdout.splitlines() if x.startswith("error empty_file: "))
    obj = next(json.loads(x) for x in as_json.stdout.splitlines() if x.startswith("{"))
    assert obj["error"]["code"] == "empty_file", obj
    assert line == f"error empty_file: {obj['error']['message']} [{empty}]", (line, obj)
    assert "ingest a file with content" in line and "upload" not in line, line


def test_the_ctrl_c_summary_counts_a_file_skipped_as_unchanged_apart_from_those_stored(capsys, tmp_path):
    """Before (the trial of e07bdd7): Ctrl-C's line counted a file skipped as unchanged (stored by an
    earlier run) among the files this run stored: "2 of 3 files stored". Now it says 1 stored, 1
    skipped (unchanged), 1 not ingested. The Report is the one ``docanchor ingest`` prints with; the
    real Ctrl-C is tests/test_cli_edges.py::test_ctrl_c_during_ingest_says_what_was_stored_and_how_to_finish."""
    from plugin.cli.report import Report
    from plugin.cli.sync import FileWork

    report = Report(as_json=False, quiet=True, show_anchor=False, dry_run=False)
    report.unchanged(FileWork(tmp_path / "a.md", str(tmp_path / "a.md"), "doc_a", "unchanged", {"title": "A"}))
    report.stored(FileWork(tmp_path / "b.md", str(tmp_path / "b.md"), "doc_b"),
                  {"doc_id": "doc_b", "title": "B", "n_chunks": 2}, [])
    report.interrupted(3, remote=False)
    err = capsys.readouterr().err
    assert err.startswith("interrupted: 1 of 3 files stored, 1 skipped (unchanged), 1 not ingested; "), err


def test_ctrl_c_while_storing_stops_between_steps_and_stores_nothing_of_that_file(da, monkeypatch, tmp_path):
    """Before (the trial of 3d88e0c, its defect 1): Ctrl-C of `docanchor ingest` while a file's
    chunks were written waited for the whole write (9.4-10.7 s for the novel), stored the file and
    then said "the file in progress was not stored". Now it stops after the write step under way
    (``ingest.stream.WRITE_STEP_CHUNKS``), what that file wrote is removed, and the line is true."""
    import os
    import signal

    from tests.test_job_control import LEDGER_STEP_CHUNKS, StepRecorder, _ledger

    monkeypatch.setattr("ingest.stream.WRITE_STEP_CHUNKS", LEDGER_STEP_CHUNKS)
    ledger = tmp_path / "ledger.md"
    ledger.write_bytes(_ledger())

    def press_ctrl_c(stored: int) -> None:  # after the first step's write, as a user would mid-write
        if stored == LEDGER_STEP_CHUNKS:
            os.kill(os.getpid(), signal.SIGINT)

    recorder = StepRecorder(da.ctx.store, after=press_ctrl_c)
    monkeypatch.setattr(da.ctx.store, "add_chunks", recorder)
    result = CliRunner().invoke(main, ["ingest", str(ledger)], obj=da)
    assert result.exit_code == 130, (result.output, result.exception)
    assert recorder.steps == [LEDGER_STEP_CHUNKS]  # no step began after the one under way
    assert da.list_documents() == [] and da.ctx.lexical.doc_counts(da.settings.namespace) == {}
    assert da.ctx.store.count_chunks(da.settings.namespace) == 0
    assert "interrupted: 0 of 1 file stored, 1 not ingested; the file in progress was not stored" in result.stderr


def test_ctrl_c_after_the_last_write_says_every_file_was_ingested(capsys, tmp_path):
    """Before (the same trial): a Ctrl-C that came after every file was stored said "2 of 2 files
    stored, 0 not ingested; the file in progress was not stored; run the same command again"."""
    from plugin.cli.report import Report
    from plugin.cli.sync import FileWork

    report = Report(as_json=False, quiet=True, show_anchor=False, dry_run=False)
    report.stored(FileWork(tmp_path / "b.md", str(tmp_path / "b.md"), "doc_b"),
                  {"doc_id": "doc_b", "title": "B", "n_chunks": 2}, [])
    report.interrupted(1, remote=False)
    err = capsys.readouterr().err
    assert err.strip() == "interrupted: 1 of 1 file stored, 0 not ingested; every file was ingested before it stopped.", err
