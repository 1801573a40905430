"""Resident memory of one ``docanchor serve`` before and after it ingests files (trial D10: workers
of ``serve --workers 2`` held 1.76/1.83 GB after 10,011 chunks, 0.88/0.90 GB after a restart).

A real ``docanchor serve`` (real model, embedded Chroma, a fresh data dir) on a loopback port:
its RSS (``VmRSS`` of the serving process, parse workers not counted) once it answers a search
(model loaded, nothing stored), then after each file is uploaded and its job has ended, then
after ``--settle-s`` seconds idle. ``--env K=V`` passes settings to the server (e.g.
``MALLOC_ARENA_MAX=2``), to compare runs.

    python bench/serve_rss.py ../shared/corpus/pdf ../shared/cases/a13_txt_gbk_chinese_no_spaces.txt
    python bench/serve_rss.py --env MALLOC_ARENA_MAX=2 ../shared/corpus/pdf

``--reads N`` then pages through each stored document with ``POST /v1/read`` (N windows at
``--read-budget`` tokens from its beginning, and one window from each outline heading) and
prints the RSS after the reads (trial D5: idle workers held 1.05-1.10 GB after reading the
novel). ``--data-dir`` serves an existing data dir instead of a fresh one (files to upload are
then optional); ``--repo`` is the checkout the server runs from (default: this one), to compare
two checkouts on one data dir, each with its own interpreter::

    python bench/serve_rss.py --data-dir /tmp/novel-data --reads 200
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_MB = 1_000_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rss_mb(pid: int) -> tuple[float, float, float]:
    """``(VmRSS, VmHWM, RssFile)`` of ``pid`` in MB (RssFile: mapped files, e.g. the model and the
    index segments, which the system can drop and read again; the rest is the heap)."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return tuple(int(fields[k].split()[0]) * 1024 / _MB for k in ("VmRSS", "VmHWM", "RssFile"))  # type: ignore


def _cpu_s(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")


def _call(base: str, method: str, path: str, body: bytes | None = None, ctype: str = "application/json",
          timeout_s: float = 600) -> tuple[int, dict]:
    req = urllib.request.Request(base + path, data=body, method=method, headers={"Content-Type": ctype})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


def _upload(base: str, path: Path) -> dict:
    """POST the file, then poll its job until it ends; the job (or the synchronous answer)."""
    boundary = uuid.uuid4().hex
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{path.name}\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode() + path.read_bytes() + \
        f"\r\n--{boundary}--\r\n".encode()
    status, got = _call(base, "POST", "/v1/documents?wait_s=0", body, f"multipart/form-data; boundary={boundary}")
    job_id = got.get("job_id")
    while status == 202 or (job_id and got.get("status") in ("queued", "running")):
        time.sleep(1.0)
        status, got = _call(base, "GET", f"/v1/jobs/{job_id}")
    return got


def _read_all(base: str, windows: int, budget: int) -> int:
    """Page through every stored document: ``windows`` windows of ``budget`` tokens from its
    beginning, then one from each outline heading. Returns how many windows were read."""
    done = 0
    for doc in _call(base, "GET", "/v1/documents?limit=100")[1].get("documents", []):
        start = None
        for _ in range(windows):
            body = {"doc_id": doc["doc_id"], "budget_tokens": budget, **({"from": start} if start else {})}
            got = _call(base, "POST", "/v1/read", json.dumps(body).encode())[1]
            done, start = done + 1, got.get("next_cursor")
            if not start:
                break
        record = _call(base, "GET", f"/v1/documents/{doc['doc_id']}")[1]
        for heading in record.get("outline", []):
            _call(base, "POST", "/v1/read", json.dumps({"doc_id": doc["doc_id"], "from": heading,
                                                          "budget_tokens": budget}).encode())
            done += 1
    return done


def _files(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        out += sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--data-dir", help="serve this existing data dir (kept) instead of a fresh one")
    ap.add_argument("--reads", type=int, default=0, help="windows to page through per document after the uploads")
    ap.add_argument("--read-budget", type=int, default=500)
    ap.add_argument("--repo", default=str(REPO), help="the checkout the server runs from")
    ap.add_argument("--env", action="append", default=[], help="K=V for the server's environment")
    ap.add_argument("--settle-s", type=float, default=10.0)
    args = ap.parse_args()
    extra = dict(e.split("=", 1) for e in args.env)
    port, tmp = _free_port(), Path(tempfile.mkdtemp(prefix="serve-rss-"))
    base = f"http://127.0.0.1:{port}"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("DOCANCHOR_")}, "HF_HUB_OFFLINE": "1", **extra}
    log = open(tmp / "server.log", "wb")
    data = args.data_dir or str(tmp / "data")
    proc = subprocess.Popen([sys.executable, "-m", "plugin.cli", "--data-dir", data, "serve",
                             "--host", "127.0.0.1", "--port", str(port)], cwd=args.repo, env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        for _ in range(1200):
            try:
                if _call(base, "GET", "/healthz", timeout_s=5)[0] == 200:
                    break
            except OSError:
                time.sleep(0.5)
        _call(base, "POST", "/v1/retrieve", json.dumps({"query": "warm up the model", "budget_tokens": 300}).encode())
        rss, hwm, files = _rss_mb(proc.pid)
        print(f"env {extra or '{}'}; load {os.getloadavg()[0]:.1f}")
        print(f"ready, model loaded:      RSS {rss:7.0f} MB  peak {hwm:7.0f} MB  files {files:5.0f} MB  "
              f"cpu {_cpu_s(proc.pid):6.1f} s")
        chunks = 0
        for f in _files(args.paths):
            job = _upload(base, f)
            chunks += int((job.get("result") or {}).get("n_chunks") or job.get("n_chunks") or 0)
            rss, hwm, files = _rss_mb(proc.pid)
            print(f"{f.name[:24]:24} {job.get('status', '?'):9} RSS {rss:7.0f} MB  peak {hwm:7.0f} MB  "
                  f"files {files:5.0f} MB  chunks so far {chunks}", flush=True)
        if args.reads:
            windows = _read_all(base, args.reads, args.read_budget)
            rss, hwm, files = _rss_mb(proc.pid)
            print(f"after {windows} read windows:     RSS {rss:7.0f} MB  peak {hwm:7.0f} MB  files {files:5.0f} MB  "
                  f"cpu {_cpu_s(proc.pid):6.1f} s", flush=True)
        time.sleep(args.settle_s)
        rss, hwm, files = _rss_mb(proc.pid)
        print(f"after {args.settle_s:.0f} s idle:          RSS {rss:7.0f} MB  peak {hwm:7.0f} MB  files {files:5.0f} MB  cpu "
              f"{_cpu_s(proc.pid):6.1f} s  chunks {chunks}; load {os.getloadavg()[0]:.1f}")
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()
        subprocess.run(["rm", "-rf", str(tmp)], check=False)  # a --data-dir is elsewhere, kept


if __name__ == "__main__":
    main()
