"""Ingest throughput on the real corpus, with the real model.

Ingests every file of ../shared/corpus into a fresh data dir through DocAnchor's real ingest
path, then embeds the same chunk texts once more with the bare embedder (an evenly spaced sample
of them, ``--embed-sample``), so the ratio of the two rates shows what parsing, chunking and
storing cost on top of embedding.

    .venv/bin/python bench/ingest_bench.py [--corpus ../shared/corpus]

Prints one line per file, then: documents, pages, chunks, seconds, chunks/s, embedder chunks/s.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from docanchor.errors import DocAnchorError  # noqa: E402
from docanchor.settings import Settings  # noqa: E402
from plugin.api import DocAnchor  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=str(Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus"))
    ap.add_argument("--embed-sample", type=int, default=3000,
                    help="chunks (evenly spaced over all of them) the bare embedder re-embeds; 0 = all")
    args = ap.parse_args()
    files = sorted(p for p in Path(args.corpus).rglob("*") if p.is_file() and p.suffix.lower() not in {".md5", ""}
                   and p.name not in {"MANIFEST.md", "SHA256SUMS"})
    with tempfile.TemporaryDirectory() as tmp:
        da = DocAnchor(Settings.from_env(data_dir=Path(tmp)))
        da.ctx.embedder.embed(["warm-up"])  # load the model outside the timings
        texts: list[str] = []
        docs = pages = 0
        t0 = time.perf_counter()
        for f in files:
            t = time.perf_counter()
            try:
                res = da.ingest_file(f)
            except DocAnchorError as exc:
                print(f"  {f.relative_to(args.corpus)}: error {exc.code} ({time.perf_counter() - t:.1f} s)")
                continue
            docs += 1
            pages += res.record.n_pages or 0
            texts.extend(c.text for c in res.chunks or [])
            print(f"  {f.relative_to(args.corpus)}: ok {res.record.n_chunks} chunks ({time.perf_counter() - t:.1f} s)")
        total = time.perf_counter() - t0
        step = max(1, len(texts) // args.embed_sample) if args.embed_sample else 1
        sample = texts[::step]
        t = time.perf_counter()
        for i in range(0, len(sample), 64):
            da.ctx.embedder.embed(sample[i : i + 64])
        embed_rate = len(sample) / (time.perf_counter() - t)
    n = len(texts)
    print(f"documents {docs}  pages {pages}  chunks {n}  seconds {total:.1f}  "
          f"chunks/s {n / total:.1f}  embedder chunks/s {embed_rate:.1f} (on {len(sample)} of the same chunks)  "
          f"(ingest rate = {100 * (n / total) / embed_rate:.0f} % of bare embedding)")


if __name__ == "__main__":
    main()
