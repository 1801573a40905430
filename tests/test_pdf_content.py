""":func:`ingest.parsers.pdf_content.operations` gives what pypdf's own content stream parser
gives -- the same operators, operand types and values, the same errors -- for hand-written
streams with every kind of token and for every page and Form XObject of the real PDFs under
../shared. (Its CPU is measured by bench/parse_cpu.py.)"""

from __future__ import annotations

import io
import math

import pypdf
import pytest
from pypdf.generic import ContentStream, DecodedStreamObject

from ingest.parsers.pdf_content import operations
from tests.conftest import CASES, CORPUS


def _pypdf(data: bytes) -> tuple:
    stream = DecodedStreamObject()
    stream.set_data(data)
    try:
        return "ok", list(ContentStream(stream, None, "bytes").operations)
    except Exception as exc:  # noqa: BLE001 - the error itself is compared
        return "error", type(exc).__name__


def _ours(data: bytes) -> tuple:
    stream = DecodedStreamObject()
    stream.set_data(data)
    content = ContentStream(stream, None, "bytes")
    try:
        return "ok", operations(content.get_data(), content)
    except Exception as exc:  # noqa: BLE001
        return "error", type(exc).__name__


def _same(a, b) -> bool:
    """Equal values of the same types, all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


STREAMS = [
    b"BT /F1 12 Tf 72 712 Td (Hello, world) Tj ET",
    b"q 1 0 0 1 -3.5 +.25 cm 0.5 g 10 10 100 50 re f Q",
    b"BT [(A) -250 (W\\(orld\\)) 120.5 (x\\101\\12y\\\\z)] TJ ET",  # escapes, in an array
    b"BT (nested (paren) string) Tj (line\\\ncontinued) Tj ET",
    b"BT <48656C6C6F> Tj <48 65 6c 6C 6> Tj <> Tj ET",  # hex: plain, with spaces, odd, empty
    b"/Span <</ActualText (fi) /MCID 3>> BDC (x) Tj EMC",  # a dictionary operand
    b"/Name#20With#41Codes gs /A#ZZ gs /\xc3\xa9t\xc3\xa9 gs /\xe9 gs",  # # codes, UTF-8, latin-1
    b"% a comment\n1 0 0 RG % another\r 5 w",
    b"[1 [2 [3 null true false]] /N (s)] 0 d",
    b"1,5 w --3 w 1.2.3 w + w . w",  # numbers pypdf reads as 0 with a warning
    b"12345678901234567890123 w 0.000000000000000000001 w",  # past pypdf's 20-byte look-ahead
    b"BT 0 Tc 1 0 0 1 0 0 Tm (a) ' 1 2 (b) \" ET",
    b"BI /W 2 /H 1 /BPC 8 /CS /G ID \x00\xff EI Q",  # an inline image
    b"1 0 R Do",  # a reference pypdf refuses in a content stream
    b"[1 2 % comment in an array\n 3] 0 d",
    b"[1 2",  # an array left open at the end
    b"1 2 ] w",  # a stray bracket
    b")",
    b"{ 1 }",
    b"\x0b 1 w",
    b"(unterminated",
    b"<4G> Tj",
    b"Tf" + b"x" * 200 + b" 1 w",  # an operator past pypdf's length limit
    b"/" + b"n" * 5000 + b" gs",
    b"[null nullx 1] 0 d",
    b"",
    b"   \n\t ",
    b"\x00 q \x00 Q",
]


@pytest.mark.parametrize("data", STREAMS, ids=range(len(STREAMS)))
def test_each_kind_of_token_is_read_as_pypdf_reads_it(data):
    expected = _pypdf(data)
    got = _ours(data)
    assert _same(expected, got), (expected, got)


def _content_streams(reader):
    """Every page's content and every Form XObject reachable from a page's resources."""
    seen = set()
    for page in reader.pages:
        if page.get("/Contents") is not None:
            yield page["/Contents"].get_object()
        todo = [page.get("/Resources")]
        while todo:
            try:
                xobjects = todo.pop().get_object().get("/XObject")
                forms = [] if xobjects is None else [x.get_object() for x in xobjects.get_object().values()]
            except Exception:  # noqa: BLE001, S112 - a damaged resource dictionary
                continue
            for form in forms:
                if form.get("/Subtype") == "/Form" and id(form) not in seen:
                    seen.add(id(form))
                    yield form
                    todo.append(form.get("/Resources"))


REAL = sorted(p for p in list(CORPUS.rglob("*.pdf")) + list(CASES.glob("*.pdf")) if p.stat().st_size)


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_every_content_stream_of_the_real_pdfs_is_read_as_pypdf_reads_it(path):
    try:
        reader = pypdf.PdfReader(io.BytesIO(path.read_bytes()), strict=False)
        if reader.is_encrypted:
            reader.decrypt("")
        streams = list(_content_streams(reader))
    except Exception:  # noqa: BLE001 - a file pypdf cannot open has no streams to compare
        pytest.skip("pypdf cannot open it")
    for stream in streams:
        try:
            content = ContentStream(stream, reader, "bytes")
            data = content.get_data()
        except Exception:  # noqa: BLE001, S112 - undecodable: neither parser sees it
            continue
        try:
            expected = ("ok", list(ContentStream(stream, reader, "bytes").operations))
        except Exception as exc:  # noqa: BLE001
            expected = ("error", type(exc).__name__)
        try:
            got = ("ok", operations(data, content))
        except Exception as exc:  # noqa: BLE001
            got = ("error", type(exc).__name__)
        assert _same(expected, got)
