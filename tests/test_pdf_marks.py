"""Footnote marks of PDFs (ingest/parsers/pdf_marks.py) on real corpus files and small generated
pages.

The report behind it: dmca.pdf read "signed into law by1 President Clinton", "services that2 are
used", "to create3 four new limitations": a raised footnote number glued to the word before it,
so a keyword search did not find "by", "that" or "create" there, and each note's own number
landed inside the note's text ("112 Stat. 2827,3 2830-34"). Marks and their note labels are
left out of the text; exponents, which have no note, stay."""

from __future__ import annotations

import functools
import re

from docanchor.lexical import tokenize
from ingest.parsers.pdf import parse_pdf
from tests.conftest import CORPUS
from tests.pdf_writer import PdfWriter

PDF = CORPUS / "pdf"


@functools.lru_cache(maxsize=None)
def _parse(name: str):
    return parse_pdf((PDF / name).read_bytes(), name)


def _good(parsed) -> str:
    """Text of unflagged blocks, whitespace collapsed: what gets indexed as good text."""
    return " ".join(" ".join(parsed.text[b.start : b.end] for b in parsed.blocks if not b.flags).split())


def test_dmca_footnote_marks_leave_their_words_whole():
    parsed = _parse("dmca.pdf")
    good = _good(parsed)
    for glued in ("by1", "that2", "create3", "2827,3", "1998).1", "exclusive 2 rights"):
        assert glued not in good, glued
    for whole in ("signed into law by President Clinton", "devices or services that are used",
                  "to create four new limitations", "112 Stat. 2827, 2830-34", "(Oct. 28, 1998).",
                  "the exercise of any of the exclusive rights of an author"):
        assert whole in good, whole
    assert parsed.flags["footnote_marks"] == {"pages": [1, 4, 8], "count": 6}  # 3 marks, 3 note labels


def test_dmca_words_before_marks_are_keyword_tokens():
    """What BM25 indexes (:func:`docanchor.lexical.tokenize`: stemmed, stopwords out): "create"
    is the token "creat" beside its neighbours, and no token glues a word to a mark."""
    tokens = tokenize(_good(_parse("dmca.pdf")))
    assert not {"by1", "that2", "create3"} & set(tokens)
    joined = " ".join(tokens)
    assert "sign law presid clinton" in joined and "creat four new limit" in joined


def test_multi_column_notes_lose_their_numbers_and_keep_their_words():
    """Two-column LaTeX paper: marks after words ("practice2", "units3") and note labels at the
    column's foot ("9Lucene implementation", "10FAISS") go; "Lucene" and "FAISS" are words again."""
    parsed = _parse("multi-column.pdf")
    good = _good(parsed)
    assert not re.search(r"\b(practice2|units3|benchmarks\.1|9Lucene|10FAISS|1The)\b", good)
    assert "Lucene implementation. BM25 parameters" in good
    assert "The code and trained models have been released" in good
    assert parsed.flags["footnote_marks"]["count"] >= 20


def test_exponents_without_a_note_stay():
    """GeoTopo-komprimiert.pdf: "R2" is R with an exponent 2 (drawn small and raised like a
    mark), and no note starts with "2": it stays."""
    good = _good(_parse("GeoTopo-komprimiert.pdf"))
    assert "aber nicht zum R2 oder" in good and "Für den R2 müsste" in good


def _page(body: bytes) -> bytes:
    w = PdfWriter()
    font = w.simple_font()  # every glyph 500 units wide: 6 pt at 12 pt, 3.5 pt at 7 pt
    w.page(body, fonts={"F1": font})
    return w.build()


MARKED = (b"BT /F1 12 Tf 72 700 Td (The law was signed by) Tj ET "
          b"BT /F1 7 Tf 198 704.6 Td (1) Tj ET "
          b"BT /F1 12 Tf 201.5 700 Td ( the President in 1998.) Tj ET "
          b"BT /F1 12 Tf 72 680 Td (The area of the square is x) Tj ET "
          b"BT /F1 7 Tf 234 684.6 Td (2) Tj ET "
          b"BT /F1 12 Tf 237.5 680 Td ( square metres.) Tj ET ")
"""A body line with a footnote mark "1" after "by" (7 pt, raised 4.6 pt, as on dmca.pdf), and a
line with an exponent "2" after "x"."""
NOTE = b"BT /F1 7 Tf 72 104.6 Td (1) Tj ET BT /F1 10 Tf 75.5 100 Td (Pub. L. No. 105-304.) Tj ET"
"""The note at the foot of the page, starting with its raised label "1"."""


def test_a_mark_and_its_note_label_are_left_out_and_an_exponent_stays():
    parsed = parse_pdf(_page(MARKED + NOTE), "note.pdf")
    text = " ".join(parsed.text.split())
    assert "signed by the President in 1998." in text
    assert "is x2 square metres" in text  # no note "2": an exponent, kept as pypdf reads it
    assert "Pub. L. No. 105-304." in text and "1Pub" not in text and "by1" not in text
    assert parsed.flags["footnote_marks"] == {"pages": [1], "count": 2}


def test_a_mark_without_a_note_on_its_page_stays():
    """Only pairs go: a raised number without a note label may be an exponent or a note on
    another page; pypdf's text is kept."""
    parsed = parse_pdf(_page(MARKED), "mark.pdf")
    text = " ".join(parsed.text.split())
    assert "signed by1 the President" in text
    assert "footnote_marks" not in parsed.flags
