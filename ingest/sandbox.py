"""Run a parse function in a child process under a CPU-time limit and a memory cap.

A hostile file (a decompression bomb, a cyclic object graph, a pathological content stream)
must never stall a request thread or exhaust the server. :class:`Sandbox` keeps a small pool
of worker processes; each call sends ``(target, args)`` to an idle worker and waits:

- the call may use ``cpu_s`` seconds of the worker's CPU time (``RLIMIT_CPU``, set in the child
  before each call to the CPU time it has used so far plus ``cpu_s``; the kernel stops the worker
  with ``SIGXCPU`` past it) -> the worker is replaced and ``DocumentError(code="parse_cpu_limit")``
  is raised. Time spent waiting for a busy machine is not CPU time, so load never fails a file;
- more than ``wall_s`` seconds of wall clock (a backstop, far above ``cpu_s``, for a parser that
  stalls without using CPU) -> the worker is killed and replaced, and
  ``DocumentError(code="parse_timeout")`` is raised. Both messages name the limit that was
  reached and the setting that raises it; neither calls the file damaged;
- the worker runs under ``RLIMIT_DATA = memory_bytes`` (set in the child with
  :func:`resource.setrlimit`): the memory it allocates (heap, anonymous mappings, thread
  stacks), not the address space it only reserves or maps from library files. A runaway
  allocation raises ``MemoryError`` there (a native library's ``std::bad_alloc`` counts the same,
  :func:`_out_of_memory`), which arrives as ``TooLarge(code="too_large")`` naming the limit and
  ``DOCANCHOR_PARSE_MEMORY_BYTES``; the worker is then replaced. Not ``RLIMIT_AS``: glibc reserves
  64 MiB of address space for each thread's malloc arena and onnxruntime runs a thread pool per
  OCR model, so an OCR worker's address space is far above its memory and moves with its threads'
  timing and the pages it read before: an address-space cap failed ordinary scanned pages on a
  busy machine;
- a :class:`~docanchor.errors.DocAnchorError` raised in the child arrives as the same class,
  with the same code, message and details;
- any other exception arrives as ``DocumentError(code="malformed")`` (the message never
  echoes internals; the child's exception type is logged);
- a worker that dies otherwise (signal, hard crash) -> ``DocumentError(code="parse_crashed")``.

Workers start through the ``forkserver`` context (``spawn`` where that is unavailable), never
plain ``fork``: forking a process that holds torch's and Chroma's threads can deadlock the
child. Workers are reused (the overhead per call is one pickle round trip, ~1 ms) and retired
after :data:`MAX_TASKS_PER_WORKER` calls. Where ``resource`` is missing (Windows) only the
wall-clock backstop applies.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import logging
import math
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
import traceback
import types
from importlib import import_module
from typing import Any

from docanchor.errors import DocAnchorError, DocumentError, TooLarge

log = logging.getLogger(__name__)

MAX_TASKS_PER_WORKER = 200
"""A worker is retired after this many calls, so slow leaks in parser libraries cannot grow."""
DEFAULT_MAX_WORKERS = max(1, min(4, os.cpu_count() or 1))
"""Parallel parses at most (callers beyond it wait for a free worker)."""
_START_METHOD = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"


WORKER_GC_THRESHOLD = (10_000, 10, 10)
"""Cyclic garbage collector thresholds of a worker (:func:`gc.set_threshold`: allocations before
a generation-0 collection, then collections before the next generation's). CPython's default
(700, 10, 10) runs a collection every 700 new container objects; a PDF parse allocates millions
of short-lived operands (pypdf, pdfminer.six) next to a large live object graph, so collections
cost much of a parse's CPU. Most garbage is freed by reference counting anyway; a larger first
threshold costs a few MB of not-yet-collected cycles (bench/parse_cpu.py measures both codes
with their worker's setting)."""
QUIET_LOGGERS = ("pypdf", "pdfminer", "fontTools", "docx", "PIL")
"""Parser libraries whose per-glyph warnings are silenced (ERROR and above only) in workers and,
unless it logs at DEBUG, in the command line (:func:`quiet_parsers`)."""


def quiet_parsers(level: int = logging.ERROR) -> None:
    """Let the loggers of :data:`QUIET_LOGGERS` pass only records of ``level`` and above (a
    ``logging`` level; ``logging.NOTSET`` lets them follow the root logger again). A damaged
    file's repair notes ("incorrect startxref pointer") are the parser's, not the user's: DocAnchor
    says in its own words what it could not read."""
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(level)


def _child_main(conn, memory_bytes: int | None, cpu_s: float | None = None) -> None:
    """Worker loop: set the memory cap, then answer ``(target, args)`` messages until EOF, each
    under a fresh CPU-time allowance of ``cpu_s`` seconds. SIGINT is ignored: Ctrl-C in a terminal
    signals the whole process group, and the parent decides (it ends the worker by closing ``conn``
    or killing it); a worker of its own would print a KeyboardInterrupt traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    quiet_parsers()
    gc.set_threshold(*WORKER_GC_THRESHOLD)
    _set_limit("RLIMIT_CORE", 0)  # a worker stopped by SIGXCPU must not write a core file
    if memory_bytes:
        _set_limit("RLIMIT_DATA", memory_bytes)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        if cpu_s:
            _set_limit("RLIMIT_CPU", math.ceil(_cpu_used() + cpu_s))
        target, args = message
        try:
            module, func = target.split(":")
            result = getattr(import_module(module), func)(*args)
            reply = ("ok", result)
        except DocAnchorError as exc:
            cls = type(exc)
            reply = ("error", (cls.__module__, cls.__qualname__, exc.code, exc.message, exc.details))
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, never re-raised here
            if _out_of_memory(exc):
                reply = ("memory", None)
            else:
                reply = ("crash", f"{type(exc).__name__}: {traceback.format_exc(limit=6)[-1500:]}")
        try:
            conn.send(reply)
        except MemoryError:
            conn.send(("memory", None))
        except Exception as exc:  # noqa: BLE001 - e.g. an unpicklable result
            conn.send(("crash", f"reply not sendable: {type(exc).__name__}"))


def _out_of_memory(exc: BaseException | None) -> bool:
    """Whether ``exc``, or an exception it was raised from, is an allocation failure: Python's
    ``MemoryError``, or C++'s ``std::bad_alloc`` re-raised by a native library as its own error
    (onnxruntime: ``RuntimeException`` "... Status Message: std::bad_alloc", which RapidOCR wraps
    in its ``ONNXRuntimeError``)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, MemoryError) or "std::bad_alloc" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _cpu_used() -> float:
    """CPU seconds (user + system) this process has used."""
    times = os.times()
    return times.user + times.system


def _set_limit(name: str, soft: int) -> None:
    """Set the soft limit ``resource.<name>`` (never above the hard limit; skipped where the
    platform has no such limit)."""
    try:
        import resource

        which = getattr(resource, name)
        _soft, hard = resource.getrlimit(which)
        resource.setrlimit(which, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
    except (ImportError, AttributeError, ValueError, OSError):  # pragma: no cover - non-Linux platforms
        pass


_main_lock = threading.Lock()


@contextlib.contextmanager
def _main_hidden():
    """Start a worker without it re-running the caller's ``__main__`` script.

    ``spawn`` and ``forkserver`` children normally import the parent's main script again, which
    runs an unguarded script (no ``if __name__ == "__main__":``) a second time inside the worker.
    A worker needs nothing from ``__main__`` (it imports parsers by module name), so while it
    starts, ``__main__`` is shown to multiprocessing as a module with no file.
    """
    main = sys.modules.get("__main__")
    with _main_lock:
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            yield
        finally:
            if main is not None:
                sys.modules["__main__"] = main


class _Worker:
    def __init__(self, ctx, memory_bytes: int | None, cpu_s: float | None) -> None:
        self.conn, child_conn = ctx.Pipe()
        self.process = ctx.Process(target=_child_main, args=(child_conn, memory_bytes, cpu_s), daemon=True,
                                   name="docanchor-parse")
        with _main_hidden():
            self.process.start()
        child_conn.close()
        self.tasks = 0

    def kill(self) -> None:
        try:
            self.process.kill()
            self.process.join(2)
        except Exception:  # noqa: BLE001 - already gone
            pass
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(None)
            self.process.join(1)
        except Exception:  # noqa: BLE001
            pass
        if self.process.is_alive():
            self.kill()
        else:
            self.conn.close()


class Sandbox:
    """A pool of parse workers with a CPU-time limit, a wall-clock backstop and a memory cap per call.

    Args:
        cpu_s: CPU seconds one call may use before its worker is stopped (whole seconds are
            enforced: ``RLIMIT_CPU`` counts in seconds, so the limit is rounded up).
        wall_s: wall-clock seconds one call may take before its worker is killed (at least
            ``cpu_s``).
        memory_bytes: memory cap of each worker process (``RLIMIT_DATA``: what it allocates), in
            bytes (``None``: no cap).
        max_workers: parallel calls at most; further callers wait for a free worker (that
            wait is not part of either limit).

    Raises:
        ValueError: a limit that is not above 0, or ``wall_s`` below ``cpu_s``.

    Thread-safe: the HTTP server calls it from many request threads.
    """

    def __init__(self, cpu_s: float, wall_s: float, memory_bytes: int | None,
                 max_workers: int = DEFAULT_MAX_WORKERS) -> None:
        if cpu_s <= 0 or wall_s < cpu_s:
            raise ValueError(f"need 0 < cpu_s <= wall_s (seconds), got cpu_s={cpu_s}, wall_s={wall_s}")
        self.cpu_s = cpu_s
        self.wall_s = wall_s
        self.memory_bytes = memory_bytes
        self._ctx = mp.get_context(_START_METHOD)
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max_workers)
        self._closed = False

    def run(self, target: str, *args: Any) -> Any:
        """Call ``target`` (``"package.module:function"``) with ``args`` in a worker.

        Returns:
            The function's return value (it must be picklable).

        Raises:
            DocumentError: ``parse_cpu_limit`` (over ``cpu_s`` of CPU time), ``parse_timeout``
                (over ``wall_s`` of wall clock), ``parse_crashed`` (the worker died),
                ``malformed`` (an unexpected exception in the parser), or the parser's own.
            TooLarge: the worker ran out of its ``memory_bytes``, or the parser raised it.
            DocAnchorError: whatever subclass the parser raised, rebuilt with the same code,
                message and details.
        """
        with self._slots:
            worker = self._take()
            started = time.monotonic()
            try:
                worker.conn.send((target, args))
                if not worker.conn.poll(self.wall_s):
                    worker.kill()
                    worker = None
                    raise self._over_limit("wall")
                kind, payload = worker.conn.recv()
                if kind in ("memory", "crash"):  # its heap may be in a bad state: replace it
                    worker.kill()
                    worker = None
            except (EOFError, OSError, BrokenPipeError) as exc:
                if worker is not None:
                    worker.process.join(5)
                    code = worker.process.exitcode
                    worker.kill()
                    worker = None
                    if code == -signal.SIGXCPU:
                        raise self._over_limit("cpu") from None
                    log.warning("parse worker died (exit code %s) after %.1f s", code, time.monotonic() - started)
                raise DocumentError(
                    "The parser stopped unexpectedly on this file; it may be damaged. Try a re-exported copy.",
                    code="parse_crashed",
                ) from exc
            finally:
                if worker is not None:
                    self._give_back(worker)
        return self._unpack(kind, payload)

    def _over_limit(self, which: str) -> DocumentError:
        """The error for a call stopped at its CPU (``cpu``) or wall-clock (``wall``) limit."""
        if which == "cpu":
            return DocumentError(
                f"Parsing the file used its limit of {self.cpu_s:g} seconds of CPU time (DOCANCHOR_PARSE_CPU_S) "
                "and was stopped. Very large or complex files can need more: raise DOCANCHOR_PARSE_CPU_S, or "
                "split the file.",
                code="parse_cpu_limit", limit="cpu", limit_s=self.cpu_s, setting="DOCANCHOR_PARSE_CPU_S",
            )
        return DocumentError(
            f"Parsing the file did not finish within {self.wall_s:g} seconds of wall-clock time "
            "(DOCANCHOR_PARSE_WALL_S) and was stopped; the machine may have been too busy, or the parser stalled. "
            "Try again later, or raise DOCANCHOR_PARSE_WALL_S.",
            code="parse_timeout", limit="wall", limit_s=self.wall_s, setting="DOCANCHOR_PARSE_WALL_S",
        )

    def _unpack(self, kind: str, payload: Any) -> Any:
        if kind == "ok":
            return payload
        if kind == "memory":
            raise TooLarge(
                f"Parsing the file needed more than its limit of {self._mib()} of memory "
                "(DOCANCHOR_PARSE_MEMORY_BYTES) and was stopped. Very large or complex files can need more: raise "
                "DOCANCHOR_PARSE_MEMORY_BYTES, or split the file.",
                code="too_large", limit="memory", memory_bytes=self.memory_bytes,
                setting="DOCANCHOR_PARSE_MEMORY_BYTES",
            )
        if kind == "error":
            raise _rebuild(*payload)
        log.warning("parser raised an unexpected exception in the worker: %s", payload)
        raise DocumentError("The file could not be parsed; it may be damaged. Try a re-exported copy.",
                            code="malformed")

    def _mib(self) -> str:
        return f"{(self.memory_bytes or 0) / 2**20:,.0f} MiB"

    def _take(self) -> _Worker:
        with self._lock:
            if self._closed:
                raise RuntimeError("the sandbox is closed")
            while self._idle:
                worker = self._idle.pop()
                if worker.process.is_alive():
                    worker.tasks += 1
                    return worker
                worker.kill()
        worker = _Worker(self._ctx, self.memory_bytes, self.cpu_s)
        worker.tasks = 1
        return worker

    def _give_back(self, worker: _Worker) -> None:
        if worker.tasks >= MAX_TASKS_PER_WORKER or not worker.process.is_alive():
            worker.stop()
            return
        with self._lock:
            if self._closed:
                worker.stop()
            else:
                self._idle.append(worker)

    def close(self) -> None:
        """Stop every idle worker; later calls raise ``RuntimeError``."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.stop()


def _rebuild(module: str, qualname: str, code: str, message: str, details: dict) -> DocAnchorError:
    """The child's DocAnchorError as the same class, code, message and details."""
    try:
        cls = getattr(import_module(module), qualname)
        if not (isinstance(cls, type) and issubclass(cls, DocAnchorError)):
            raise TypeError(qualname)
        return cls(message, code=code, **details)
    except Exception:  # noqa: BLE001 - unknown class: keep code and message on the root type
        return DocAnchorError(message, code=code, **details)


_pools: dict[tuple[str, float, float, int | None], Sandbox] = {}
_pools_lock = threading.Lock()


def run_sandboxed(target: str, *args: Any, cpu_s: float, wall_s: float, memory_bytes: int | None,
                  pool: str = "parse") -> Any:
    """:meth:`Sandbox.run` on a shared pool named ``pool`` with these limits (created on first
    use, closed at exit); calls of different pools never share a worker (OCR's workers load
    models that parse workers should not carry)."""
    key = (pool, float(cpu_s), float(wall_s), memory_bytes)
    with _pools_lock:
        box = _pools.get(key)
        if box is None:
            box = _pools[key] = Sandbox(cpu_s, wall_s, memory_bytes)
    return box.run(target, *args)


@atexit.register
def _close_pools() -> None:
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.close()
