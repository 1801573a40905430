"""Evidence per token: DocAnchor's retrieval against three peers' defaults, by character ranges.

Data: ../shared/bench/chunking_eval (Chroma's chunking evaluation, brandonstarxel/chunking_evaluation;
see its SOURCE.md): 4 Markdown corpora, 373 questions with reference excerpts as character ranges.

- The corpora go through DocAnchor's real ingest path (:class:`plugin.api.DocAnchor`) into one
  namespace, with the real model. The only difference from production is the embedder: it wraps
  the real one with an on-disk cache keyed by ``(model|precision, sha256(text))`` under ``bench/out/``
  (git-ignored), so a re-run embeds only texts it has not seen. Queries are embedded by the real
  model on every call (never cached), so measured latency includes the query embedding.
- Every question is asked at each budget (cl100k tokens) through ``DocAnchor.retrieve``.
- Peers are rebuilt with the same model and packed by the same :func:`retrieval.pack.pack`:
  LangChain tutorial (RecursiveCharacterTextSplitter 1000/200 characters, k=4), LobeChat
  knowledge base (800/400, top 5), Open WebUI (1000/100, top 3).
- recall = reference characters covered / reference characters; precision = covered / returned
  characters; IoU = covered / (returned + uncovered reference); each averaged over questions.
  Section ranges are the sections' ``source_start``/``source_end`` (offsets into the decoded
  file, as a client highlighting the passage would use them).
- Once per run a few questions also go through ``POST /v1/retrieve`` on a loopback waitress
  server, and their answers are compared with the Python call's.
- CJK part (``--cjk``): the three Chinese files of ../shared/corpus are ingested, with the 4
  corpora, into a second namespace (``corpora-cjk``), so the main table always measures the 4
  corpora alone, as the issue specifies, and CJK queries still compete with them; 50 passages are drawn with a fixed seed and each is queried with a distinctive
  8-character phrase from it; recall of the passage is reported at each budget.

Run: ``python bench/budget_recall.py [--systems docanchor,langchain] [--budgets 500,1000]
[--corpora finance] [--limit N] [--half odd|even] [--cjk] [--model NAME] [--precision fp32|bf16]``. Tune a rule
on ``--half odd`` and confirm it on ``--half even`` (questions it was not tuned on); parallel
experiments with ``--reuse-index`` each need their own copy of the index (``--index-dir``).
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import random
import re
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Sequence

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DATA = (REPO / ".." / "shared" / "bench" / "chunking_eval").resolve()
CORPUS = (REPO / ".." / "shared" / "corpus").resolve()
OUT = REPO / "bench" / "out"
BUDGETS = (250, 500, 1000, 2000)
PEERS = {"langchain": (1000, 200, 4), "lobechat": (800, 400, 5), "openwebui": (1000, 100, 3)}
PEER_LABEL = {"langchain": "langchain 1000/200 k4", "lobechat": "lobechat 800/400 k5",
              "openwebui": "openwebui 1000/100 k3", "docanchor": "docanchor"}
CJK_FILES = ("txt/sanguo_yanyi_gbk.txt", "pdf/issue-67-example.pdf", "docx/libreoffice_conversion.docx")
CJK_PASSAGES = 50
CJK_SEED = 20240607
HTTP_CHECKS = 5
NO_ANSWER_BUDGET = 1000
INGEST_CODE = ("ingest/chunking.py", "ingest/parsers/text.py", "ingest/parsers/pdf.py", "ingest/parsers/docx.py",
               "ingest/normalise.py", "ingest/pipeline.py", "ingest/stream.py", "docanchor/lexical.py", "docanchor/store.py",
               "ingest/row_context.py", "docanchor/types.py", "docanchor/text.py", "docanchor/offsets.py",
               "docanchor/lexical_engine.py", "ingest/builder.py", "ingest/titles.py")

from docanchor.embedder import Embedder  # noqa: E402  (after the sys.path insert)


class CachedEmbedder(Embedder):
    """The real embedder with an on-disk cache of document vectors (bench only).

    ``embed`` looks every text up by ``(model|precision, sha256(text))`` in a SQLite file (vectors
    of another precision are never reused) and embeds only the misses; ``embed_query`` always runs
    the model (latency is measured on it).
    """

    def __init__(self, inner: Embedder, path: Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.precision = inner.precision
        self.key = f"{inner.name}|{inner.precision}"
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS vec (model TEXT, sha TEXT, v BLOB, PRIMARY KEY (model, sha))")
        self._lock = threading.Lock()
        self.hits = self.misses = 0
        self.query_s: list[float] = []
        self.memo_queries: dict[str, list[float]] | None = None

    @property
    def dimension(self) -> int:  # type: ignore[override]
        return self.inner.dimension

    @property
    def token_limit(self) -> int:  # type: ignore[override]
        return self.inner.token_limit

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def embed_query(self, text: str) -> list[float]:
        if self.memo_queries is not None:  # ablation runs: latency is not measured there
            if text not in self.memo_queries:
                self.memo_queries[text] = self.inner.embed_query(text)
            return self.memo_queries[text]
        t = time.perf_counter()
        try:
            return self.inner.embed_query(text)
        finally:
            self.query_s.append(time.perf_counter() - t)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        shas = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
        found: dict[str, list[float]] = {}
        with self._lock:
            for i in range(0, len(shas), 500):
                part = shas[i:i + 500]
                rows = self._db.execute(
                    f"SELECT sha, v FROM vec WHERE model = ? AND sha IN ({','.join('?' * len(part))})",
                    [self.key, *part]).fetchall()
                found.update((s, np.frombuffer(v, dtype=np.float32).tolist()) for s, v in rows)
        todo = list(dict.fromkeys(t for t, s in zip(texts, shas) if s not in found))
        self.hits += len(texts) - len(todo)
        self.misses += len(todo)
        if todo:
            vecs = []
            for i in range(0, len(todo), 256):
                vecs.extend(self.inner.embed(todo[i:i + 256]))
            new = {hashlib.sha256(t.encode("utf-8")).hexdigest(): v for t, v in zip(todo, vecs)}
            with self._lock, self._db:
                self._db.executemany("INSERT OR REPLACE INTO vec VALUES (?, ?, ?)",
                                     [(self.key, s, np.asarray(v, np.float32).tobytes()) for s, v in new.items()])
            found.update(new)
        return [found[s] for s in shas]


def load_questions(corpora: Sequence[str] | None, limit: int | None):
    with open(DATA / "questions_df.csv", encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    out = [(r["question"], r["corpus_id"], [(x["start_index"], x["end_index"]) for x in json.loads(r["references"])])
           for r in rows if not corpora or r["corpus_id"] in corpora]
    return out[:limit] if limit else out


def score(returned: list[tuple[str, int, int]], corpus: str, refs: list[tuple[int, int]]):
    """(covered, returned chars, reference chars) for ranges ``(corpus, start, end)``."""
    ref: set[int] = set()
    for s, e in refs:
        ref.update(range(s, e))
    got: dict[str, set[int]] = {}
    for c, s, e in returned:
        got.setdefault(c, set()).update(range(s, e))
    covered = len(ref & got.get(corpus, set()))
    return covered, sum(len(v) for v in got.values()), len(ref)


class Tally:
    """Per-question (covered, returned, reference, tokens) rows and their means."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, int, int]] = []

    def add(self, covered: int, returned: int, ref: int, tokens: int) -> None:
        self.rows.append((covered, returned, ref, tokens))

    def summary(self) -> tuple[float, float, float, float]:
        a = np.array(self.rows, float).reshape(-1, 4)
        cov, ret, ref = a[:, 0], a[:, 1], a[:, 2]
        recall = float(np.mean(cov / np.maximum(ref, 1)))
        precision = float(np.mean(np.where(ret > 0, cov / np.maximum(ret, 1), 0)))
        iou = float(np.mean(cov / np.maximum(ret + ref - cov, 1)))
        return recall, precision, iou, float(np.mean(a[:, 3]))


def _pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def http_check(da, questions, budgets, namespace: str) -> list[str]:
    """Ask a few questions through POST /v1/retrieve on a loopback waitress server; compare."""
    import urllib.request

    from waitress.server import create_server

    from plugin.app import create_app
    from plugin.serve import close_server

    server = create_server(create_app(docanchor=da), host="127.0.0.1", port=0, threads=2)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    lines = []
    try:
        base = f"http://127.0.0.1:{server.effective_port}"
        for q, _, _ in questions[:HTTP_CHECKS]:
            b = budgets[len(lines) % len(budgets)]
            body = json.dumps({"query": q, "budget_tokens": b, "namespace": namespace, "explain": True}).encode()
            req = urllib.request.Request(base + "/v1/retrieve", data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=60) as resp:
                got = json.loads(resp.read())
            want = json.loads(json.dumps(da.retrieve(q, b, namespace=namespace, explain=True).to_dict()))
            same = got == want
            lines.append(f"  HTTP vs Python, budget {b}: {'identical' if same else 'DIFFERENT'} "
                         f"({len(got['sections'])} sections, {got['context_tokens_used']} tokens) — {q[:60]!r}")
    finally:
        close_server(server, thread)
    return lines


def cjk_passages(texts: dict[str, str], n: int, seed: int) -> list[tuple[str, int, int, str]]:
    """``n`` passages ``(key, start, end, phrase)`` drawn with ``seed`` from the CJK texts.

    A passage is a line or sentence of the normalised text with at least 20 CJK characters;
    passages are drawn round-robin over the files (so the 1.2 MB novel does not take all 50).
    The query phrase is the first run of 8 consecutive CJK characters in the passage that
    occurs exactly once across all the texts (distinctive); passages without one are skipped.
    """
    rng = random.Random(seed)
    cjk = "\u3400-\u4dbf\u4e00-\u9fff"
    pools = {}
    for key, text in texts.items():
        spans = [(m.start(), m.end()) for m in re.finditer(r"[^\n。！？!?]+[。！？!?]?", text)]
        spans = [(s, e) for s, e in spans if len(re.findall(f"[{cjk}]", text[s:e])) >= 20]
        rng.shuffle(spans)
        pools[key] = spans
    joined = "\n".join(texts.values())
    out: list[tuple[str, int, int, str]] = []
    keys = sorted(pools)
    while len(out) < n and any(pools.values()):
        for key in keys:
            if len(out) >= n or not pools[key]:
                continue
            s, e = pools[key].pop()
            text = texts[key]
            for m in re.finditer(f"(?=([{cjk}]{{8}}))", text[s:e]):
                phrase = m.group(1)
                if joined.count(phrase) == 1:
                    out.append((key, s, e, phrase))
                    break
    return out


def ask_without_answer(da, questions, doc_corpus: dict[str, str], namespace: str) -> tuple[float, float, int]:
    """Each question asked of the documents of the other corpora only (``doc_ids``), so the index
    holds no answer: ``(mean tokens returned, share with no_strong_match, questions)`` at
    :data:`NO_ANSWER_BUDGET`. Filtering by ``doc_ids`` stands in for an index without the corpus:
    the strong-match test counts document frequencies over the documents searched, so a term only
    the left-out corpus holds is absent (BM25's own scores still count it)."""
    by_corpus: dict[str, list[str]] = {}
    for doc_id, c in doc_corpus.items():
        if not c.endswith((".pdf", ".docx", ".txt")):  # the 4 corpora, not the CJK files
            by_corpus.setdefault(c, []).append(doc_id)
    tokens, strong = [], 0
    questions = [x for x in questions if any(k != x[1] for k in by_corpus)]  # none with one corpus only
    for q, c, _ in questions:
        others = sorted(d for k, ids in by_corpus.items() if k != c for d in ids)
        r = da.retrieve(q, NO_ANSWER_BUDGET, namespace=namespace, doc_ids=others)
        tokens.append(r.context_tokens_used)
        strong += bool(r.no_strong_match)
    return float(np.mean(tokens)) if tokens else 0.0, strong / max(1, len(questions)), len(questions)


def ablated_recall(da, questions, budgets, doc_corpus, to_file, passages, cjk_ns) -> dict[tuple[str, int], float]:
    """Mean recall ``{("en" | "cjk", budget): recall}`` of the English questions and the CJK passages,
    and the English IoU as ``{("en-iou", budget): IoU}`` (a rule may exist for precision, not recall)."""
    out: dict[tuple[str, int], float] = {}
    for b in budgets:
        t = Tally()
        for q, c, refs in questions:
            r = da.retrieve(q, b)
            ranges = [to_file(doc_corpus.get(s.doc_id, s.doc_id), s) for s in r.sections]
            t.add(*score(ranges, c, refs), r.context_tokens_used)
        out[("en", b)], _, out[("en-iou", b)], _ = t.summary()
        if passages:
            t = Tally()
            for key, s, e, phrase in passages:
                r = da.retrieve(phrase, b, namespace=cjk_ns)
                t.add(*score([(doc_corpus[x.doc_id], x.start_char, x.end_char) for x in r.sections], key, [(s, e)]),
                      r.context_tokens_used)
            out[("cjk", b)] = t.summary()[0]
    return out


def reused_index_dir(model: str, precision: str, settings) -> Path:
    """The index ``--reuse-index`` keeps under bench/out/ for ``model`` in ``precision``, keyed by
    ``settings``' chunk sizes and the ingest code (:data:`INGEST_CODE`)."""
    from docanchor.settings import Settings

    code = hashlib.sha256(b"".join((REPO / p).read_bytes() for p in INGEST_CODE)).hexdigest()[:10]
    named = "" if model == Settings().embedding_model else f"{Path(model).name}-"
    return OUT / f"index-{named}{settings.chunk_tokens}-{settings.chunk_overlap_tokens}-{precision}-{code}"


def set_constants(items: list[str]) -> None:
    """Apply ``--set MODULE.NAME=VALUE`` overrides (VALUE as JSON, cast to the constant's type)."""
    import importlib

    for item in items:
        target, value = item.split("=", 1)
        module, name = target.rsplit(".", 1)
        mod = importlib.import_module(module)
        setattr(mod, name, type(getattr(mod, name))(json.loads(value)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--systems", default="docanchor,langchain,lobechat,openwebui")
    ap.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    ap.add_argument("--corpora", default="", help="comma-separated corpus ids (default: all 4)")
    ap.add_argument("--limit", type=int, default=None, help="ask only the first N questions")
    ap.add_argument("--every", type=int, default=1, help="ask every K-th question (a spread sample of all corpora)")
    ap.add_argument("--half", default="", choices=("", "odd", "even"),
                    help="ask only the odd- or even-numbered questions (1-based; after --limit, before --every): "
                         "tune on one half, confirm on the other")
    ap.add_argument("--cjk", action="store_true", help="also run the CJK part")
    ap.add_argument("--cjk-passages", type=int, default=CJK_PASSAGES,
                    help="CJK passages to draw (one passage is 100/N recall points; a change to a CJK "
                         "file's text redraws the sample, so compare such changes with a larger N)")
    ap.add_argument("--no-http", action="store_true", help="skip the loopback HTTP check")
    ap.add_argument("--model", default=None, metavar="NAME",
                    help="the embedding model (settings.embedding_model: a name of docanchor.embedder.PACKAGED_MODELS "
                         "or a local folder; default: DocAnchor's default)")
    ap.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16"),
                    help="the embedder's precision (auto: bf16 where the CPU has it natively)")
    ap.add_argument("--query-runtime", default="auto", choices=("auto", "onnx", "torch"),
                    help="what embeds the questions (auto: onnxruntime, torch if the conversion fails)")
    ap.add_argument("--chunk-tokens", type=int, default=None, help="override settings.chunk_tokens")
    ap.add_argument("--overlap-tokens", type=int, default=None, help="override settings.chunk_overlap_tokens")
    ap.add_argument("--per-question", type=Path, default=None, help="write per-question rows (JSONL) here: one per question and budget; "
                    "the CJK part's rows carry part 'cjk' and the passage (file, start, end, phrase)")
    ap.add_argument("--reuse-index", action="store_true",
                    help="keep the ingested index under bench/out/ (keyed by chunk settings and the ingest code) "
                         "and reuse it on later runs")
    ap.add_argument("--index-dir", type=Path, default=None,
                    help="with --reuse-index, keep the index here instead (parallel runs each need their own copy)")
    ap.add_argument("--ablate", default="", metavar="RULE[,RULE]|all",
                    help="also measure recall with each named rule of retrieval.search.ABLATABLE switched off")
    ap.add_argument("--set", action="append", default=[], metavar="MODULE.NAME=VALUE",
                    help="override a module constant for an experiment, e.g. retrieval.search.DENSE_K=60")
    args = ap.parse_args()
    set_constants(args.set)

    from docanchor.embedder import get_embedder
    from docanchor.lexical import tokenize
    from docanchor.settings import Settings
    from plugin.api import DocAnchor
    from retrieval.pack import Piece, pack

    systems = [s for s in args.systems.split(",") if s]
    budgets = tuple(int(b) for b in args.budgets.split(","))
    wanted = [c for c in args.corpora.split(",") if c]
    questions = load_questions(wanted, args.limit)
    questions = questions[{"": slice(None), "odd": slice(0, None, 2), "even": slice(1, None, 2)}[args.half]][::args.every]
    corpora = sorted(wanted) if wanted else sorted(p.stem for p in (DATA / "corpora").glob("*.md"))
    model = args.model or Settings().embedding_model
    emb = CachedEmbedder(get_embedder(model, precision=args.precision, query_runtime=args.query_runtime),
                         OUT / "embeddings.sqlite")
    overrides = {k: v for k, v in (("chunk_tokens", args.chunk_tokens), ("chunk_overlap_tokens", args.overlap_tokens))
                 if v is not None}
    ns, cjk_ns = "corpora", "corpora-cjk"
    settings = Settings(data_dir=Path("unused"), namespace=ns, **overrides)
    if args.reuse_index:
        data_dir = args.index_dir or reused_index_dir(model, emb.precision, settings)
    else:
        data_dir = Path(tempfile.mkdtemp(prefix="docanchor-bench-"))
    settings = settings.with_(data_dir=data_dir)
    da = DocAnchor(settings, embedder=emb)
    count = da.ctx.counter.count
    tallies: dict[tuple[str, int], Tally] = {}
    per_corpus: dict[tuple[str, int, str], Tally] = {}
    over_budget = 0
    notes: list[str] = []
    rows_out = []

    doc_corpus = {}
    if "docanchor" in systems or args.cjk:
        t0 = time.perf_counter()
        for space in (ns, cjk_ns) if args.cjk else (ns,):
            for c in corpora:
                path = DATA / "corpora" / f"{c}.md"
                res = da.ingest_file(path, namespace=space)
                doc_corpus[res.record.doc_id] = c
                if space == ns:
                    notes.append(f"ingested {c}: {res.record.n_chunks} chunks")
        cjk_texts = {}
        if args.cjk:
            for rel in CJK_FILES:
                res = da.ingest_file(CORPUS / rel, namespace=cjk_ns)
                doc_corpus[res.record.doc_id] = rel
                if res.parsed is None:  # already in a reused index: parse again for the text
                    from ingest.detect import detect_type
                    from ingest.parsers import parse

                    data = (CORPUS / rel).read_bytes()
                    res.parsed = parse(detect_type(data, rel), data, Path(rel).name)
                cjk_texts[rel] = res.parsed.text
                notes.append(f"ingested {rel}: {res.record.n_chunks} chunks")
        notes.append(f"ingest {time.perf_counter() - t0:.1f} s (embedding cache: {emb.hits} hits, "
                     f"{emb.misses} embedded); chunk_tokens {settings.chunk_tokens}, "
                     f"overlap {settings.chunk_overlap_tokens}")

    def to_file(c: str, sec) -> tuple[str, int, int]:
        """A section's range in its corpus file (the section's source offsets); the CJK passages
        are drawn from the normalised text, so theirs stay normalised."""
        if c in corpora and sec.source_start is not None:
            return c, sec.source_start, sec.source_end
        return c, sec.start_char, sec.end_char

    latencies: list[float] = []
    rest: list[float] = []
    strong_miss_answerable = 0
    if "docanchor" in systems:
        for _ in range(3):
            da.retrieve("warm up the caches", 500)
        for qi, (q, c, refs) in enumerate(questions):
            for b in budgets:
                t = time.perf_counter()
                r = da.retrieve(q, b)
                latencies.append(time.perf_counter() - t)
                rest.append(latencies[-1] - emb.query_s[-1])
                over_budget += r.context_tokens_used > b
                strong_miss_answerable += bool(r.no_strong_match) and b == NO_ANSWER_BUDGET
                ranges = [to_file(doc_corpus.get(s.doc_id, s.doc_id), s) for s in r.sections]
                cov, ret, ref = score(ranges, c, refs)
                tallies.setdefault(("docanchor", b), Tally()).add(cov, ret, ref, r.context_tokens_used)
                per_corpus.setdefault(("docanchor", b, c), Tally()).add(cov, ret, ref, r.context_tokens_used)
                rows_out.append({"q": qi, "corpus": c, "budget": b, "covered": cov, "returned": ret, "ref": ref,
                                 "tokens": r.context_tokens_used, "sections": len(r.sections)})
        if not args.no_http:
            notes.extend(http_check(da, questions, budgets, ns))

    for name in [s for s in systems if s in PEERS]:
        size, overlap, k = PEERS[name]
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        splitter = RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=overlap, add_start_index=True)
        items, texts = [], []
        for c in corpora:
            raw = (DATA / "corpora" / f"{c}.md").read_text(encoding="utf-8")
            for i, d in enumerate(splitter.create_documents([raw])):
                s = d.metadata["start_index"]
                items.append((c, i, d.page_content, s, s + len(d.page_content)))
                texts.append(d.page_content)
        vecs = np.array(emb.embed(texts), dtype=np.float32)
        qvecs = np.array([emb.inner.embed_query(q) for q, _, _ in questions], dtype=np.float32)  # as queries (e5's prefix)
        label = PEER_LABEL[name]
        for (q, c, refs), qv in zip(questions, qvecs):
            top = np.argsort(-(vecs @ qv), kind="stable")[:k]
            ps = [Piece(f"{items[j][0]}:{items[j][1]:06d}", items[j][0], items[j][1], items[j][0], items[j][2],
                        items[j][3], items[j][4], score=float(k - n)) for n, j in enumerate(top)]
            for b in budgets:
                r = pack(ps, b, count, query_terms=set(tokenize(q)), tokenize=tokenize)
                over_budget += r.context_tokens_used > b
                cov, ret, ref = score([(s.doc_id, s.start_char, s.end_char) for s in r.sections], c, refs)
                tallies.setdefault((label, b), Tally()).add(cov, ret, ref, r.context_tokens_used)
                per_corpus.setdefault((label, b, c), Tally()).add(cov, ret, ref, r.context_tokens_used)

    cjk_rows: dict[int, Tally] = {}
    passages: list[tuple[str, int, int, str]] = []
    if args.cjk:
        passages = cjk_passages(cjk_texts, args.cjk_passages, CJK_SEED)
        for key, s, e, phrase in passages:
            for b in budgets:
                r = da.retrieve(phrase, b, namespace=cjk_ns)
                over_budget += r.context_tokens_used > b
                ranges = [(doc_corpus[x.doc_id], x.start_char, x.end_char) for x in r.sections]
                cov, ret, ref = score(ranges, key, [(s, e)])
                cjk_rows.setdefault(b, Tally()).add(cov, ret, ref, r.context_tokens_used)
                rows_out.append({"part": "cjk", "file": key, "start": s, "end": e, "phrase": phrase, "budget": b,
                                 "covered": cov, "returned": ret, "ref": ref, "tokens": r.context_tokens_used,
                                 "sections": len(r.sections)})
        notes.append(f"CJK: {len(passages)} passages (seed {CJK_SEED}) from "
                     + ", ".join(f"{k.split('/')[-1]} {sum(1 for p in passages if p[0] == k)}" for k in CJK_FILES))

    no_answer = None
    if "docanchor" in systems:
        no_answer = ask_without_answer(da, questions, doc_corpus, ns)
    ablation: dict[str, dict[tuple[str, int], float]] = {}
    if args.ablate:
        from retrieval import search as _search

        stages = _search.ABLATABLE if args.ablate == "all" else tuple(args.ablate.split(","))
        emb.memo_queries = {}
        for stage in stages:
            _search.ABLATED = frozenset({stage})
            try:
                ablation[stage] = ablated_recall(da, questions, budgets, doc_corpus, to_file,
                                                 passages if args.cjk else [], cjk_ns)
            finally:
                _search.ABLATED = frozenset()

    print("\n".join(notes))
    print(f"\n{len(questions)} questions, budgets {budgets}, model {emb.name} ({emb.precision}), "
          f"budget tokenizer {da.ctx.counter.name}")
    print(f"{'system':24} {'budget':>6} {'recall':>7} {'prec.':>7} {'IoU':>7} {'tokens':>7}")
    order = sorted(tallies.items(), key=lambda kv: (kv[0][0] != "docanchor", kv[0][0], kv[0][1]))
    for (name, b), tally in order:
        rec, pre, iou, tok = tally.summary()
        print(f"{name:24} {b:>6} {rec:>7.1%} {pre:>7.1%} {iou:>7.1%} {tok:>7.0f}")
    print("\nper corpus: recall / IoU")
    systems_seen = sorted({k[0] for k in per_corpus}, key=lambda s: (s != "docanchor", s))
    print(f"{'system':24} {'budget':>6} " + " ".join(f"{c[:17]:>17}" for c in corpora))
    for name in systems_seen:
        for b in budgets:
            cells = []
            for c in corpora:
                t = per_corpus.get((name, b, c))
                if t is None:
                    cells.append(f"{'-':>17}")
                    continue
                rec, _, iou, _ = t.summary()
                cells.append(f"{rec:>8.1%} {iou:>7.1%} ".rjust(17))
            print(f"{name:24} {b:>6} " + " ".join(cells))
    if cjk_rows:
        print(f"\nCJK ({len(passages)} passages, 8-character phrase queries)")
        for b, t in sorted(cjk_rows.items()):
            rec, pre, iou, tok = t.summary()
            print(f"docanchor CJK            {b:>6} {rec:>7.1%} {pre:>7.1%} {iou:>7.1%} {tok:>7.0f}")
    if latencies:
        print(f"\nDocAnchor retrieve() latency (warm, query embedding included): p50 "
              f"{1000 * statistics.median(latencies):.1f} ms, p99 {1000 * _pct(latencies, 0.99):.1f} ms, "
              f"max {1000 * max(latencies):.1f} ms over {len(latencies)} requests")
        print(f"  of which outside the query embedding: p50 {1000 * statistics.median(rest):.1f} ms, "
              f"p99 {1000 * _pct(rest, 0.99):.1f} ms; load average at the end "
              f"{' '.join(f'{x:.1f}' for x in __import__('os').getloadavg())} on {__import__('os').cpu_count()} CPUs")
    if no_answer is not None:
        mean_tokens, strong_share, n = no_answer
        print(f"\nno-answer questions ({n}: each corpus's questions asked of the other three corpora's documents), "
              f"budget {NO_ANSWER_BUDGET}: mean tokens {mean_tokens:.0f}, no_strong_match on {strong_share:.1%}")
        if NO_ANSWER_BUDGET in budgets:
            print(f"  answerable questions with no_strong_match at budget {NO_ANSWER_BUDGET}: "
                  f"{strong_miss_answerable / max(1, len(questions)):.1%}")
    if ablation:
        base = {("en", b): tallies[("docanchor", b)].summary()[0] for b in budgets if ("docanchor", b) in tallies}
        base.update({("cjk", b): t.summary()[0] for b, t in cjk_rows.items()})
        iou_at = NO_ANSWER_BUDGET if ("docanchor", NO_ANSWER_BUDGET) in tallies else budgets[-1]
        base[("en-iou", iou_at)] = tallies[("docanchor", iou_at)].summary()[2]
        print("\nablation: recall change in points with one rule off (negative: the rule adds recall)")
        print(f"{'rule off':18} " + " ".join(f"{'en@' + str(b):>8}" for b in budgets)
              + " " + " ".join(f"{'cjk@' + str(b):>8}" for b in budgets if ("cjk", b) in base)
              + f" {'IoU@' + str(iou_at):>9}")
        for stage, got in ablation.items():
            cells = [f"{100 * (got[('en', b)] - base[('en', b)]):>+8.2f}" for b in budgets if ('en', b) in base]
            cells += [f"{100 * (got[('cjk', b)] - base[('cjk', b)]):>+8.2f}" for b in budgets if ("cjk", b) in got]
            cells.append(f"{100 * (got[('en-iou', iou_at)] - base[('en-iou', iou_at)]):>+9.2f}")
            print(f"{stage:18} " + " ".join(cells))
    print(f"requests over budget: {over_budget}")
    if args.per_question:
        args.per_question.write_text("\n".join(json.dumps(r) for r in rows_out) + "\n")


if __name__ == "__main__":
    main()
