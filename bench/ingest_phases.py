"""Where bulk ingest's CPU goes: one ``DocAnchor.ingest_many`` over ``--corpus``, with CPU seconds
per phase and per kind of thread, so the shares can be compared on a busy machine.

The stream's steps are wrapped (:func:`_wrap`) and timed with ``time.thread_time`` on the thread
that runs them, each phase counted without the phases it calls (exclusive). Besides, the CPU of
every thread of the process is read from ``/proc/self/task/*/stat`` (Linux only) and split into
the iterating thread and the rest (torch's OpenMP workers, Chroma's and tantivy's threads; the
parse thread has ended by then: its CPU is the sum of the ``parse thread`` phases and the token
counting), and the CPU of the parse workers (the sandbox's child processes) from their
``/proc/<pid>/stat``.

    .venv/bin/python bench/ingest_phases.py --corpus /tmp/corpus-without-175

Prints ``uptime`` before and after, chunks/s, a table of phases (CPU s, share of the process's
CPU, wall s, calls) and the CPU seconds per kind of thread.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TICK_S = 1 / os.sysconf("SC_CLK_TCK")

cpu: dict[str, float] = defaultdict(float)  # phase -> exclusive thread CPU seconds
wall: dict[str, float] = defaultdict(float)  # phase -> inclusive wall seconds
calls: dict[str, int] = defaultdict(int)
roles: dict[int, str] = {}  # native thread id -> role
_stack = threading.local()


def _wrap(owner: object, attr: str, phase: str, role: str | None = None) -> None:
    """Replace ``owner.attr`` by a timed call that books its exclusive thread CPU to ``phase``."""
    fn = getattr(owner, attr)

    def timed(*args, **kwargs):
        if role is not None:
            roles.setdefault(threading.get_native_id(), role)
        frames = _stack.__dict__.setdefault("frames", [])
        frames.append(0.0)
        c0, w0 = time.thread_time(), time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent = time.thread_time() - c0
            inner = frames.pop()
            cpu[phase] += spent - inner
            wall[phase] += time.perf_counter() - w0
            calls[phase] += 1
            if frames:
                frames[-1] += spent

    setattr(owner, attr, timed)


def _threads() -> dict[int, float]:
    """CPU seconds (user + system) of each thread of this process."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(tid)] = (int(fields[11]) + int(fields[12])) * TICK_S
    return out


def descendants(reaped: bool = False) -> dict[int, float]:
    """CPU seconds (user + system) of every live process descending from this one (the sandbox's
    forkserver and workers), by pid, from ``/proc/<pid>/stat``; with ``reaped``, each one's count
    includes the children it reaped (a forkserver's workers that ended). Linux only."""
    parent, used = {}, {}
    last = 15 if reaped else 13  # utime stime, then cutime cstime
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(pid)] = int(fields[1])
        used[int(pid)] = sum(int(x) for x in fields[11:last]) * TICK_S
    mine, me = {}, os.getpid()
    for pid in used:
        p = parent.get(pid)
        while p and p != me and p in parent:
            p = parent[p]
        if p == me:
            mine[pid] = used[pid]
    return mine


def _instrument(da) -> None:
    import ingest.chunking as chunking
    import ingest.pipeline as pipeline
    import ingest.stream as stream

    ctx = da.ctx
    _wrap(stream, "prepare", "parse thread: prepare (other)")
    _wrap(pipeline, "parse_document", "parse thread: parse (sandbox call)")
    _wrap(pipeline, "chunk_document", "parse thread: chunking (other)")
    _wrap(chunking, "table_context", "parse thread: chunking (other)")
    _wrap(ctx.counter, "count", "token counting (budget, tiktoken)")
    _wrap(ctx.embedder, "count_tokens", "token counting (word pieces)")
    _wrap(ctx.embedder, "embed", "embed (calling thread)", role="iterating thread")
    _wrap(stream, "make_record", "record + anchor")
    _wrap(ctx.store, "add_chunks", "write: Chroma add")
    _wrap(ctx.lexical, "add", "write: lexical add")
    _wrap(ctx.store, "put_document", "write: record")
    _wrap(ctx.store, "get_document", "store look-ups")
    _wrap(ctx.store, "delete_document", "store look-ups")
    _wrap(stream._Run, "_take", "iterating thread: waiting for a parse (take)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, required=True)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from bench.ingest_bench import corpus_files
    from docanchor.settings import Settings
    from plugin.api import DocAnchor

    print(f"uptime at start: {os.popen('uptime').read().strip()}", flush=True)
    files = corpus_files(args.corpus.resolve())
    with tempfile.TemporaryDirectory() as tmp:
        da = DocAnchor(Settings.from_env(data_dir=Path(tmp)))
        da.ctx.embedder.embed(["warm-up"])
        _ = da.ctx.store, da.ctx.counter, da.ctx.lexical
        _instrument(da)
        roles[threading.get_native_id()] = "iterating thread"
        t0, k0, p0 = time.perf_counter(), _threads(), descendants()
        chunks = sum(o.result.record.n_chunks for o in da.ingest_many(files) if o.result)
        seconds, k1, p1 = time.perf_counter() - t0, _threads(), descendants()
        da.close()
    _print(chunks, seconds, k0, k1, p0, p1)
    print(f"uptime at end: {os.popen('uptime').read().strip()}")


def _print(chunks: int, seconds: float, k0, k1, p0, p1) -> None:
    by_role: dict[str, float] = defaultdict(float)
    for tid, used in k1.items():
        by_role[roles.get(tid, "other threads (torch OpenMP, Chroma, tantivy)")] += used - k0.get(tid, 0.0)
    workers = sum(used - p0.get(pid, 0.0) for pid, used in p1.items())
    process = sum(by_role.values())
    print(f"chunks {chunks}  seconds {seconds:.1f}  chunks/s {chunks / seconds:.1f}")
    print(f"{'phase':<48} {'CPU s':>7} {'share':>6} {'wall s':>7} {'calls':>6}")
    for phase in sorted(cpu, key=lambda p: -cpu[p]):
        print(f"{phase:<48} {cpu[phase]:7.1f} {100 * cpu[phase] / process:5.0f}% {wall[phase]:7.1f} {calls[phase]:6d}")
    print("CPU seconds by thread:")
    for role, used in sorted(by_role.items(), key=lambda kv: -kv[1]):
        print(f"  {role:<46} {used:7.1f} {100 * used / process:5.0f}%")
    print(f"  {'process total':<46} {process:7.1f}")
    print(f"  {'parse workers (sandbox processes)':<46} {workers:7.1f}")
    print(f"  CPU per chunk: {1000 * (process + workers) / max(1, chunks):.1f} ms  (process + workers)")


if __name__ == "__main__":
    main()
