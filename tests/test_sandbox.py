"""The parse sandbox: CPU-time limit and wall-clock backstop, memory cap, errors crossing the
process boundary as the same class, crash handling, worker replacement and reuse, concurrency.
Targets are standard library functions (``time:sleep``, ``builtins:bytearray`` ...) and
``tests/sandbox_targets.py``. No assertion measures time: limits are shown by which of two
workloads (burning CPU, sleeping) is stopped."""

from __future__ import annotations

import threading

import pytest

from docanchor.errors import ConfigError, DocAnchorError, DocumentError, TooLarge
from docanchor.settings import Settings
from ingest import parsers
from ingest.sandbox import Sandbox, _out_of_memory, run_sandboxed
from tests.conftest import CASES, CORPUS
from tests.waiting import BACKSTOP_S

STALL_LIMIT_S = 10.0
"""The limit of :func:`stalling`: short for a call that sleeps :data:`BACKSTOP_S`, long for a
call that answers at once even on a busy machine (how fast the limit fires is a bench figure)."""


@pytest.fixture
def sandbox():
    """Limits that only a hang reaches: every call here answers, however busy the machine."""
    box = Sandbox(cpu_s=BACKSTOP_S, wall_s=BACKSTOP_S, memory_bytes=1024**3, max_workers=2)
    yield box
    box.close()


@pytest.fixture
def stalling():
    """A wall-clock backstop that a sleeping call reaches long before :data:`BACKSTOP_S`."""
    box = Sandbox(cpu_s=STALL_LIMIT_S, wall_s=STALL_LIMIT_S, memory_bytes=1024**3, max_workers=2)
    yield box
    box.close()


def test_result_comes_back(sandbox):
    assert sandbox.run("builtins:len", b"abcd") == 4
    assert sandbox.run("builtins:sorted", [3, 1, 2]) == [1, 2, 3]


def test_wall_clock_backstop_kills_a_stalled_worker_and_says_which_limit(stalling):
    with pytest.raises(DocumentError) as info:
        stalling.run("time:sleep", BACKSTOP_S)  # uses no CPU: only the wall-clock backstop can stop it
    err = info.value
    assert err.code == "parse_timeout" and err.http_status == 422
    assert err.details == {"limit": "wall", "limit_s": STALL_LIMIT_S, "setting": "DOCANCHOR_PARSE_WALL_S"}
    assert f"{STALL_LIMIT_S:g} seconds of wall-clock time" in err.message and "DOCANCHOR_PARSE_WALL_S" in err.message
    assert "damaged" not in err.message
    assert stalling.run("builtins:len", b"ok") == 2  # a fresh worker answers


def test_cpu_limit_stops_a_parser_that_burns_cpu_and_says_which_limit():
    box = Sandbox(cpu_s=1.0, wall_s=BACKSTOP_S, memory_bytes=None, max_workers=1)
    try:
        with pytest.raises(DocumentError) as info:
            box.run("tests.sandbox_targets:burn_cpu", 300.0)  # would run 5 minutes of CPU
        err = info.value
        assert err.code == "parse_cpu_limit" and err.http_status == 422
        assert err.details == {"limit": "cpu", "limit_s": 1.0, "setting": "DOCANCHOR_PARSE_CPU_S"}
        assert "1 seconds of CPU time" in err.message and "DOCANCHOR_PARSE_CPU_S" in err.message
        assert "damaged" not in err.message
        assert box.run("builtins:len", b"ok") == 2  # a fresh worker answers
    finally:
        box.close()


def test_waiting_is_not_cpu_time_and_each_call_gets_its_own_allowance():
    box = Sandbox(cpu_s=1.0, wall_s=BACKSTOP_S, memory_bytes=None, max_workers=1)
    try:
        assert box.run("time:sleep", 2.5) is None  # longer than cpu_s, but asleep
        pids = {box.run("tests.sandbox_targets:burn_cpu", 0.6) for _ in range(3)}  # 1.8 s of CPU in all
        assert len(pids) == 1  # one worker served the three calls
    finally:
        box.close()


def test_memory_cap_gives_too_large_and_says_which_limit(sandbox):
    with pytest.raises(TooLarge) as info:
        sandbox.run("builtins:bytearray", 3 * 1024**3)
    err = info.value
    assert err.code == "too_large" and err.http_status == 413
    assert err.details == {"limit": "memory", "memory_bytes": 1024**3, "setting": "DOCANCHOR_PARSE_MEMORY_BYTES"}
    assert "1,024 MiB of memory" in err.message and "raise DOCANCHOR_PARSE_MEMORY_BYTES" in err.message
    assert "damaged" not in err.message and "smaller file" not in err.message
    assert sandbox.run("builtins:len", b"ok") == 2


def test_the_memory_cap_counts_memory_not_reserved_address_space(sandbox):
    """Before: the cap was RLIMIT_AS, so address space a worker only reserves (glibc's 64 MiB per
    thread arena, onnxruntime's thread pools) counted as memory, and OCR failed ordinary pages
    (std::bad_alloc) once the reservations of a busy worker crossed it."""
    pid = sandbox.run("tests.sandbox_targets:reserve_address_space", 2 * 1024**3)  # twice the 1 GiB cap
    assert sandbox.run("tests.sandbox_targets:allocate", 256 * 1024**2) == 256 * 1024**2
    assert sandbox.run("os:getpid") == pid  # the same worker, holding its reservation
    with pytest.raises(TooLarge):  # what it allocates still counts
        sandbox.run("builtins:bytearray", 3 * 1024**3)


def test_a_native_librarys_bad_alloc_is_the_memory_cap():
    """onnxruntime reports an allocation failure as ``RuntimeException(... std::bad_alloc)``
    (RapidOCR wraps it again): it is the memory cap, not a damaged file."""
    assert _out_of_memory(RuntimeError("Non-zero status code returned while running Conv node. Status Message: "
                                       "std::bad_alloc"))
    try:
        try:
            raise MemoryError
        except MemoryError as inner:
            raise ValueError("wrapped") from inner
    except ValueError as outer:
        assert _out_of_memory(outer)
    assert not _out_of_memory(ValueError("bad value"))


def test_domain_errors_arrive_as_same_class_code_message():
    data = (CORPUS / "pdf" / "libreoffice-writer-password.pdf").read_bytes()
    with pytest.raises(DocumentError) as info:
        run_sandboxed("ingest.parsers.pdf:parse_pdf", data, "p.pdf", cpu_s=BACKSTOP_S, wall_s=BACKSTOP_S,
                      memory_bytes=2 * 1024**3)
    assert type(info.value) is DocumentError
    assert info.value.code == "pdf_encrypted"
    assert "password" in info.value.message

    data = (CORPUS / "pdf" / "175.pdf").read_bytes()
    with pytest.raises(DocumentError) as info:
        run_sandboxed("ingest.parsers.pdf:parse_pdf", data, "s.pdf", cpu_s=BACKSTOP_S, wall_s=BACKSTOP_S,
                      memory_bytes=2 * 1024**3)
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
    started = threading.Event()

    def stall():
        started.set()
        try:
            stalling.run("time:sleep", BACKSTOP_S)
        except DocAnchorError as exc:
            errors.append(exc)

    thread = threading.Thread(target=stall)
    thread.start()
    started.wait(BACKSTOP_S)
    assert stalling.run("builtins:len", b"abcdef") == 6
    assert thread.is_alive() and not errors  # answered while the other call is still stalled
    thread.join(BACKSTOP_S)
    assert errors and errors[0].code == "parse_timeout"


def test_workers_are_reused(sandbox):
    """One worker answers call after call (what keeps the cost per call small; that cost is a
    figure of bench/time_targets.py)."""
    assert len({sandbox.run("os:getpid") for _ in range(50)}) == 1


def test_workers_collect_garbage_less_often_than_cpython_by_default(sandbox):
    """A worker's gen-0 collection threshold is WORKER_GC_THRESHOLD, not CPython's 700 (the CPU
    it saves is a figure of bench/parse_cpu.py); the parent process keeps its own."""
    import gc

    from ingest.sandbox import WORKER_GC_THRESHOLD

    assert WORKER_GC_THRESHOLD[0] > gc.get_threshold()[0]
    assert tuple(sandbox.run("gc:get_threshold")) == WORKER_GC_THRESHOLD


def test_parse_routes_pdf_through_the_sandbox_with_documented_limits():
    assert parsers.SANDBOXED >= {"pdf", "docx"}
    assert (Settings().parse_cpu_s, Settings().parse_wall_s) == (60.0, 600.0)  # docs/guide.md's table
    assert Settings().parse_memory_bytes == 2 * 1024**3
    parsed = parsers.parse("pdf", (CASES / "a05_pdf_encrypted_empty_password_aes256.pdf").read_bytes(), "a05.pdf")
    assert "GANNET-1505" in parsed.text and parsed.blocks[0].page == 1


def test_parse_routes_docx_through_the_sandbox():
    with pytest.raises(TooLarge) as info:
        parsers.parse("docx", (CASES / "a12_docx_zip_bomb_media.docx").read_bytes(), "a12.docx")
    assert info.value.code == "too_large"


def test_bad_limits_are_refused():
    with pytest.raises(ValueError, match="cpu_s"):
        Sandbox(cpu_s=0, wall_s=10, memory_bytes=None)
    with pytest.raises(ValueError, match="wall_s"):
        Sandbox(cpu_s=10, wall_s=5, memory_bytes=None)


def test_parse_limits_are_settings():
    s = Settings.from_env({"DOCANCHOR_PARSE_CPU_S": "90", "DOCANCHOR_PARSE_WALL_S": "900",
                           "DOCANCHOR_PARSE_MEMORY_BYTES": str(4 * 1024**3)})
    assert (s.parse_cpu_s, s.parse_wall_s, s.parse_memory_bytes) == (90.0, 900.0, 4 * 1024**3)
    with pytest.raises(ConfigError, match="DOCANCHOR_PARSE_MEMORY_BYTES"):
        Settings(parse_memory_bytes=1024**2)
    assert Settings().parse_wall_s >= 10 * Settings().parse_cpu_s  # the wall clock is only a backstop
    with pytest.raises(ConfigError, match="DOCANCHOR_PARSE_WALL_S"):
        Settings(parse_cpu_s=60, parse_wall_s=30)
    with pytest.raises(ConfigError, match="DOCANCHOR_PARSE_CPU_S"):
        Settings(parse_cpu_s=0)


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
