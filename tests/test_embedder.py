"""The embedder's size is known without loading the model, so commands that only open the store
(list, read, delete) do not import sentence-transformers and torch (8 s -> 1 s for `docanchor list`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from docanchor.embedder import _pooled_dimension
from docanchor.settings import DEFAULT_EMBEDDING_MODEL
from tests.waiting import BACKSTOP_S

ROOT = Path(__file__).resolve().parents[1]


def test_declared_dimension_is_the_loaded_models(real_embedder):
    assert _pooled_dimension(DEFAULT_EMBEDDING_MODEL) == real_embedder.model.get_embedding_dimension() == 384


def test_a_folder_with_a_dense_layer_or_no_config_is_loaded_instead(tmp_path: Path):
    (tmp_path / "modules.json").write_text(
        '[{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},'
        ' {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},'
        ' {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}]')
    assert _pooled_dimension(str(tmp_path)) is None  # a Dense layer changes the size
    assert _pooled_dimension(str(tmp_path / "missing")) is None


def test_listing_and_reading_never_import_the_model(tmp_path: Path):
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from docanchor.settings import Settings\n"
        "from plugin.api import DocAnchor\n"
        f"da = DocAnchor(Settings(data_dir=Path({str(tmp_path)!r})))\n"
        "assert da.list_documents() == []\n"
        "print('sentence_transformers' in sys.modules, 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=BACKSTOP_S)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "False"]


# ---------------------------------------------------------------------------- precision and pool
import threading  # noqa: E402

import pytest  # noqa: E402

from docanchor.embedder import (  # noqa: E402
    BF16_CPU_FLAGS, PRECISION_MIN_COSINE, EmbeddingPool, SentenceTransformerEmbedder, interchangeable,
    native_bf16, resolve_precision,
)
from docanchor.errors import ConfigError  # noqa: E402
from docanchor.settings import Settings  # noqa: E402

CPUINFO_AVX512 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16 amx_tile\n\nprocessor\t: 1\n"
CPUINFO_AMX = "processor\t: 0\nflags\t\t: fpu avx2 amx_bf16 amx_tile amx_int8\n"
CPUINFO_PLAIN = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512bw\nbugs\t\t: avx512_bf16\n"


@pytest.mark.parametrize("cpuinfo, native", [(CPUINFO_AVX512, True), (CPUINFO_AMX, True), (CPUINFO_PLAIN, False)])
def test_auto_precision_is_bf16_only_where_the_cpu_has_it(tmp_path: Path, cpuinfo: str, native: bool):
    path = tmp_path / "cpuinfo"
    path.write_text(cpuinfo)
    assert native_bf16(path) is native
    assert resolve_precision("auto", path) == ("bf16" if native else "fp32")
    assert resolve_precision("fp32", path) == "fp32" and resolve_precision("bf16", path) == "bf16"  # forced


def test_no_cpuinfo_means_fp32_and_bad_settings_are_refused(tmp_path: Path):
    assert resolve_precision("auto", tmp_path / "missing") == "fp32"
    assert BF16_CPU_FLAGS == {"amx_bf16", "avx512_bf16"}
    with pytest.raises(ConfigError, match="DOCANCHOR_EMBEDDING_PRECISION"):
        Settings.from_env({"DOCANCHOR_EMBEDDING_PRECISION": "fp16"})
    with pytest.raises(ConfigError, match="DOCANCHOR_EMBEDDING_THREADS"):
        Settings(embedding_threads=-1)
    assert Settings.from_env({"DOCANCHOR_EMBEDDING_PRECISION": "fp32"}).embedding_precision == "fp32"
    assert interchangeable("fp32", "bf16") and interchangeable("bf16", "fp32") and interchangeable("int8", "int8")
    assert not interchangeable("int8", "fp32")


class _StubModel:
    """Stands in for the sentence-transformers model: records which forward passes overlap. A
    one-text pass (a query) waits until ``pair`` queries run at once, or until the backstop."""

    def __init__(self, pair: int = 2) -> None:
        self.pair = pair
        self.queries = self.most_queries = 0
        self.batch_running = False
        self.batch_overlapped = False
        self.lock = threading.Lock()
        self.paired = threading.Event()
        self.batches: list[int] = []

    def encode(self, texts, **kwargs):
        import torch

        query = len(texts) == 1
        with self.lock:
            self.batch_overlapped |= self.batch_running or (not query and self.queries > 0)
            self.queries += query
            self.batch_running |= not query
            self.most_queries = max(self.most_queries, self.queries)
            if self.queries >= self.pair:
                self.paired.set()
            self.batches.append(len(texts))
        if query:
            self.paired.wait(BACKSTOP_S)
        else:
            threading.Event().wait(0.005)  # long enough for other threads to pile in
        with self.lock:
            self.queries -= query
            self.batch_running &= query
        return torch.ones(len(texts), 4)


def test_queries_run_side_by_side_on_one_thread_each_and_a_batch_runs_alone():
    """Regression: every query embedding held the whole pool, so request threads queued behind
    each other's queries (scale_bench: 8 HTTP clients got 1.12x one client's requests/s)."""
    emb = SentenceTransformerEmbedder(precision="fp32", batch_size=8, threads=2, query_runtime="torch")
    emb._model = stub = _StubModel(pair=2)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            if i == 2:
                assert len(emb.embed([f"text {n}" for n in range(20)])) == 20
            else:
                assert len(emb.embed_query("a query")) == 4
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(BACKSTOP_S)
    assert not errors
    assert stub.most_queries == 2  # both queries ran at once (the embedder has two threads) ...
    assert not stub.batch_overlapped  # ... and a batch never ran beside anything
    assert sorted(stub.batches) == [1, 1, 4, 8, 8]  # an embed() of 20 texts took three turns of the pool


def test_no_more_queries_run_at_once_than_the_embedder_has_threads():
    emb = SentenceTransformerEmbedder(precision="fp32", threads=1, query_runtime="torch")
    emb._model = stub = _StubModel(pair=99)
    stub.paired.set()  # queries do not wait for each other here
    threads = [threading.Thread(target=emb.embed_query, args=("q",)) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(BACKSTOP_S)
    assert stub.most_queries == 1 and stub.batches == [1] * 6


def test_a_waiting_query_goes_before_waiting_batches():
    pool = EmbeddingPool()
    order: list[str] = []
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with pool.turn():
            holding.set()
            release.wait(120)

    def take(kind: str) -> None:
        with pool.turn(query=kind == "query"):
            order.append(kind)

    first = threading.Thread(target=hold)
    first.start()
    assert holding.wait(120)
    batch = threading.Thread(target=take, args=("batch",))
    batch.start()
    while not pool._cond._waiters:  # the batch is waiting
        threading.Event().wait(0.01)
    query = threading.Thread(target=take, args=("query",))
    query.start()
    while pool._queries_waiting == 0:
        threading.Event().wait(0.01)
    release.set()
    for t in (first, batch, query):
        t.join(120)
    assert order == ["query", "batch"]


@pytest.mark.e2e
def test_bf16_vectors_stay_within_the_tolerance_of_fp32(real_embedder):
    """The basis of INTERCHANGEABLE_PRECISIONS: bf16 and fp32 vectors of corpus chunks agree."""
    import numpy as np

    from tests.conftest import CORPUS

    text = (CORPUS / "md" / "ch04-01-what-is-ownership.md").read_text(encoding="utf-8")
    texts = [p.strip() for p in text.split("\n\n") if len(p.strip()) > 40][:80]
    texts += ["三国演义 第一回 宴桃园豪杰三结义", "x", "Ünïcödé ünd Zählen 12345 €"]
    fp32 = np.array(SentenceTransformerEmbedder(precision="fp32").embed(texts))
    bf16 = np.array(SentenceTransformerEmbedder(precision="bf16").embed(texts))
    cosines = (fp32 * bf16).sum(axis=1)
    assert cosines.min() >= PRECISION_MIN_COSINE, cosines.min()
    assert np.allclose(np.linalg.norm(bf16, axis=1), 1.0, atol=1e-5)  # unit length in float32


_LOAD_SCRIPT = (
    "import os, sys\n"
    "from pathlib import Path\n"
    "from docanchor.settings import Settings\n"
    "from plugin.api import DocAnchor\n"
    "da = DocAnchor(Settings(data_dir=Path(sys.argv[1]), embedding_threads=int(sys.argv[2])))\n"
    "da.ctx.embedder.embed(['warm up'])\n"
    "import torch\n"
    "print(os.environ.get('OMP_WAIT_POLICY'), torch.get_num_threads(), da.ctx.embedder.precision)\n"
)


@pytest.mark.e2e
def test_a_query_vector_on_one_thread_beside_others_is_the_lone_querys(real_embedder):
    """Queries run on one thread each, side by side (EmbeddingPool): their vectors must be bit
    for bit those of the same query embedded alone on all of the pool's threads."""
    from concurrent.futures import ThreadPoolExecutor

    queries = ["What is ownership in Rust?", "x", "三国演义 第一回 宴桃园豪杰三结义",
               "How does the borrow checker decide when a reference outlives the data it points to?"] * 3
    torch_queries = SentenceTransformerEmbedder(precision=real_embedder.precision, query_runtime="torch")
    torch_queries._model = real_embedder.model  # the same weights, queries in torch
    alone = {q: real_embedder._encode([q], threads=max(2, real_embedder.threads))[0] for q in queries}
    with ThreadPoolExecutor(8) as ex:
        together = list(ex.map(torch_queries.embed_query, queries))
    assert all(v == alone[q] for q, v in zip(queries, together))
    assert real_embedder.query_encoder is not None  # onnxruntime: one thread per query, whatever the others do
    onnx_alone = {q: real_embedder.query_encoder.encode(q) for q in queries}
    with ThreadPoolExecutor(8) as ex:
        together = list(ex.map(real_embedder.embed_query, queries))
    assert all(v == onnx_alone[q] for q, v in zip(queries, together))


@pytest.mark.e2e
def test_the_python_api_loads_the_model_quietly_with_passive_threads(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "HF_HUB_DISABLE_PROGRESS_BARS")}
    out = subprocess.run([sys.executable, "-c", _LOAD_SCRIPT, str(tmp_path), "1"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Loading weights" not in out.stderr and "it/s" not in out.stderr, out.stderr[-2000:]
    policy, threads, precision = out.stdout.split()
    assert (policy, threads) == ("PASSIVE", "1")
    assert precision == resolve_precision("auto")


@pytest.mark.e2e
def test_counting_tokens_beside_embedding_on_another_thread_changes_neither(real_embedder):
    """Regression: count_tokens (the chunker's, on a parse thread or another ingest lane) and
    embed (padded, truncated batches) shared the Hugging Face tokenizer, whose padding and
    truncation are set per call on the one backend: a batch came out unpadded ('Unable to create
    tensor ... expected sequence of length 99 at dim 1 (got 98)', two PDFs of
    bench/ingest_bench.py failed) and a count could come out truncated at the model's limit."""
    import threading

    long_text = " ".join(f"word{i} and some filler" for i in range(400))  # past the model's 256 pieces
    expected = real_embedder.count_tokens(long_text)
    assert expected > real_embedder.token_limit
    batches = [[("short text " * (1 + (k * 7 + j) % 40)).strip() for j in range(16)] for k in range(12)]
    counts: list[int] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def count() -> None:
        try:
            while not done.is_set():
                counts.append(real_embedder.count_tokens(long_text))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    counter = threading.Thread(target=count)
    counter.start()
    try:
        for batch in batches:
            assert len(real_embedder.embed(batch)) == len(batch)
    finally:
        done.set()
        counter.join(BACKSTOP_S)
    assert not errors and counts and set(counts) == {expected}


# ---------------------------------------------------------------------------- queries in onnxruntime
from docanchor import onnx_query  # noqa: E402
from docanchor.embedder import _model_path  # noqa: E402


def _real_sentences() -> list[str]:
    """Corpus paragraphs, a long text past the model's 256 word pieces, and odd short ones."""
    from tests.conftest import CORPUS

    text = (CORPUS / "md" / "ch04-01-what-is-ownership.md").read_text(encoding="utf-8")
    texts = [p.strip() for p in text.split("\n\n") if len(p.strip()) > 40][:60]
    return texts + [" ".join(f"word{i} and some filler" for i in range(400)), "x", "?",
                    "三国演义 第一回 宴桃园豪杰三结义", "Ünïcödé ünd Zählen 12345 €", "How is a budget counted?"]


def test_the_query_runtime_setting_is_checked():
    with pytest.raises(ConfigError, match="DOCANCHOR_QUERY_RUNTIME"):
        Settings.from_env({"DOCANCHOR_QUERY_RUNTIME": "tensorrt"})
    with pytest.raises(ConfigError, match="DOCANCHOR_QUERY_RUNTIME"):
        SentenceTransformerEmbedder(query_runtime="gpu")
    assert Settings.from_env({"DOCANCHOR_QUERY_RUNTIME": "torch"}).query_runtime == "torch"
    assert SentenceTransformerEmbedder(query_runtime="torch").query_encoder is None  # nothing converted


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory) -> Path:
    """A cache dir holding the real model's conversion, made once by an embedder's first query."""
    cache = tmp_path_factory.mktemp("model-cache")
    emb = SentenceTransformerEmbedder(precision="fp32", query_runtime="onnx", cache_dir=cache)
    emb.embed_query("warm up")
    return cache


@pytest.mark.e2e
def test_the_conversion_is_one_file_named_by_the_weights_hash(onnx_cache: Path):
    model_dir = _model_path("all-MiniLM-L6-v2")
    path = onnx_query.onnx_file(model_dir, onnx_cache)
    assert [p.name for p in onnx_cache.iterdir()] == [path.name]  # no temporary file left
    assert onnx_query.weights_hash(model_dir)[:20] in path.name
    import onnx

    onnx.checker.check_model(str(path))


@pytest.mark.e2e
def test_query_vectors_in_onnxruntime_are_torchs(real_embedder, onnx_cache: Path):
    """float32 in onnxruntime against torch in float32 (the same numbers up to the order of sums)
    and in bfloat16 (the chunks' vectors where the CPU has it): within the tolerance that lets
    precisions share a collection, so no reindex is asked for."""
    import numpy as np

    texts = _real_sentences()
    emb = SentenceTransformerEmbedder(precision="fp32", query_runtime="onnx", cache_dir=onnx_cache)
    onnx_vectors = np.array([emb.embed_query(t) for t in texts])
    fp32 = np.array(SentenceTransformerEmbedder(precision="fp32").embed(texts))
    bf16 = np.array(SentenceTransformerEmbedder(precision="bf16").embed(texts))
    assert (onnx_vectors * fp32).sum(axis=1).min() >= onnx_query.CHECK_MIN_COSINE
    assert (onnx_vectors * bf16).sum(axis=1).min() >= PRECISION_MIN_COSINE
    assert np.allclose(np.linalg.norm(onnx_vectors, axis=1), 1.0, atol=1e-5)
    assert emb.precision == "fp32" and SentenceTransformerEmbedder(precision="bf16").precision == "bf16"
    assert interchangeable("bf16", "fp32")  # what the store checks a collection's precision with


_QUERY_SCRIPT = (
    "import sys\n"
    "from pathlib import Path\n"
    "from docanchor.embedder import SentenceTransformerEmbedder\n"
    "emb = SentenceTransformerEmbedder(query_runtime=sys.argv[2], cache_dir=Path(sys.argv[1]))\n"
    "v = emb.embed_query('What is ownership in Rust?')\n"
    "print(len(v), 'torch' in sys.modules, 'sentence_transformers' in sys.modules)\n"
)


@pytest.mark.e2e
def test_a_cached_conversion_is_reused_and_queries_need_no_torch(onnx_cache: Path):
    before = {p.name: p.stat().st_mtime_ns for p in onnx_cache.iterdir()}
    out = subprocess.run([sys.executable, "-c", _QUERY_SCRIPT, str(onnx_cache), "onnx"], cwd=ROOT,
                         capture_output=True, text=True, timeout=BACKSTOP_S)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["384", "False", "False"]
    assert {p.name: p.stat().st_mtime_ns for p in onnx_cache.iterdir()} == before  # not converted again


@pytest.mark.e2e
def test_two_processes_converting_at_once_leave_one_whole_file(tmp_path: Path):
    cache = tmp_path / "cache"
    runs = [subprocess.Popen([sys.executable, "-c", _QUERY_SCRIPT, str(cache), "onnx"], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [r.communicate(timeout=BACKSTOP_S) for r in runs]
    assert [r.returncode for r in runs] == [0, 0], [e[-2000:] for _, e in outs]
    assert all(o.split() == ["384", "True", "True"] for o, _ in outs)  # converting imports torch; nothing else printed
    assert not any("Warning" in e or "torchvision" in e or "initializer" in e for _, e in outs), outs  # quiet
    files = list(cache.iterdir())
    assert [p.suffix for p in files] == [".onnx"]  # one file, no temporary ones
    import onnx

    onnx.checker.check_model(str(files[0]))


@pytest.mark.e2e
def test_a_failed_conversion_falls_back_to_torch_with_one_warning(real_embedder, tmp_path: Path, caplog):
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the cache dir should be")
    emb = SentenceTransformerEmbedder(precision=real_embedder.precision, cache_dir=blocked)
    emb._model = real_embedder.model
    with caplog.at_level("WARNING", logger="docanchor.embedder"):
        first = emb.embed_query("What is ownership in Rust?")
        emb.embed_query("And borrowing?")
    warnings = [r.getMessage() for r in caplog.records if r.name == "docanchor.embedder"]
    assert len(warnings) == 1 and "query embeddings run in torch" in warnings[0], warnings
    assert emb.query_encoder is None
    assert first == emb._encode(["What is ownership in Rust?"], threads=1)[0]
    forced = SentenceTransformerEmbedder(precision=real_embedder.precision, cache_dir=blocked, query_runtime="onnx")
    with pytest.raises(ConfigError, match="DOCANCHOR_QUERY_RUNTIME=onnx"):
        forced.embed_query("What is ownership in Rust?")


def test_only_mean_pooled_folders_are_converted(tmp_path: Path):
    model_dir = _model_path("all-MiniLM-L6-v2")
    assert onnx_query.mean_pooled(model_dir)
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "modules.json").write_text(
        '[{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},'
        ' {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]')
    (tmp_path / "1_Pooling" / "config.json").write_text('{"pooling_mode_cls_token": true}')
    assert not onnx_query.mean_pooled(tmp_path)
    with pytest.raises(ValueError, match="mean"):
        onnx_query.convert(None, tmp_path, tmp_path / "out.onnx")  # refused before any model is needed
    assert not (tmp_path / "out.onnx").exists()
