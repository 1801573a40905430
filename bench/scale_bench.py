"""Retrieval at scale: indexes of 10,000 / 100,000 / 1,000,000 chunks built through DocAnchor's own
store and lexical code, then latency, memory, disk, start-up, add/delete and HTTP concurrency.

    python bench/scale_bench.py [--sizes 10000,100000,1000000] [--server-sizes 100000] [--reuse]
                                [--questions N] [--http-seconds 20] [--clients 8] [--threads 8] [--workers 1]
                                [--connections keep-alive|new] [--only retrieve,http]

Data (stated again in the output):
- Real documents with real model vectors (the sample): the 4 corpora of ../shared/bench/chunking_eval,
  ingested by :meth:`plugin.api.DocAnchor.ingest_file` (parse, chunk, embed with the real model --
  vectors cached in bench/out/embeddings.sqlite, as bench/budget_recall.py does); its 373 questions
  are the queries, and "filtered to 1 document" means the question's own corpus document.
- Filler documents up to the size, of :data:`CHUNKS_PER_DOC` chunks each: windows of real text cut
  at seeded random places from the files of ../shared (chunking_eval corpora, corpus md/txt/html/docx
  parsed by DocAnchor's parsers), written with :meth:`ChromaStore.add_chunks`,
  :meth:`LexicalIndex.add` and :meth:`ChromaStore.put_document`. Their vectors are cheap stand-ins:
  the real vector of a sample chunk plus Gaussian noise, renormalised (cosine to it about 0.9), a
  document's chunks following consecutive sample chunks, so the vector space keeps the sample's
  clusters. "Filtered to 10 documents" is the question's document and 9 seeded filler documents.

Measured, per size (each in a fresh process, so start-up and memory are a new user's):
- retrieve p50/p95/p99 through :meth:`DocAnchor.retrieve` for all documents, 1 and 10 documents,
  budgets 500 and 4,000 tokens, split into query embedding (``embed_query``), dense
  (``ChromaStore.query`` or ``nearest_in_documents``), lexical (``LexicalIndex.search``) and the
  rest (records, fusion, chunk reads, packing); and the total without the query embedding;
- process RSS (now and peak) after those requests; size on disk (Chroma, lexical index);
- time from process start to the first answer: in-process, and for ``docanchor serve``;
- time to add one small document (about 9 chunks, real model) and to delete one; the first add is
  shown apart: it loads the ingest model (the searches before it embed queries with the query
  encoder only, as ``docanchor serve``'s start-up does), which the later adds do not pay;
- over HTTP, ``docanchor serve`` with ``--threads`` threads (8) in each of ``--workers`` processes
  (1; more only against a Chroma server): one client, then ``--clients`` concurrent clients, for
  ``--http-seconds`` each: requests/s and p50/p99, the cores used by the server's processes (and
  by the Chroma server, and by this script's client threads: all three share the machine's cores)
  and each one's CPU milliseconds per request, the server's RSS (all its processes); with
  workers, each worker's cores and the connections each holds halfway through the phase.
  Each client keeps one connection alive (``--connections keep-alive``, the default: what an
  HTTP client library or LobeChat's gateway does) or opens a new one per request (``new``).
Sizes in ``--server-sizes`` are also built into, and measured against, a ``chroma run`` server.

Built indexes are kept under bench/out/scale/ with ``--reuse`` (keyed by size, backend and
:data:`BUILD_VERSION`); building 1,000,000 chunks takes the longest part of a run.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import http.client
import time
import urllib.request
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
SHARED = (REPO / ".." / "shared").resolve()
OUT = REPO / "bench" / "out"
NAMESPACE = "scale"
CHUNKS_PER_DOC = 260
"""Filler chunks per document (100,000 chunks are then about 385 documents)."""
NOISE = 0.5
"""Standard deviation of the stand-in vectors' noise, relative to a unit vector's length."""
SEED = 20261201
BUILD_VERSION = 1
"""Bumped when what is built changes, so ``--reuse`` does not measure an old index."""
BUILD_BATCH_CHUNKS = 1000
"""Filler chunks written per store call while building (bulk ingest also writes in batches)."""
WARM_UP = 10
SMALL_DOCS = 5
"""Small documents added and deleted (the add/delete figures are over these)."""


# ---------------------------------------------------------------------------- text and vectors
def source_texts() -> list[str]:
    """Real text from ../shared: chunking_eval corpora and the corpus's md, txt, html and docx files."""
    from ingest.detect import detect_type
    from ingest.parsers import parse

    texts = [p.read_text(encoding="utf-8") for p in sorted((SHARED / "bench/chunking_eval/corpora").glob("*.md"))]
    for sub in ("md", "txt", "html", "docx"):
        for path in sorted((SHARED / "corpus" / sub).iterdir()):
            try:
                data = path.read_bytes()
                texts.append(parse(detect_type(data, path.name), data, path.name).text)
            except Exception:  # a corpus file made to be refused: not text for filler
                continue
    return [t for t in texts if len(t) > 2000]


def filler_chunks(doc_id: str, texts: list[str], rng: random.Random, counter):
    from docanchor.types import Chunk

    chunks, pos = [], 0
    for ordinal in range(CHUNKS_PER_DOC):
        text = texts[rng.randrange(len(texts))]
        start = rng.randrange(len(text) - 700)
        start = text.find(" ", start) + 1 or start
        end = text.rfind(" ", start, start + rng.randint(300, 600)) if " " in text[start:start + 600] else start + 300
        piece = text[start:max(end, start + 100)].strip() or "filler"
        chunks.append(Chunk(doc_id=doc_id, ordinal=ordinal, text=piece, start_char=pos, end_char=pos + len(piece),
                            heading_path=(f"Part {ordinal // 20 + 1}",), n_tokens=counter(piece)))
        pos += len(piece) + 2
    return chunks


def stand_in_vectors(sample: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    start = int(rng.integers(len(sample)))
    base = sample[(start + np.arange(n)) % len(sample)]
    noisy = base + rng.normal(0.0, NOISE / np.sqrt(sample.shape[1]), base.shape).astype(np.float32)
    return noisy / np.linalg.norm(noisy, axis=1, keepdims=True)


# ---------------------------------------------------------------------------- build
def settings_for(data_dir: Path, chroma_port: int | None):
    from docanchor.settings import Settings

    extra = {"chroma_host": "127.0.0.1", "chroma_port": chroma_port} if chroma_port else {}
    return Settings.from_env(data_dir=data_dir, namespace=NAMESPACE, **extra)  # DOCANCHOR_QUERY_RUNTIME=torch for A/B


def _write_fillers(store, lexical, batch: list) -> None:
    """Write filler documents as a bulk ingest does: one store write and one lexical commit per batch."""
    from docanchor.types import DocumentRecord

    chunks = [c for _, _, doc_chunks, _ in batch for c in doc_chunks]
    store.add_chunks(NAMESPACE, chunks, np.concatenate([v for *_, v in batch]).tolist())
    lexical.add(NAMESPACE, chunks)
    for i, doc_id, doc_chunks, _ in batch:
        store.put_document(NAMESPACE, DocumentRecord(
            doc_id=doc_id, title=f"Filler {i}", doc_type="txt", n_chunks=len(doc_chunks),
            n_tokens=sum(c.n_tokens for c in doc_chunks), n_chars=doc_chunks[-1].end_char, anchor=f"Filler {i}."))


def build(size: int, data_dir: Path, chroma_port: int | None) -> dict:
    """Fill ``data_dir`` (or the Chroma server) with ``size`` chunks. Returns what was built."""
    from budget_recall import CachedEmbedder

    from docanchor.embedder import get_embedder
    from plugin.api import DocAnchor

    t0 = time.perf_counter()
    emb = CachedEmbedder(get_embedder(), OUT / "embeddings.sqlite")
    da = DocAnchor(settings_for(data_dir, chroma_port), embedder=emb)
    store, lexical, count = da.ctx.store, da.ctx.lexical, da.ctx.counter.count
    real = {}
    for path in sorted((SHARED / "bench/chunking_eval/corpora").glob("*.md")):
        real[path.stem] = da.ingest_file(path).record.doc_id
    sample = np.concatenate([np.asarray(store.get_chunk_embeddings(NAMESPACE, d), dtype=np.float32)
                             for d in real.values()])
    n_real = store.count_chunks(NAMESPACE)
    texts = source_texts()
    rng, nrng = random.Random(SEED), np.random.default_rng(SEED)
    fillers, done, i, batch = [], n_real, 0, []
    while done < size:
        doc_id = "doc_" + hashlib.sha256(f"filler {size} {i}".encode()).hexdigest()[:16]
        chunks = filler_chunks(doc_id, texts, rng, count)[: size - done]
        batch.append((i, doc_id, chunks, stand_in_vectors(sample, len(chunks), nrng)))
        fillers.append(doc_id)
        done += len(chunks)
        i += 1
        if sum(len(c) for _, _, c, _ in batch) >= BUILD_BATCH_CHUNKS or done >= size:
            _write_fillers(store, lexical, batch)
            batch = []
        if i % 50 == 0:
            print(f"  built {done:,} of {size:,} chunks in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    da.close()
    return {"size": size, "real_docs": real, "real_chunks": n_real, "fillers": fillers, "version": BUILD_VERSION,
            "build_s": round(time.perf_counter() - t0, 1), "sample_vectors": int(len(sample))}


# ---------------------------------------------------------------------------- measure (child process)
def measure(data_dir: Path, chroma_port: int | None, info: dict, questions_n: int, budgets: list[int]) -> dict:
    """Runs in a fresh process started at ``DOCANCHOR_BENCH_T0``: first answer, latencies, RSS,
    add and delete."""
    t_spawn = float(os.environ["DOCANCHOR_BENCH_T0"])
    from budget_recall import load_questions

    from plugin.api import DocAnchor

    questions = load_questions(None, questions_n or None)
    da = DocAnchor(settings_for(data_dir, chroma_port))
    parts = _instrument(da)
    ready_s = time.time() - t_spawn
    da.retrieve(questions[0][0], 500)
    first = {"start_s": ready_s, "total_s": time.time() - t_spawn, **parts}
    first.update(_warm_vectors(da))
    gc.freeze()  # what is alive now is left out of garbage collection, as DocAnchor.start_up does in serve
    rng = random.Random(SEED)
    tens = {q: [info["real_docs"][c], *rng.sample(info["fillers"], 9)] for q, c, _ in questions}
    for q, _, _ in questions[:WARM_UP]:
        da.retrieve(q, 500)
    rows = {}
    for label in ("all", "1 doc", "10 docs"):
        for budget in budgets:
            samples = []
            for q, c, _ in questions:
                doc_ids = None if label == "all" else [info["real_docs"][c]] if label == "1 doc" else tens[q]
                parts.clear()
                t = time.perf_counter()
                da.retrieve(q, budget, doc_ids=doc_ids)
                total = time.perf_counter() - t
                samples.append((total, parts.get("embed", 0.0), parts.get("dense", 0.0), parts.get("lexical", 0.0)))
            rows[f"{label}, {budget}"] = samples
    rss = _rss()
    adds, deletes = [], []
    texts = source_texts()
    _instrument(da, writes=True)
    for i in range(SMALL_DOCS):
        text = texts[i % len(texts)]
        start = rng.randrange(len(text) - 4000)
        body = f"# Small document {i}\n\n" + text[start:start + 3600]
        parts.clear()
        loaded = getattr(da.ctx.embedder, "_model", True) is not None  # the ingest model (queries need not load it)
        t = time.perf_counter()
        rec = da.ingest_text(body, title=f"small-{i}.md").record
        adds.append({"total": time.perf_counter() - t, "chunks": rec.n_chunks, "loads_model": not loaded, **parts})
        parts.clear()
        t = time.perf_counter()
        da.delete_document(rec.doc_id)
        deletes.append({"total": time.perf_counter() - t, **parts})
    da.close()
    return {"first": first, "rows": rows, "rss": rss, "adds": adds, "deletes": deletes}


def _warm_vectors(da) -> dict:
    """Read the chunk vectors ahead as ``docanchor serve`` does after start-up (there in a
    background thread, here before the timed requests); returns documents read and seconds."""
    from plugin.warm import warm_vectors

    t = time.perf_counter()
    return {"warm_docs": warm_vectors(da), "warm_s": time.perf_counter() - t}


_PARTS: dict[str, float] = {}


def _instrument(da, writes: bool = False) -> dict:
    """Time the query embedding, the dense search and the lexical search of each request (with
    ``writes``: the embedding, Chroma and lexical parts of adds and deletes instead)."""
    parts = _PARTS

    def timed(obj, name: str, key: str) -> None:
        inner = getattr(obj, name)

        def wrapper(*args, **kwargs):
            t = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                parts[key] = parts.get(key, 0.0) + time.perf_counter() - t

        setattr(obj, name, wrapper)

    if writes:
        timed(da.ctx.embedder, "embed", "embed")
        for name in ("add_chunks", "delete_document", "put_document"):
            timed(da.ctx.store, name, "chroma")
        for name in ("add", "delete"):
            timed(da.ctx.lexical, name, "lexical")
        return parts
    timed(da.ctx.embedder, "embed_query", "embed")
    timed(da.ctx.store, "query", "dense")
    timed(da.ctx.store, "nearest", "dense")  # ids and distances; the chunks are read with the BM25 hits'
    timed(da.ctx.store, "nearest_in_documents", "dense")  # the exact search within documents
    timed(da.ctx.lexical, "search", "lexical")
    return parts


def _rss(pid: int | str = "self") -> dict:
    status = Path(f"/proc/{pid}/status").read_text()
    out = {}
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) * 1024
    return out


# ---------------------------------------------------------------------------- HTTP
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _body(query: str, budget: int) -> bytes:
    return json.dumps({"query": query, "budget_tokens": budget, "namespace": NAMESPACE}).encode()


def _post(base: str, query: str, budget: int, timeout_s: float = 120.0) -> int:
    """POST /v1/retrieve on a new connection; the HTTP status."""
    body = _body(query, budget)
    req = urllib.request.Request(f"{base}/v1/retrieve", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout_s) as r:
        r.read()
        return r.status


class _KeptConnection:
    """POST /v1/retrieve over one kept-alive HTTP/1.1 connection, opened again after an error."""

    def __init__(self, base: str, timeout_s: float = 120.0) -> None:
        host, _, port = base.removeprefix("http://").partition(":")
        self.host, self.port, self.timeout_s = host, int(port), timeout_s
        self.conn: http.client.HTTPConnection | None = None

    def post(self, query: str, budget: int) -> int:
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
        try:
            self.conn.request("POST", "/v1/retrieve", body=_body(query, budget),
                              headers={"Content-Type": "application/json"})
            r = self.conn.getresponse()
            r.read()
            return r.status
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            raise OSError(f"POST /v1/retrieve failed: {exc}") from exc

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def http_bench(data_dir: Path, chroma_port: int | None, questions: list[str], seconds: float, clients: int,
               threads: int = 8, keep_alive: bool = True, workers: int = 1, chroma_pid: int | None = None) -> dict:
    port = free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1", DOCANCHOR_NAMESPACE=NAMESPACE)
    if chroma_port:
        env.update(DOCANCHOR_CHROMA_HOST="127.0.0.1", DOCANCHOR_CHROMA_PORT=str(chroma_port))
    log = open(data_dir.parent / f"serve-{port}.log", "wb")
    t0 = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "plugin.cli", "--data-dir", str(data_dir), "serve", "--host",
                             "127.0.0.1", "--port", str(port), "--threads", str(threads)]
                            + (["--workers", str(workers)] if workers > 1 else []), cwd=REPO, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)  # a group of its own: stop_server
    base = f"http://127.0.0.1:{port}"
    try:
        first = None
        while first is None:
            if proc.poll() is not None or time.time() - t0 > 600:
                raise SystemExit(f"docanchor serve did not answer; see {log.name}")
            try:
                if _post(base, questions[0], 500, timeout_s=5) == 200:
                    first = time.time() - t0
            except OSError:
                time.sleep(0.2)
        out = {"first_answer_s": first, "warm_s": _read_ahead_s(Path(log.name), t0, proc, workers)}
        pids = [proc.pid] + _children(proc.pid)
        worker_pids = [p for p in pids if p != proc.pid and b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()]
        for n in (1, clients):
            cpu = sum(_cpu_s(p) for p in pids)
            worker_cpu = [_cpu_s(p) for p in worker_pids]
            chroma_cpu = _cpu_s(chroma_pid) if chroma_pid else 0.0
            own_cpu = time.process_time()
            held: list[list[int]] = []  # connections each worker holds, halfway through the phase
            sample = threading.Timer(seconds / 2, lambda seen=held: seen.append(_held_connections(worker_pids, port)))
            sample.start()
            out[n] = _load(base, questions, n, seconds, keep_alive)
            sample.cancel()
            out[n]["client_cores"] = (time.process_time() - own_cpu) / out[n]["wall_s"]
            out[n]["cores"] = (sum(_cpu_s(p) for p in pids) - cpu) / out[n]["wall_s"]
            out[n]["worker_cores"] = [(_cpu_s(p) - c) / out[n]["wall_s"] for p, c in zip(worker_pids, worker_cpu)]
            out[n]["held"] = held[0] if held else []
            out[n]["chroma_cores"] = ((_cpu_s(chroma_pid) - chroma_cpu) / out[n]["wall_s"]) if chroma_pid else None
        rss = [_rss(p) for p in pids]
        out["rss"] = {k: sum(r.get(k, 0) for r in rss) for k in ("VmRSS", "VmHWM")}
        out["workers"] = workers
        return out
    finally:
        stop_server(proc)
        log.close()


SUPERVISOR_STOP_S = 30.0
"""Seconds :func:`stop_server` allows a server beyond its workers' stop (a backstop, not a measure)."""


def stop_server(proc: subprocess.Popen) -> None:
    """Stop a ``docanchor serve`` started with ``start_new_session`` as Ctrl+C stops it, waiting as
    long as its own stop may last (its workers' backstop :data:`plugin.workers.STOP_WAIT_S`, which
    is above one server's :data:`plugin.serve.CLOSE_WAIT_S`, plus :data:`SUPERVISOR_STOP_S`); then
    SIGKILL to its whole process group, so no worker outlives the bench (a kill of the supervisor
    alone, after 60 s, left both workers serving, each holding its model)."""
    from plugin.workers import STOP_WAIT_S

    wait_s = STOP_WAIT_S + SUPERVISOR_STOP_S
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        print(f"docanchor serve (pid {proc.pid}) did not stop in {wait_s:.0f} s; killing its process group",
              file=sys.stderr)
        os.killpg(proc.pid, signal.SIGKILL)  # the server still runs, so its group exists
        proc.wait()


def _read_ahead_s(log_path: Path, t0: float, proc: subprocess.Popen, workers: int = 1,
                  deadline_s: float = 600.0) -> float | None:
    """Seconds from process start until serve logged (once per worker) that its background read of
    chunk vectors ended (:mod:`plugin.warm`), waited for so that it does not run during the timed
    load; None when this version of serve logs no such line before ``deadline_s``."""
    if not (REPO / "plugin" / "warm.py").exists():
        return None
    while time.time() - t0 < deadline_s and proc.poll() is None:
        if log_path.read_text(errors="replace").count("chunk vectors") >= workers:
            return time.time() - t0
        time.sleep(0.2)
    return None


def _load(base: str, questions: list[str], clients: int, seconds: float, keep_alive: bool = True) -> dict:
    latencies: list[float] = []
    errors = [0]
    stop_at = time.monotonic() + seconds
    lock = threading.Lock()

    def client(k: int) -> None:
        i = k * 37
        kept = _KeptConnection(base) if keep_alive else None
        while time.monotonic() < stop_at:
            q = questions[i % len(questions)]
            i += 1
            t = time.perf_counter()
            try:
                ok = (kept.post(q, 500) if kept else _post(base, q, 500)) == 200
            except OSError:
                ok = False
            with lock:
                if ok:
                    latencies.append(time.perf_counter() - t)
                else:
                    errors[0] += 1
        if kept:
            kept.close()

    t = time.perf_counter()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - t
    return {"requests": len(latencies), "errors": errors[0], "rps": len(latencies) / wall, "wall_s": wall,
            "p50_ms": 1000 * _pct(latencies, 50), "p99_ms": 1000 * _pct(latencies, 99)}


def _cpu_ms(phase: dict) -> float:
    """The server's CPU milliseconds per answered request in one load phase (less sensitive to the
    machine's load than latency: what the requests cost, not how long they waited for a core)."""
    return 1000 * phase["cores"] / max(phase["rps"], 1e-9)


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system, all threads) the process ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _held_connections(pids: list[int], port: int) -> list[int]:
    """How many established TCP connections to ``port`` each process of ``pids`` holds (the
    kernel's socket tables in /proc/net matched to each process's open file descriptors)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            if f[3] == "01" and int(f[1].rpartition(":")[2], 16) == port:  # 01: ESTABLISHED
                inodes.add(f"socket:[{f[9]}]")
    out = []
    for pid in pids:
        n = 0
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                n += os.readlink(fd) in inodes
            except OSError:
                continue
        out.append(n)
    return out


def _children(pid: int) -> list[int]:
    """The ids of the processes whose parent is ``pid`` (the workers of ``docanchor serve --workers``)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rpartition(")")[2].split()[1]) == pid:
                out.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return out


def _pct(values, q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else float("nan")


# ---------------------------------------------------------------------------- orchestration
def start_chroma(path: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    path.mkdir(parents=True, exist_ok=True)
    log = open(path.parent / "chroma.log", "ab")
    proc = subprocess.Popen([str(Path(sys.executable).parent / "chroma"), "run", "--path", str(path), "--host",
                             "127.0.0.1", "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=2):
                return proc, port
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit("chroma run did not answer its heartbeat")


def run_size(size: int, server: bool, args) -> None:
    root = OUT / "scale" / f"{size}-{'server' if server else 'embedded'}-v{BUILD_VERSION}"
    data_dir, marker = root / "data", root / "built.json"
    if not args.reuse or not marker.exists():
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
    chroma = start_chroma(root / "chroma-server-db") if server else None
    port = chroma[1] if chroma else None
    if chroma and marker.exists():  # the server moved to a new port: tell the data dir (docanchor.store_record)
        from docanchor.store_record import StoreRecord, record_path

        record_path(data_dir).write_text(json.dumps(StoreRecord("127.0.0.1", port).as_json()) + "\n", encoding="utf-8")
    try:
        if marker.exists():
            info = json.loads(marker.read_text())
        else:
            print(f"building {size:,} chunks ({'Chroma server' if server else 'embedded Chroma'}) in {root}",
                  file=sys.stderr)
            info = build(size, data_dir, port)
            marker.write_text(json.dumps(info))
        only = set(args.only.split(","))
        result = measure_in_child(data_dir, marker, port, args) if "retrieve" in only else None
        from budget_recall import load_questions

        questions = [q for q, _, _ in load_questions(None, args.questions or None)]
        workers = args.workers if server else 1  # embedded Chroma: one process per data dir
        http = (http_bench(data_dir, port, questions, args.http_seconds, args.clients, args.threads,
                           args.connections == "keep-alive", workers, chroma[0].pid if chroma else None)
                if args.http_seconds > 0 and "http" in only else None)
        report(size, server, info, result, http, root, args)
    finally:
        if chroma:
            chroma[0].terminate()
            chroma[0].wait(timeout=60)


def measure_in_child(data_dir: Path, marker: Path, port: int | None, args) -> dict:
    """:func:`measure` in a fresh process (so start-up and memory are a new user's)."""
    child = subprocess.run(
        [sys.executable, __file__, "--measure", str(data_dir), "--info", str(marker),
         "--questions", str(args.questions), "--budgets", args.budgets] + (["--chroma-port", str(port)] if port else []),
        env=dict(os.environ, DOCANCHOR_BENCH_T0=repr(time.time()), HF_HUB_OFFLINE="1"),
        capture_output=True, text=True, cwd=REPO)
    if child.returncode != 0:
        raise SystemExit(f"measuring failed:\n{child.stderr[-4000:]}")
    return json.loads(child.stdout.strip().splitlines()[-1])


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def report(size: int, server: bool, info: dict, res: dict | None, http: dict | None, root: Path,
           args) -> None:
    """Print one size's figures (``res`` None: the retrieve phase was not run; ``http`` None: nor HTTP)."""
    mb = 2**20
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    backend = "Chroma server (chroma run)" if server else "embedded Chroma"
    print(f"\n== {size:,} chunks, {backend}; load average {load} on {os.cpu_count()} CPUs")
    print(f"data: {len(info['real_docs'])} real documents ({info['real_chunks']:,} chunks, real model vectors: "
          f"the chunking_eval corpora) + {len(info['fillers'])} filler documents of up to {CHUNKS_PER_DOC} chunks of "
          f"real text cut from ../shared with stand-in vectors (a sample chunk's vector + Gaussian noise "
          f"sd {NOISE}/sqrt(dim), renormalised); built in {info['build_s']:.0f} s")
    chroma_dir = root / ("chroma-server-db" if server else "data/chroma")
    print(f"on disk: Chroma {_du(chroma_dir) / mb:,.0f} MB, lexical index {_du(root / 'data' / 'lexical') / mb:,.0f} MB")
    if res:
        _report_retrieve(res, http)
    if http:
        _report_http(http, args.clients, args.threads, args.connections)
    sys.stdout.flush()


def _report_retrieve(res: dict, http: dict | None) -> None:
    mb = 2**20
    first = res["first"]
    print(f"first answer after process start: in-process {first['total_s']:.1f} s (imports and set-up "
          f"{first['start_s']:.1f} s; first request: model load and query embedding {first.get('embed', 0):.1f} s, "
          f"opening and checking the lexical index and BM25 {first.get('lexical', 0):.1f} s, dense "
          f"{first.get('dense', 0):.1f} s)" + (f"; docanchor serve {http['first_answer_s']:.1f} s" if http else ""))
    print(f"chunk vectors read ahead, then the objects alive frozen out of garbage collection (as docanchor "
          f"serve does after start-up, before the timed requests): "
          f"{first.get('warm_docs', 0)} documents in {first.get('warm_s', 0.0):.1f} s")
    print(f"RSS after the requests: {res['rss']['VmRSS'] / mb:,.0f} MB (peak {res['rss']['VmHWM'] / mb:,.0f} MB)"
          + (f"; docanchor serve after HTTP load {http['rss']['VmRSS'] / mb:,.0f} MB (peak "
             f"{http['rss']['VmHWM'] / mb:,.0f} MB)" if http else ""))
    print(f"{'retrieve (ms)':22} {'p50':>7} {'p95':>7} {'p99':>7} | {'no-embed p50':>12} {'p95':>7} {'p99':>7} |"
          f" {'embed':>6} {'dense':>6} {'lexical':>7} {'rest':>6} (p50 each)")
    for label, samples in res["rows"].items():
        a = np.asarray(samples) * 1000
        total, embed, dense, lexical = a[:, 0], a[:, 1], a[:, 2], a[:, 3]
        rest, no_embed = total - embed - dense - lexical, total - embed
        print(f"{label:22} {_pct(total, 50):7.1f} {_pct(total, 95):7.1f} {_pct(total, 99):7.1f} | "
              f"{_pct(no_embed, 50):12.1f} {_pct(no_embed, 95):7.1f} {_pct(no_embed, 99):7.1f} | "
              f"{_pct(embed, 50):6.1f} {_pct(dense, 50):6.1f} {_pct(lexical, 50):7.1f} {_pct(rest, 50):6.1f}")
    first = res["adds"][0]
    print(f"first add ({first['chunks']} chunks): {first['total']:.2f} s (embedding {first.get('embed', 0.0):.2f} s"
          + (", loading the ingest model first: the searches before it loaded only the query encoder; "
             "docanchor serve's first upload pays it too)" if first.get("loads_model") else ")"))
    for what, rows in (("add one small document", res["adds"][1:]), ("delete it", res["deletes"])):
        med = {k: statistics.median(r.get(k, 0.0) for r in rows) for k in ("total", "embed", "chroma", "lexical")}
        size = f" ({statistics.median(r['chunks'] for r in rows):.0f} chunks, real model)" if "chunks" in rows[0] else ""
        print(f"{what}{size}: median {med['total']:.2f} s, max {max(r['total'] for r in rows):.2f} s over {len(rows)} "
              f"(median parts: embedding {med['embed']:.2f} s, Chroma {med['chroma']:.2f} s, lexical "
              f"{med['lexical']:.3f} s)")


def _report_http(http: dict, clients: int, threads: int, connections: str) -> None:
    one, many = http[1], http[clients]
    workers = http.get("workers", 1)

    def others(phase: dict) -> str:
        rps = max(phase["rps"], 1e-9)
        out = (f", Chroma server {phase['chroma_cores']:.2f} cores = {1000 * phase['chroma_cores'] / rps:.0f} CPU "
               "ms/request" if phase.get("chroma_cores") is not None else "")
        if phase.get("client_cores") is not None:
            out += f", clients {phase['client_cores']:.2f} cores = {1000 * phase['client_cores'] / rps:.0f} CPU ms/request"
        if workers > 1 and phase.get("worker_cores"):
            out += (", per worker: " + "/".join(f"{c:.2f}" for c in phase["worker_cores"]) + " cores, "
                    + "/".join(map(str, phase.get("held") or ["?"])) + " connections halfway")
        return out

    print(f"HTTP /v1/retrieve (budget 500, docanchor serve --threads {threads}"
          + (f" --workers {workers}" if workers > 1 else "") + f", {connections} connections): 1 client "
          f"{one['rps']:.1f} req/s (p50 {one['p50_ms']:.0f} ms, p99 {one['p99_ms']:.0f} ms, server {one['cores']:.2f} "
          f"cores = {_cpu_ms(one):.0f} CPU ms/request{others(one)}); {clients} clients {many['rps']:.1f} req/s (p50 "
          f"{many['p50_ms']:.0f} ms, p99 {many['p99_ms']:.0f} ms, server {many['cores']:.2f} cores = "
          f"{_cpu_ms(many):.0f} CPU ms/request{others(many)}) = "
          f"{many['rps'] / max(one['rps'], 1e-9):.2f}x; "
          f"errors {one['errors'] + many['errors']}; server RSS {http['rss']['VmRSS'] / 2**20:,.0f} MB in all; "
          f"docanchor serve started in {http['first_answer_s']:.1f} s"
          + (f", its read-ahead of chunk vectors ended {http['warm_s']:.1f} s after start (before the load)"
             if http.get("warm_s") else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000", help="comma-separated index sizes in chunks")
    ap.add_argument("--server-sizes", default="100000",
                    help="sizes (among --sizes) also run against a 'chroma run' server; empty for none")
    ap.add_argument("--reuse", action="store_true", help="keep built indexes under bench/out/scale and reuse them")
    ap.add_argument("--questions", type=int, default=0, help="ask only the first N of the 373 questions")
    ap.add_argument("--budgets", default="500,4000")
    ap.add_argument("--http-seconds", type=float, default=20.0, help="seconds per HTTP load phase (0: skip HTTP)")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--threads", type=int, default=8, help="docanchor serve --threads for the HTTP phases")
    ap.add_argument("--workers", type=int, default=1,
                    help="docanchor serve --workers for the HTTP phases against a Chroma server (embedded: always 1)")
    ap.add_argument("--connections", default="keep-alive", choices=("keep-alive", "new"),
                    help="each HTTP client keeps one connection alive (as client libraries do) or opens one per "
                         "request")
    ap.add_argument("--only", default="retrieve,http",
                    help="phases to run, comma-separated: retrieve (in-process latencies, RSS, start-up, add and "
                         "delete), http (docanchor serve under 1 and --clients clients)")
    ap.add_argument("--backends", default="embedded,server",
                    help="comma-separated: embedded (every size) and server (the sizes in --server-sizes)")
    ap.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--info", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--chroma-port", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.measure:
        info = json.loads(args.info.read_text())
        budgets = [int(b) for b in args.budgets.split(",")]
        print(json.dumps(measure(args.measure, args.chroma_port, info, args.questions, budgets)))
        return
    sizes = [int(s) for s in args.sizes.split(",") if s]
    server_sizes = {int(s) for s in args.server_sizes.split(",") if s}
    backends = set(args.backends.split(","))
    for size in sizes:
        if "embedded" in backends:
            run_size(size, False, args)
        if size in server_sizes and "server" in backends:
            run_size(size, True, args)


if __name__ == "__main__":
    main()
