"""Thread CPU time of each retrieval stage, per request, on an index bench/scale_bench.py built.

    python bench/retrieve_cpu.py DATA_DIR [--budgets 500,4000] [--questions N] [--profile FILE]
                                 [--digest FILE]

Opens DATA_DIR (a ``.../data`` directory of bench/scale_bench.py, namespace ``scale``) with
:class:`plugin.api.DocAnchor`, reads the chunk vectors ahead as ``docanchor serve`` does, asks 10
warm-up questions, then every question of bench/budget_recall.py at each budget over all
documents, and prints per stage the mean and median thread CPU milliseconds of one request
(``time.thread_time``: what the request costs the interpreter, which depends little on the
machine's load, unlike wall clock). A stage's time excludes the stages timed inside it.
``--profile`` also writes a cProfile of the timed requests; ``--digest`` writes one line per
request (budget, question number, sha256 of the context and the sections' chunk ids) so two
versions of the code can be checked for identical answers.
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
_STACK: list[list[float]] = []
_TIMES: dict[str, float] = {}


def _timed(owner, name: str, label: str) -> None:
    """Replace ``owner.name`` by a wrapper adding its exclusive thread CPU time to ``label``."""
    inner = getattr(owner, name)

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
    import retrieval.search as search
    from retrieval.stages import context, cutoff, dedupe, expand, fuse, gather, novelty, rerank

    _timed(da.ctx.embedder, "embed_query", "embed")
    for name in ("nearest", "nearest_in_documents", "query"):
        _timed(da.ctx.store, name, "dense")
    _timed(da.ctx.lexical, "search", "lexical")
    _timed(gather, "read_chunks", "chunk reads")
    _timed(gather, "records", "records")
    _timed(gather, "gather", "gather (rest)")
    _timed(fuse, "fuse", "fuse")
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data_dir", type=Path)
    ap.add_argument("--budgets", default="500,4000")
    ap.add_argument("--questions", type=int, default=0, help="ask only the first N questions")
    ap.add_argument("--profile", type=Path, help="write a cProfile of the timed requests here")
    ap.add_argument("--digest", type=Path, help="write one sha256 line per request here")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from budget_recall import load_questions
    from scale_bench import settings_for

    from plugin.api import DocAnchor
    from plugin.warm import warm_vectors

    questions = [q for q, _, _ in load_questions(None, args.questions or None)]
    da = DocAnchor(settings_for(args.data_dir, None))
    warm_vectors(da)
    for q in questions[:WARM_UP]:
        da.retrieve(q, 500)
    _instrument(da)
    prof = cProfile.Profile() if args.profile else None
    digest = open(args.digest, "w") if args.digest else None
    gcs = [0]
    gc.callbacks.append(lambda phase, info: gcs.__setitem__(0, gcs[0] + (phase == "start" and info["generation"] == 2)))
    for budget in [int(b) for b in args.budgets.split(",")]:
        rows = []
        for i, q in enumerate(questions):
            _TIMES.clear()
            if prof:
                prof.enable()
            res = da.retrieve(q, budget)
            if prof:
                prof.disable()
            rows.append(dict(_TIMES))
            if digest:
                ids = ";".join(",".join(s.chunk_ids) for s in res.sections)
                h = hashlib.sha256(f"{res.context}\x00{ids}\x00{res.context_tokens_used}".encode()).hexdigest()
                digest.write(f"{budget}\t{i}\t{h}\n")
        _report(budget, rows)
    print(f"full collections during the timed requests: {gcs[0]}")
    if prof:
        prof.dump_stats(args.profile)
    if digest:
        digest.close()
    da.close()


def _report(budget: int, rows: list[dict[str, float]]) -> None:
    labels = sorted({k for r in rows for k in r}, key=lambda k: -sum(r.get(k, 0.0) for r in rows))
    totals = [1000 * sum(v for k, v in r.items() if k != "embed") for r in rows]
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\n== budget {budget}, all documents, {len(rows)} requests; load average {load}")
    print(f"thread CPU ms per request without the query embedding: mean {statistics.mean(totals):.2f}, "
          f"p50 {statistics.median(totals):.2f}, p99 {sorted(totals)[int(0.99 * (len(totals) - 1))]:.2f}")
    for k in labels:
        v = [1000 * r.get(k, 0.0) for r in rows]
        print(f"  {k:18} mean {statistics.mean(v):6.2f}  p50 {statistics.median(v):6.2f}")


if __name__ == "__main__":
    main()
