"""The same bytes give the same chunks through every door (issue 17), for every file of
../shared/corpus and ../shared/cases that is stored (PDF, DOCX, HTML, Markdown, text, CSV).

The cause found for the reported difference (one PDF: 45 chunks through the CLI, 44 through
HTTP): pdfminer.six orders equally distant text boxes by their memory addresses, so a page's
pdfminer text depended on the heap of the process that parsed it (a fresh CLI process or a
long-running server's parse worker). :mod:`ingest.parsers.pdf_miner` makes that order follow the
page instead.

Three checks:

- the PDF cause directly: pages with many equally distant boxes, read in one process with its
  heap shaken between reads;
- every file parsed and chunked (the real tokenizer, no embedding) in two fresh interpreters
  with different hash seeds, so an order taken from a set, a dict of hashed keys or object
  addresses shows up;
- the files ingested through the three doors -- the Python API, a real ``docanchor ingest``
  process and a real ``docanchor serve`` process -- and every stored chunk (text, offsets,
  pages, heading path, kind, tokens, embedding context) and document record compared. Every
  PDF and every file of under 300 chunks goes through the doors (each format has several); the
  six non-PDF files of more chunks (:data:`CHECKED_ONCE`) take the second check only: with them
  the real model embedded 4,000 chunks per door and the test ran past 30 minutes at load 12.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from docanchor.settings import Settings
from ingest.parsers import pdf_miner
from plugin.api import DocAnchor
from tests.conftest import CASES, CORPUS
from tests.corpus_expectations import ALL
from tests.live_server import REPO, LiveServer

FILES = [e.file for e in ALL if not e.error]
CHECKED_ONCE = {  # file: its chunks at the default settings
    "sanguo_yanyi_gbk.txt": 11241, "population.csv": 4784, "handbook-872p.docx": 2452,
    "country-codes.csv": 1432, "example-10k.html": 527, "libreoffice_conversion.docx": 332,
}
DOOR_FILES = [f for f in FILES if f.name not in CHECKED_ONCE]
FORMATS = {".pdf", ".docx", ".html", ".md", ".txt", ".csv"}
OFFLINE = {**os.environ, "HF_HUB_OFFLINE": "1"}
SOURCE_FIELDS = ("source_name", "sources")  # where the bytes came from: a path, or an upload's name
WHEN_FIELDS = ("added_at",)  # when the bytes came


def _same_bytes_facts(record: dict) -> dict:
    """What a document's record says about its bytes: without where and when they came, and
    without the wall-clock seconds OCR took (a measurement for the bench, not a fact of the file)."""
    kept = {k: v for k, v in record.items() if k not in SOURCE_FIELDS + WHEN_FIELDS}
    if isinstance(kept.get("flags", {}).get("ocr"), dict):
        kept["flags"] = {**kept["flags"], "ocr": {k: v for k, v in kept["flags"]["ocr"].items() if k != "seconds"}}
    return kept


def test_the_files_cover_every_format():
    assert {f.suffix for f in DOOR_FILES} == FORMATS
    assert len(DOOR_FILES) >= 30 and any(f.parent == CASES for f in DOOR_FILES)
    assert set(CHECKED_ONCE) <= {f.name for f in FILES}


def test_pdfminer_text_does_not_depend_on_the_heap():
    """GeoTopo-komprimiert.pdf pages 7, 12 and 16 (formulas and figure labels: many equally
    distant text boxes), each read three times with the heap shaken in between. On 66038e9
    every one of these pages gave two different texts."""
    data = (CORPUS / "pdf" / "GeoTopo-komprimiert.pdf").read_bytes()
    ballast = []
    for page in (7, 12, 16):
        texts = set()
        for n in (0, 5000, 20000):
            objects = [[object() for _ in range(7)] for _ in range(n)]
            del objects[::2]  # leave holes of the layout objects' size class in the heap
            ballast.append(objects)
            texts.add(dict(pdf_miner.pages(data, {page}, max_pages=1000))[page])
        assert len(texts) == 1, f"page {page}"


_CHUNK_HASHES = """
import hashlib, json, sys
from dataclasses import asdict
from pathlib import Path
from docanchor.embedder import get_embedder
from docanchor.settings import Settings
from docanchor.tokens import get_counter
from ingest.chunking import chunk_document
from ingest.detect import detect_type
from ingest.scanned import OcrOptions, parse_document

embedder, counter, settings = get_embedder(), get_counter(), Settings()
out = {}
for name in sys.argv[1:]:
    data = Path(name).read_bytes()
    parsed = parse_document(detect_type(data, name), data, name, ocr=OcrOptions())
    flags = dict(parsed.flags)
    if isinstance(flags.get("ocr"), dict):  # wall-clock seconds: a measurement, not a fact of the file
        flags["ocr"] = {k: v for k, v in flags["ocr"].items() if k != "seconds"}
    chunks = chunk_document(parsed, "doc", counter=counter, embedder=embedder, settings=settings)
    rows = [asdict(c) for c in chunks] + [parsed.title, flags]
    out[name] = [len(chunks), hashlib.sha256(json.dumps(rows, ensure_ascii=False, sort_keys=True).encode()).hexdigest()]
print(json.dumps(out))
"""


def _chunk_hashes(seed: str) -> dict[str, list]:
    done = subprocess.run([sys.executable, "-c", _CHUNK_HASHES, *map(str, FILES)], cwd=REPO,
                          env={**OFFLINE, "PYTHONHASHSEED": seed}, check=True, capture_output=True, text=True,
                          timeout=3600)  # a backstop against a hang, not a speed bound
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.e2e
def test_chunks_do_not_depend_on_the_process():
    first, second = _chunk_hashes("1"), _chunk_hashes("2")
    assert first.keys() == second.keys() == {str(f) for f in FILES}
    for name in first:
        assert first[name][0] > 0, name
        assert first[name] == second[name], name


def _stored(data_dir: Path, embedder) -> dict[str, dict]:
    """Every stored document of ``data_dir``: its record (without its sources, which are the path
    or the upload's name by door) and its chunks, in order, all fields."""
    da = DocAnchor(Settings(data_dir=data_dir), embedder=embedder)
    try:
        ns = da.settings.namespace
        return {d.doc_id: {"record": _same_bytes_facts(d.to_dict()),
                           "chunks": [asdict(c) for c in da.ctx.store.get_chunks(ns, d.doc_id)]}
                for d in da.list_documents()}
    finally:
        da.close()


def _what_differs(stored: dict, other: dict | None) -> list[str]:
    """The record fields, or "chunks", in which ``other`` differs from ``stored`` (for the message)."""
    if other is None:
        return ["missing"]
    fields = [k for k in stored["record"].keys() | other["record"].keys()
              if stored["record"].get(k) != other["record"].get(k)]
    return sorted(fields) + (["chunks"] if stored["chunks"] != other["chunks"] else [])


@pytest.mark.e2e
@pytest.mark.server
@pytest.mark.timeout(5400)  # a backstop against a hang: three doors embed 2,000 chunks each
def test_cli_http_and_python_store_the_same_chunks(tmp_path: Path, real_embedder):
    py_dir, cli_dir, http_dir = tmp_path / "py", tmp_path / "cli", tmp_path / "http"

    da = DocAnchor(Settings(data_dir=py_dir), embedder=real_embedder)
    try:
        for path in DOOR_FILES:
            da.ingest_file(path)
    finally:
        da.close()

    subprocess.run([sys.executable, "-m", "plugin.cli", "--data-dir", str(cli_dir), "ingest", *map(str, DOOR_FILES)],
                   cwd=REPO, check=True, timeout=3600, capture_output=True, env=OFFLINE)

    server = LiveServer(http_dir)
    try:
        server.wait_ready(timeout_s=900)  # a backstop against a hang, not a speed bound
        for path in DOOR_FILES:
            status, body = server.upload(path, timeout_s=1800)
            assert status in (200, 201), (path.name, status, body)
    finally:
        server.stop()

    python, cli, http = (_stored(d, real_embedder) for d in (py_dir, cli_dir, http_dir))
    assert len(python) == len(DOOR_FILES)
    assert all(stored["chunks"] for stored in python.values())
    differ = [(door, stored["record"]["title"], _what_differs(stored, other.get(doc_id)))
              for doc_id, stored in python.items()
              for door, other in (("CLI", cli), ("HTTP", http)) if other.get(doc_id) != stored]
    assert not differ
