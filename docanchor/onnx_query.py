"""Query embeddings in onnxruntime: the embedding model converted to ONNX once, then run per query.

The conversion (:func:`convert`) exports the model's transformer with its mean pooling and
normalisation in float32 through ``torch.onnx.export``'s dynamo exporter (``onnx`` and
``onnxscript``), checks the result against the torch model on :data:`CHECK_SENTENCES`, and writes
it atomically (:func:`docanchor.disk.replaced_atomically`: two processes converting at once leave
one whole file) to :func:`onnx_file`, a name keyed by the hash of the model's weight files: new weights
get a new file, and a file once written is reused by every later process, which then needs no torch
to embed a query. The tokenizer is the model folder's own ``tokenizer.json``.

:class:`OnnxQueryEncoder` runs one query per call on the calling thread (one intra-op thread, no
inter-op pool), so the process's :class:`docanchor.embedder.EmbeddingPool` bounds its threads as
it bounds torch's; onnxruntime releases the interpreter lock while it computes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
import warnings
from pathlib import Path
from typing import Iterator

from docanchor.disk import replaced_atomically

log = logging.getLogger(__name__)

EXPORT_VERSION = 1
"""Part of every converted file's name: bump it when the exported graph changes, so files
written by an older DocAnchor are not reused."""
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
"""The weight files whose bytes key a converted model (the first of them the folder has)."""
CHECK_SENTENCES = (
    "What is ownership in Rust?",
    "x",
    "三国演义 第一回 宴桃园豪杰三结义",
    "Ünïcödé ünd Zählen 12345 € and a longer clause that pads the batch with several more word pieces",
)
"""Texts a fresh conversion embeds in both runtimes before it is kept."""
CHECK_MIN_COSINE = 0.99999
"""The least cosine between a fresh conversion's vectors and the torch float32 model's on
:data:`CHECK_SENTENCES` (both compute in float32; the export changes only the order of sums)."""


def weights_hash(model_dir: Path) -> str:
    """SHA-256 (hex) of the model folder's weight file (the first of :data:`WEIGHT_FILES`).

    Raises:
        FileNotFoundError: the folder has none of them.
    """
    for name in WEIGHT_FILES:
        path = model_dir / name
        if path.is_file():
            digest = hashlib.sha256()
            with path.open("rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
            return digest.hexdigest()
    raise FileNotFoundError(f"{model_dir} has none of {', '.join(WEIGHT_FILES)}")


def onnx_file(model_dir: Path, cache_dir: Path) -> Path:
    """Where the float32 ONNX conversion of ``model_dir`` lives in ``cache_dir``."""
    return cache_dir / f"embedding-{weights_hash(model_dir)[:20]}-fp32-v{EXPORT_VERSION}.onnx"


def mean_pooled(model_dir: Path) -> bool:
    """True when the sentence-transformers folder pools by the mean of token vectors only (the
    pooling :func:`convert` exports)."""
    from docanchor.embedder import pooling_config

    config = pooling_config(model_dir)
    if config is None:
        return False
    modes = {k for k, v in config.items() if k.startswith("pooling_mode_") and v is True}
    return modes == {"pooling_mode_mean_tokens"}


def convert(st_model, model_dir: Path, target: Path) -> None:
    """Export ``st_model``, the sentence-transformers model of ``model_dir`` loaded in float32, to
    ``target``, atomically (mode 644), after
    checking it against the model. Quiet: the exporter's warnings and log lines are dropped.

    Raises:
        ValueError: the folder pools otherwise than by the mean, or the export's vectors differ
            from the model's (cosine below :data:`CHECK_MIN_COSINE`).
        Exception: whatever ``torch.onnx.export`` raises (``onnxscript``
            missing, an operator it cannot export), or an ``OSError`` writing ``target``.
    """
    import numpy as np
    import torch

    if not mean_pooled(model_dir):
        raise ValueError(f"{model_dir.name} does not pool by the mean of its token vectors alone")
    started = time.monotonic()
    max_length = int(st_model.max_seq_length)
    graph = _pooled_module()(st_model[0].auto_model).eval()
    sample = _Tokens(model_dir, max_length).batch(list(CHECK_SENTENCES[-2:]))
    names = list(sample)
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("sequence", max=max_length)
    with replaced_atomically(target) as tmp:
        with torch.no_grad(), _quiet_export():
            program = torch.onnx.export(
                graph, tuple(torch.from_numpy(sample[n]) for n in names), input_names=names,
                output_names=["sentence_vector"], dynamo=True, external_data=False, verbose=False,
                dynamic_shapes={n: {0: batch, 1: seq} for n in names})
            program.save(str(tmp))
        with torch.no_grad():
            expected = st_model.encode(list(CHECK_SENTENCES), convert_to_numpy=True, normalize_embeddings=True,
                                       show_progress_bar=False)
        got = np.array([OnnxQueryEncoder(tmp, model_dir).encode(t) for t in CHECK_SENTENCES])
        least = float((got * expected).sum(axis=1).min())
        if least < CHECK_MIN_COSINE:
            raise ValueError(f"the ONNX export's vectors differ from the model's (cosine {least:.6f})")
    log.info("converted the embedding model to ONNX in %.1f s: %s", time.monotonic() - started, target)


class OnnxQueryEncoder:
    """A converted model in one onnxruntime session, shared by threads.

    Args:
        path: the ``.onnx`` file (:func:`convert`).
        model_dir: the model folder, for its tokenizer and ``max_seq_length``.
    """

    def __init__(self, path: Path, model_dir: Path) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # the calling thread computes; EmbeddingPool bounds the callers
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        self._session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self._inputs = [i.name for i in self._session.get_inputs()]
        self._tokens = _Tokens(model_dir, _max_seq_length(model_dir))

    def encode(self, text: str) -> list[float]:
        """The unit-length float32 vector of ``text`` (truncated at the model's ``max_seq_length``
        word pieces, as sentence-transformers does)."""
        feeds = self._tokens.batch([text])
        return self._session.run(None, {n: feeds[n] for n in self._inputs})[0][0].tolist()


class _Tokens:
    """The model folder's own tokenizer (``tokenizer.json``), truncating at ``max_length`` word
    pieces with the special tokens and padding a batch to its longest text."""

    def __init__(self, model_dir: Path, max_length: int) -> None:
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length=max_length)
        self._tokenizer.enable_padding()

    def batch(self, texts: list[str]) -> dict:
        import numpy as np

        encoded = self._tokenizer.encode_batch(texts)
        return {
            "input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64),
        }


@contextlib.contextmanager
def _quiet_export() -> Iterator[None]:
    """Drop the exporter's warnings (dynamic axis names, torchvision's operators not registered)
    and its passes' log lines (``onnx_ir``, ``onnxscript``) while it runs: a conversion logs one
    line of its own, and a failure raises."""
    loggers = [logging.getLogger(name) for name in ("onnx_ir", "onnxscript", "torch.onnx")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _max_seq_length(model_dir: Path) -> int:
    """The ``max_seq_length`` of a sentence-transformers folder (512 when it names none)."""
    try:
        config = json.loads((model_dir / "sentence_bert_config.json").read_text(encoding="utf-8"))
        return int(config["max_seq_length"])
    except (OSError, ValueError, KeyError, TypeError):
        return 512


def _pooled_module():
    import torch

    class Pooled(torch.nn.Module):
        """The transformer, the mean of its token vectors over the attention mask, unit length."""

        def __init__(self, transformer) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids, attention_mask, token_type_ids):
            hidden = self.transformer(input_ids=input_ids, attention_mask=attention_mask,
                                      token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2, dim=1)

    return Pooled

