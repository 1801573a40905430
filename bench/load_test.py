"""Load test: 8 concurrent clients against a real ``docanchor serve`` on loopback, then an audit.

    python bench/load_test.py [--seconds 60] [--clients 8] [--max-requests 20000] [--chroma-server]

The script starts ``docanchor serve`` (real embedding model) on a free port with a temporary data
dir -- and with ``--chroma-server`` a ``chroma run`` on another free port, passed to DocAnchor as
``DOCANCHOR_CHROMA_HOST``/``DOCANCHOR_CHROMA_PORT``. Each client thread mixes uploads (small real
files from ../shared/corpus, shared by all clients, and generated Markdown texts of its own),
re-uploads of the same bytes, deletes and replaces of its own documents, retrievals, reads and
lists, until ``--seconds`` pass or ``--max-requests`` were sent. Every request has a timeout.

Then it stops the server and audits the index directly (store and BM25 index):
every document that reported success and was not deleted or replaced is listed and searchable,
nothing else is listed, no chunk id appears twice, each document's chunks in Chroma and in the
BM25 index match its record's ``n_chunks`` (ordinals 0..n-1), no orphan chunks, no job left
unfinished. Target: zero 5xx, zero lost or duplicated chunks; exit status 1 otherwise.

Clients own their generated documents, so each client knows exactly which of them must survive;
corpus files are uploaded by everyone and never deleted (the server serialises their ingest, so a
concurrent second upload of the same bytes must come back ``duplicate``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = (REPO / ".." / "shared" / "corpus").resolve()
GOOD_FILES = ["md/ch04-01-what-is-ownership.md", "txt/sample-french-1.txt", "txt/norwich-city.txt",
              "html/fake-html-cp1252.html", "docx/docx-tables.docx", "pdf/issue-1113-evil-xobjects.pdf"]
BAD_FILES = ["pdf/empty.pdf"]
"""Files that must be refused with a 4xx (the server must keep serving)."""
WORDS = ("budget anchor section heading reader cursor token window index chunk query ranking "
         "citation document archive ledger harbour valve turbine meadow lantern orchard glacier "
         "canyon falcon copper velvet saddle compass beacon").split()
OPS = {"upload_new": 8, "upload_corpus": 3, "reupload": 6, "delete": 5, "replace": 3,
       "retrieve": 40, "read": 25, "list": 10}
"""Relative weights of the operations (ingest with the real model is the slow one)."""
REQUEST_TIMEOUT_S = 120.0
JOB_DEADLINE_S = 180.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nonce(client: int, n: int) -> str:
    """A letters-only word unique to one generated document (BM25 keeps it whole)."""
    letters, x = [], client * 100_000 + n
    while True:
        x, r = divmod(x, 26)
        letters.append(chr(97 + r))
        if x == 0:
            break
    return "zqv" + "".join(letters)


def generated_text(client: int, n: int, rng: random.Random) -> str:
    word = nonce(client, n)
    parts = [f"# Field report {word}\n"]
    for s in range(rng.randint(2, 5)):
        sentences = " ".join(
            f"The {rng.choice(WORDS)} {word} {rng.choice(WORDS)} was checked near the {rng.choice(WORDS)}."
            for _ in range(rng.randint(4, 12)))
        parts.append(f"## Section {s}\n\n{sentences}\n")
    return "\n".join(parts)


class Client:
    """HTTP calls with timing; results recorded in shared stats."""

    def __init__(self, base: str, stats: "Stats") -> None:
        self.base, self.stats = base, stats

    def call(self, op: str, method: str, path: str, body: bytes | None = None,
             ctype: str = "application/json") -> tuple[int, dict]:
        req = urllib.request.Request(self.base + path, data=body, method=method, headers={"Content-Type": ctype})
        t0 = time.perf_counter()
        try:
            with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT_S) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as err:
            status, raw = err.code, err.read()
        except OSError as exc:
            self.stats.record(op, time.perf_counter() - t0, f"exc:{type(exc).__name__}")
            return 0, {}
        self.stats.record(op, time.perf_counter() - t0, status)
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, {}

    def json(self, op: str, method: str, path: str, payload: object) -> tuple[int, dict]:
        return self.call(op, method, path, json.dumps(payload).encode())

    def upload_file(self, op: str, method: str, path: str, name: str, data: bytes) -> tuple[int, dict]:
        boundary = uuid.uuid4().hex
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
                "Content-Type: application/octet-stream\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
        return self.call(op, method, path, body, f"multipart/form-data; boundary={boundary}")

    def finish(self, status: int, body: dict) -> tuple[int, dict]:
        """Follow a 202 job to its end: the document (201/200) or the job's error status."""
        if status != 202:
            return status, body
        job_id, deadline = body.get("job_id"), time.monotonic() + JOB_DEADLINE_S
        while time.monotonic() < deadline:
            time.sleep(0.5)
            st, job = self.call("job_poll", "GET", f"/v1/jobs/{job_id}")
            if st != 200:
                return st, job
            if job.get("status") == "done":
                return (200 if job["result"].get("duplicate") else 201), job["result"]
            if job.get("status") == "failed":
                return job.get("error_status") or 500, {"error": {"code": job.get("error_code")}}
        return 0, {"error": {"code": "job_deadline"}}


class Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lat: dict[str, list[float]] = defaultdict(list)
        self.status: dict[str, Counter] = defaultdict(Counter)
        self.requests = 0
        self.anomalies: list[str] = []

    def record(self, op: str, seconds: float, status: int | str) -> None:
        with self.lock:
            self.lat[op].append(seconds)
            self.status[op][status] += 1
            self.requests += 1

    def anomaly(self, text: str) -> None:
        with self.lock:
            self.anomalies.append(text)


def client_loop(idx: int, base: str, stats: Stats, stop_at: float, max_requests: int,
                corpus: dict[str, bytes], corpus_ok: dict[str, str], corpus_lock: threading.Lock,
                alive_out: dict[str, str]) -> None:
    rng = random.Random(1000 + idx)
    http = Client(base, stats)
    alive: dict[str, tuple[str, bytes]] = {}  # own doc_id -> (nonce, bytes)
    n = 0
    names, weights = zip(*OPS.items())
    while time.monotonic() < stop_at and stats.requests < max_requests:
        op = rng.choices(names, weights)[0]
        if op in ("delete", "replace", "reupload", "read") and not alive:
            op = "upload_new"
        if op == "upload_new":
            n += 1
            text = generated_text(idx, n, rng)
            st, body = http.finish(*http.json(op, "POST", "/v1/documents", {"text": text, "title": f"gen-{idx}-{n}.md"}))
            if st == 201:
                alive[body["doc_id"]] = (nonce(idx, n), text.encode())
            elif st == 200:
                stats.anomaly(f"fresh generated text came back duplicate: {body.get('doc_id')}")
        elif op == "upload_corpus":
            rel = rng.choice(list(corpus))
            st, body = http.finish(*http.upload_file(op, "POST", "/v1/documents", Path(rel).name, corpus[rel]))
            if rel in BAD_FILES:
                if not 400 <= st < 500:
                    stats.anomaly(f"{rel} answered {st}, expected a 4xx refusal")
            elif st in (200, 201):
                with corpus_lock:
                    if corpus_ok.setdefault(rel, body["doc_id"]) != body["doc_id"]:
                        stats.anomaly(f"{rel} got two doc_ids")
        elif op == "reupload":
            doc_id = rng.choice(list(alive))
            word, data = alive[doc_id]
            st, body = http.finish(*http.json(op, "POST", "/v1/documents", {"text": data.decode(), "title": "again.md"}))
            if st != 200 or not body.get("duplicate") or body.get("doc_id") != doc_id:
                stats.anomaly(f"re-upload of live {doc_id} answered {st} duplicate={body.get('duplicate')}")
        elif op == "delete":
            doc_id = rng.choice(list(alive))
            st, body = http.call(op, "DELETE", f"/v1/documents/{doc_id}")
            if st == 200:
                del alive[doc_id]
            else:
                stats.anomaly(f"delete of live {doc_id} answered {st}")
        elif op == "replace":
            doc_id = rng.choice(list(alive))
            n += 1
            text = generated_text(idx, n, rng)
            st, body = http.finish(*http.json(op, "PUT", f"/v1/documents/{doc_id}", {"text": text, "title": f"gen-{idx}-{n}.md"}))
            if st == 201 and body.get("replaced") == doc_id:
                del alive[doc_id]
                alive[body["doc_id"]] = (nonce(idx, n), text.encode())
            else:
                stats.anomaly(f"replace of {doc_id} answered {st}: {body.get('error')}")
        elif op == "retrieve":
            if alive and rng.random() < 0.6:
                doc_id = rng.choice(list(alive))
                query = f"{alive[doc_id][0]} {rng.choice(WORDS)}"
            else:
                query = " ".join(rng.sample(WORDS, 3)) + " ownership scope"
            st, body = http.json(op, "POST", "/v1/retrieve", {"query": query, "budget_tokens": rng.choice([200, 500, 1500])})
            if st == 200 and body.get("context_tokens_used", 0) > body.get("budget_tokens", 0):
                stats.anomaly("retrieve exceeded its budget")
        elif op == "read":
            doc_id = rng.choice(list(alive))
            st, body = http.json(op, "POST", "/v1/read", {"doc_id": doc_id, "budget_tokens": 300})
            if st != 200:
                stats.anomaly(f"read of live {doc_id} answered {st}")
        else:
            http.call(op, "GET", "/v1/documents")
    for doc_id, (word, _) in alive.items():
        alive_out[doc_id] = word


def start_chroma(tmp: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    exe = Path(sys.executable).parent / "chroma"
    log = open(tmp / "chroma.log", "wb")
    proc = subprocess.Popen([str(exe), "run", "--path", str(tmp / "chroma-db"), "--host", "127.0.0.1",
                             "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    wait_http(f"http://127.0.0.1:{port}/api/v2/heartbeat", proc, 60)
    return proc, port


def wait_http(url: str, proc: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"process exited with {proc.returncode} before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"{url} did not answer in {timeout_s} s")


def stop(proc: subprocess.Popen, sig: int = signal.SIGINT) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def pct(values: list[float], q: float) -> float:
    vs = sorted(values)
    return vs[min(len(vs) - 1, int(round(q * (len(vs) - 1))))] * 1000


def audit(settings, expected: dict[str, str], corpus_ids: set[str]) -> list[str]:
    """Open the index the server left and check it. Returns the problems found."""
    sys.path.insert(0, str(REPO))
    from docanchor.store import collection_name
    from plugin.api import DocAnchor

    problems: list[str] = []
    da = DocAnchor(settings)
    ns = settings.namespace
    store = da.ctx.store
    records = {r.doc_id: r for r in store.list_documents(ns)}
    want = set(expected) | corpus_ids
    for d in sorted(want - set(records)):
        problems.append(f"lost: {d} reported success but is not listed")
    for d in sorted(set(records) - want):
        problems.append(f"unexpected: {d} is listed but was deleted, replaced or never reported")
    coll = store.client.get_collection(collection_name(ns, "chunks"))
    got = coll.get(include=["metadatas"])
    ids = got["ids"]
    dup = [i for i, c in Counter(ids).items() if c > 1]
    if dup:
        problems.append(f"{len(dup)} duplicated chunk ids, e.g. {dup[:3]}")
    per_doc: dict[str, list[int]] = defaultdict(list)
    for meta in got["metadatas"]:
        per_doc[meta["doc_id"]].append(int(meta["ordinal"]))
    orphans = set(per_doc) - set(records)
    if orphans:
        problems.append(f"orphan chunks of {len(orphans)} unlisted documents ({sum(len(per_doc[d]) for d in orphans)} chunks)")
    lex = Counter(da.ctx.lexical.doc_counts(ns))
    for d, r in records.items():
        if sorted(per_doc.get(d, [])) != list(range(r.n_chunks)):
            problems.append(f"{d}: {len(per_doc.get(d, []))} chunks in Chroma, record says {r.n_chunks}")
        if lex.get(d, 0) != r.n_chunks:
            problems.append(f"{d}: {lex.get(d, 0)} chunks in BM25, record says {r.n_chunks}")
    for d in set(lex) - set(records):
        problems.append(f"{d}: {lex[d]} BM25 rows of an unlisted document")
    searchable = 0
    for d in sorted(want & set(records)):
        if d in expected:
            res = da.retrieve(expected[d], budget_tokens=300)
            ok = bool(res.sections) and res.sections[0].doc_id == d
        else:
            ok = bool(da.retrieve(records[d].title or "the", budget_tokens=300, doc_ids=[d]).sections)
        searchable += ok
        if not ok:
            problems.append(f"{d} is not found by a search for it")
    unfinished = da.jobs.unfinished()
    if unfinished:
        problems.append(f"{len(unfinished)} ingest jobs left unfinished")
    print(f"audit: {len(records)} documents listed ({len(want)} expected), {len(ids)} chunks in Chroma, "
          f"{sum(lex.values())} in BM25, {searchable} searchable")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="How long the clients run (seconds).")
    ap.add_argument("--clients", type=int, default=8, help="Concurrent client threads.")
    ap.add_argument("--max-requests", type=int, default=20_000, help="Stop after this many requests.")
    ap.add_argument("--chroma-server", action="store_true", help="Run against a 'chroma run' server.")
    ap.add_argument("--keep", action="store_true", help="Keep the temporary data dir.")
    args = ap.parse_args()

    sys.path.insert(0, str(REPO))
    from docanchor.settings import Settings

    tmp = Path(tempfile.mkdtemp(prefix="docanchor-load-"))
    data_dir = tmp / "data"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "DOCANCHOR_PUBLIC_BASE_URL": base}
    for k in [k for k in env if k.startswith("DOCANCHOR_") and k != "DOCANCHOR_PUBLIC_BASE_URL"]:
        del env[k]
    chroma = None
    settings = Settings(data_dir=data_dir)
    if args.chroma_server:
        chroma, cport = start_chroma(tmp)
        env.update(DOCANCHOR_CHROMA_HOST="127.0.0.1", DOCANCHOR_CHROMA_PORT=str(cport))
        settings = settings.with_(chroma_host="127.0.0.1", chroma_port=cport)
    server_log = open(tmp / "server.log", "wb")
    server = subprocess.Popen([sys.executable, "-m", "plugin.cli", "--data-dir", str(data_dir), "serve",
                               "--host", "127.0.0.1", "--port", str(port)],
                              cwd=REPO, env=env, stdout=server_log, stderr=subprocess.STDOUT)
    try:
        t0 = time.monotonic()
        wait_http(base + "/healthz", server, 180)
        print(f"backend: {'chroma server' if chroma else 'embedded chroma'}; server ready in "
              f"{time.monotonic() - t0:.1f} s; {args.clients} clients for {args.seconds:.0f} s (max {args.max_requests} requests)")
        corpus = {rel: (CORPUS / rel).read_bytes() for rel in GOOD_FILES + BAD_FILES}
        stats, corpus_ok, corpus_lock = Stats(), {}, threading.Lock()
        alive: dict[str, str] = {}
        started = time.monotonic()
        threads = [threading.Thread(target=client_loop, args=(i, base, stats, started + args.seconds, args.max_requests,
                                                              corpus, corpus_ok, corpus_lock, alive)) for i in range(args.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - started
    finally:
        stop(server)
        server_log.close()

    print(f"\n{stats.requests} requests in {elapsed:.1f} s = {stats.requests / elapsed:.1f} requests/s")
    print(f"{'operation':<14}{'count':>7}{'p50 ms':>10}{'p99 ms':>10}  statuses")
    for op in sorted(stats.lat):
        lat = stats.lat[op]
        st = ", ".join(f"{k}: {v}" for k, v in sorted(stats.status[op].items(), key=lambda kv: str(kv[0])))
        print(f"{op:<14}{len(lat):>7}{pct(lat, 0.5):>10.1f}{pct(lat, 0.99):>10.1f}  {st}")
    by_status = Counter()
    for op, c in stats.status.items():
        for k, v in c.items():
            if k == "exc" or str(k).startswith("exc") or int(k) >= 400:
                by_status[k] += v
    expected_4xx = sum(v for op, c in stats.status.items() for k, v in c.items()
                       if op == "upload_corpus" and isinstance(k, int) and 400 <= k < 500)
    print(f"errors by status: {dict(by_status) or 'none'} (of which {expected_4xx} are the intended refusals of "
          f"{', '.join(BAD_FILES)})")
    five = sum(v for k, v in by_status.items() if isinstance(k, int) and k >= 500)
    for a in stats.anomalies[:20]:
        print("anomaly:", a)

    problems = audit(settings, alive, set(corpus_ok.values()))
    if chroma is not None:
        stop(chroma, signal.SIGTERM)
    for p in problems[:30]:
        print("audit problem:", p)
    unexpected = sum(v for k, v in by_status.items() if not isinstance(k, int))
    ok = five == 0 and not problems and not stats.anomalies and unexpected == 0
    print(f"\n5xx: {five}; transport errors: {unexpected}; anomalies: {len(stats.anomalies)}; audit problems: "
          f"{len(problems)} -> {'TARGET MET' if ok else 'TARGET MISSED'}")
    if five:
        log = (tmp / "server.log").read_text(errors="replace")
        for block in log.split("Traceback")[1:4]:
            print("server traceback:" + block[:3000])
    if args.keep or not ok:
        print(f"data kept in {tmp}")
    else:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
