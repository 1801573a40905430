"""How long the ``docanchor`` command takes, as a user runs it: with no server (a cold start per
command) and with ``docanchor serve`` running on the same data dir (commands go through its API).

Builds a data dir from a few corpus files with the real CLI (or uses ``--data-dir``), then times
each command ``--repeat`` times as a subprocess (wall clock and CPU seconds of the child), and
last a bulk ingest of ``--ingest-folder`` into the running server. ``--compare-with DIR`` runs the
same cold commands with another checkout's code (e.g. ``/work/main``) in the same run (the data
dir is then seeded by that checkout, whose records this one reads).

    .venv/bin/python bench/cli_bench.py [--repeat 5] [--compare-with /work/main]

Targets (issue 16): ``search`` against a running server <= 1 s wall; ``list`` without a server <= 2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
CORPUS = REPO / ".." / "shared" / "corpus"
SEED_FILES = ["md/ch04-01-what-is-ownership.md", "txt/sample-french-1.txt", "txt/norwich-city.txt",
              "html/example-with-scripts.html", "csv/country-codes.csv"]
QUERY = "What are the ownership rules?"


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def env_for(code: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCANCHOR_")}
    env.update({"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(code)})
    return env


def timed(args: list[str], code: Path, data: Path) -> tuple[float, float, subprocess.CompletedProcess]:
    """Run ``docanchor --data-dir DATA ARGS`` with ``code``'s modules: (wall s, child CPU s, result)."""
    before = os.times()
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "plugin.cli", "--data-dir", str(data), *args], cwd=code,
                         env=env_for(code), capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({out.returncode}): {out.stderr[-1500:]}")
    return wall, cpu, out


def series(label: str, args: list[str], code: Path, data: Path, repeat: int) -> dict:
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu, _ = timed(args, code, data)
        walls.append(wall)
        cpus.append(cpu)
    row = {"label": label, "wall_p50": statistics.median(walls), "wall_max": max(walls),
           "cpu_p50": statistics.median(cpus)}
    print(f"  {label:<44} wall p50 {row['wall_p50']:6.2f} s  max {row['wall_max']:6.2f} s   "
          f"CPU p50 {row['cpu_p50']:6.2f} s", flush=True)
    return row


def seed(data: Path, code: Path) -> str:
    """Ingest the seed files with ``code``'s CLI (the older checkout when comparing: this one reads
    its records, records stored before sources existed; an older one cannot read newer records)."""
    paths = [str(CORPUS / f) for f in SEED_FILES]
    wall, _, out = timed(["ingest", *paths], code, data)
    print(f"seeded {data} in {wall:.1f} s: {out.stdout.strip().splitlines()[-1]}")
    return next(line.split()[1] for line in out.stdout.splitlines() if line.startswith("ok doc_"))


def start_server(data: Path) -> tuple[subprocess.Popen, Path]:
    from tests.live_server import free_port

    port = free_port()
    log = data.parent / "cli-bench-server.log"
    proc = subprocess.Popen([sys.executable, "-m", "plugin.cli", "--data-dir", str(data), "serve", "--port", str(port)],
                            cwd=REPO, env=env_for(REPO), stdout=log.open("wb"), stderr=subprocess.STDOUT)
    t = time.perf_counter()
    while "serving on" not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.perf_counter() - t > 1800:
            raise SystemExit(f"server did not start: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.5)
    print(f"server up on port {port} after {time.perf_counter() - t:.1f} s (model loaded, store opened)")
    return proc, log


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--data-dir", type=Path, help="an existing data dir (default: a fresh one seeded from the corpus)")
    ap.add_argument("--compare-with", type=Path, help="another checkout whose cold commands run in the same run")
    ap.add_argument("--ingest-folder", type=Path, default=CORPUS / "md",
                    help="folder bulk-ingested into the running server at the end (default ../shared/corpus/md)")
    args = ap.parse_args()
    print(f"start: {uptime()}")
    with tempfile.TemporaryDirectory(prefix="cli-bench-") as tmp:
        data = args.data_dir or Path(tmp) / "data"
        doc_id = seed(data, args.compare_with or REPO) if args.data_dir is None else json.loads(timed(["list", "--json"], REPO, data)[2].stdout)[0]["doc_id"]
        cold = [("list", ["list"]), ("anchor", ["anchor", doc_id]), ("read", ["read", doc_id, "--budget", "300"]),
                ("status", ["status"]), ("search", ["search", QUERY, "--budget", "500"])]
        rows = []
        for code, name in [(REPO, "this checkout")] + ([(args.compare_with, str(args.compare_with))]
                                                        if args.compare_with else []):
            print(f"no server (each command cold-starts; search loads the model), {name}:")
            rows += [series(f"{label} [{name}]", cmd, code, data, args.repeat) for label, cmd in cold
                     if not (cmd[0] == "status" and code != REPO)]
        proc, _ = start_server(data)
        try:
            print("server running, this checkout:")
            warm = [series(f"{label} [server]", cmd, REPO, data, args.repeat) for label, cmd in cold
                    if cmd[0] != "status"]
            folder = Path(tmp) / "bulk"
            shutil.copytree(args.ingest_folder, folder)
            wall, cpu, out = timed(["ingest", "--quiet", str(folder)], REPO, data)
            n_files = sum(1 for p in folder.rglob("*") if p.is_file())
            print(f"  bulk ingest into the server: {n_files} file(s) in {wall:.1f} s wall, client CPU {cpu:.2f} s")
        finally:
            proc.terminate()
            proc.wait(timeout=120)
    by = {r["label"]: r for r in rows + warm}
    print(f"end: {uptime()}")
    print("targets (issue 16):")
    for what, label, target in (("docanchor search against a running server", "search [server]", 1.0),
                                ("docanchor list without a server", "list [this checkout]", 2.0)):
        row = by[label]
        print(f"  {what:<42} wall p50 {row['wall_p50']:.2f} s (target <= {target:g} s): "
              f"{'met' if row['wall_p50'] <= target else 'NOT met'}  (CPU p50 {row['cpu_p50']:.2f} s)")


if __name__ == "__main__":
    main()
