"""Thread CPU time of each retrieval stage, per request, on an index bench/scale_bench.py built.

    python bench/retrieve_cpu.py DATA_DIR [--budgets 500,4000] [--questions N] [--profile FILE]
                                 [--digest FILE] [--check FILE] [--gc-freeze] [--chroma-port PORT]

Opens DATA_DIR (a ``.../data`` directory of bench/scale_bench.py, namespace ``scale``) with
:class:`plugin.api.DocAnchor`, reads the chunk vectors ahead as ``docanchor serve`` does, asks 10
warm-up questions, then every question of bench/budget_recall.py at each budget over all
documents, and prints per stage the mean and median thread CPU milliseconds of one request
(``time.thread_time``: what the request costs the interpreter, which depends little on the
machine's load, unlike wall clock). A stage's time excludes the stages timed inside it.
``--profile`` also writes a cProfile of the timed requests; ``--digest`` writes one line per
request (budget, question number, sha256 of the whole answer: every field of every section, the
context, its token count, the message and the flags), and ``--check`` compares each request's
line with that of an earlier ``--digest`` file, so a change meant to keep answers identical can
be checked on every question (it prints how many requests differ and exits 1 if any does).
``--chroma-port`` opens a data dir built against a Chroma server (bench/scale_bench.py's
``*-server-*`` index, its ``chroma run`` started by the caller on that port) and counts the HTTP
round trips each request makes to it, by route (every one costs both processes CPU).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import hashlib
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path.cwd()
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

WARM_UP = 10
ROUND_TRIPS = "Chroma round trips"
WALL, PROCESS, GC = "wall", "process CPU", "garbage collection"
"""Whole-request figures (the query embedding included) beside the stages: wall clock, and the CPU of
every thread of the process. Far above the stages' sum, they show time spent off this thread (other
threads holding the interpreter lock, waiting for the disk) that the stage table cannot see. Garbage
collection is timed too (thread CPU); it is inside the stages that allocated when it ran."""
_STACK: list[list[float]] = []
_TIMES: dict[str, float] = {}


def _timed(owner, name: str, label: str) -> None:
    """Replace ``owner.name`` by a wrapper adding its exclusive thread CPU time to ``label`` (nothing
    when ``owner`` is None or has no ``name``: an older checkout being compared or bisected)."""
    inner = getattr(owner, name, None)
    if inner is None:
        return

    def wrapper(*args, **kwargs):
        _STACK.append([0.0])
        t = time.thread_time()
        try:
            return inner(*args, **kwargs)
        finally:
            spent = time.thread_time() - t
            children = _STACK.pop()[0]
            _TIMES[label] = _TIMES.get(label, 0.0) + spent - children
            if _STACK:
                _STACK[-1][0] += spent

    setattr(owner, name, wrapper)


def _instrument(da) -> None:
    import importlib

    import retrieval.search as search

    def stage(name: str):
        try:
            return importlib.import_module(f"retrieval.stages.{name}")
        except ImportError:  # a stage an older checkout does not have
            return None

    context, coverage, cutoff, dedupe, expand, fuse, gather, novelty, references, rerank = map(stage, (
        "context", "coverage", "cutoff", "dedupe", "expand", "fuse", "gather", "novelty", "references", "rerank"))

    _timed(da.ctx.embedder, "embed_query", "embed")
    for name in ("nearest", "nearest_in_documents", "query"):
        _timed(da.ctx.store, name, "dense")
    _timed(da.ctx.lexical, "search", "lexical")
    _timed(gather, "read_chunks", "chunk reads")
    _timed(expand, "read_chunks", "chunk reads")  # the neighbours' and texts beside, read by expand
    _timed(gather, "records", "records")
    _timed(gather, "gather", "gather (rest)")
    _timed(fuse, "fuse", "fuse")
    _timed(coverage, "add_coverage", "coverage")
    _timed(references, "weigh_references", "references")
    _timed(context, "add_context", "context")
    for name in ("relevance_floor", "drop_unread_below", "mark_below", "mark_without_evidence", "strong_match"):
        _timed(cutoff, name, "cutoff")
    _timed(expand, "read_neighbours", "neighbours")
    _timed(expand, "keep_lifts_in_section", "section break")
    _timed(expand, "follow_run_on", "run-on")
    _timed(dedupe, "first_copies", "dedupe")
    _timed(rerank, "rerank", "rerank")
    _timed(novelty, "rank_by_novelty", "novelty")
    _timed(expand, "shape", "shape")
    _timed(expand, "texts_beside", "texts_beside")
    _timed(search, "_piece", "pieces")
    _timed(search, "pack", "pack")
    _timed(search, "least_budget_for", "least budget")
    _timed(da, "retrieve", "retrieve (rest)")


_CALLS: dict[str, int] = {}


def _count_round_trips() -> None:
    """Count every HTTP request chromadb's client makes (:data:`_CALLS`, by method and route with
    the ids in it replaced by ``*``)."""
    import re

    from chromadb.api.fastapi import FastAPI

    inner = FastAPI._make_request

    def counted(self, method, path, **kwargs):
        route = re.sub(r"/collections/[^/]+", "/collections/*", path)
        _CALLS[f"{method.upper()} {route}"] = _CALLS.get(f"{method.upper()} {route}", 0) + 1
        return inner(self, method, path, **kwargs)

    FastAPI._make_request = counted


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data_dir", type=Path)
    ap.add_argument("--budgets", default="500,4000")
    ap.add_argument("--questions", type=int, default=0, help="ask only the first N questions")
    ap.add_argument("--profile", type=Path, help="write a cProfile of the timed requests here")
    ap.add_argument("--digest", type=Path, help="write one sha256 line per request here")
    ap.add_argument("--gc-freeze", action="store_true",
                    help="gc.freeze() after the warm-up: the objects alive then are left out of every collection")
    ap.add_argument("--check", type=Path, help="compare each request's sha256 line with this --digest file")
    ap.add_argument("--chroma-port", type=int, help="the data dir's Chroma server (chroma run) listens here")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from budget_recall import load_questions
    from scale_bench import settings_for

    from plugin.api import DocAnchor
    from plugin.warm import warm_vectors

    questions = [q for q, _, _ in load_questions(None, args.questions or None)]
    if args.chroma_port:
        _count_round_trips()
    da = DocAnchor(settings_for(args.data_dir, args.chroma_port))
    warm_vectors(da)
    for q in questions[:WARM_UP]:
        da.retrieve(q, 500)
    if args.gc_freeze:
        gc.freeze()
    _instrument(da)
    prof = cProfile.Profile() if args.profile else None
    answers: list[str] = []
    gcs = [0]
    gc.callbacks.append(lambda phase, info: gcs.__setitem__(0, gcs[0] + (phase == "start" and info["generation"] == 2)))
    gc.callbacks.append(_time_collections)
    for budget in [int(b) for b in args.budgets.split(",")]:
        rows, calls = [], []
        for i, q in enumerate(questions):
            _TIMES.clear()
            _CALLS.clear()
            if prof:
                prof.enable()
            wall, process = time.perf_counter(), time.process_time()
            res = da.retrieve(q, budget)
            _TIMES[WALL], _TIMES[PROCESS] = time.perf_counter() - wall, time.process_time() - process
            if prof:
                prof.disable()
            rows.append(dict(_TIMES))
            calls.append(dict(_CALLS))
            answers.append(f"{budget}\t{i}\t{_answer_digest(res)}\n")
        _report(budget, rows)
        if args.chroma_port:
            _report_calls(calls)
    print(f"full collections during the timed requests: {gcs[0]}")
    if args.digest:
        args.digest.write_text("".join(answers))
    if args.check:
        _check(answers, args.check.read_text().splitlines(keepends=True))
    if prof:
        prof.dump_stats(args.profile)
    da.close()


_GC_START = [0.0]


def _time_collections(phase: str, info: dict) -> None:
    """Add the thread CPU time of each garbage collection to :data:`GC` (it is inside the stages too)."""
    if phase == "start":
        _GC_START[0] = time.thread_time()
    else:
        _TIMES[GC] = _TIMES.get(GC, 0.0) + time.thread_time() - _GC_START[0]


def _answer_digest(res) -> str:
    """sha256 of everything a caller gets back from one retrieve (the trace aside)."""
    whole = (repr(res.sections), res.context, res.context_tokens_used, res.message, res.no_strong_match,
             res.least_budget_tokens)
    return hashlib.sha256(repr(whole).encode()).hexdigest()


def _check(answers: list[str], expected: list[str]) -> None:
    """Print how many of ``answers`` differ from the ``expected`` digest lines; exit 1 if any does."""
    differ = [a.split("\t")[:2] for a, e in zip(answers, expected) if a != e]
    if len(answers) != len(expected):
        sys.exit(f"check: {len(answers)} requests asked, {len(expected)} in the digest file")
    print(f"check: {len(differ)} of {len(answers)} requests differ from the digest file"
          + (f" (first: budget {differ[0][0]}, question {differ[0][1]})" if differ else ""))
    if differ:
        sys.exit(1)


def _report_calls(calls: list[dict[str, int]]) -> None:
    n = len(calls)
    print(f"  {ROUND_TRIPS} per request: {sum(sum(c.values()) for c in calls) / n:.2f}")
    for route in sorted({r for c in calls for r in c}):
        print(f"    {route:40} {sum(c.get(route, 0) for c in calls) / n:6.2f}")


def _report(budget: int, rows: list[dict[str, float]]) -> None:
    labels = sorted({k for r in rows for k in r} - {WALL, PROCESS, GC}, key=lambda k: -sum(r.get(k, 0.0) for r in rows))
    totals = [1000 * sum(v for k, v in r.items() if k not in ("embed", WALL, PROCESS, GC)) for r in rows]
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\n== budget {budget}, all documents, {len(rows)} requests; load average {load}")
    print(f"thread CPU ms per request without the query embedding: mean {statistics.mean(totals):.2f}, "
          f"p50 {statistics.median(totals):.2f}, p99 {sorted(totals)[int(0.99 * (len(totals) - 1))]:.2f}")
    for k in (WALL, PROCESS, GC):
        v = sorted(1000 * r.get(k, 0.0) for r in rows)
        print(f"whole request (query embedding included), {k} ms: mean {statistics.mean(v):.2f}, "
              f"p50 {statistics.median(v):.2f}, p99 {v[int(0.99 * (len(v) - 1))]:.2f}")
    for k in labels:
        v = [1000 * r.get(k, 0.0) for r in rows]
        print(f"  {k:18} mean {statistics.mean(v):6.2f}  p50 {statistics.median(v):6.2f}")


if __name__ == "__main__":
    main()
