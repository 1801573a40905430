"""CPU seconds of chunking per file, this checkout against an earlier commit, and a check that
both cut exactly the same chunks.

Each measurement runs in a fresh process that parses every file given (in process, no sandbox
worker) and then times ``ingest.chunking.chunk_document`` alone with ``time.process_time``, with
the real embedding model's tokenizer and the default settings (the model loads before the clock
runs; a full garbage collection runs before each file, outside the clock). Every chunk's offsets,
token count, pages, headings and context are written as canonical JSON; the script asserts that
the two codes' chunks are identical for every file.

With ``--baseline REV`` the same runs on the code of commit ``REV``; the codes alternate in fresh
processes for ``--rounds`` rounds and each file's figure is the least CPU over the rounds (the
method, export and report are :mod:`bench.ab_cpu`'s).

    .venv/bin/python bench/chunk_cpu.py ../shared/corpus/txt/sanguo_yanyi_gbk.txt --baseline main --rounds 3

Prints ``uptime`` at the start and the end, one line per file (characters, chunks, CPU s of each
code, their ratio, identical or not) and the totals. Exits with status 1 when chunks differ.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
from bench.ab_cpu import Table, compare  # after the sys.path insert


def child(code_dir: Path, files: list[Path], out: Path) -> None:
    """Chunk every file with the code in ``code_dir``; write ``{file: {cpu_s, chars, chunks, result}}`` to ``out``."""
    sys.path.insert(0, str(code_dir))
    from docanchor.context import Context
    from docanchor.errors import DocAnchorError
    from docanchor.settings import Settings
    from ingest.chunking import chunk_document
    from ingest.detect import detect_type
    from ingest.scanned import OcrOptions, parse_document

    settings = Settings()
    ocr = OcrOptions(enabled=settings.ocr == "on", max_pages=settings.ocr_max_pages)  # as ingest.pipeline.prepare
    with tempfile.TemporaryDirectory() as data_dir:
        ctx = Context(settings.with_(data_dir=data_dir))
        ctx.embedder.load()  # outside the clock, as in a server that has ingested once
        figures = {}
        for path in files:
            data = path.read_bytes()
            try:
                parsed = parse_document(detect_type(data, path.name), data, path.name, ocr=ocr)
            except DocAnchorError as err:  # nothing to chunk (empty, no text layer...): said in the table
                figures[str(path)] = {"cpu_s": 0.0, "chars": 0, "chunks": 0, "result": err.code}
                continue
            gc.collect()
            c0 = time.process_time()
            chunks = chunk_document(parsed, "doc", counter=ctx.counter, embedder=ctx.embedder, settings=settings)
            cpu_s = time.process_time() - c0
            result = [[c.start_char, c.end_char, c.n_tokens, c.page_start, c.page_end, list(c.heading_path), c.kind,
                       c.context, c.gap_after, c.joins_next] for c in chunks]
            figures[str(path)] = {"cpu_s": cpu_s, "chars": len(parsed.text), "chunks": len(chunks),
                                  "result": json.dumps(result, ensure_ascii=False)}
        ctx.close()
    out.write_text(json.dumps(figures))


TABLE = Table(name_width=40, name_cell=lambda name: Path(name).name[:40],
              extras=[("chars", 9, lambda f: f["chars"]), ("chunks", 7, lambda f: f["chunks"])],
              column="chunks", noun="chunks", same="identical in every file and run")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", type=Path, nargs="+", help="documents to chunk (any type DocAnchor reads)")
    ap.add_argument("--baseline", metavar="REV", help="also measure the code of this commit, alternating")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--child", nargs=2, metavar=("CODE_DIR", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    files = [f.resolve() for f in args.files]
    if args.child:
        child(Path(args.child[0]), files, Path(args.child[1]))
        return
    compare(__file__, [str(f) for f in files], args.baseline, args.rounds, TABLE)


if __name__ == "__main__":
    main()
