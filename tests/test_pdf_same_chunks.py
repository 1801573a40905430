"""The same PDF bytes give the same chunks through every door (issue 17).

The cause found: pdfminer.six orders equally distant text boxes by their memory addresses, so a
page's pdfminer text depended on the heap of the process that parsed it (a fresh CLI process or
a long-running server's parse worker). :mod:`ingest.parsers.pdf_miner` makes that order follow
the page instead. The first test shows the property directly, in one process with its heap
shaken between reads; the end-to-end test ingests every stored corpus and case PDF through the
Python API, a real ``docanchor ingest`` process and a real ``docanchor serve`` process and
compares the chunks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from docanchor.settings import Settings
from ingest.parsers import pdf_miner
from plugin.api import DocAnchor
from tests.conftest import CASES, CORPUS
from tests.corpus_expectations import ALL
from tests.live_server import REPO, LiveServer

PDFS = [e.file for e in ALL if e.file.suffix == ".pdf" and not e.error]


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


def _chunks(data_dir: Path, embedder) -> dict[str, list[tuple]]:
    da = DocAnchor(Settings(data_dir=data_dir), embedder=embedder)
    try:
        ns = da.settings.namespace
        return {d.doc_id: [(c.text, c.page_start, c.page_end, tuple(c.heading_path))
                           for c in da.ctx.store.get_chunks(ns, d.doc_id)]
                for d in da.list_documents()}
    finally:
        da.close()


@pytest.mark.e2e
@pytest.mark.server
def test_cli_http_and_python_store_the_same_chunks(tmp_path: Path, real_embedder):
    assert len(PDFS) >= 12 and any(p.parent == CASES for p in PDFS)
    py_dir, cli_dir, http_dir = tmp_path / "py", tmp_path / "cli", tmp_path / "http"

    da = DocAnchor(Settings(data_dir=py_dir), embedder=real_embedder)
    try:
        for path in PDFS:
            da.ingest_file(path)
    finally:
        da.close()

    subprocess.run([sys.executable, "-m", "plugin.cli", "--data-dir", str(cli_dir), "ingest", *map(str, PDFS)],
                   cwd=REPO, check=True, timeout=1800, capture_output=True,
                   env={**os.environ, "HF_HUB_OFFLINE": "1"})

    server = LiveServer(http_dir)
    try:
        server.wait_ready(timeout_s=900)  # a backstop against a hang, not a speed bound
        for path in PDFS:
            status, body = server.upload(path)
            assert status in (200, 201), (path.name, status, body)
    finally:
        server.stop()

    python, cli, http = (_chunks(d, real_embedder) for d in (py_dir, cli_dir, http_dir))
    assert len(python) == len(PDFS)
    for doc_id, chunks in python.items():
        assert cli.get(doc_id) == chunks, f"CLI differs for {doc_id}"
        assert http.get(doc_id) == chunks, f"HTTP differs for {doc_id}"
