"""Every real file in ../shared/corpus and ../shared/cases, through DocAnchor's real ingest path.

One parametrised test per file (the table is :mod:`tests.corpus_expectations`): ingested with
:meth:`plugin.api.DocAnchor.ingest_file` into a fresh on-disk Chroma, it is either stored with
its markers retrievable, or refused with its error code and nothing stored; always within its
memory bound (:func:`bench.corpus_report.measure_ingest`: peak RSS growth of this process or of
the sandbox's parse worker). Ingest times are targets, printed by ``bench/corpus_report.py``.

Vectors come from the fake :class:`~tests.fakes.HashEmbedder` (speed: the e2e suite runs the
model), but word pieces are counted with the real all-MiniLM-L6-v2 tokenizer, so chunking makes
the same cuts as in production and the 254-word-piece limit is checked for real. Retrieval with
hashed vectors is carried by BM25, so queries are keyword queries.

Then each error code is checked over HTTP (Flask test client: a 4xx with the one JSON error
body) and the CLI (``docanchor ingest`` on a folder of the refused files plus one good file: a
line per file with its code, the run goes on, exit status 1).
"""

from __future__ import annotations

import io
import re
import shutil
import unicodedata
from pathlib import Path

import pytest
from click.testing import CliRunner

from bench.corpus_report import input_files, measure_ingest
from docanchor.settings import Settings
from docanchor.types import stored_text
from plugin.api import DocAnchor
from plugin.app import create_app
from plugin.cli import main as cli_main
from tests.conftest import SHARED
from tests.corpus_expectations import ALL, ERRORS, Expect
from tests.fakes import HashEmbedder
from tests.waiting import BACKSTOP_S

RETRIEVE_BUDGET_TOKENS = 1500
"""Budget of each marker query: a few sections, so a marker must rank near the top."""


def norm(text: str) -> str:
    """CASES.md's "normalised": NFKC, whitespace runs collapsed to one space."""
    return re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text)).strip()


class TokenizerHashEmbedder(HashEmbedder):
    """Hashed vectors, but the real model's word-piece count and limit (tokenizer only in use)."""

    def __init__(self, real) -> None:
        super().__init__()
        self._real = real
        self.token_limit = real.token_limit

    def count_tokens(self, text: str) -> int:
        return self._real.count_tokens(text)


@pytest.fixture(scope="module")
def embedder(real_embedder) -> TokenizerHashEmbedder:
    return TokenizerHashEmbedder(real_embedder)


def test_table_covers_every_input_file():
    """No file of the two folders goes untested, and no expectation names a missing file."""
    on_disk = {str(p.relative_to(SHARED)) for p in input_files(SHARED)}
    table = {e.path for e in ALL}
    assert len(on_disk) == 45
    assert table == on_disk


@pytest.mark.parametrize("exp", ALL, ids=[e.id for e in ALL])
def test_file(exp: Expect, tmp_path: Path, embedder: TokenizerHashEmbedder):
    da = DocAnchor(Settings(data_dir=tmp_path / "data"), embedder=embedder)
    m = measure_ingest(lambda: da.ingest_file(exp.file))

    assert not m.peak_mb > exp.max_mb, f"{exp.id} grew RSS by {m.peak_mb:.0f} MiB (bound {exp.max_mb} MiB)"

    if exp.error:
        assert m.error is not None, f"{exp.id} was stored; expected {exp.error}"
        assert (m.error.code, m.error.http_status) == (exp.error, exp.status)
        assert m.error.message.endswith(".") and len(m.error.message) > 30
        if exp.error == "no_text_layer":
            assert m.error.details.get("n_pages", 0) >= 1, "no_text_layer should say how many pages"
        assert da.list_documents() == []
        assert da.ctx.store.count_chunks(da.settings.namespace) == 0
        return

    assert m.error is None, f"{exp.id} refused: {m.error.code}: {m.error.message}"
    check_stored(da, exp, m.result)


def check_stored(da: DocAnchor, exp: Expect, result) -> None:
    ns, record, parsed = da.settings.namespace, result.record, result.parsed
    chunks = da.ctx.store.get_chunks(ns, record.doc_id)
    assert [d.doc_id for d in da.list_documents()] == [record.doc_id]

    # ---- chunk invariants: exact offsets, both token limits, ordinals, no empty chunk
    assert chunks and len(chunks) == record.n_chunks
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    limit_pieces = da.ctx.embedder.token_limit
    for c in chunks:
        assert c.text == parsed.text[c.start_char:c.end_char], f"chunk {c.ordinal} offsets"
        assert c.text.strip() == c.text and c.text
        assert c.n_tokens == da.ctx.counter.count(c.text) <= da.settings.chunk_tokens, f"chunk {c.ordinal} budget tokens"
        assert da.ctx.embedder.count_tokens(c.text) <= limit_pieces, f"chunk {c.ordinal} over {limit_pieces} word pieces"
        if exp.no_chunk_starts:
            assert c.text[0] not in exp.no_chunk_starts, f"chunk {c.ordinal} starts with {c.text[:10]!r}"
    assert len(parsed.text) >= exp.min_chars
    assert record.n_chars == len(stored_text(chunks)) <= len(parsed.text)  # the size counts stored text only

    # ---- content: markers, forbidden strings, once, order, co-occurrence, flags
    texts = [norm(c.text) for c in chunks]
    stored = " ".join(texts)
    for marker in exp.markers:
        assert norm(marker) in stored, f"marker {marker!r} not in stored text"
    for bad in exp.forbidden:
        assert norm(bad) not in stored, f"{bad!r} is in stored text"
    for pattern in exp.forbidden_patterns:
        hit = re.search(pattern, stored)
        assert hit is None, f"stored text matches {pattern!r}: {hit.group(0) if hit else ''!r}"
    for phrase in exp.once:
        assert stored.count(norm(phrase)) == 1, f"{phrase!r} occurs {stored.count(norm(phrase))} times"
    if exp.in_order:
        positions = [stored.find(norm(p)) for p in exp.in_order]
        assert -1 not in positions and positions == sorted(positions), f"order {positions}"
    for group in exp.same_chunk:
        assert any(all(norm(p) in t for p in group) for t in texts), f"no chunk holds all of {group}"
    for key, want in exp.flags.items():
        got = record.flags.get(key)
        if isinstance(want, list):
            assert got is not None and set(want) <= set(got), f"flag {key}={got!r}, want {want}"
        else:
            assert got, f"flag {key} missing: {record.flags}"

    # ---- retrieval: each marker comes back in a section under the budget
    for marker in exp.markers:
        query = exp.queries.get(marker, marker)
        res = da.retrieve(query, RETRIEVE_BUDGET_TOKENS)
        assert res.context_tokens_used <= RETRIEVE_BUDGET_TOKENS
        assert any(norm(marker) in norm(s.text) for s in res.sections), (
            f"query {query!r} did not return {marker!r}; got {[s.text[:80] for s in res.sections]}")
    if exp.top_hit:  # the best-scored section (hashed vectors can tie two sections' fused scores)
        query, marker = exp.top_hit
        res = da.retrieve(query, RETRIEVE_BUDGET_TOKENS)
        best = max(s.score for s in res.sections)
        assert any(norm(marker) in norm(s.text) for s in res.sections if s.score == best), query


# ---------------------------------------------------------------------------- error codes at the edges
def test_error_codes_over_http(tmp_path: Path):
    """Each refused file: its documented 4xx status and the one JSON error body; the server lives on."""
    da = DocAnchor(Settings(data_dir=tmp_path / "data", sync_wait_s=BACKSTOP_S), embedder=HashEmbedder())
    client = create_app(da.settings, da).test_client()
    for exp in ERRORS:
        resp = client.post("/v1/documents", content_type="multipart/form-data",
                           data={"file": (io.BytesIO(exp.file.read_bytes()), exp.file.name)})
        assert resp.status_code == exp.status and 400 <= resp.status_code < 500, (exp.id, resp.get_data(as_text=True))
        assert resp.mimetype == "application/json"
        err = resp.get_json()["error"]
        assert {"code", "message", "status"} <= set(err)
        assert (err["code"], err["status"]) == (exp.error, exp.status), exp.id
        assert err["message"].endswith(".")
    assert client.get("/healthz").status_code == 200
    assert client.get("/v1/documents").get_json()["documents"] == []


def test_error_codes_over_cli(tmp_path: Path):
    """``docanchor ingest FOLDER``: one line per file with its code, the good file still ingested, exit 1."""
    folder = tmp_path / "inbox"
    folder.mkdir()
    for exp in ERRORS:
        shutil.copy(exp.file, folder / exp.file.name)
    good = SHARED / "cases" / "a15_csv_quoted_fields.csv"
    shutil.copy(good, folder / good.name)
    da = DocAnchor(Settings(data_dir=tmp_path / "data"), embedder=HashEmbedder())

    result = CliRunner().invoke(cli_main, ["ingest", str(folder)], obj=da)

    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    for exp in ERRORS:
        mine = [ln for ln in lines if ln.endswith(f"{exp.file.name}]")]
        assert len(mine) == 1 and mine[0].startswith(f"error {exp.error}: "), (exp.id, mine)
    assert any(ln.startswith("ok ") and ln.endswith(f"{good.name}]") for ln in lines), lines
    assert f"{len(ERRORS) + 1} files: 1 ok, 0 skipped (unchanged), {len(ERRORS)} failed" in result.stdout
    assert len(da.list_documents()) == 1


# ---------------------------------------------------------------------------- class probes
def test_short_latin1_western_text_is_not_read_as_central_european(tmp_path: Path):
    """Class of corpus/md/umlauts-non-utf8.md and a17: short Latin-1 French ties cp1250 in the
    detector's scores (``crème`` -> ``crčme``); Windows-1252 must win the tie."""
    text = "Le garçon a mangé une crème brûlée à Noël, référence MERLE-4040. Ça coûte douze francs."
    da = DocAnchor(Settings(data_dir=tmp_path / "data"), embedder=HashEmbedder())
    res = da.ingest_bytes(text.encode("latin-1"), filename="note.txt")
    assert res.record.flags["encoding"] == "cp1252"
    assert norm(res.parsed.text) == text
