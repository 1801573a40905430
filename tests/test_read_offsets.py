"""Every section's text is the document's normalised text between its offsets (issue 15).

A property over real documents of ../shared/corpus (the novel's first chapters, the Norwich
article, a CSV, the Rust chapter): every window a read returns, walked from the start at a small
and a larger budget, and every section of many searches at several budgets, has ``text ==
stored_text(chunks)[start_char:end_char]`` -- the characters a client highlights are the
characters it was given. Fake embedder: ranking does not matter here, only the edges.
"""

from __future__ import annotations

import pytest

from docanchor.lexical import tokenize
from docanchor.settings import Settings
from docanchor.types import stored_text
from tests.conftest import CORPUS
from tests.fakes import HashEmbedder
from tests.waiting import BACKSTOP_S

NOVEL_LINES = 400
"""Lines of the novel ingested (its first chapters): enough blank-line runs and speech tags."""
QUERIES_PER_DOC = 12
BUDGETS = (60, 150, 400, 1000)


@pytest.fixture(scope="module")
def corpus_da(tmp_path_factory):
    """A DocAnchor holding four real documents; yields ``(da, {doc_id: stored text})``."""
    from plugin.api import DocAnchor

    tmp = tmp_path_factory.mktemp("offsets")
    lines = (CORPUS / "txt" / "sanguo_yanyi_gbk.txt").read_bytes().decode("gbk").splitlines()
    novel = tmp / "sanguo_yanyi.txt"
    novel.write_text("\n".join(lines[:NOVEL_LINES]) + "\n", encoding="utf-8")
    paths = [novel, CORPUS / "txt" / "norwich-city.txt", CORPUS / "csv" / "country-codes.csv",
             CORPUS / "md" / "ch04-01-what-is-ownership.md"]
    da = DocAnchor(Settings(data_dir=tmp / "data", sync_wait_s=BACKSTOP_S), embedder=HashEmbedder())
    texts = {}
    for path in paths:
        doc_id = da.ingest_file(path).record.doc_id
        texts[doc_id] = stored_text(da.ctx.store.get_chunks("default", doc_id))
    yield da, texts
    da.close()


def _queries(text: str) -> list[str]:
    """Terms spread over ``text``: every so many distinct BM25 tokens of two or more characters."""
    terms = list(dict.fromkeys(t for t in tokenize(text) if len(t) >= 2))
    step = max(1, len(terms) // QUERIES_PER_DOC)
    return terms[::step][:QUERIES_PER_DOC]


def test_every_read_window_is_the_text_between_its_offsets(corpus_da):
    """Before: POST /v1/read on the novel from start_char 0 to end_char 209 returned 207
    characters (runs of blank lines collapsed), so offsets and text disagreed."""
    da, texts = corpus_da
    for doc_id, full in texts.items():
        for budget in (60, 400):
            cursor, windows = None, 0
            while windows < 40:
                r = da.read(doc_id, start=cursor, budget_tokens=budget)
                assert r.text == full[r.start_char:r.end_char], (doc_id, budget, r.start_char)
                windows += 1
                if r.next_cursor is None:
                    break
                cursor = r.next_cursor


def test_every_search_section_is_the_text_between_its_offsets(corpus_da):
    da, texts = corpus_da
    checked = 0
    for doc_id, full in texts.items():
        for query in _queries(full):
            for budget in BUDGETS:
                for s in da.retrieve(query, budget, doc_ids=[doc_id]).sections:
                    assert s.text == full[s.start_char:s.end_char], (doc_id, query, budget, s.start_char)
                    checked += 1
    assert checked > 100
