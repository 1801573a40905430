"""Memory and time of one huge ingest, stage by stage (issue 18: a 40 MB text reached 3.8 GB while chunking).

A text of ``--mb`` megabytes is generated (deterministically) and ingested through the real path
(:meth:`plugin.api.DocAnchor.ingest_bytes`: detect, parse, chunk, embed, Chroma, BM25, anchor)
into a fresh data dir. One line per stage gives its seconds and the peak resident-memory growth of
this process during it (Linux ``VmHWM``, reset at each stage start through ``/proc/self/clear_refs``;
growth over the RSS before the ingest, since the model and libraries are resident before any file
arrives). The last lines give the data dir's growth on disk per chunk next to the estimate the
free-space check uses (:func:`docanchor.disk.chunk_store_bytes`).

    python bench/big_ingest.py --mb 40                       # prose with paragraphs, hashed vectors
    python bench/big_ingest.py --mb 40 --kind oneline        # one 40 MB line (a single block)
    python bench/big_ingest.py --mb 10 --vectors model       # the real model embeds too (slow)
    python bench/big_ingest.py --mb 40 --stop-after chunking # parse and chunk only
    python bench/big_ingest.py --mb 10 --repo ../main        # the same on another checkout (before/after)

``--vectors hash`` (default) keeps the real tokenizers and the model's dimension (so chunking and
memory are real) but computes vectors by hashing words instead of running the model, which would
take hours for 40 MB on a laptop CPU.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import random
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
_KIB, _MIB = 1024, 1024 * 1024


def _status_kib(key: str) -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(key + ":"))


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
        fh.write("5")


def make_text(mb: float, kind: str, source: Path) -> bytes:
    """``mb`` megabytes of English built from ``source``'s words: ``prose`` (sentences in paragraphs
    of 3-8 sentences), ``lines`` (one sentence per line) or ``oneline`` (no line break at all)."""
    rng = random.Random(18)
    words = source.read_text(encoding="utf-8").split()
    target, size, parts = int(mb * 1_000_000), 0, []
    while size < target:
        sentence = " ".join(rng.choice(words) for _ in range(rng.randint(8, 24))).rstrip(".") + "."
        sep = {"prose": "\n\n" if rng.random() < 0.2 else " ", "lines": "\n", "oneline": " "}[kind]
        parts.append(sentence + sep)
        size += len(sentence) + len(sep)
    return "".join(parts).encode("utf-8")


class HashedVectors:
    """The configured model's tokenizer, token limit and dimension, with hashed-word vectors."""

    def __init__(self, model) -> None:
        self.model = model
        self.name, self.dimension, self.token_limit = model.name, model.dimension, model.token_limit

    def count_tokens(self, text: str) -> int:
        return self.model.count_tokens(text)

    def embed(self, texts):
        out = []
        for text in texts:
            v = [0.0] * self.dimension
            for w in text.lower().split():
                v[int.from_bytes(hashlib.blake2b(w.encode(), digest_size=4).digest(), "little") % self.dimension] += 1
            norm = math.sqrt(sum(x * x for x in v)) or 1.0
            out.append([x / norm for x in v])
        return out

    def embed_query(self, text: str):
        return self.embed([text])[0]


class _Stop(Exception):
    pass


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=40.0, help="size of the generated text in megabytes (default 40)")
    ap.add_argument("--kind", choices=("prose", "lines", "oneline"), default="prose")
    ap.add_argument("--vectors", choices=("hash", "model"), default="hash")
    ap.add_argument("--stop-after", choices=("chunking", "embedding", "all"), default="all")
    ap.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1],
                    help="the DocAnchor checkout to measure (default: this one)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(args.repo.resolve()))
    from docanchor.embedder import get_embedder
    from docanchor.settings import Settings
    from plugin.api import DocAnchor

    source = Path(__file__).resolve().parents[2] / "shared/corpus/txt/norwich-city.txt"
    data = make_text(args.mb, args.kind, source)
    model = get_embedder()
    model.count_tokens("warm up")
    embedder = model if args.vectors == "model" else HashedVectors(model)
    stages: list[dict] = []  # name, started, peak_kib (growth), seconds, units
    base_kib = _status_kib("VmRSS")

    def close_stage() -> None:
        if stages:
            stages[-1]["peak_kib"] = _status_kib("VmHWM") - base_kib
            stages[-1]["seconds"] = time.perf_counter() - stages[-1]["started"]

    def progress(stage: str, done: int, total: int) -> None:
        if not stages or stages[-1]["name"] != stage:
            close_stage()
            if (stage, args.stop_after) in (("embedding", "chunking"), ("storing", "embedding")):
                raise _Stop
            _reset_peak()
            stages.append({"name": stage, "started": time.perf_counter(), "peak_kib": 0, "seconds": 0.0})
        stages[-1]["units"] = total

    print(f"repo {args.repo.resolve()}; {len(data):,} bytes of {args.kind} text; vectors: {args.vectors} "
          f"({embedder.name}, {embedder.dimension} dims); RSS before the ingest {base_kib / _KIB:.0f} MiB")
    with tempfile.TemporaryDirectory(prefix="big-ingest-") as tmp:
        try:
            settings = Settings(data_dir=Path(tmp) / "data", min_free_disk_bytes=0)
        except TypeError:  # a checkout from before the free-space check
            settings = Settings(data_dir=Path(tmp) / "data")
        da = DocAnchor(settings, embedder=embedder)
        da.list_documents()
        before_disk = _dir_bytes(Path(tmp))
        started, result = time.perf_counter(), None
        _reset_peak()
        try:
            result = da.ingest_bytes(data, filename=f"big-{args.kind}.txt", progress=progress)
        except _Stop:
            pass
        close_stage()
        total_s = time.perf_counter() - started
        print(f"{'stage':<10} {'seconds':>8} {'peak MiB':>9}  units (characters while chunking, else chunks)")
        for st in stages:
            print(f"{st['name']:<10} {st['seconds']:>8.1f} {st['peak_kib'] / _KIB:>9.0f}  {st.get('units', 0):,}")
        print(f"{'total':<10} {total_s:>8.1f} {max(st['peak_kib'] for st in stages) / _KIB:>9.0f}")
        if result is not None:
            grown = _dir_bytes(Path(tmp)) - before_disk
            n = result.record.n_chunks
            line = f"chunks {n:,}; data dir grew {grown / _MIB:.1f} MiB = {grown / n:,.0f} bytes per chunk"
            try:
                from docanchor.disk import chunk_store_bytes

                line += f"; free-space estimate {chunk_store_bytes(n, embedder.dimension) / n:,.0f} bytes per chunk"
            except ImportError:
                pass
            print(line)
        da.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
