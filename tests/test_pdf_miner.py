"""pdfminer.six's reading of a page for the split-word check (:mod:`ingest.parsers.pdf_miner`,
:func:`ingest.parsers.pdf_split.may_join`), over real PDFs of ../shared/corpus/pdf.

A page is interpreted once (:func:`ingest.parsers.pdf_miner.layouts`); its text in pdfminer's
order is exactly what pdfminer's own ``TextConverter`` writes, and its cheap reading (text boxes
in position order) holds the same words and lines, which is all the split-word check needs to
tell a page where nothing can be joined. CPU seconds are measured by bench/parse_cpu.py."""

from __future__ import annotations

import io
from collections import Counter

import pytest

from ingest.parsers import pdf, pdf_miner
from ingest.parsers.pdf_split import _WORD, join_confirmed, may_join
from tests.conftest import CORPUS

PDF = CORPUS / "pdf"


def _pdfminer_text(data: bytes, numbers: set[int]) -> dict[int, str]:
    """Page number -> text, by pdfminer.six's own ``TextConverter`` with default ``LAParams``."""
    from pdfminer.converter import TextConverter
    from pdfminer.layout import LAParams
    from pdfminer.pdfinterp import PDFPageInterpreter, PDFResourceManager
    from pdfminer.pdfpage import PDFPage

    pdf_miner._stable_layout()
    rsrc = PDFResourceManager(caching=True)
    out = {}
    for index, page in enumerate(PDFPage.get_pages(io.BytesIO(data), password="")):
        if index + 1 in numbers:
            buf = io.StringIO()
            device = TextConverter(rsrc, buf, laparams=LAParams())
            PDFPageInterpreter(rsrc, device).process_page(page)
            device.close()
            out[index + 1] = buf.getvalue()
    return out


@pytest.mark.parametrize(("name", "numbers"), [("multi-column.pdf", {1, 2, 6}), ("dmca.pdf", {1, 4}),
                                               ("nlp2004slides.pdf", {3, 17})])
def test_glyphs_read_in_pdfminer_order_are_pdfminers_own_text(name, numbers):
    data = (PDF / name).read_bytes()
    expected = _pdfminer_text(data, numbers)
    got = {n: glyphs.text() for n, glyphs in pdf_miner.layouts(data, numbers, max_pages=100)}
    assert got == expected
    assert all(text.strip() for text in got.values())
    assert dict(pdf_miner.pages(data, numbers, max_pages=100)) == expected


@pytest.mark.parametrize(("name", "numbers"), [("multi-column.pdf", {1, 2, 6}), ("GeoTopo-komprimiert.pdf", {7, 31})])
def test_cheap_reading_has_the_same_lines_and_words_in_another_order(name, numbers):
    data = (PDF / name).read_bytes()
    for _, glyphs in pdf_miner.layouts(data, numbers, max_pages=200):
        ordered, cheap = glyphs.text(), glyphs.text(ordered=False)
        assert Counter(ordered.splitlines()) == Counter(cheap.splitlines())
        assert Counter(_WORD.findall(ordered)) == Counter(_WORD.findall(cheap))
        assert glyphs.text() == ordered  # reading again gives the same text
    assert ordered != cheap  # multi-column.pdf page 6 / GeoTopo page 31: the order does differ


def test_may_join_is_false_only_where_join_confirmed_joins_nothing():
    cases = [
        ("the law of th e\nland", "the law of the land", True),  # "the" confirmed
        ("the law of th e\nland", "the law of th e land the", True),  # words allow it, the pair forbids it
        ("Umgebung V von x\nund", "Umgebung V von x und", False),  # no word "vonx"
        ("New sect ion 1201", "New section 1201", True),
        ("went in to it", "went in to it", False),  # no "into" more than the text has
        ("the law of th e", "", False),
    ]
    for text, reference, expected in cases:
        assert may_join(text, reference) is expected, text
        if not expected:
            assert join_confirmed(text, reference) == (text, 0)
    assert join_confirmed("the law of th e\nland", "the law of th e land the") == ("the law of th e\nland", 0)


def test_split_probes_lay_out_only_pages_that_may_join(monkeypatch):
    """GeoTopo-komprimiert.pdf has 53 candidate pages ("von x") and no split word: its three
    probes are read cheaply, none in pdfminer's order; dmca.pdf (joins on 17 pages) reads its
    first candidate both ways, then the rest in pdfminer's order only. Same text as before
    (bench/parse_cpu.py --baseline compares whole outputs)."""
    readings = []
    original = pdf_miner.PageGlyphs.text
    monkeypatch.setattr(pdf_miner.PageGlyphs, "text",
                        lambda self, ordered=True: (readings.append(ordered), original(self, ordered=ordered))[1])
    geotopo = pdf.parse_pdf((PDF / "GeoTopo-komprimiert.pdf").read_bytes(), "GeoTopo-komprimiert.pdf")
    assert "split_words_joined" not in geotopo.flags
    assert readings == [False] * pdf.SPLIT_PROBE_PAGES
    readings.clear()
    dmca = pdf.parse_pdf((PDF / "dmca.pdf").read_bytes(), "dmca.pdf")
    assert dmca.flags["split_words_joined"]["count"] > 100
    assert readings == [False] + [True] * len(dmca.flags["split_words_joined"]["pages"])
