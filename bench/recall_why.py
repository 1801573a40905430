"""Why the English part of bench/budget_recall.py misses: each missed reference character's cause.

For every question and budget, the reference characters the returned sections do not cover are
each charged to one cause, found from the explain trace of the same ``DocAnchor.retrieve`` call
(so it measures the service's own ranking) and from deeper dense and BM25 searches:

- ``not listed (dense r / bm25 r)``: the chunk holding it is in neither top-k list nor brought in as
  a neighbour; its rank in a 400-deep dense and BM25 search is bucketed (41-100, 101-400, >400).
- ``below cut-off``, ``no evidence``, ``section break``, ``duplicate``: the candidate's fate.
- ``budget, rank N-M``: the candidate was dropped for budget; N-M buckets its place in the
  final ranking. For these the tokens of the pieces packed above it are split into own evidence
  (listed matches) and completion (neighbours, run-ons), which says whether context eats budget.
- ``no_strong_match cap``: the query was judged to have no strong match, so at most
  ``cutoff.WEAK_BUDGET_TOKENS`` came back, and the chunk was not among them.
- ``..., beside a packed chunk``: the chunk before or after it was packed (a passage running over
  a chunk boundary comes back cut).
- ``packed, cut to a span``: the chunk is packed, but its span (boundary sentence, trim) leaves
  the character out.
- ``in no chunk``: no chunk of the document holds the character (unindexed text).

A character held by two chunks is charged to the one that came closest (packed before dropped
before cut before unlisted). Prints, per budget, the recall points lost to each cause (mean over
questions of missed share), so the causes sum to ``100 - recall``.

Run: ``python bench/recall_why.py --index-dir DIR [--budgets 1000,2000]
[--half odd] [--every K] [--list N]`` (the index of bench/budget_recall.py ``--reuse-index``).
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import budget_recall as br

NAMESPACE = "corpora"
"""The English part's namespace in bench/budget_recall.py's index."""
DEEP_K = 400
"""Depth of the dense and BM25 searches that place an unlisted answer chunk."""
CLOSENESS = ("packed, cut to a span", "no_strong_match cap", "budget", "duplicate", "section break", "no evidence", "below cut-off",
             "not listed", "in no chunk")
"""Causes from closest to being returned to farthest: a character held by two chunks takes the closer."""


def bucket(rank: int | None, edges=(40, 100, DEEP_K)) -> str:
    if rank is None:
        return f">{edges[-1]}"
    lo = 1
    for e in edges:
        if rank <= e:
            return f"{lo}-{e}"
        lo = e + 1
    return f">{edges[-1]}"


def doc_chunks(da, ns: str, doc_id: str, n: int):
    """``[(chunk, source_start, source_end)]`` of a document's chunks in ordinal order."""
    from docanchor.offsets import source_offset
    from docanchor.types import chunk_id

    got = da.ctx.lexical.get_chunks(ns, [chunk_id(doc_id, i) for i in range(n)])
    out = []
    for i in range(n):
        c = got.get(chunk_id(doc_id, i))
        if c is None:
            continue
        a, b = source_offset(c.source_runs, c.start_char), source_offset(c.source_runs, c.end_char)
        out.append((c, c.start_char if a is None else a, c.end_char if b is None else b))
    return out


PACKED = ("kept", "merged", "trimmed")
"""Fates (as the trace words them) of a candidate whose text went into a section."""


def causes(refs, covered: set[int], chunks, trace, deep_dense, deep_bm25):
    """``({cause: missed characters}, reference characters, {chunk id: budget-drop detail})`` of
    one question at one budget."""
    rows = {r["chunk_id"]: (i, r) for i, r in enumerate(trace["candidates"])}
    ref: set[int] = set()
    for s, e in refs:
        ref.update(range(int(s), int(e)))
    missed = ref - covered
    charge: dict[int, tuple[int, str, str]] = {}  # char -> (closeness, cause, chunk id)
    for c, a, b in chunks:
        hit = missed.intersection(range(a, b))
        if hit:
            key, cause = _charged(c, rows, trace, deep_dense, deep_bm25)
            for ch in hit:
                if ch not in charge or key < charge[ch][0]:
                    charge[ch] = (key, cause, c.chunk_id)
    out = collections.Counter(charge.get(ch, (0, "in no chunk", ""))[1] for ch in missed)
    return out, len(ref), _budget_drops(charge, rows)


def _charged(c, rows, trace, deep_dense, deep_bm25) -> tuple[int, str]:
    """``(closeness, cause)`` of chunk ``c``'s missed characters (:data:`CLOSENESS` orders them)."""
    cause = _cause(c.chunk_id, rows, deep_dense, deep_bm25)
    if cause != CLOSENESS[0] and trace.get("no_strong_match"):
        cause = "no_strong_match cap"
    elif cause != CLOSENESS[0] and _beside_packed(c, rows):
        cause += ", beside a packed chunk"
    head = cause.split(",")[0].split(" (")[0]
    return (CLOSENESS.index(head) if head in CLOSENESS else len(CLOSENESS)), cause


def _budget_drops(charge, rows) -> dict:
    """``{chunk id: (cause, rank, own tokens above, completion tokens above, trace row)}`` of the
    answer chunks dropped for budget: the tokens of the pieces packed above each, split into
    listed matches (own evidence) and the rest (neighbours, run-ons)."""
    packed = [(i, r["tokens"] or 0, r["why"] == "matched") for i, r in enumerate(rows[k][1] for k in rows)
              if r["fate"].startswith(PACKED)]
    out = {}
    for _, cause, cid in charge.values():
        if cid in rows and cause.startswith("budget") and cid not in out:
            rank = rows[cid][0]
            own = sum(t for i, t, o in packed if i < rank and o)
            comp = sum(t for i, t, o in packed if i < rank and not o)
            out[cid] = (cause, rank, own, comp, rows[cid][1])
    return out


def _beside_packed(chunk, rows) -> bool:
    """Whether the chunk before or after ``chunk`` in its document was packed."""
    from docanchor.types import chunk_id

    for o in (chunk.ordinal - 1, chunk.ordinal + 1):
        got = rows.get(chunk_id(chunk.doc_id, o))
        if got is not None and got[1]["fate"].startswith(PACKED):
            return True
    return False


def _cause(cid, rows, deep_dense, deep_bm25) -> str:
    if cid not in rows:
        return f"not listed (dense {bucket(deep_dense.get(cid))} / bm25 {bucket(deep_bm25.get(cid))})"
    rank, r = rows[cid]
    fate = r["fate"]
    if fate.startswith(PACKED + ("left out",)):
        return CLOSENESS[0]
    if fate.startswith("dropped for budget"):
        return f"budget, rank {bucket(rank + 1, (10, 20, 40, 80))}"
    if fate.startswith("dropped as duplicate"):
        return "duplicate"
    for part, name in (("cut-off", "below cut-off"), ("evidence floor", "no evidence"),
                       ("section break", "section break")):
        if part in fate:
            return name
    return fate


def setup(args):
    """``(DocAnchor, embedder, questions, {doc id: corpus}, {corpus: doc_chunks})`` over the
    reused index of bench/budget_recall.py."""
    from docanchor.embedder import get_embedder
    from docanchor.settings import Settings
    from plugin.api import DocAnchor

    questions = br.load_questions(None, None)
    questions = questions[{"": slice(None), "odd": slice(0, None, 2), "even": slice(1, None, 2)}[args.half]][::args.every]
    emb = br.CachedEmbedder(get_embedder(), br.OUT / "embeddings.sqlite")
    emb.memo_queries = {}
    da = DocAnchor(Settings(data_dir=args.index_dir, namespace=NAMESPACE), embedder=emb)
    doc_corpus, chunks_of = {}, {}
    for c in sorted(p.stem for p in (br.DATA / "corpora").glob("*.md")):
        rec = da.ingest_file(br.DATA / "corpora" / f"{c}.md", namespace=NAMESPACE).record
        doc_corpus[rec.doc_id] = c
        chunks_of[c] = doc_chunks(da, NAMESPACE, rec.doc_id, rec.n_chunks)
    return da, emb, questions, doc_corpus, chunks_of


def ask(da, emb, q, corpus, refs, budgets, doc_corpus, chunks) -> dict:
    """``{budget: (causes, reference characters, budget drops)}`` of one question."""
    qn = " ".join(q.split())
    emb_q = emb.embed_query(qn)
    deep_dense = {cid: i for i, (cid, _) in enumerate(da.ctx.store.nearest(NAMESPACE, emb_q, DEEP_K), 1)}
    deep_bm25 = {cid: i for i, (cid, _) in enumerate(da.ctx.lexical.search(NAMESPACE, qn, DEEP_K), 1)}
    out = {}
    for b in budgets:
        r = da.retrieve(q, b, explain=True)
        covered: set[int] = set()
        for s in r.sections:
            if doc_corpus.get(s.doc_id) == corpus:
                a = s.source_start if s.source_start is not None else s.start_char
                e = s.source_end if s.source_end is not None else s.end_char
                covered.update(range(a, e))
        out[b] = causes(refs, covered, chunks, r.trace, deep_dense, deep_bm25) + (r.context_tokens_used,)
    return out


def report(loss, drops, n: int, budgets, listed: int) -> None:
    print(f"{n} questions; recall points lost by cause (mean over questions of the missed share)")
    for b in budgets:
        print(f"\nbudget {b}: {100 * sum(loss[b].values()) / n:.2f} points lost")
        for cause, v in sorted(loss[b].items(), key=lambda kv: -kv[1]):
            print(f"  {100 * v / n:6.2f}  {cause}")
    if not drops:
        return
    print("\nbudget drops: tokens packed above the dropped answer chunk (own evidence / completion)")
    for b in budgets:
        rows = [w for w in drops if w[0] == b]
        if rows:
            print(f"  budget {b}: {len(rows)} chunks; mean own {np.mean([w[5] for w in rows]):.0f}, "
                  f"completion {np.mean([w[6] for w in rows]):.0f} tokens above")
    for w in sorted(drops, key=lambda w: (w[0], w[4]))[:listed]:
        print(f"  b{w[0]} rank {w[4] + 1} own {w[5]} comp {w[6]} score {w[7]} {w[8]} used {w[9]}: "
              f"{w[2]} {w[1][:70]!r}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budgets", default="500,1000,2000")
    ap.add_argument("--every", type=int, default=1, help="ask every K-th question")
    ap.add_argument("--half", default="", choices=("", "odd", "even"), help="as bench/budget_recall.py's")
    ap.add_argument("--index-dir", type=Path, required=True, help="a copy of bench/budget_recall.py's index")
    ap.add_argument("--list", type=int, default=0, help="print the N best-ranked answer chunks dropped for budget")
    ap.add_argument("--set", action="append", default=[], metavar="MODULE.NAME=VALUE",
                    help="override a module constant for an experiment (as bench/budget_recall.py's)")
    args = ap.parse_args()
    br.set_constants(args.set)
    budgets = tuple(int(b) for b in args.budgets.split(","))
    da, emb, questions, doc_corpus, chunks_of = setup(args)
    loss = {b: collections.Counter() for b in budgets}
    drops = []
    for q, corpus, refs in questions:
        for b, (got, nref, detail, used) in ask(da, emb, q, corpus, refs, budgets, doc_corpus,
                                                  chunks_of[corpus]).items():
            for cause, n in got.items():
                loss[b][cause] += n / max(1, nref)
            drops.extend((b, q, cid, cause, rank, own, comp, row["score"], row["why"], used)
                         for cid, (cause, rank, own, comp, row) in detail.items())
    report(loss, drops, len(questions), budgets, args.list)


if __name__ == "__main__":
    main()
