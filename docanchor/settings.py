"""One frozen settings object, built at the edge from ``DOCANCHOR_*`` environment variables.

Nothing reads the environment at import time: the CLI and the HTTP app factory call
:func:`Settings.from_env` once and pass the result down.
"""

from __future__ import annotations

import os
import re
from dataclasses import Field, dataclass, field, fields, replace
from pathlib import Path
from typing import Mapping

from docanchor.errors import ConfigError, InvalidRequest

DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
EMBEDDING_PRECISIONS = ("auto", "fp32", "bf16")
QUERY_RUNTIMES = ("auto", "onnx", "torch")
BUDGET_ENCODINGS = ("cl100k_base", "o200k_base")
LOCAL_ORIGINS = ("http://localhost:*", "http://127.0.0.1:*")
"""Default ``lobechat_origins``: LobeChat on this machine (its Docker image listens on 3210, a
development server elsewhere), over plain http on any port."""
_ORIGIN = re.compile(r"\*|https?://(\*\.)?[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*(:(\d{1,5}|\*))?")
"""An origin as CSP's ``frame-ancestors`` takes it (a host-source without path: Chromium takes
no IPv6 literal there), or ``*``."""

DEFAULT_CHROMA_PORT = 8000
"""The Chroma server's port when ``DOCANCHOR_CHROMA_HOST`` comes without one (``chroma run``'s default)."""
FROM_ENV = "from_env"
"""Key of a settings field's metadata: ``False`` for a field no ``DOCANCHOR_*`` variable sets
(:func:`env_fields` leaves it out)."""

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
"""The values of ``DOCANCHOR_LOG_LEVEL`` (Python's logging levels by name)."""


@dataclass(frozen=True)
class Settings:
    """DocAnchor's configuration. Units are in the names (``_tokens``, ``_bytes``, ``_s``).

    Attributes:
        data_dir: where the embedded Chroma database and DocAnchor's own files live.
        chroma_host: a Chroma server's host; when set, Chroma's ``HttpClient`` is used instead
            of the embedded ``PersistentClient``. A data dir records its store when first written;
            the CLI and ``plugin.api.DocAnchor`` fill this in from that record when it is unset
            (:mod:`docanchor.store_record`).
        chroma_port: that server's port; unset (``None``): the recorded server's port on a data
            dir that records one on the same host, else :data:`DEFAULT_CHROMA_PORT`
            (:attr:`chroma_server_port`). Set alone, it names a port of the recorded host, and is
            refused where no server is recorded (:func:`docanchor.store_record.follow`).
        chroma_recorded_in: the ``store.json`` the Chroma server's address was read from
            (:func:`docanchor.store_record.follow`); ``None`` when the settings named it. Not an
            environment variable: it says where the address came from, for the error sentences.
        embedding_model: a model named in ``docanchor.embedder.PACKAGED_MODELS``
            (``all-MiniLM-L6-v2``, the default, or ``multilingual-e5-small`` with the extra
            ``multilingual``) or a path to a local sentence-transformers model folder.
        reranker_path: a local sentence-transformers ``CrossEncoder`` folder that reranks the
            top retrieval candidates; empty (default) for no reranker. Nothing is downloaded.
        budget_encoding: the tokenizer that measures budgets and anchors: ``cl100k_base``
            (default) or ``o200k_base``.
        chunk_tokens: target chunk size in budget tokens.
        chunk_overlap_tokens: overlap between neighbouring chunks, in budget tokens.
        anchor_tokens: the anchor's maximum size in budget tokens (300 by design).
        default_budget_tokens: the budget used when a caller gives none, in budget tokens.
        max_upload_bytes: the largest accepted upload, in bytes.
        public_base_url: the URL LobeChat's server reaches DocAnchor at; written into the
            served manifest's ``api[].url``.
        host: the address ``docanchor serve`` binds to.
        port: the port ``docanchor serve`` listens on.
        api_keys: accepted API keys; empty means no authentication.
        namespace: the namespace used when a request names none.
        server_threads: worker threads of ``docanchor serve`` (of each of its processes).
        server_workers: processes of ``docanchor serve`` sharing its port (:mod:`plugin.workers`);
            more than 1 needs ``chroma_host`` (embedded Chroma is one process per data dir).
        process_dir: where this process keeps its own files when several processes share one data
            dir and a Chroma server: its BM25 index and its marks of ingests under way; the job log
            stays in ``data_dir``, shared. Empty: ``data_dir``. ``docanchor serve --workers`` sets
            it for each worker process (see :attr:`own_dir`).
        sync_wait_s: how long an upload waits for its ingest job before answering 202 with the
            job id (seconds).
        url_fetch_timeout_s: the deadline for fetching a document from a URL, the whole fetch
            (seconds).
        ocr: ``on`` (default) reads pages that hold only an image (scanned PDF pages, images)
            by OCR; ``off`` refuses them with ``no_text_layer``.
        ocr_max_pages: most pages of one document read by OCR (about 1-5 s each on 2 cores);
            pages over it are listed in ``ocr_skipped_pages`` and not indexed.
        lobechat_origins: the origins of the LobeChat deployments that may frame the upload
            page (its ``Content-Security-Policy: frame-ancestors``) and send it settings:
            ``scheme://host[:port]``, ``*`` as port or first label allowed (CSP source syntax),
            or ``*`` alone for any. The default is LobeChat on this machine, any port.
        metrics_token: a bearer token that may read ``/metrics`` (API keys may too); with
            neither keys nor this token, ``/metrics`` is open.
        log_level: ``DEBUG``, ``INFO``, ``WARNING`` or ``ERROR`` (any case); empty: ``INFO`` for
            ``docanchor serve`` (one access line per request), ``WARNING`` for other commands.
            ``-v`` means ``DEBUG``.
        compaction_threshold_percent: the context pressure (tokens needed / window, percent) at
            which context assembly starts replacing old tool results by references (85).
        spill_threshold_tokens: a single message or tool result larger than this many tokens (the
            model's tokenizer) is stored as a document and replaced by a reference (10,000).
        summary_tokens: the largest extractive summary a compaction puts in the prompt, in tokens.
        summary_llm_url: the base URL of an OpenAI-compatible chat endpoint (``.../v1``) that
            writes compaction summaries instead of the extractive summariser; empty (default): off.
        summary_llm_model: the model name sent to that endpoint.
        summary_llm_api_key: its API key (sent as ``Authorization: Bearer``); empty for none.
        summary_llm_timeout_s: how long a summary call may take before the extractive one is
            used instead (seconds).
        small_job_bytes: an ingest job of more bytes starts in the large lane (its parse alone may be
            long), in bytes; see :func:`plugin.runner.job_lane`.
        small_job_chunks: an ingest job of more chunks moves to the large lane once its chunks are
            known (before any is embedded), in chunks; see :func:`plugin.runner.job_lane`.
        min_free_disk_bytes: free space writes must leave on the data dir's disk, in bytes; an
            ingest or delete that would eat into it is refused with ``disk_full`` (507) before it
            writes (see :mod:`docanchor.disk`). 0 turns the check off.
        embedding_precision: the embedder's number format: ``auto`` (bfloat16 where the CPU
            computes it natively, see :func:`docanchor.embedder.resolve_precision`, else
            float32), ``fp32`` or ``bf16`` (forced); ``auto`` only for ``multilingual-e5-small``
            (4-bit weights).
        embedding_threads: threads of the process's one embedding pool (a batch runs on all of
            them; queries run one thread each, this many at once); 0 means every core this
            process may run on.
        query_runtime: what computes query embeddings: ``auto`` (onnxruntime on the model converted
            to ONNX once, see :mod:`docanchor.onnx_query`; torch when the conversion fails, with one
            warning), ``onnx`` (a failed conversion is an error) or ``torch``; ``auto`` only for
            ``multilingual-e5-small`` (its queries run in its own engine).
        model_cache_dir: where converted models are kept (a file per model, named by its weights'
            hash); empty: ``$XDG_CACHE_HOME/docanchor``, else ``~/.cache/docanchor``.
        parse_cpu_s: CPU seconds one sandboxed parse (the registry's ``sandboxed`` formats, see
            :mod:`docanchor.formats`), or the OCR of one page, may use before it is stopped
            (:mod:`ingest.sandbox`); time spent waiting for a busy machine does not count.
        parse_wall_s: wall-clock seconds one such call may take, a backstop far above
            ``parse_cpu_s`` for a parser that stalls without using CPU.
        parse_memory_bytes: memory one parse worker (or OCR worker) may allocate, in bytes
            (``RLIMIT_DATA``, see :mod:`ingest.sandbox`): a decompression bomb stops there with
            ``too_large``. Address space the worker only reserves or maps (libraries, per-thread
            allocator arenas) does not count. 2 GiB: the OCR worker, the largest, holds three models
            and one page's feature maps (bench/corpus_report.py prints the peak growth per file).
    """

    data_dir: Path = Path("./docanchor-data")
    chroma_host: str | None = None
    chroma_port: int | None = None
    chroma_recorded_in: Path | None = field(default=None, metadata={FROM_ENV: False})
    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    reranker_path: str = ""
    budget_encoding: str = "cl100k_base"
    chunk_tokens: int = 100
    chunk_overlap_tokens: int = 0
    anchor_tokens: int = 300
    default_budget_tokens: int = 1000
    max_upload_bytes: int = 50 * 1024 * 1024
    public_base_url: str = "http://127.0.0.1:8765"
    host: str = "127.0.0.1"
    port: int = 8765
    api_keys: tuple[str, ...] = field(default_factory=tuple)
    namespace: str = "default"
    server_threads: int = 8
    server_workers: int = 1
    process_dir: str = ""
    sync_wait_s: float = 10.0
    url_fetch_timeout_s: float = 20.0
    ocr: str = "on"
    ocr_max_pages: int = 50
    lobechat_origins: tuple[str, ...] = field(default_factory=lambda: LOCAL_ORIGINS)
    metrics_token: str = ""
    log_level: str = ""
    compaction_threshold_percent: int = 85
    spill_threshold_tokens: int = 10_000
    summary_tokens: int = 1_000
    summary_llm_url: str = ""
    summary_llm_model: str = ""
    summary_llm_api_key: str = ""
    summary_llm_timeout_s: float = 60.0
    small_job_bytes: int = 2 * 1024 * 1024
    small_job_chunks: int = 500
    min_free_disk_bytes: int = 64 * 1024 * 1024
    embedding_precision: str = "auto"
    embedding_threads: int = 0
    query_runtime: str = "auto"
    model_cache_dir: str = ""
    parse_cpu_s: float = 60.0
    parse_wall_s: float = 600.0
    parse_memory_bytes: int = 2 * 1024**3

    def __post_init__(self) -> None:
        if self.chroma_host and ":" in self.chroma_host and not self.chroma_host.startswith("["):
            raise ConfigError(  # Chroma's client puts the host into a URL as it is, where ::1 is no host
                f"DOCANCHOR_CHROMA_HOST must be a host name or address without a port; got {self.chroma_host!r}. "
                f"Write an IPv6 address in brackets ([{self.chroma_host}]) and the port in DOCANCHOR_CHROMA_PORT.")
        if self.budget_encoding not in BUDGET_ENCODINGS:
            raise ConfigError(
                f"DOCANCHOR_BUDGET_ENCODING must be one of {', '.join(BUDGET_ENCODINGS)}; "
                f"got {self.budget_encoding!r}."
            )
        for name, (low, high) in SETTING_RANGES.items():
            if not low <= getattr(self, name) <= high:
                raise ConfigError(f"{env_name(name)} must be {low} to {high}; got {getattr(self, name)}.")
        if not 0 <= self.chunk_overlap_tokens < self.chunk_tokens:
            raise ConfigError(
                "DOCANCHOR_CHUNK_OVERLAP_TOKENS must be at least 0 and below the chunk size "
                f"({self.chunk_tokens}); got {self.chunk_overlap_tokens}."
            )
        if self.min_free_disk_bytes < 0:
            raise ConfigError(f"DOCANCHOR_MIN_FREE_DISK_BYTES must be 0 or more; got {self.min_free_disk_bytes}.")
        if self.ocr not in ("on", "off"):
            raise ConfigError(f"DOCANCHOR_OCR must be on or off; got {self.ocr!r}.")
        bad = [o for o in self.lobechat_origins if not _ORIGIN.fullmatch(o)]
        if bad or not self.lobechat_origins:
            raise ConfigError(
                "DOCANCHOR_LOBECHAT_ORIGINS must be a comma-separated list of origins such as "
                f"https://chat.example.org or http://localhost:* (or * for any); got {', '.join(bad) or 'none'}.")
        if self.log_level and self.log_level.upper() not in LOG_LEVELS:
            raise ConfigError(f"DOCANCHOR_LOG_LEVEL must be one of {', '.join(LOG_LEVELS)}; got {self.log_level!r}.")
        self._check_embedding_and_parse()
        self._check_namespace()
        object.__setattr__(self, "data_dir", Path(self.data_dir))
        object.__setattr__(self, "public_base_url", self.public_base_url.rstrip("/"))

    def _check_namespace(self) -> None:
        """The default namespace obeys the rule every request's does (:func:`docanchor.access.check_namespace`)."""
        from docanchor.access import check_namespace  # imported here: docanchor.access imports this module

        try:
            check_namespace(self.namespace)
        except InvalidRequest as err:
            raise ConfigError(f"DOCANCHOR_NAMESPACE is not a namespace: {err.message}") from None

    def _check_embedding_and_parse(self) -> None:
        if self.embedding_precision not in EMBEDDING_PRECISIONS:
            raise ConfigError(
                f"DOCANCHOR_EMBEDDING_PRECISION must be one of {', '.join(EMBEDDING_PRECISIONS)}; "
                f"got {self.embedding_precision!r}."
            )
        if self.query_runtime not in QUERY_RUNTIMES:
            raise ConfigError(
                f"DOCANCHOR_QUERY_RUNTIME must be one of {', '.join(QUERY_RUNTIMES)}; got {self.query_runtime!r}."
            )
        if not 0 <= self.embedding_threads <= 1024:
            raise ConfigError(
                f"DOCANCHOR_EMBEDDING_THREADS must be 0 (every core) to 1024; got {self.embedding_threads}."
            )
        if not self.parse_cpu_s > 0:
            raise ConfigError(f"DOCANCHOR_PARSE_CPU_S must be above 0 seconds; got {self.parse_cpu_s}.")
        if not self.parse_wall_s >= self.parse_cpu_s:
            raise ConfigError(
                f"DOCANCHOR_PARSE_WALL_S must be at least DOCANCHOR_PARSE_CPU_S ({self.parse_cpu_s:g} s); "
                f"got {self.parse_wall_s}."
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> "Settings":
        """Build settings from ``DOCANCHOR_<FIELD>`` variables (e.g. ``DOCANCHOR_DATA_DIR``).

        ``DOCANCHOR_API_KEYS`` is a comma-separated list. An empty (or blank) variable is not set,
        by the convention for environment variables (``DOCANCHOR_NAMESPACE=`` is the default
        namespace). Keyword ``overrides`` win over the environment.

        Raises:
            ConfigError: a variable does not parse as its field's type or is out of range.
        """
        environ = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for f in env_fields():
            raw = environ.get(env_name(f.name))
            if raw is None or not raw.strip():
                continue
            values[f.name] = _parse(f.name, str(f.type), raw)
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]

    def with_(self, **changes: object) -> "Settings":
        """A copy with some fields changed."""
        return replace(self, **changes)

    @property
    def chroma_server_port(self) -> int:
        """The port of the Chroma server ``chroma_host`` names: ``chroma_port``, else
        :data:`DEFAULT_CHROMA_PORT` (the one place the default is filled in; a data dir's recorded
        port is filled in before, by :func:`docanchor.store_record.follow`)."""
        return DEFAULT_CHROMA_PORT if self.chroma_port is None else self.chroma_port

    @property
    def own_dir(self) -> Path:
        """This process's own folder: ``process_dir`` when set, else ``data_dir``."""
        return Path(self.process_dir).expanduser() if self.process_dir else self.data_dir


def workers_need_server(workers: int) -> str:
    """Why ``workers`` serving processes are refused without a Chroma server, and what to do."""
    return (f"{workers} server workers need a Chroma server (DOCANCHOR_CHROMA_HOST): embedded Chroma belongs to one "
            "process per data dir, and a second process would answer without the first one's writes. Start "
            "`chroma run --path DIR` and set DOCANCHOR_CHROMA_HOST and DOCANCHOR_CHROMA_PORT, or serve with one "
            "worker (--workers 1; --threads sets its threads).")


MAX_BUDGET_TOKENS = 1_000_000
"""Largest ``budget_tokens`` a retrieve or read accepts, in budget tokens (a bound on work and on
the answer's size, far above any model's useful context; README.md documents it). Kept with the
settings (the default budget's bounds) so the command line's ``--budget`` checks it without
importing the library."""

SETTING_RANGES: dict[str, tuple[int, int]] = {
    "chunk_tokens": (16, 2000),
    "anchor_tokens": (50, 2000),
    "ocr_max_pages": (1, 10_000),
    "parse_memory_bytes": (256 * 1024**2, 1024**4),
    "server_workers": (1, 64),
    "compaction_threshold_percent": (50, 99),
    "spill_threshold_tokens": (1_000, 1_000_000),
    "summary_tokens": (100, 20_000),
}
"""The bounds (inclusive) of the whole-number settings checked by range, one place for the
settings and for the requests that may also carry one (``plugin.conversation.REQUEST_SETTINGS``
names which)."""


def env_fields() -> list[Field]:
    """The settings fields a ``DOCANCHOR_*`` variable sets (every one but those marked :data:`FROM_ENV` ``False``)."""
    return [f for f in fields(Settings) if f.metadata.get(FROM_ENV, True)]


def env_name(field_name: str) -> str:
    """The environment variable of a settings field: ``spill_threshold_tokens`` ->
    ``DOCANCHOR_SPILL_THRESHOLD_TOKENS``."""
    return f"DOCANCHOR_{field_name.upper()}"


def _parse(name: str, type_name: str, raw: str) -> object:
    try:
        if type_name == "int":
            return int(raw)
        if type_name == "float":
            return float(raw)
        if type_name == "Path":
            return Path(raw).expanduser()
        if type_name.startswith("tuple"):
            return tuple(k.strip() for k in raw.split(",") if k.strip())
        if type_name == "int | None":
            return int(raw)
        return raw
    except ValueError:
        raise ConfigError(
            f"{env_name(name)} must be a number; got {raw!r}."
        ) from None
