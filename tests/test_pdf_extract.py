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
from tests.pdf_writer import PdfWriter, utf16_hex

PDF = CORPUS / "pdf"
PAGES = [("multi-column.pdf", 0), ("multi-column.pdf", 5), ("issue-67-example.pdf", 3),
         ("korean-text-with-tables.pdf", 0)]
"""Pages drawn without word spacing (``Tw``), which pypdf reads as they are drawn."""


def _page_text(data: bytes, index: int = 0) -> str:
    reader = pypdf.PdfReader(io.BytesIO(data))
    if reader.is_encrypted:
        reader.decrypt("")
    pobj = reader.pages[index]
    ink = walk_page(reader, pobj, *_operations(reader, pobj))
    text = text_without(reader, pobj, ink, set())
    assert text_without(reader, pobj, ink, set()) == text  # the page was put back as it was
    return text


def _pypdf_text(data: bytes, index: int = 0) -> str:
    reader = pypdf.PdfReader(io.BytesIO(data))
    if reader.is_encrypted:
        reader.decrypt("")
    return reader.pages[index].extract_text()


@pytest.mark.parametrize(("name", "index"), PAGES)
def test_text_without_nothing_dropped_is_pypdfs_own_text(name, index):
    """Nothing dropped, no word spacing: exactly what pypdf extracts from the page of a freshly
    opened file."""
    data = (PDF / name).read_bytes()
    expected = _pypdf_text(data, index)
    assert expected.strip()
    assert _page_text(data, index) == expected


def _spaced_line(words: str, rest: str, tw: float) -> bytes:
    """A page that shows ``words`` with word spacing ``tw`` (Helvetica-named font, every glyph
    500 units wide, 10 pt) and ``rest`` as a string of its own placed exactly where ``words``
    ends, as dmca.pdf's producer starts a string inside a word."""
    w = PdfWriter()
    font = w.simple_font()
    end = 5 * len(words) + tw * words.count(" ")
    w.page(b"BT /F1 10 Tf %.2f Tw 72 700 Td (%s) Tj %.2f 0 Td 0 Tw (%s) Tj ET"
           % (tw, words.encode(), end, rest.encode()), fonts={"F1": font})
    return w.build()


def test_a_string_started_inside_a_word_after_word_spacing_joins_its_word():
    """Before: "computer programs i n section 117" (dmca.pdf page 13: the line is set with
    ``1.2863 Tw`` and "n" is a string of its own): pypdf measured the first string without its
    word spacing, so "n" seemed to start a space further right."""
    data = _spaced_line("the exemption for computer programs i", "n section 117", 4.0)
    assert "programs i n section" in _pypdf_text(data)  # pypdf alone splits the word
    assert "the exemption for computer programs in section 117" in _page_text(data)


def test_word_spacing_in_a_tj_array_is_counted_too():
    w = PdfWriter()
    font = w.simple_font()
    # the array's width: 12 glyphs of 5 + 1 space of 4 (Tw), 1 (the -100), 11 glyphs of 5 + 2 spaces
    w.page(b"BT /F1 10 Tf 4 Tw 72 700 Td [(for computer) -100 ( programs i)] TJ 128 0 Td 0 Tw (n section) Tj ET",
           fonts={"F1": font})
    data = w.build()
    assert "programs i n section" in _pypdf_text(data)
    assert _page_text(data).split() == ["for", "computer", "programs", "in", "section"]


def test_word_spacing_does_not_apply_to_a_two_byte_font():
    """Tw spaces only single-byte code 32 (ISO 32000-1 9.3.3): in a composite font the byte 0x20
    is half of a code ("丠" is 0x4E20 in UCS-2) and the string is left whole."""
    w = PdfWriter()
    font = w.cjk_font()
    w.page(b"BT /F1 10 Tf 30 Tw 72 700 Td " + utf16_hex("中丠文") + b" Tj ET", fonts={"F1": font})
    data = w.build()
    assert _page_text(data) == _pypdf_text(data)
    assert "中丠文" in _page_text(data)


def test_dmca_pages_lose_only_spaces_pypdf_measured_inside_words():
    """dmca.pdf sets every line with ``Tw``: the page text has pypdf's characters and lines,
    with fewer spaces ("i n", "sect ion", "copyrigh t", "(1 )", "1998 ,")."""
    data = (PDF / "dmca.pdf").read_bytes()
    for index in (0, 2, 4, 12):
        before, after = _pypdf_text(data, index), _page_text(data, index)
        assert after.replace(" ", "") == before.replace(" ", "")
        assert after.count(" ") < before.count(" ")
    assert "computer programs in\nsection 117" in _page_text(data, 12)
    assert "section 1201(c)(1)\n" in _page_text(data, 4)


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


def test_font_metrics_are_read_once_per_document(monkeypatch):
    """A document's pages share their fonts: each font object's widths are read once per parse
    (:func:`ingest.parsers.pdf_visibility.walk_page`'s ``metrics``), not once per page, and a
    walk with the shared metrics judges every show as a walk of its own would."""
    from ingest.parsers import pdf_visibility

    read = []
    original = pdf_visibility.font_metrics
    monkeypatch.setattr(pdf_visibility, "font_metrics", lambda font: (read.append(font), original(font))[1])
    data = (PDF / "multi-column.pdf").read_bytes()
    reader = pypdf.PdfReader(io.BytesIO(data))
    shared: dict = {}
    for pobj in reader.pages:
        alone = walk_page(reader, pobj, *_operations(reader, pobj))
        read.clear()
        walked = walk_page(reader, pobj, *_operations(reader, pobj), metrics=shared)
        assert [(s.box, s.hidden, s.duplicate, s.font) for s in walked.shows] == \
               [(s.box, s.hidden, s.duplicate, s.font) for s in alone.shows]
        assert list(walked.fonts) == list(alone.fonts)
    assert shared and read == []  # the last page's fonts were all met on earlier pages
    read.clear()
    parse_pdf(data, "multi-column.pdf")
    assert len(read) == len(shared)  # one read per font object in a whole parse
