"""The storing step of one large document, A/B in one process: its chunks written in one call each
to Chroma and the lexical index (``one``: the write before ``ingest.stream.WRITE_STEP_CHUNKS``) or
in steps of that many (``steps``: what :mod:`ingest.stream` does, a cancel seen between steps).

The document is read and chunked as an ingest does (the configured embedder's tokenizer); its
vectors are random unit rows (storing does not look at them), so no embedding runs. Each run
writes into a fresh data dir; runs alternate ``one, steps, steps, one`` per round.

    .venv/bin/python bench/store_steps.py ../shared/corpus/txt/sanguo_yanyi_gbk.txt --rounds 2

Prints ``uptime`` before and after and, per run, the process CPU seconds, wall seconds and the
longest wall seconds between two points where a stop is seen (the whole write for ``one``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def run(kind: str, chunks, vectors, step: int) -> tuple[float, float, float]:
    from docanchor.context import Context
    from docanchor.settings import Settings

    with tempfile.TemporaryDirectory() as tmp:
        ctx = Context(Settings(data_dir=Path(tmp)), embedder=EMBEDDER)
        _ = ctx.store, ctx.lexical
        n = step if kind == "steps" else len(chunks)
        c0, w0 = time.process_time(), time.perf_counter()
        longest, last = 0.0, w0
        for start in range(0, len(chunks), n):
            ctx.store.add_chunks("ns", chunks[start:start + n], vectors[start:start + n])
            ctx.lexical.add("ns", chunks[start:start + n])
            now = time.perf_counter()
            longest, last = max(longest, now - last), now
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        assert ctx.store.count_chunks("ns") == len(chunks)
        ctx.close()
    return cpu, wall, longest


def main() -> None:
    global EMBEDDER
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path", type=Path)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()

    import numpy as np

    from docanchor.context import Context
    from docanchor.embedder import get_embedder
    from docanchor.settings import Settings
    from ingest.pipeline import Source, prepare
    from ingest.stream import WRITE_STEP_CHUNKS

    EMBEDDER = get_embedder()
    with tempfile.TemporaryDirectory() as tmp:
        ctx = Context(Settings(data_dir=Path(tmp)), embedder=EMBEDDER)
        prepared = prepare(ctx, Source(path=args.path), "ns")
        ctx.close()
    chunks = prepared.chunks
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((len(chunks), EMBEDDER.dimension)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    print(f"{args.path.name}: {len(chunks)} chunks, step {WRITE_STEP_CHUNKS}")
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    for r in range(args.rounds):
        for kind in ("one", "steps", "steps", "one"):
            cpu, wall, longest = run(kind, chunks, vectors, WRITE_STEP_CHUNKS)
            print(f"round {r} {kind:5s} cpu {cpu:6.2f} s  wall {wall:6.2f} s  longest between stops {longest:5.2f} s")
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


EMBEDDER = None

if __name__ == "__main__":
    main()
