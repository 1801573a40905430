"""The command line's edges: closed pipes, data dirs that hold no index, ``status``, ``--version``.

Real subprocesses where the behaviour lives in the process (pipes, the working directory)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from docanchor.errors import Conflict
from docanchor.settings import Settings
from plugin.api import DocAnchor
from tests.conftest import CORPUS, REPO
from tests.fakes import ModelNamedEmbedder
from tests.lock_holder import LockHolder
from tests.waiting import BACKSTOP_S

OWNERSHIP = CORPUS / "md" / "ch04-01-what-is-ownership.md"


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCANCHOR_")}
    return {**env, "HF_HUB_OFFLINE": "1", **extra}


@pytest.fixture
def stored(tmp_path: Path) -> tuple[Path, str]:
    """A data dir holding one document (fake vectors under the real model's name: read commands never embed)."""
    data = tmp_path / "data"
    with DocAnchor(Settings(data_dir=data), embedder=ModelNamedEmbedder()) as da:
        doc_id = da.ingest_file(OWNERSHIP).record.doc_id
    return data, doc_id


def into_closed_pipe(args: list[str], env: dict[str, str], cwd: Path = REPO) -> tuple[int, str]:
    """Run the CLI with its stdout read by nobody (``docanchor ... | true``): exit status, stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "plugin.cli", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the command writes (it is still importing)
    err = proc.stderr.read().decode(errors="replace")
    return proc.wait(timeout=600), err


def test_a_closed_pipe_ends_every_command_quietly(stored):
    """Regression: `docanchor list | true` printed 'error internal ... report it if it repeats'.
    Then `docanchor list | head -3` exited 1, click's status for EPIPE, which a script reads as a
    failure (new-user trial); now 141, what the shell reports for `ls | head -3` (SIGPIPE)."""
    data, doc_id = stored
    for args in (["list"], ["list", "--json"], ["anchor", doc_id], ["read", doc_id, "--budget", "2000"], ["--help"],
                 ["list", "--help"], ["search", "ownership", "--budget", "500"]):
        status, err = into_closed_pipe(["--data-dir", str(data), *args], cli_env())
        err = "".join(line for line in err.splitlines(keepends=True)  # a new machine's first query says this once
                      if not line.startswith("preparing the query encoder, once per machine: "))
        assert err == "", (args, err)
        assert status == 141, (args, status)  # 128 + SIGPIPE; nothing is printed


def run_cli(args: list[str], cwd: Path = REPO, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "plugin.cli", *args], cwd=cwd, env=env or cli_env(),
                          capture_output=True, text=True, timeout=600)


def test_reading_commands_never_create_a_data_dir(tmp_path):
    """Regression: `docanchor list` in any folder silently created ./docanchor-data."""
    cwd = tmp_path / "somewhere"
    cwd.mkdir()
    empty = tmp_path / "empty-dir"
    empty.mkdir()
    env = cli_env(PYTHONPATH=str(REPO))
    for args in (["list"], ["list", "--json"], ["anchor", "doc_x"], ["read", "doc_x"], ["search", "anything"],
                 ["delete", "doc_x"], ["check"], ["--data-dir", str(empty), "list"]):
        out = run_cli(args, cwd=cwd, env=env)
        where = empty if "--data-dir" in args else "docanchor-data"
        assert out.returncode == 1, (args, out.stdout, out.stderr)
        line = out.stderr
        if "--json" in args:  # the same error as the HTTP API's error body
            error = json.loads(out.stderr)["error"]
            line = f"error {error['code']}: {error['message']}"
        assert line.startswith(f"error no_index: There is no DocAnchor index in {where} "), out.stderr
        assert "docanchor ingest PATH" in line
    assert list(cwd.iterdir()) == [] and list(empty.iterdir()) == []


def test_status_says_what_the_index_holds_and_whether_a_server_runs(stored, tmp_path):
    data, _ = stored
    out = run_cli(["--data-dir", str(data), "status", "--json"])
    assert out.returncode == 0, out.stderr
    status = json.loads(out.stdout)
    assert status["documents"] == 1 and status["chunks"] > 1 and status["index"] is True
    assert status["embedding_model"] == "all-MiniLM-L6-v2" and status["embedding_dimension"] == 384
    assert status["chunk_tokens"] == 100 and status["budget_encoding"] == "cl100k_base"
    assert status["server"]["running"] is False and status["data_dir"] == str(data)
    text = run_cli(["--data-dir", str(data), "status"]).stdout
    assert "documents:  1\n" in text and "server:     not running\n" in text and "embedded Chroma" in text
    with LockHolder(data, "server", "http://127.0.0.1:9") as server:  # says its address, answers nothing
        held = run_cli(["--data-dir", str(data), "status"])
    assert f"server:     running (pid {server.pid}) at http://127.0.0.1:9" in held.stdout
    assert held.returncode == 1 and "error server_unreachable" in held.stderr
    nothing = run_cli(["--data-dir", str(tmp_path / "none"), "status"])
    assert nothing.returncode == 0 and "(no index yet" in nothing.stdout and not (tmp_path / "none").exists()
    assert run_cli(["--version"]).stdout.startswith("docanchor ")


def test_the_python_api_takes_the_data_dir_lock(tmp_path):
    """Regression: the Python API wrote while a server ran on the data dir (the server then could not
    find what it wrote); it now holds the data dir from its first write until close()."""
    settings = Settings(data_dir=tmp_path / "data")
    with LockHolder(settings.data_dir, "server", "http://127.0.0.1:9") as server:
        da = DocAnchor(settings, embedder=ModelNamedEmbedder())
        with pytest.raises(Conflict) as info:
            da.ingest_file(OWNERSHIP)
        assert info.value.code == "store_locked" and f"(pid {server.pid}) at http://127.0.0.1:9" in info.value.message
        assert "POST /v1/documents" in info.value.message
        da.close()
    with DocAnchor(settings, embedder=ModelNamedEmbedder()) as da:
        doc_id = da.ingest_file(OWNERSHIP).record.doc_id
        other = run_cli(["--data-dir", str(settings.data_dir), "delete", doc_id])
        assert other.returncode == 1 and f"Python API (pid {os.getpid()})" in other.stderr, other.stderr
        assert DocAnchor(settings, embedder=ModelNamedEmbedder()).delete_document(doc_id) > 0  # one process shares it
    gone = run_cli(["--data-dir", str(settings.data_dir), "list"])
    assert gone.returncode == 0 and doc_id not in gone.stdout


def test_reading_commands_without_a_server_load_neither_the_model_nor_torch(stored):
    data, doc_id = stored
    for args in (["list"], ["anchor", doc_id], ["read", doc_id, "--budget", "50"], ["status"]):
        out = subprocess.run([sys.executable, "-X", "importtime", "-m", "plugin.cli", "--data-dir", str(data), *args],
                             cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, (args, out.stderr[-2000:])
        imported = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
        assert "chromadb" in imported  # the check sees imports
        assert not {"torch", "sentence_transformers", "transformers"} & imported, args


def test_readme_documents_read_json_the_cursors_and_the_python_api():
    """Regression: the README did not document `read --json`, the `char:N` cursors or most of the Python API."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "`read --json`" in readme and "`char:N`" in readme
    python = readme.split("## Python", 1)[1].split("\n## ", 1)[0]
    for method in ("ingest_text", "ingest_bytes", "ingest_file", "replace", "delete_document", "read", "anchor",
                   "list_documents", "get_job", "wait_job", "reindex", "close", "forget_source", "status"):
        assert f"`{method}(" in python, method
        assert callable(getattr(DocAnchor, method)), method


def on_terminal(args: list[str], cwd: Path = REPO) -> tuple[int, str, str]:
    """Run the CLI with stderr on a 120-column pseudo-terminal: (exit status, stdout, what the terminal showed)."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "plugin.cli", *args], cwd=cwd, env=cli_env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    shown = b""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not data:
            break
        shown += data
    os.close(master)
    out = proc.stdout.read().decode()
    return proc.wait(timeout=600), out, shown.decode(errors="replace")


@pytest.mark.e2e
def test_ingest_shows_a_progress_bar_on_a_terminal_only(tmp_path):
    """Regression: no live progress in the CLI; now a bar of files and of the current file's chunks
    embedded on a terminal, and nothing in a pipe or with --quiet."""
    data = tmp_path / "data"
    texts = {name: f"# {name}\n\n" + f"The {name} paragraph talks about harbours and tides.\n\n" * 40
             for name in ("one", "two", "three")}
    for name, text in texts.items():
        (tmp_path / f"{name}.md").write_text(text)
    status, out, shown = on_terminal(["--data-dir", str(data), "ingest", str(tmp_path / "one.md")])
    assert status == 0 and out.startswith("ok doc_"), shown
    assert "1/1" in shown and "file" in shown and re.search(r"embedding \d+/\d+ chunks", shown), shown
    piped = run_cli(["--data-dir", str(data), "ingest", str(tmp_path / "two.md")])
    assert piped.returncode == 0 and piped.stdout.startswith("ok doc_")
    assert "chunks]" not in piped.stderr and "file/s" not in piped.stderr and "\r" not in piped.stderr
    status, out, shown = on_terminal(["--data-dir", str(data), "ingest", "--quiet", str(tmp_path / "three.md")])
    assert status == 0 and out == "" and shown == ""


def test_ctrl_c_during_ingest_says_what_was_stored_and_how_to_finish(tmp_path):
    """Regression: Ctrl-C during ``docanchor ingest`` printed only "Aborted!". Now it says how many
    files were stored and how many were not, and that running the same command again finishes
    the job (stored files are skipped as unchanged); the interrupted file leaves nothing behind.
    The PDF comes first, so a parse worker is alive when the terminal's SIGINT reaches the whole
    process group: it must not print a traceback of its own (the new-user trial saw one)."""
    import signal
    import threading

    folder = tmp_path / "notes"
    folder.mkdir()
    shutil.copy(REPO / "tests" / "fixtures" / "formats" / "typed.pdf", folder / "a-typed.pdf")
    for i in range(119):
        words = " ".join(f"note{i}word{j}" for j in range(60))
        (folder / f"note{i:03}.md").write_text(f"# Note {i}\n\n{words}\n")
    env = cli_env(DOCANCHOR_DATA_DIR=str(tmp_path / "data"), PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "plugin.cli", "ingest", str(folder)]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own process group, as a terminal's foreground job
    first_ok = threading.Event()
    lines: list[str] = []

    def read_stdout() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            lines.append(line)
            if line.startswith("ok doc_") and "a-typed.pdf" in line:
                first_ok.set()

    reader = threading.Thread(target=read_stdout, daemon=True)
    reader.start()
    assert first_ok.wait(BACKSTOP_S), "no file was stored before the backstop"
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the whole process group
    stderr = proc.stderr.read()  # type: ignore[union-attr]
    assert proc.wait(BACKSTOP_S) == 130, stderr
    reader.join(BACKSTOP_S)
    stored = sum(line.startswith("ok doc_") for line in lines)
    assert "Aborted!" not in stderr and "Traceback" not in stderr, stderr
    said = re.search(r"interrupted: (\d+) of 120 files stored, (\d+) not ingested", stderr)
    assert said, stderr
    assert int(said[1]) == stored and int(said[1]) + int(said[2]) == 120
    assert "run the same command again" in stderr

    again = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=BACKSTOP_S)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[-1].startswith(f"120 files: {120 - stored} ok, {stored} skipped (unchanged)")
    check = subprocess.run([sys.executable, "-m", "plugin.cli", "check"], cwd=REPO, env=env, capture_output=True,
                           text=True, timeout=BACKSTOP_S)
    assert check.returncode == 0, check.stdout + check.stderr


def _lexical_doc_ids(data: Path) -> set[str]:
    """Documents the namespace's lexical index holds, read without opening (and so mending) it."""
    from docanchor.lexical import LexicalIndex

    return set(LexicalIndex(Settings(data_dir=data), store=None).doc_counts("default"))


def test_cli_deletes_replacements_and_sync_removals_leave_no_lexical_repair(tmp_path):
    """Regression: after `docanchor delete`, a replacement or an `ingest --sync` removal, the
    command itself logged 'lexical index ... repaired: 1 document(s) without a record removed'
    (the index was first opened, and checked against the records, after the record was gone)."""
    folder = tmp_path / "notes"
    folder.mkdir()
    for name in ("alpha", "beta", "gamma"):
        (folder / f"{name}.md").write_text(f"# {name.title()}\n\nThe {name} note talks about orchards.\n")
    data = tmp_path / "data"
    with DocAnchor(Settings(data_dir=data), embedder=ModelNamedEmbedder()) as da:
        ids = {d.title: d.doc_id for d in (da.ingest_file(p).record for p in sorted(folder.iterdir()))}
    assert _lexical_doc_ids(data) == set(ids.values())

    deleted = run_cli(["--data-dir", str(data), "delete", ids["Alpha"]])
    assert deleted.returncode == 0, deleted.stderr
    (folder / "alpha.md").unlink()
    (folder / "beta.md").unlink()
    (folder / "gamma.md").write_text("# Gamma\n\nThe gamma note now talks about lighthouses.\n")
    synced = run_cli(["--data-dir", str(data), "ingest", "--sync", "--yes", str(folder)])
    assert synced.returncode == 0, synced.stderr
    for proc in (deleted, synced):
        assert "repaired" not in proc.stderr and "WARNING" not in proc.stderr, proc.stderr

    left = _lexical_doc_ids(data)
    assert not left & set(ids.values())  # alpha deleted, beta removed by --sync, gamma replaced
    check = run_cli(["--data-dir", str(data), "check"])
    assert check.returncode == 0 and "WARNING" not in check.stderr, check.stdout + check.stderr
    with DocAnchor(Settings(data_dir=data), embedder=ModelNamedEmbedder()) as da:
        assert {d.title for d in da.list_documents()} == {"Gamma"}
        assert left == {d.doc_id for d in da.list_documents()}


def test_context_errors_speak_the_command_line(tmp_path):
    """Before: `docanchor context assemble|compact` answered in HTTP's words -- an unknown model "send
    context_limit ... with the request", a broken FILE.json "The request body is not valid JSON",
    --context-limit 10 "'context_limit' must be ..."."""
    conversation = [{"role": "user", "content": "Where is the tanker Kestrel?"}]
    unknown, broken, fine = tmp_path / "unknown.json", tmp_path / "broken.json", tmp_path / "fine.json"
    unknown.write_text(json.dumps({"model": "acme-brainstorm-7", "messages": conversation}), encoding="utf-8")
    broken.write_text('{"model": "gpt-4o",\n "messages": [\n  {"role": "user" "content": "Kestrel?"}]}\n', encoding="utf-8")
    fine.write_text(json.dumps({"model": "gpt-4o", "messages": conversation}), encoding="utf-8")
    base = ["--data-dir", str(tmp_path / "data"), "context"]
    for route in ("assemble", "compact"):
        told = run_cli([*base, route, str(unknown), "--explain-only"])
        assert told.returncode == 1 and told.stderr.startswith("error unknown_model: "), told.stderr
        assert "pass --context-limit TOKENS" in told.stderr and "or context_limit in FILE.json" in told.stderr
        assert "send " not in told.stderr and "request" not in told.stderr, told.stderr
        bad = run_cli([*base, route, str(broken), "--explain-only"])
        assert bad.returncode == 1 and f"{broken} is not valid JSON" in bad.stderr, bad.stderr
        assert "line 3 column 19" in bad.stderr and "request body" not in bad.stderr, bad.stderr
        small = run_cli([*base, route, str(fine), "--context-limit", "10", "--explain-only"])
        assert small.returncode == 1, small.stderr
        assert "--context-limit must be a whole number of tokens from 2,048" in small.stderr, small.stderr
        assert "'context_limit'" not in small.stderr


def test_a_context_file_that_is_not_utf8_is_invalid_json_naming_the_file(tmp_path):
    """Before: a FILE.json in Latin-1 or UTF-16, or binary bytes, ended `docanchor context` with
    'error internal' (the CLI decoded the file as UTF-8 before the JSON check saw it)."""
    latin1, utf16, binary = tmp_path / "latin1.json", tmp_path / "utf16.json", tmp_path / "binary.json"
    body = '{"model": "gpt-4o", "messages": [{"role": "user", "content": "café"}]}'
    latin1.write_bytes(body.encode("latin-1"))
    utf16.write_bytes(body.encode("utf-16"))
    binary.write_bytes(b"\xff\xfe{\x00\x80")
    for route in ("assemble", "compact"):
        for path in (latin1, utf16, binary):
            told = run_cli(["--data-dir", str(tmp_path / "data"), "context", route, str(path), "--explain-only"])
            assert told.returncode == 1 and told.stderr.startswith("error invalid_json: "), told.stderr
            assert f"{path} is not UTF-8 text" in told.stderr, told.stderr
    with_bom = tmp_path / "bom.json"
    with_bom.write_bytes(b"\xef\xbb\xbf" + body.encode("utf-8"))
    fine = run_cli(["--data-dir", str(tmp_path / "data"), "context", "assemble", str(with_bom), "--explain-only"])
    assert fine.returncode == 0, fine.stderr


def test_a_path_too_long_fails_alone_in_a_bulk_ingest(tmp_path):
    """Before: `docanchor ingest <4,210-character path> note.txt` (or a 300-character file name)
    ended with 'error internal' and stored nothing: the CLI's own is_dir() check raised 'File name
    too long' before any file was read. Now each gets its own error line and note.txt is stored."""
    note = tmp_path / "note.txt"
    note.write_text("The tanker Kestrel was logged at berth 12 on Tuesday.", encoding="utf-8")
    over_limit = "/" + "/".join(["d" * 200] * 21)  # 4,221 characters
    long_name = tmp_path / ("n" * 300 + ".txt")
    data = ["--data-dir", str(tmp_path / "data")]
    told = run_cli([*data, "ingest", over_limit, str(long_name), str(note)])
    assert told.returncode == 1, told.stdout + told.stderr
    lines = told.stdout.splitlines()
    assert any(ln.startswith("error invalid_argument: ") and ln.endswith(f"[{over_limit}]") for ln in lines), lines
    assert any(ln.startswith("error ") and "File name too long" in ln and str(long_name) in ln for ln in lines), lines
    assert "error internal" not in told.stdout + told.stderr
    listed = run_cli([*data, "list"])
    assert listed.returncode == 0 and "note" in listed.stdout, listed.stdout


def test_the_next_read_line_names_the_namespace_the_command_named(tmp_path):
    """Before: `docanchor --namespace facts read DOC` ended "next: docanchor read DOC --from ..."
    without the namespace, so the command it printed answered document_not_found (new-user trial)."""
    import shlex

    note = tmp_path / "note.md"
    note.write_text("\n\n".join(f"Entry {i}: the tanker Kestrel was logged at berth {i} on Tuesday morning."
                                for i in range(60)), encoding="utf-8")
    data = ["--data-dir", str(tmp_path / "data")]
    stored = run_cli([*data, "--namespace", "facts", "ingest", str(note), "--json"])
    assert stored.returncode == 0, stored.stderr
    doc_id = json.loads(stored.stdout.splitlines()[0])["doc_id"]
    first = run_cli([*data, "--namespace", "facts", "read", doc_id, "--budget", "60"])
    nxt = next(ln for ln in first.stderr.splitlines() if ln.startswith("next: "))
    assert "--namespace facts" in nxt, nxt
    args = shlex.split(nxt.removeprefix("next: "))
    assert args[0] == "docanchor"
    followed = run_cli([*data, *args[1:]])
    assert followed.returncode == 0 and "Entry" in followed.stdout, followed.stderr


def test_an_empty_namespace_is_refused_as_http_and_mcp_refuse_it(stored, tmp_path):
    """Before: `docanchor --namespace "" list` listed the default namespace, and the Python API took
    namespace="" for the default too, where HTTP and MCP answer invalid_namespace
    (docanchor.access.check_namespace, the one rule; new-user trial)."""
    from docanchor.errors import InvalidRequest

    data, doc_id = stored
    for name, args, told in (("", ["list"], "The namespace is blank (empty or only whitespace); name one"),
                             # before: "A namespace must be 1 to 200 characters" for blanks too (new-user trial)
                             ("   ", ["anchor", doc_id], "The namespace is blank (empty or only whitespace); name one"),
                             ("\t", ["list"], "The namespace is blank (empty or only whitespace); name one"),
                             ("n" * 201, ["list"], "The namespace is 201 characters long; a namespace is at most 200")):
        out = run_cli(["--data-dir", str(data), "--namespace", name, *args])
        # a bad option value is a usage error: exit status 2, as for --budget 0 (before: 1)
        assert out.returncode == 2 and out.stdout == "", (name, args, out.returncode, out.stdout)
        assert out.stderr.startswith(f"error invalid_namespace: {told}"), out.stderr
    with DocAnchor(Settings(data_dir=data), embedder=ModelNamedEmbedder()) as da:
        with pytest.raises(InvalidRequest) as refused:
            da.list_documents(namespace="")
        assert refused.value.code == "invalid_namespace"
        assert [d.doc_id for d in da.list_documents()] == [doc_id]  # nothing lost


def test_a_dry_run_prints_docanchors_lines_only_and_parser_warnings_go_to_the_log(tmp_path):
    """Before: `docanchor ingest --dry-run FILE.pdf` printed pypdf's own "WARNING pypdf._reader:
    incorrect startxref pointer(1)" lines among DocAnchor's (the real ingest parses in a worker
    whose parser loggers are quiet, ingest.sandbox.QUIET_LOGGERS); with -v they are logged."""
    from tests.pdf_writer import PdfWriter, literal

    pdf = PdfWriter()
    pdf.page(b"BT /F1 12 Tf 72 700 Td " + literal("A page of the damaged report.") + b" Tj ET", {"F1": pdf.helvetica()})
    good = pdf.build()
    head, tail = good.rsplit(b"startxref\n", 1)
    pointer, end = tail.split(b"\n", 1)
    damaged = tmp_path / "damaged.pdf"  # its startxref points 7 bytes past the table: pypdf warns, then finds it
    damaged.write_bytes(head + b"startxref\n%d\n" % (int(pointer) + 7) + end)
    data = ["--data-dir", str(tmp_path / "data")]
    out = run_cli([*data, "ingest", "--dry-run", str(damaged)])
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("would add [") and "pypdf" not in out.stdout + out.stderr, (out.stdout, out.stderr)
    logged = run_cli([*data, "-v", "ingest", "--dry-run", str(damaged)])
    assert "WARNING pypdf" in logged.stderr and "startxref" in logged.stderr, logged.stderr


def test_a_bad_context_limit_in_the_file_is_reported_as_the_files_field(tmp_path):
    """Before: a bad context_limit inside FILE.json was reported as "--context-limit must be ...",
    an option the command did not get (new-user trial). It names the file and the field; the
    option, when given, is still named as the option."""
    request = tmp_path / "ctx.json"
    request.write_text(json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "Hello."}],
                                   "context_limit": 12}), encoding="utf-8")
    data = ["--data-dir", str(tmp_path / "data")]
    for route in ("assemble", "compact"):
        out = run_cli([*data, "context", route, str(request), "--explain-only"])
        assert out.returncode == 1 and out.stdout == "", out.stdout
        assert out.stderr == (f"error invalid_argument: {request}'s context_limit must be a whole number of tokens "
                              "from 2,048 to 10,000,000; got 12.\n"), out.stderr
    option = run_cli([*data, "context", "assemble", str(request), "--explain-only", "--context-limit", "7"])
    assert option.stderr.startswith("error invalid_argument: --context-limit must be"), option.stderr


def test_read_with_a_budget_too_small_for_any_text_is_an_error(stored):
    """Before: `docanchor read DOC --budget 1` exited 0, printed the "too small" sentence and a
    "next: ... --from char:0" line that reads nothing more (new-user trial, issue 15). Now it is an
    error with a code and the sentence naming the least budget, and nothing on stdout."""
    data, doc_id = stored
    out = run_cli(["--data-dir", str(data), "read", doc_id, "--budget", "1"])
    assert out.returncode == 1 and out.stdout == "", (out.returncode, out.stdout)
    assert out.stderr.startswith("error budget_too_small: The budget of 1 token is too small"), out.stderr
    assert "--budget" in out.stderr and "next:" not in out.stderr, out.stderr
    fits = run_cli(["--data-dir", str(data), "read", doc_id, "--budget", "200"])
    assert fits.returncode == 0 and fits.stdout.strip(), fits.stderr


def test_docanchor_namespace_names_the_namespace_locally_as_through_a_server(tmp_path):
    """Before: with DOCANCHOR_NAMESPACE=team and no --namespace, a command through a server sent
    the namespace (the server's answers named it: More line, read-on call) but one on the data dir
    itself did not, so `anchor` printed a More line that reads the default namespace (new-user
    trial, issue 15). One rule now: the variable names the namespace as --namespace does."""
    data = tmp_path / "data"
    with DocAnchor(Settings(data_dir=data, namespace="team"), embedder=ModelNamedEmbedder()) as da:
        doc_id = da.ingest_file(OWNERSHIP).record.doc_id
    env = cli_env(DOCANCHOR_NAMESPACE="team")
    anchor = run_cli(["--data-dir", str(data), "anchor", doc_id], env=env)
    assert anchor.returncode == 0, anchor.stderr
    more = [line for line in anchor.stdout.splitlines() if line.startswith("More:")]
    assert more and 'namespace="team"' in more[0], anchor.stdout
    read = run_cli(["--data-dir", str(data), "read", doc_id, "--budget", "200"], env=env)
    assert read.returncode == 0 and "next: docanchor --namespace team read" in read.stderr, read.stderr


def json_error(out: subprocess.CompletedProcess) -> dict:
    """The one JSON error object a ``--json`` command printed on stderr (nothing on stdout)."""
    assert out.stdout == "", out.stdout
    body = json.loads(out.stderr)
    assert set(body) == {"error"} and {"code", "message", "details"} <= set(body["error"]), body
    return body["error"]


def test_with_json_every_error_is_one_json_object_on_stderr_with_the_same_exit_status(stored, tmp_path):
    """Before: `docanchor read DOC --budget 1 --json` exited 0 and printed the empty window, where
    the command without --json exits 1 with budget_too_small; and every other error of a --json
    command was the text line `error CODE: ...` (new-user trial, issue 15). Now, with --json, an
    error is the HTTP API's error body on stderr, with the exit status the command has without it."""
    data, doc_id = stored
    at = ["--data-dir", str(data)]
    cases = (([*at, "read", doc_id, "--budget", "1"], "budget_too_small", 1),
             ([*at, "read", "doc_missing"], "document_not_found", 1),
             ([*at, "--namespace", "", "list"], "invalid_namespace", 2),  # before: 1, as if not a usage error
             ([*at, "search", "ownership", "--budget", "0"], "invalid_argument", 2),
             # before: exit status 1, the library's budget error (new-user trial): a usage error as --budget 0 is
             ([*at, "search", "ownership", "--budget", "99999999"], "invalid_argument", 2),
             ([*at, "read", doc_id, "--budget", "1000001"], "invalid_argument", 2),
             ([*at, "search", "ownership", "--bogus"], "invalid_argument", 2),  # before: a text line with --json
             ([*at, "--bogus", "list"], "invalid_argument", 2),  # before: click's usage text (issue 15's trial)
             (["--data-dir", str(tmp_path / "empty"), "list"], "no_index", 1))
    for args, code, status in cases:
        text, out = run_cli(args), run_cli([*args, "--json"])
        assert text.returncode == out.returncode == status, (args, text.returncode, out.returncode, out.stderr)
        error = json_error(out)
        assert error["code"] == code, (args, error)
        # the same sentence as the text line; a usage error too (before: click's three-line usage text)
        assert text.stderr.startswith(f"error {code}: {error['message']}"), (text.stderr, error)
        if status == 2:
            assert len(text.stderr.splitlines()) == 1 and "Usage:" not in text.stderr, text.stderr
        if code == "budget_too_small":
            assert error["details"] == {"budget_tokens": 1} and "--budget" in error["message"], error


def test_a_bad_query_names_its_field_at_the_command_line_as_over_http(stored, tmp_path):
    """Before: `docanchor search "" --json` (and a query over the 4,000-character limit) gave
    ``details: {}`` where POST /v1/retrieve (a real server on a loopback port) gives
    ``{"field": "query"}`` (new-user trial, issue 15). Now both doors name the field."""
    from docanchor.settings import Settings
    from tests.live_server import serving_fake

    data, _ = stored
    with serving_fake(Settings(data_dir=tmp_path / "served")) as (base, _da):
        for query in ("", "x" * 4001):
            cli_error = json_error(run_cli(["--data-dir", str(data), "search", query, "--json"]))
            http_error = _http_error(f"{base}/v1/retrieve", {"query": query})
            assert cli_error["code"] == http_error["code"] == "invalid_argument", (cli_error, http_error)
            assert cli_error["details"] == http_error["details"] == {"field": "query"}, (cli_error, http_error)
            # one sentence (before: HTTP said "'query' must be a non-empty string (at most 4,000 characters)")
            assert cli_error["message"] == http_error["message"], (cli_error, http_error)


def _http_error(url: str, payload: dict) -> dict:
    """The error object a POST of ``payload`` (JSON) to ``url`` answers with (status 400)."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, data=json.dumps(payload).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=BACKSTOP_S)
    assert caught.value.code == 400
    return json.loads(caught.value.read())["error"]


def test_an_empty_docanchor_namespace_means_not_set(stored):
    """An empty environment variable is "unset" by convention: DOCANCHOR_NAMESPACE= (or blanks)
    leaves the namespace unnamed (the default), where --namespace "" is invalid_namespace
    (README, "Command line"); the read-on line then names no namespace."""
    data, doc_id = stored
    for empty in ("", "  "):
        listing = run_cli(["--data-dir", str(data), "list", "--json"], env=cli_env(DOCANCHOR_NAMESPACE=empty))
        assert listing.returncode == 0, listing.stderr
        assert [d["doc_id"] for d in json.loads(listing.stdout)] == [doc_id]
    read = run_cli(["--data-dir", str(data), "read", doc_id, "--budget", "100"], env=cli_env(DOCANCHOR_NAMESPACE=""))
    assert read.returncode == 0 and f"next: docanchor read {doc_id} --from" in read.stderr, read.stderr


def test_a_usage_error_under_json_names_its_parameter(stored, tmp_path):
    """Before: every usage error of a --json command gave ``"details": {}`` (`docanchor list --bogus
    --json`, `search x --budget 0 --json`, `read --json`), where the HTTP API names the field
    (new-user trial). Now ``details.field`` is the parameter: its name as the command passes it on,
    the HTTP API's field (``--budget`` is ``budget_tokens``, as POST /v1/retrieve names it, on a real
    server on a loopback port), or an unknown option as typed."""
    from tests.live_server import serving_fake

    data, doc_id = stored
    at = ["--data-dir", str(data)]
    cases = (([*at, "search", "ownership", "--budget", "0"], "budget_tokens"),
             ([*at, "search", "ownership", "--budget"], "budget_tokens"),  # the option's value is missing
             ([*at, "read", doc_id, "--budget", "x"], "budget_tokens"),
             ([*at, "read"], "doc_id"),
             ([*at, "search"], "query"),
             ([*at, "list", "--bogus"], "--bogus"),
             ([*at, "--namespace", "   ", "list"], "namespace"),
             ([*at, "read", doc_id, "--json", "--from"], "start"))  # --from's value is missing: read's start
    for args, field in cases:
        out = run_cli([*args, "--json"] if args[-1] != "--from" else args)
        assert out.returncode == 2, (args, out.returncode, out.stderr)
        assert json_error(out)["details"] == {"field": field}, (args, out.stderr)
    with serving_fake(Settings(data_dir=tmp_path / "served")) as (base, _da):
        http_error = _http_error(f"{base}/v1/retrieve", {"query": "ownership", "budget_tokens": 0})
    assert http_error["details"]["field"] == "budget_tokens", http_error


def test_an_extra_argument_and_a_fractional_budget_are_usage_errors_like_the_others(stored):
    """Before: `docanchor status --json extra` gave ``"details": {}`` where every other usage error
    names its parameter, and `search q --budget 1.5` printed click's "'1.5' is not a valid integer
    range" (and --budget 0 "0 is not in the range 1<=x<=1000000"), where the API says a budget is a
    whole number of tokens (plugin.api.check_budget, now the CLI's rule too; new-user trial)."""
    data, doc_id = stored
    at = ["--data-dir", str(data)]
    for args, field in (([*at, "status", "--json", "extra"], "extra"),
                        ([*at, "list", "extra", "more", "--json"], "extra")):
        out = run_cli(args)
        assert out.returncode == 2, (args, out.returncode, out.stderr)
        error = json_error(out)
        assert error["code"] == "invalid_argument" and error["details"] == {"field": field}, (args, error)
        assert "unexpected extra argument" in error["message"] and "--help`" in error["message"], error
    for budget, shown in (("1.5", "1.5"), ("0", "0"), ("lots", '"lots"'), ("2000001", "2000001")):
        out = run_cli([*at, "search", "ownership", "--budget", budget, "--json"])
        assert out.returncode == 2, (budget, out.returncode, out.stderr)
        error = json_error(out)
        assert error["code"] == "invalid_argument" and error["details"] == {"field": "budget_tokens"}, error
        assert error["message"] == f"--budget must be a whole number of tokens from 1 to 1,000,000; got {shown}.", error
    plain = run_cli([*at, "read", doc_id, "--budget", "1.5"])
    assert plain.returncode == 2 and plain.stderr == ("error invalid_argument: --budget must be a whole number of "
                                                      "tokens from 1 to 1,000,000; got 1.5.\n"), plain.stderr
    assert run_cli([*at, "read", doc_id, "--budget", "200.0"]).returncode == 0  # 200 as the API takes it


def test_an_error_built_from_sentences_has_a_full_stop_between_them(stored, tmp_path):
    """Before: `docanchor context assemble missing.json` said "...: No such file or directory See
    `docanchor context assemble --help`." and `read DOC extra` "Got unexpected extra argument (extra)
    See ...": a message another library wrote (the system's, click's) has no full stop, and the next
    sentence was glued to it (docanchor.errors.sentences now joins them)."""
    data, doc_id = stored
    missing = tmp_path / "missing.json"
    for args, glued in ((["context", "assemble", str(missing)], "No such file or directory. See `"),
                        (["read", doc_id, "extra"], "Got unexpected extra argument (extra). See `")):
        out = run_cli(["--data-dir", str(data), *args])
        assert out.returncode == 2, out.stderr
        assert glued in out.stderr and out.stderr.rstrip().endswith("--help`."), out.stderr


def test_a_zip_bomb_refusal_says_what_to_do(tmp_path):
    """Before: case a12 (../shared/cases/CASES.md: a DOCX whose image part expands 1,028:1) was told
    "... DocAnchor accepts at most 100:1. It may be a zip bomb." -- a guess, and no step to take
    (new-user trial). Now its sentence ends with what to do about a genuine file."""
    from tests.conftest import CASES

    out = run_cli(["--data-dir", str(tmp_path / "data"), "ingest", str(CASES / "a12_docx_zip_bomb_media.docx")])
    assert out.returncode == 1, out.stderr
    [line] = [line for line in out.stdout.splitlines() + out.stderr.splitlines() if line.startswith("error too_large")]
    assert "It may be a zip bomb; if the file is genuine, save it again with its large embedded media removed" in line
    assert line.endswith("and try that instead. [" + str(CASES / "a12_docx_zip_bomb_media.docx") + "]"), line


def test_serve_on_a_port_in_use_says_so_before_loading_the_model(tmp_path):
    """Before: the model loaded (seconds), then "error internal" (EADDRINUSE shown only with -v)."""
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        got = run_cli(["--data-dir", str(tmp_path / "data"), "serve", "--port", str(port)])
    finally:
        taken.close()
    assert got.returncode == 1, got.stderr
    assert f"error address_in_use: docanchor serve cannot listen on 127.0.0.1:{port}" in got.stderr, got.stderr
    assert "loading the embedding model" not in got.stderr, got.stderr


def test_refusals_of_files_say_ingest_at_the_command_line(tmp_path):
    """Before (trial of c4dec4b, defect 10): `docanchor ingest` of a password-protected PDF said
    "... and upload it again", of case a06 (a PDF decompression bomb) "upload a smaller or uncompressed
    file": the library's sentence names the HTTP door's verb. The sentence keeps its one place; the
    command line fills in its own verb (plugin.cli.app.cli_words), in the lines and in --json."""
    from tests.conftest import CASES

    folder = tmp_path / "bad"
    folder.mkdir()
    shutil.copy(CORPUS / "pdf" / "libreoffice-writer-password.pdf", folder / "locked.pdf")  # pdf_encrypted
    shutil.copy(CASES / "a06_pdf_flate_bomb.pdf", folder / "bomb.pdf")  # too_large
    (folder / "bom.txt").write_bytes(b"\xef\xbb\xbfhello \xff\xfe world")  # malformed: "save it as UTF-8 and ..."
    with zipfile.ZipFile(folder / "damaged.docx", "w") as z:  # malformed: "... save it again and re-upload it"
        z.writestr("[Content_Types].xml", '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
                   '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-'
                   'officedocument.wordprocessingml.document.main+xml"/></Types>')
        z.writestr("word/document.xml", "<w:document><w:body><w:p>unclosed")
    blob = tmp_path / "blob.bin"  # unsupported_type: "convert it to one of these and ..."
    blob.write_bytes(bytes(range(256)) * 8)
    data = ["--data-dir", str(tmp_path / "data")]
    codes = {"locked.pdf": "pdf_encrypted", "bomb.pdf": "too_large", "bom.txt": "malformed",
             "damaged.docx": "malformed", "blob.bin": "unsupported_type"}
    out = run_cli([*data, "ingest", str(folder), str(blob)])
    assert out.returncode == 1, out.stderr
    lines = {Path(line.rsplit(" [", 1)[1].rstrip("]")).name: line for line in out.stdout.splitlines()
             if line.startswith("error ")}
    assert sorted(lines) == sorted(codes), out.stdout
    for name, line in lines.items():
        assert line.startswith(f"error {codes[name]}: "), line
        assert "upload" not in line.lower() and "ingest" in line, line
    assert "and ingest it again" in lines["locked.pdf"] and "ingest a smaller" in lines["bomb.pdf"], lines
    as_json = run_cli([*data, "ingest", "--json", str(folder / "locked.pdf"), str(folder / "bomb.pdf")])
    messages = [json.loads(line)["error"]["message"] for line in as_json.stdout.splitlines()]
    assert len(messages) == 2 and all("upload" not in m and "ingest" in m for m in messages), as_json.stdout


@pytest.mark.e2e
def test_the_first_query_on_a_machine_says_it_prepares_the_query_encoder(stored, tmp_path):
    """Before (trial of c4dec4b, defect 11): the first `docanchor search` on a machine paused ~13 s
    (the model's conversion to ONNX, docanchor.onnx_query) with nothing on the terminal. Now one
    line on stderr says what it waits for, once: the next query loads the conversion and says nothing."""
    data, _ = stored
    cache = tmp_path / "model-cache"  # DOCANCHOR_MODEL_CACHE_DIR without a conversion: a new machine
    env = cli_env(DOCANCHOR_MODEL_CACHE_DIR=str(cache))
    search = ["--data-dir", str(data), "search", "What is ownership?", "--budget", "300"]
    first = run_cli(search, env=env)
    assert first.returncode == 0, first.stderr
    said = [line for line in first.stderr.splitlines() if "query encoder" in line]
    assert len(said) == 1 and said[0].startswith("preparing the query encoder, once per machine: "), first.stderr
    assert str(cache) in said[0] and [p.suffix for p in cache.iterdir()] == [".onnx"], (said, list(cache.iterdir()))
    again = run_cli(search, env=env)
    assert again.returncode == 0 and "query encoder" not in again.stderr, again.stderr
