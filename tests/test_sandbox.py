"""The parse sandbox: wall-clock kill, memory cap, errors crossing the process boundary as the
same class, crash handling, worker replacement, concurrency and worker reuse. Targets are standard
library functions (``time:sleep``, ``builtins:bytearray`` ...) so no test-only module is needed."""

from __future__ import annotations

import threading
import time

import pytest

from docanchor.errors import DocAnchorError, DocumentError, TooLarge
from ingest import parsers
from ingest.sandbox import Sandbox, run_sandboxed
from tests.conftest import CASES, CORPUS
from tests.waiting import BACKSTOP_S

STALL_LIMIT_S = 10.0
"""The limit of :func:`stalling`: short for a call that sleeps :data:`BACKSTOP_S`, long for a
call that answers at once even on a busy machine (how fast the limit fires is a bench figure)."""


@pytest.fixture
def sandbox():
    """Limits that only a hang reaches: every call here answers, however busy the machine."""
    box = Sandbox(timeout_s=BACKSTOP_S, memory_bytes=1024**3, max_workers=2)
    yield box
    box.close()


@pytest.fixture
def stalling():
    box = Sandbox(timeout_s=STALL_LIMIT_S, memory_bytes=1024**3, max_workers=2)
    yield box
    box.close()


def test_result_comes_back(sandbox):
    assert sandbox.run("builtins:len", b"abcd") == 4
    assert sandbox.run("builtins:sorted", [3, 1, 2]) == [1, 2, 3]


def test_timeout_kills_worker_and_pool_recovers(stalling):
    started = time.monotonic()
    with pytest.raises(DocumentError) as info:
        stalling.run("time:sleep", BACKSTOP_S)
    elapsed = time.monotonic() - started
    assert info.value.code == "parse_timeout" and info.value.http_status == 422
    assert elapsed >= STALL_LIMIT_S - 0.1  # never before its limit (a busy machine only adds)
    assert f"{STALL_LIMIT_S:g} seconds" in info.value.message
    assert stalling.run("builtins:len", b"ok") == 2  # a fresh worker answers


def test_memory_cap_gives_too_large(sandbox):
    with pytest.raises(TooLarge) as info:
        sandbox.run("builtins:bytearray", 3 * 1024**3)
    assert info.value.code == "too_large" and info.value.http_status == 413
    assert sandbox.run("builtins:len", b"ok") == 2


def test_domain_errors_arrive_as_same_class_code_message():
    data = (CORPUS / "pdf" / "libreoffice-writer-password.pdf").read_bytes()
    with pytest.raises(DocumentError) as info:
        run_sandboxed("ingest.parsers.pdf:parse_pdf", data, "p.pdf", timeout_s=BACKSTOP_S, memory_bytes=2 * 1024**3)
    assert type(info.value) is DocumentError
    assert info.value.code == "pdf_encrypted"
    assert "password" in info.value.message

    data = (CORPUS / "pdf" / "175.pdf").read_bytes()
    with pytest.raises(DocumentError) as info:
        run_sandboxed("ingest.parsers.pdf:parse_pdf", data, "s.pdf", timeout_s=BACKSTOP_S, memory_bytes=2 * 1024**3)
    assert info.value.code == "no_text_layer" and info.value.details == {"n_pages": 2}


def test_unexpected_exception_is_malformed_without_internals(sandbox):
    with pytest.raises(DocumentError) as info:
        sandbox.run("builtins:int", "not a number")
    assert info.value.code == "malformed"
    assert "ValueError" not in info.value.message and "int()" not in info.value.message


def test_dead_worker_is_parse_crashed_and_replaced(sandbox):
    with pytest.raises(DocumentError) as info:
        sandbox.run("os:_exit", 3)
    assert info.value.code == "parse_crashed"
    assert sandbox.run("builtins:len", b"abc") == 3


def test_other_calls_served_while_one_stalls(stalling):
    errors: list[DocAnchorError] = []

    def stall():
        try:
            stalling.run("time:sleep", BACKSTOP_S)
        except DocAnchorError as exc:
            errors.append(exc)

    thread = threading.Thread(target=stall)
    thread.start()
    time.sleep(0.2)  # only orders the two calls; the check below holds in either order
    assert stalling.run("builtins:len", b"abcdef") == 6
    assert thread.is_alive() and not errors  # answered while the other call is still stalled
    thread.join(BACKSTOP_S)
    assert errors and errors[0].code == "parse_timeout"


def test_workers_are_reused(sandbox):
    """One worker answers call after call (what keeps the cost per call small; that cost is a
    figure of bench/time_targets.py)."""
    assert len({sandbox.run("os:getpid") for _ in range(50)}) == 1


def test_parse_routes_pdf_through_the_sandbox_with_documented_limits():
    assert parsers.SANDBOXED >= {"pdf", "docx"}
    assert parsers.PARSE_TIMEOUT_S == 60.0 and parsers.PARSE_MEMORY_BYTES == 2 * 1024**3
    parsed = parsers.parse("pdf", (CASES / "a05_pdf_encrypted_empty_password_aes256.pdf").read_bytes(), "a05.pdf")
    assert "GANNET-1505" in parsed.text and parsed.blocks[0].page == 1


def test_parse_routes_docx_through_the_sandbox():
    with pytest.raises(TooLarge) as info:
        parsers.parse("docx", (CASES / "a12_docx_zip_bomb_media.docx").read_bytes(), "a12.docx")
    assert info.value.code == "too_large"


def test_bad_limits_are_refused():
    with pytest.raises(ValueError, match="timeout_s"):
        Sandbox(timeout_s=0, memory_bytes=None)


def test_an_unguarded_script_is_not_run_again_by_the_workers(tmp_path):
    """A user's script without ``if __name__ == "__main__":`` ingests a PDF; its body runs once."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    script = tmp_path / "unguarded.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(repo)!r})\n"
        "from ingest.parsers import parse\n"
        "print('BODY')\n"
        f"data = open({str(repo / '..' / 'shared' / 'corpus' / 'pdf' / 'dmca.pdf')!r}, 'rb').read()\n"
        "print(len(parse('pdf', data, 'dmca.pdf').text) > 1000)\n"
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=BACKSTOP_S,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["BODY", "True"]
