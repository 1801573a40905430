"""CPU per read window, in-process and over HTTP (trial D4: every window read the whole document).

Reads windows of one stored document at several budgets from three kinds of start -- its
beginning, its outline's headings (every ``--heading-step``-th), and cursors spread evenly over its
characters -- and prints, per budget and kind, the median and mean CPU milliseconds of a window:

- in-process: the calling thread's CPU time (``time.thread_time``) around ``DocAnchor.read``;
- over HTTP: a real ``docanchor serve`` on a loopback port (one process, the data dir's store),
  the server process's CPU time (``/proc/<pid>/stat``, all its threads) across each request to
  ``POST /v1/read`` and to LobeChat's ``/lobechat/readDocument``, and the request's wall time.

The data dir must hold the document already (e.g. ``docanchor ingest`` of the novel). Run it with
each checkout's own interpreter to compare (its editable install decides the code read)::

    HF_HUB_OFFLINE=1 .venv/bin/python bench/read_bench.py --data-dir /tmp/novel-data
    HF_HUB_OFFLINE=1 /work/main/.venv/bin/python bench/read_bench.py --data-dir /tmp/novel-data

CPU times under load are what the process spent, not how long it waited; the load average is
printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cpu_s(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1000
    return 0.0


def _post(url: str, body: dict, timeout_s: float = 600) -> bytes:
    req = urllib.request.Request(url, data=json.dumps(body, ensure_ascii=False).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:
        return resp.read()


def _starts(record, heading_step: int, cursors: int) -> list[tuple[str, str | None]]:
    out: list[tuple[str, str | None]] = [("beginning", None)]
    out += [("heading", h) for h in record.outline[::heading_step]]
    out += [("cursor", f"char:{record.n_chars * (k + 1) // (cursors + 1)}") for k in range(cursors)]
    return out


def _line(label: str, ms: list[float]) -> str:
    return f"{label:34} n={len(ms):3}  median {statistics.median(ms):8.1f}  mean {statistics.fmean(ms):8.1f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--doc-id", help="the document to read (default: the one with the most chunks)")
    ap.add_argument("--budgets", default="150,500,2000")
    ap.add_argument("--heading-step", type=int, default=5)
    ap.add_argument("--cursors", type=int, default=10)
    ap.add_argument("--no-http", action="store_true")
    args = ap.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]

    import plugin
    from docanchor.settings import Settings
    from plugin.api import DocAnchor

    repo = Path(plugin.__file__).resolve().parents[1]
    print(f"code {repo}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    settings = Settings.from_env(data_dir=args.data_dir)
    with DocAnchor(settings) as da:
        records = da.list_documents()
        record = next(r for r in records if r.doc_id == args.doc_id) if args.doc_id else max(
            records, key=lambda r: r.n_chunks)
        starts = _starts(record, args.heading_step, args.cursors)
        print(f"document {record.doc_id} {record.title!r}: {record.n_chunks} chunks, {record.n_chars} chars; "
              f"{len(starts)} starts")
        da.read(record.doc_id, budget_tokens=150)  # opens the store and the lexical index
        for budget in budgets:
            by_kind: dict[str, list[float]] = {}
            for kind, start in starts:
                t = time.thread_time()
                da.read(record.doc_id, start=start, budget_tokens=budget)
                by_kind.setdefault(kind, []).append((time.thread_time() - t) * 1000)
            every = [ms for v in by_kind.values() for ms in v]
            print(_line(f"in-process {budget:5} all", every))
            for kind, ms in by_kind.items():
                print(_line(f"in-process {budget:5} {kind}", ms))
        print(f"in-process RSS {_rss_mb(os.getpid()):.0f} MB; load {os.getloadavg()[0]:.2f}")
    if args.no_http:
        return

    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("DOCANCHOR_")}, "HF_HUB_OFFLINE": "1"}
    log = open(Path(args.data_dir).parent / f"read-bench-{port}.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "plugin.cli", "--data-dir", args.data_dir, "serve", "--host",
                             "127.0.0.1", "--port", str(port)], cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(2400):
            try:
                urllib.request.urlopen(base + "/healthz", timeout=5).read()
                break
            except OSError:
                time.sleep(0.5)
        _post(base + "/v1/read", {"doc_id": record.doc_id, "budget_tokens": 150})
        for route, body in (("/v1/read", lambda s, b: {"doc_id": record.doc_id, "from": s, "budget_tokens": b}),
                            ("/lobechat/readDocument", lambda s, b: {"doc_id": record.doc_id, "from": s,
                                                                     "budget_tokens": b})):
            for budget in budgets:
                cpu, wall = [], []
                for _, start in starts:
                    sent = {k: v for k, v in body(start, budget).items() if v is not None}
                    c, t = _cpu_s(proc.pid), time.perf_counter()
                    _post(base + route, sent)
                    wall.append((time.perf_counter() - t) * 1000)
                    cpu.append((_cpu_s(proc.pid) - c) * 1000)
                print(_line(f"HTTP {route} {budget:5} server CPU", cpu) + f"   wall median {statistics.median(wall):7.1f} ms")
        print(f"server RSS after the reads {_rss_mb(proc.pid):.0f} MB; load {os.getloadavg()[0]:.2f}")
    finally:
        proc.terminate()
        proc.wait(timeout=120)
        log.close()


if __name__ == "__main__":
    main()
