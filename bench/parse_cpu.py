"""CPU seconds of the PDF parse per file, this checkout against an earlier commit, and a check
that both extract exactly the same thing.

Each measurement runs in a fresh process that calls ``ingest.parsers.pdf.parse_pdf`` in process
(no sandbox worker: the worker runs the same function) on every PDF under ``--corpus`` and reads
``time.process_time`` around each call, so the figures depend little on how busy the machine is
(a full garbage collection runs before each file, outside the clock, so a file does not pay for
the garbage of the one before). The garbage collector's thresholds are those of each code's parse
worker (``ingest.sandbox.WORKER_GC_THRESHOLD`` where the code has it, else CPython's default).
The whole result of each file -- text, blocks (pages, kinds, heading paths), title, page count
and flags, or the error code and message -- is written as canonical JSON; the script asserts
that the two codes' JSON is identical byte for byte for every file, and prints the first
difference when it is not.

With ``--ocr`` a file without a text layer (``no_text_layer``) is also read by OCR in the same
process, page by page, as :mod:`ingest.scanned` has its workers do (``ingest.ocr.ocr_page``): the
OCR's CPU counts in the file's figure (the engine is loaded before the clock runs) and the
paragraphs of every page join the compared result.

With ``--baseline REV`` the same runs on the code of commit ``REV``; the codes alternate in fresh
processes for ``--rounds`` rounds and each file's figure is the least CPU over the rounds (the
method, export and report are :mod:`bench.ab_cpu`'s).

    .venv/bin/python bench/parse_cpu.py --corpus ../shared/corpus/pdf --baseline 022dd6a --rounds 3

Prints ``uptime`` at the start and the end, the peak resident memory of each run, one line per file (pages, CPU s of each code, their
ratio, identical or not) and the totals. Exits with status 1 when an output differs.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import logging
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from bench.ab_cpu import Runs, Table, compare  # after the sys.path insert


def corpus_pdfs(corpus: Path) -> list[Path]:
    """The PDF files under ``corpus``, sorted by path."""
    return sorted(p for p in corpus.rglob("*") if p.is_file() and p.suffix.lower() == ".pdf")


def child(code_dir: Path, corpus: Path, out: Path, ocr: bool = False) -> None:
    """Parse every PDF of ``corpus`` with the code in ``code_dir``; write ``{file: {cpu_s,
    pages, result}}`` and the process's peak resident memory (MB) to ``out`` (``result``:
    canonical JSON of the document or the error)."""
    sys.path.insert(0, str(code_dir))
    for name in ("pypdf", "pdfminer", "fontTools"):  # as in a parse worker (ingest.sandbox.QUIET_LOGGERS)
        logging.getLogger(name).setLevel(logging.ERROR)
    from docanchor.errors import DocAnchorError
    from ingest import sandbox

    gc.set_threshold(*getattr(sandbox, "WORKER_GC_THRESHOLD", gc.get_threshold()))  # as in that code's worker
    from ingest.parsers.pdf import parse_pdf

    _import_libraries()
    if ocr:
        from ingest import ocr as ocr_module

        ocr_module.engine()  # the models load outside the clock, as in a warm OCR worker
    figures = {}
    for path in corpus_pdfs(corpus):
        data = path.read_bytes()
        gc.collect()  # the garbage of the files before is not this file's cost
        c0 = time.process_time()
        try:
            parsed = parse_pdf(data, path.name)
            result, pages = dataclasses.asdict(parsed), parsed.n_pages
        except DocAnchorError as err:
            result, pages = {"error": err.code, "message": str(err), "details": err.details}, None
            if ocr and err.code == "no_text_layer":
                result["ocr"] = [ocr_module.ocr_page("pdf", data, n).paragraphs
                                 for n in range(1, err.details.get("n_pages", 0) + 1)]
        cpu_s = time.process_time() - c0
        figures[str(path.relative_to(corpus))] = {
            "cpu_s": cpu_s, "pages": pages,
            "result": json.dumps(result, sort_keys=True, ensure_ascii=False, default=repr)}
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out.write_text(json.dumps({"files": figures, "peak_rss_mb": peak_mb}))


def _import_libraries() -> None:
    """Import pypdf and pdfminer.six before the clock runs (the first file would pay for it)."""
    import pdfminer.converter  # noqa: F401
    import pdfminer.pdfinterp  # noqa: F401
    import pypdf  # noqa: F401


def _peaks_then_files(runs: Runs) -> Runs:
    """Print each run's peak resident memory; the per-file figures, files sorted by name."""
    print("peak RSS of the parsing process, MB: " + "; ".join(
        f"{label} " + ", ".join(f"{run['peak_rss_mb']:.0f}" for run in rs) for label, rs in runs.items()))
    return {label: [{name: run["files"][name] for name in sorted(run["files"])} for run in rs]
            for label, rs in runs.items()}


TABLE = Table(name_width=44, name_cell=str, extras=[("pages", 5, lambda f: f["pages"] or "-")],
              column="output", noun="outputs", same="identical byte for byte in every file and run")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=REPO / ".." / "shared" / "corpus" / "pdf")
    ap.add_argument("--baseline", metavar="REV", help="also measure the code of this commit, alternating")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--ocr", action="store_true", help="also OCR the files without a text layer, in process")
    ap.add_argument("--child", nargs=2, metavar=("CODE_DIR", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    corpus = args.corpus.resolve()
    if args.child:
        child(Path(args.child[0]), corpus, Path(args.child[1]), args.ocr)
        return
    compare(__file__, ["--corpus", str(corpus), *(["--ocr"] if args.ocr else [])], args.baseline, args.rounds,
            TABLE, _peaks_then_files)


if __name__ == "__main__":
    main()
