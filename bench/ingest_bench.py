"""Ingest throughput on the real corpus with the real model, against the bare embedder and against
an earlier commit, in the same run.

Each measurement runs in a fresh process: it ingests every file under ``--corpus`` into a fresh data
dir through DocAnchor's real ingest path (``DocAnchor.ingest_many`` where the code has it, else
``ingest_file`` file by file), then embeds the same chunk texts once more with the bare embedder
(``embedder.embed`` on batches of 64, in the chunks' order; an evenly spaced sample of
``--embed-sample`` chunks), so the ratio of the two rates shows what reading, parsing, chunking and
storing cost on top of embedding (target: ingest at >= 90 % of the bare embedder's rate).

With ``--baseline REV`` the same measurement also runs on the code of commit ``REV`` (exported with
``git archive`` into a temporary folder, run with this checkout's virtualenv), and with
``--also-fp32`` on this checkout's code with ``DOCANCHOR_EMBEDDING_PRECISION=fp32`` (what the
pipeline alone gains); the configurations alternate for ``--rounds`` rounds (every other round in
reverse order), and this checkout's chunks/s over each other's (target over the baseline: >= 2.5x
on ../shared/corpus/pdf) is printed per round. ``OMP_WAIT_POLICY`` and
``DOCANCHOR_EMBEDDING_PRECISION`` are removed from the children's environment, so each code runs
its own default.

    .venv/bin/python bench/ingest_bench.py --corpus ../shared/corpus/pdf --baseline 710ac91 --also-fp32 --rounds 2

Prints ``uptime`` at the start and the end, one line per file and run, then per run: documents,
pages, chunks, seconds, chunks/s, embedder chunks/s and the ingest rate as a share of it, and the
CPU it took: the parse workers' (every process below the measuring one: parse and OCR workers,
OCR included; text formats are parsed in the ingest process itself, see
``docanchor.formats.Format.sandboxed``), the measuring process's during the ingest (embedding,
chunking, storing, and those parses) and the
bare embedder's, scaled to all chunks. From these comes the best share any overlap could reach on
this machine when its cores are ours: the bare embedder then keeps them busy (the line says how
many it used; on a busy machine it gets a fraction of one, its wall clock is mostly waiting, and
the measured share is not comparable with the bound), so an ingest
that spread all its CPU perfectly over the same cores would take (ingest CPU + parse CPU) / cores
against the embedder's embed CPU / cores, a share of embed CPU / (ingest CPU + parse CPU) ("bound,
all CPU"); with parsing the only cost beside embedding, embed CPU / (embed CPU + parse CPU)
("bound, parsers"). A measured share near the bound means the parsers limit the rate, far below
it the pipeline's overlap does. ``--suffixes .txt,.md,.docx`` keeps only those files (a corpus
cheap to parse). When
the runs did not all ingest the same files (the baseline refuses a scanned PDF that this checkout
reads with OCR, say), the rounds run again over the files every run ingested, and the same lines
are printed under "like for like".
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ab_cpu import export  # bench/ is this script's directory, first on sys.path
from ingest_phases import descendants

REPO = Path(__file__).resolve().parents[1]
SKIP = {".md5", ""}
SKIP_NAMES = {"MANIFEST.md", "SHA256SUMS"}


def corpus_files(corpus: Path, suffixes: set[str] | None = None) -> list[Path]:
    """The files under ``corpus``, sorted; only those ending in ``suffixes`` when given."""
    return sorted(p for p in corpus.rglob("*") if p.is_file() and p.suffix.lower() not in SKIP
                  and p.name not in SKIP_NAMES and (suffixes is None or p.suffix.lower() in suffixes))


def descendants_cpu() -> float:
    """CPU seconds (user + system) of every process below this one: the live ones with the
    children they reaped (:func:`ingest_phases.descendants`), and those this process reaped
    (``RUSAGE_CHILDREN``). Linux only."""
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return sum(descendants(reaped=True).values()) + reaped.ru_utime + reaped.ru_stime


def child(code_dir: Path, corpus: Path, embed_sample: int, out: Path, only: list[str] | None = None,
          suffixes: set[str] | None = None) -> None:
    """One measurement with the code in ``code_dir`` over the files of ``corpus`` (those named in
    ``only``, paths relative to ``corpus``, when given); the figures go to ``out`` as JSON, with
    each file's outcome (``ok`` or the error code) under ``files``."""
    sys.path.insert(0, str(code_dir))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from docanchor.errors import DocAnchorError
    from docanchor.settings import Settings
    from plugin.api import DocAnchor

    files = [f for f in corpus_files(corpus, suffixes) if only is None or str(f.relative_to(corpus)) in only]
    outcomes: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        da = DocAnchor(Settings.from_env(data_dir=Path(tmp)))
        da.ctx.embedder.embed(["warm-up"])  # load the model, open the store and the lexical index
        _ = da.ctx.store, da.ctx.counter, getattr(da.ctx, "lexical", None)  # outside the timings
        start_s = time.perf_counter() - started
        texts: list[str] = []
        docs = pages = 0
        c0, k0 = time.process_time(), descendants_cpu()
        t0 = time.perf_counter()
        if hasattr(da, "ingest_many"):
            results = ((f, o.result, o.error) for f, o in zip(files, da.ingest_many(files)))
        else:
            results = (_one_by_one(da, f, DocAnchorError) for f in files)
        for f, res, err in results:
            at = time.perf_counter() - t0
            outcomes[str(f.relative_to(corpus))] = err.code if err is not None else "ok"
            if err is not None:
                print(f"  {f.relative_to(corpus)}: error {err.code} (at {at:.1f} s)", flush=True)
                continue
            docs += 1
            pages += res.record.n_pages or 0
            texts.extend(getattr(c, "embedding_text", c.text) for c in res.chunks or [])
            print(f"  {f.relative_to(corpus)}: ok {res.record.n_chunks} chunks (at {at:.1f} s)", flush=True)
        total = time.perf_counter() - t0
        ingest_cpu, parse_cpu = time.process_time() - c0, descendants_cpu() - k0
        step = max(1, len(texts) // embed_sample) if embed_sample else 1
        sample = texts[::step]
        t, e0 = time.perf_counter(), time.process_time()
        for i in range(0, len(sample), 64):
            da.ctx.embedder.embed(sample[i : i + 64])
        embed_wall, embed_cpu = time.perf_counter() - t, time.process_time() - e0
        embed_rate = len(sample) / embed_wall
        da.close()
    emb = da.ctx.embedder
    out.write_text(json.dumps({
        "start_s": start_s, "files": outcomes, "docs": docs, "pages": pages, "chunks": len(texts), "seconds": total, "rate": len(texts) / total,
        "embed_rate": embed_rate, "sample": len(sample), "ingest_cpu_s": ingest_cpu, "parse_cpu_s": parse_cpu,
        "embed_cpu_s": embed_cpu * len(texts) / max(1, len(sample)), "embed_cores": embed_cpu / max(embed_wall, 1e-9),
        "precision": getattr(emb, "precision", "fp32"),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"), "code": str(Path(sys.modules["plugin.api"].__file__).parents[1]),
    }))


def _one_by_one(da, f: Path, error_type):
    try:
        return f, da.ingest_file(f), None
    except error_type as exc:
        return f, None, exc


def _line(label: str, r: dict) -> str:
    return (f"{label:>10}: start-up {r['start_s']:.1f} s (not counted)  documents {r['docs']}  pages {r['pages']}  chunks {r['chunks']}  seconds {r['seconds']:.1f}  "
            f"chunks/s {r['rate']:.1f}  embedder chunks/s {r['embed_rate']:.1f} (on {r['sample']} of the same chunks, "
            f"{r['precision']}, OMP_WAIT_POLICY={r['omp_wait_policy'] or 'default'})  "
            f"ingest rate = {100 * r['rate'] / r['embed_rate']:.0f} % of bare embedding  [code {r['code']}]"
            + (f"\n{'':>12}CPU s: parse workers {r['parse_cpu_s']:.1f}, ingest process {r['ingest_cpu_s']:.1f}, "
               f"bare embedder {r['embed_cpu_s']:.1f} (all chunks; it used {r['embed_cores']:.2f} of {os.cpu_count()} "
               f"cores)  best share on idle cores: bound, all CPU {100 * _bound_all(r):.0f} %; bound, parsers "
               f"{100 * _bound_parsers(r):.0f} %" if "parse_cpu_s" in r else ""))


def _bound_all(r: dict) -> float:
    """The best share of the bare embedder's rate an ingest using this CPU could reach (see the
    module docstring): embed CPU / (ingest process CPU + parse workers' CPU)."""
    return r["embed_cpu_s"] / max(r["ingest_cpu_s"] + r["parse_cpu_s"], 1e-9)


def _bound_parsers(r: dict) -> float:
    """The same with embedding and parsing the only costs: embed CPU / (embed CPU + parse CPU)."""
    return r["embed_cpu_s"] / max(r["embed_cpu_s"] + r["parse_cpu_s"], 1e-9)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=REPO / ".." / "shared" / "corpus")
    ap.add_argument("--embed-sample", type=int, default=3000,
                    help="chunks (evenly spaced over all of them) the bare embedder re-embeds; 0 = all")
    ap.add_argument("--baseline", metavar="REV", help="also measure the code of this commit, alternating")
    ap.add_argument("--also-fp32", action="store_true",
                    help="also measure this checkout with DOCANCHOR_EMBEDDING_PRECISION=fp32")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--suffixes", help="only files ending in these, comma-separated (.txt,.md,.docx: cheap to parse)")
    ap.add_argument("--child", nargs="+", metavar="CODE_DIR OUT [FILES_JSON]", help=argparse.SUPPRESS)
    args = ap.parse_args()
    corpus = args.corpus.resolve()
    if args.child:
        only = json.loads(Path(args.child[2]).read_text()) if len(args.child) > 2 else None
        child(Path(args.child[0]), corpus, args.embed_sample, Path(args.child[1]), only, _suffixes(args))
        return
    print(f"uptime at start: {os.popen('uptime').read().strip()}", flush=True)
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "DOCANCHOR_EMBEDDING_PRECISION")}
    with tempfile.TemporaryDirectory() as tmp:
        configs = {"this": (REPO, env)}  # label: (code, environment)
        if args.also_fp32:
            configs["this-fp32"] = (REPO, env | {"DOCANCHOR_EMBEDDING_PRECISION": "fp32"})
        if args.baseline:
            configs["baseline"] = (export(args.baseline, Path(tmp) / "baseline"), env)
        runs = _rounds(configs, args, corpus, Path(tmp))
        _report(runs, args.baseline, f"corpus {corpus}, {os.cpu_count()} CPUs")
        common, left_out = _common_files(runs)
        if left_out:
            print(f"\nlike for like: the {len(common)} files every run ingested, without "
                  + ", ".join(left_out) + " (ingested by some runs, refused by others)", flush=True)
            like = _rounds(configs, args, corpus, Path(tmp), only=common)
            _report(like, args.baseline, f"like for like ({len(common)} files both codes ingested)")
    print(f"uptime at end: {os.popen('uptime').read().strip()}")


def _rounds(configs: dict, args, corpus: Path, tmp: Path, only: list[str] | None = None) -> dict[str, list[dict]]:
    """Run every configuration ``args.rounds`` times, alternating their order (against load
    drift); with ``only``, over those files of the corpus alone."""
    runs: dict[str, list[dict]] = {label: [] for label in configs}
    files_arg: list[str] = []
    if only is not None:
        (tmp / "only.json").write_text(json.dumps(only))
        files_arg = [str(tmp / "only.json")]
    for r in range(args.rounds):
        for label in list(configs) if r % 2 == 0 else list(configs)[::-1]:
            code, child_env = configs[label]
            out = tmp / f"{label}-{r}.json"
            print(f"{label} ({args.baseline if label == 'baseline' else 'this checkout'}), round {r + 1}"
                  + (f", {len(only)} files" if only is not None else "") + ":", flush=True)
            subprocess.run([sys.executable, __file__, "--corpus", str(corpus), "--embed-sample", str(args.embed_sample),
                            *(["--suffixes", args.suffixes] if args.suffixes else []),
                            "--child", str(code), str(out), *files_arg], env=child_env, check=True)
            runs[label].append(json.loads(out.read_text()))
    return runs


def _suffixes(args) -> set[str] | None:
    return {x.strip().lower() for x in args.suffixes.split(",") if x.strip()} if args.suffixes else None


def _common_files(runs: dict[str, list[dict]]) -> tuple[list[str], list[str]]:
    """The files every run ingested, and those some ingested and others refused."""
    ok = [{f for f, what in r["files"].items() if what == "ok"} for rs in runs.values() for r in rs]
    common, anywhere = set.intersection(*ok), set.union(*ok)
    return sorted(common), sorted(anywhere - common)


def _report(runs: dict[str, list[dict]], baseline: str | None, title: str) -> None:
    print(f"\n{title}")
    for label, rs in runs.items():
        for r in rs:
            print(_line(label, r))
    for label, rs in runs.items():
        shares = [r["rate"] / r["embed_rate"] for r in rs]
        print(f"{label}: ingest rate / bare embedder rate, same process: "
              + ", ".join(f"{100 * x:.0f} %" for x in shares) + f" (median {100 * statistics.median(shares):.0f} %,"
              f" target >= 90 %); chunks/s median {statistics.median(r['rate'] for r in rs):.1f}"
              + (f"; best share from the CPU used, median: all CPU {100 * statistics.median(_bound_all(r) for r in rs):.0f} %,"
                 f" parsers alone {100 * statistics.median(_bound_parsers(r) for r in rs):.0f} %"
                 if all("parse_cpu_s" in r for r in rs) else ""))
    for label in [x for x in runs if x != "this"]:
        ratios = [t["rate"] / b["rate"] for t, b in zip(runs["this"], runs[label])]
        print(f"chunks/s, this checkout ({runs['this'][0]['precision']}) / {label} ({runs[label][0]['precision']}"
              f"{', ' + baseline if label == 'baseline' else ''}), per round: "
              + ", ".join(f"{x:.2f}x" for x in ratios) + f" (median {statistics.median(ratios):.2f}x"
              + (", target >= 2.5x)" if label == "baseline" else ")"))


if __name__ == "__main__":
    main()
