"""The parse's pypdf calls over real PDFs of ../shared/corpus/pdf: the page text DocAnchor gets
through :func:`ingest.parsers.pdf_extract.text_without` is pypdf's own text of the untouched
page, and the work done per page is done once (content streams are parsed once and never
written back out to bytes for pypdf to look at). CPU seconds are measured by bench/parse_cpu.py,
which also compares the whole parse output with an earlier commit's, byte for byte."""

from __future__ import annotations

import io

import pypdf
import pytest
from pypdf.generic import FloatObject, NameObject, NumberObject

from ingest.parsers.pdf import _operations, parse_pdf
from ingest.parsers.pdf_extract import _blanked, text_without
from ingest.parsers.pdf_visibility import walk_page
from tests.conftest import CORPUS

PDF = CORPUS / "pdf"
PAGES = [("dmca.pdf", 0), ("dmca.pdf", 9), ("multi-column.pdf", 0), ("multi-column.pdf", 5),
         ("issue-67-example.pdf", 3), ("korean-text-with-tables.pdf", 0)]


@pytest.mark.parametrize(("name", "index"), PAGES)
def test_text_without_nothing_dropped_is_pypdfs_own_text(name, index):
    """Nothing dropped: exactly what pypdf extracts from the page of a freshly opened file."""
    data = (PDF / name).read_bytes()
    expected = pypdf.PdfReader(io.BytesIO(data)).pages[index].extract_text()
    reader = pypdf.PdfReader(io.BytesIO(data))
    pobj = reader.pages[index]
    ink = walk_page(reader, pobj, *_operations(reader, pobj))
    assert expected.strip()
    assert text_without(reader, pobj, ink, set()) == expected
    assert text_without(reader, pobj, ink, set()) == expected  # the page was put back as it was


def test_text_without_drops_the_chosen_shows_only():
    """Dropping every show of the first text line removes that line and keeps the rest."""
    data = (PDF / "dmca.pdf").read_bytes()
    reader = pypdf.PdfReader(io.BytesIO(data))
    pobj = reader.pages[0]
    ink = walk_page(reader, pobj, *_operations(reader, pobj))
    full = text_without(reader, pobj, ink, set())
    first = ink.shows[0]
    same_line = {(s.stream, s.index) for s in ink.shows if abs(s.origin[1] - first.origin[1]) < 0.5}
    without = text_without(reader, pobj, ink, same_line)
    assert full.splitlines()[0].strip() and full.splitlines()[0] not in without.splitlines()
    assert full.splitlines()[-1] == without.splitlines()[-1]


def test_blanked_empties_only_text_shows_at_the_indexes():
    ops = [([NameObject("/F1"), NumberObject(12)], b"Tf"), ([b"abc"], b"Tj"), ([[b"a", 120, b"b"]], b"TJ"),
           ([NumberObject(1), NumberObject(2), b"x"], b'"'), ([NumberObject(1), NumberObject(2)], b"Td")]
    out = _blanked(ops, {0, 1, 2, 3, 4})
    assert out[0] == ops[0] and out[4] == ops[4]
    assert out[1] == ([b""], b"Tj") and out[2] == ([[]], b"TJ") and out[3] == ([1, 2, b""], b'"')
    assert _blanked(ops, set()) == ops
    assert ops[1] == ([b"abc"], b"Tj")  # the original operators are left alone


def test_parse_writes_no_content_stream_back_to_bytes(monkeypatch):
    """pypdf checks a content stream's bytes for text operators before extracting; it is handed
    the page's own bytes with the parsed operators, so no operand is serialised again (before:
    every number and name of every page was written out once per extraction)."""
    written = []
    for cls in (FloatObject, NumberObject, NameObject):
        original = cls.write_to_stream
        monkeypatch.setattr(cls, "write_to_stream",
                            lambda self, stream, *a, _o=original, **k: (written.append(self), _o(self, stream, *a, **k)))
    parsed = parse_pdf((PDF / "dmca.pdf").read_bytes(), "dmca.pdf")
    assert parsed.n_pages == 18 and "DIGITAL MILLENNIUM" in parsed.text
    assert written == []
