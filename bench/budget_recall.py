"""Evidence per token: DocAnchor's retrieval against three peers' defaults, by character ranges.

Data: ../shared/bench/chunking_eval (Chroma's chunking evaluation, brandonstarxel/chunking_evaluation;
see its SOURCE.md): 4 Markdown corpora, 373 questions with reference excerpts as character ranges.

- The 4 corpora go through DocAnchor's real ingest path into one namespace, with the real model.
- Every question is asked at budgets 250/500/1000/2000 (cl100k) through ``DocAnchor.retrieve``.
- Peers rebuilt with the same model and packed by the same :func:`retrieval.pack.pack`:
  LangChain tutorial (RecursiveCharacterTextSplitter 1000/200 characters, k=4), LobeChat
  knowledge base (800/400, top 5), Open WebUI (1000/100, top 3).
- recall = reference characters covered / reference characters; precision = covered / returned
  characters; IoU = covered / (returned + uncovered reference). Offsets of sections are into the
  normalised text and are mapped back to the file with ``ingest.normalise.normalise_map``.

Run: ``python bench/budget_recall.py [--limit N]`` (takes a few minutes on 2 CPU cores).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DATA = (REPO / ".." / "shared" / "bench" / "chunking_eval").resolve()
BUDGETS = (250, 500, 1000, 2000)
PEERS = {"langchain 1000/200 k4": (1000, 200, 4), "lobechat 800/400 k5": (800, 400, 5),
         "openwebui 1000/100 k3": (1000, 100, 3)}


def load_questions(limit: int | None):
    with open(DATA / "questions_df.csv", encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    out = [(r["question"], r["corpus_id"], [(x["start_index"], x["end_index"]) for x in json.loads(r["references"])])
           for r in rows]
    return out[:limit] if limit else out


def score(returned: list[tuple[str, int, int]], corpus: str, refs: list[tuple[int, int]]):
    """(covered, returned chars, reference chars) for ranges ``(corpus, start, end)`` in file offsets."""
    ref = set()
    for s, e in refs:
        ref.update(range(s, e))
    got: dict[str, set[int]] = {}
    for c, s, e in returned:
        got.setdefault(c, set()).update(range(s, e))
    covered = len(ref & got.get(corpus, set()))
    n_returned = sum(len(v) for v in got.values())
    return covered, n_returned, len(ref)


class Tally:
    def __init__(self) -> None:
        self.rows: list[tuple[int, int, int, int]] = []  # covered, returned, ref, tokens

    def add(self, covered: int, returned: int, ref: int, tokens: int) -> None:
        self.rows.append((covered, returned, ref, tokens))

    def summary(self) -> tuple[float, float, float, float]:
        cov = np.array([r[0] for r in self.rows], float)
        ret = np.array([r[1] for r in self.rows], float)
        ref = np.array([r[2] for r in self.rows], float)
        recall = float(np.mean(cov / np.maximum(ref, 1)))
        precision = float(np.mean(np.where(ret > 0, cov / np.maximum(ret, 1), 0)))
        iou = float(np.mean(cov / np.maximum(ret + ref - cov, 1)))
        return recall, precision, iou, float(np.mean([r[3] for r in self.rows]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="ask only the first N questions")
    args = ap.parse_args()

    from docanchor.settings import Settings
    from docanchor.lexical import tokenize
    from ingest.normalise import normalise_map
    from langchain_text_splitters import RecursiveCharacterTextSplitter
    from plugin.api import DocAnchor
    from retrieval.pack import Piece, pack

    questions = load_questions(args.limit)
    corpora = sorted({c for _, c, _ in questions})
    tmp = tempfile.mkdtemp(prefix="docanchor-bench-")
    da = DocAnchor(Settings(data_dir=Path(tmp), namespace="bench"))
    count = da.ctx.counter.count

    doc_corpus, origin = {}, {}
    t0 = time.perf_counter()
    for c in corpora:
        path = DATA / "corpora" / f"{c}.md"
        raw = path.read_text(encoding="utf-8")
        norm, org = normalise_map(raw)
        res = da.ingest_file(path)
        doc_corpus[res.record.doc_id] = c
        origin[c] = org if norm != raw else None
        print(f"ingested {c}: {res.record.n_chunks} chunks, normalised text {'differs' if norm != raw else 'identical'}",
              file=sys.stderr)
    print(f"ingest {time.perf_counter() - t0:.1f} s", file=sys.stderr)

    def to_file(c: str, s: int, e: int) -> tuple[str, int, int]:
        org = origin[c]
        return (c, s, e) if org is None else (c, org[s], org[e])

    tallies: dict[tuple[str, int], Tally] = {}
    per_corpus: dict[tuple[str, int, str], Tally] = {}
    latencies: list[float] = []
    over_budget = 0
    da.retrieve("warm up", 100)
    for q, c, refs in questions:
        for b in BUDGETS:
            t = time.perf_counter()
            r = da.retrieve(q, b)
            latencies.append(time.perf_counter() - t)
            over_budget += r.context_tokens_used > b
            ranges = [to_file(doc_corpus[s.doc_id], s.start_char, s.end_char) for s in r.sections]
            cov, ret, ref = score(ranges, c, refs)
            for key, store in (("docanchor", tallies), ):
                store.setdefault((key, b), Tally()).add(cov, ret, ref, r.context_tokens_used)
            per_corpus.setdefault(("docanchor", b, c), Tally()).add(cov, ret, ref, r.context_tokens_used)

    # peers: same model, same packing
    emb = da.ctx.embedder
    for name, (size, overlap, k) in PEERS.items():
        splitter = RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=overlap, add_start_index=True)
        pieces_all, texts = [], []
        for c in corpora:
            raw = (DATA / "corpora" / f"{c}.md").read_text(encoding="utf-8")
            for i, d in enumerate(splitter.create_documents([raw])):
                s = d.metadata["start_index"]
                pieces_all.append((c, i, d.page_content, s, s + len(d.page_content)))
                texts.append(d.page_content)
        vecs = np.array(emb.embed(texts), dtype=np.float32)
        for q, c, refs in questions:
            qv = np.array(emb.embed_query(q), dtype=np.float32)
            top = np.argsort(-(vecs @ qv), kind="stable")[:k]
            ps = [Piece(f"{pieces_all[j][0]}:{pieces_all[j][1]:06d}", pieces_all[j][0], pieces_all[j][1],
                        pieces_all[j][0], pieces_all[j][2], pieces_all[j][3], pieces_all[j][4], score=float(k - n))
                  for n, j in enumerate(top)]
            for b in BUDGETS:
                r = pack(ps, b, count, query_terms=set(tokenize(q)), tokenize=tokenize, doc_cap_share=1.0)
                over_budget += r.context_tokens_used > b
                cov, ret, ref = score([(s.doc_id, s.start_char, s.end_char) for s in r.sections], c, refs)
                tallies.setdefault((name, b), Tally()).add(cov, ret, ref, r.context_tokens_used)
                per_corpus.setdefault((name, b, c), Tally()).add(cov, ret, ref, r.context_tokens_used)

    print(f"\n{len(questions)} questions, budgets {BUDGETS}, model {emb.name}, budget tokenizer {da.ctx.counter.name}")
    print(f"{'system':24} {'budget':>6} {'recall':>7} {'prec.':>7} {'IoU':>7} {'tokens':>7}")
    for (name, b), tally in sorted(tallies.items(), key=lambda kv: (kv[0][0] != "docanchor", kv[0][0], kv[0][1])):
        rec, pre, iou, tok = tally.summary()
        print(f"{name:24} {b:>6} {rec:>7.1%} {pre:>7.1%} {iou:>7.1%} {tok:>7.0f}")
    print("\nper corpus (recall / IoU)")
    for (name, b, c), tally in sorted(per_corpus.items()):
        rec, _, iou, _ = tally.summary()
        print(f"{name:24} {b:>6} {c:20} {rec:>7.1%} {iou:>7.1%}")
    lat = sorted(latencies)
    print(f"\nDocAnchor retrieval latency: p50 {1000 * statistics.median(lat):.1f} ms, "
          f"p99 {1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))]:.1f} ms over {len(lat)} requests")
    print(f"requests over budget: {over_budget}")


if __name__ == "__main__":
    main()
