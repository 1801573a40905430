"""Type detection: content first, extension second, over every real file in the corpus and cases."""

from __future__ import annotations

import io
import zipfile

import pytest

from docanchor import formats
from docanchor.errors import DocumentError, UnsupportedType
from ingest.detect import detect_type, known_sniffers
from tests.conftest import CASES, CORPUS, REPO

FIXTURES = REPO / "tests" / "fixtures" / "formats"

EXPECTED = {
    "pdf": "pdf", "docx": "docx", "txt": "txt", "md": "md", "html": "html", "csv": "csv",
}
REAL_FILES = sorted(
    [p for p in CORPUS.rglob("*") if p.is_file() and p.parent.name in EXPECTED]
    + [p for p in CASES.iterdir() if p.suffix in (".pdf", ".docx", ".txt", ".md", ".csv")]
)


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda p: p.name)
def test_real_files_detected_by_content(path):
    data = path.read_bytes()
    if not data:
        with pytest.raises(DocumentError) as err:
            detect_type(data, path.name)
        assert err.value.code == "empty_file"
        return
    expected = path.suffix.lstrip(".")
    assert detect_type(data, path.name) == expected
    # the file name is only a hint: binary formats are found without it
    if expected in ("pdf", "docx", "html"):
        assert detect_type(data, None) == expected
        assert detect_type(data, "misnamed.txt") == expected


def _zip(entries: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, body in entries.items():
            zf.writestr(name, body)
    return buf.getvalue()


@pytest.mark.parametrize(
    "data, name",
    [
        (b"GIF89a" + b"\x00" * 100, "scan.pdf"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 100, "deck.pptx"),
        (b"MZ\x90\x00" + b"\x00" * 100, "setup.txt"),
        (b"\x7fELF\x02\x01\x01" + b"\x00" * 100, None),
        (_zip({"data.json": b"{}"}), "archive.docx"),
        (_zip({"mimetype": b"application/vnd.oasis.opendocument.spreadsheet"}), "sheet.ods"),
        (bytes(range(256)) * 4, "blob.bin"),
    ],
    ids=["gif-as-pdf", "legacy-office", "exe-as-txt", "elf", "zip-not-word", "ods", "random-binary"],
)
def test_unsupported_content_is_refused_with_the_supported_list(data, name):
    with pytest.raises(UnsupportedType) as err:
        detect_type(data, name)
    assert err.value.code == "unsupported_type"
    assert formats.supported_sentence() in err.value.message


def test_pdf_header_after_leading_junk_within_1kib():
    assert detect_type(b"\n" * 500 + b"%PDF-1.7\n...", "x.bin") == "pdf"
    assert detect_type(b" " * 2000 + b"%PDF-1.7\n", "x.txt") == "txt"


def test_html_sniffed_without_extension_and_text_fallbacks():
    assert detect_type(b"<!DOCTYPE html><html><body>hi</body></html>", None) == "html"
    assert detect_type(b"<?xml version='1.0'?>\n<!-- c -->\n<html><p>x</p></html>", "page") == "html"
    assert detect_type(b"# Title\n\ntext", "notes.markdown") == "md"
    assert detect_type(b"a,b,c\n1,2,3\n4,5,6\n7,8,9\n", None) == "csv"
    assert detect_type(b"plain words, nothing else", None) == "txt"
    assert detect_type("令狐冲".encode("gbk") * 20, "memo.txt") == "txt"
    assert detect_type("\ufeffBOM text".encode("utf-16"), "u16.txt") == "txt"


def test_empty_bytes():
    with pytest.raises(DocumentError) as err:
        detect_type(b"", "x.pdf")
    assert err.value.code == "empty_file"


FIXTURE_TYPES = {"deck.pptx": "pptx", "workbook.xlsx": "xlsx", "book.epub": "epub", "letter.odt": "odt",
                 "message.eml": "eml", "scan_en.png": "image", "scan_en.jpg": "image", "scan_en.tiff": "image",
                 "scan_en.webp": "image", "mixed_scan.pdf": "pdf"}


@pytest.mark.parametrize("name", sorted(FIXTURE_TYPES))
def test_new_formats_detected_by_content_whatever_their_name(name):
    data = (FIXTURES / name).read_bytes()
    assert detect_type(data, name) == FIXTURE_TYPES[name]
    assert detect_type(data, None) == FIXTURE_TYPES[name]
    assert detect_type(data, "misnamed.txt") == FIXTURE_TYPES[name]


def test_email_sniffed_only_from_a_header_block():
    assert detect_type(b"From: a@b.example\r\nSubject: hi\r\n\r\nbody", None) == "eml"
    assert detect_type(b"From: a@b.example\nTo: c@d.example\n\n<html><body>x</body></html>", "m.html") == "eml"
    assert detect_type(b"Subject: only one field\n\nbody", None) == "txt"
    assert detect_type(b"From: me\nSome text that is not a header\nmore", None) == "txt"
    assert detect_type(b"# Notes\nFrom: a\nDate: b\n", "notes.md") == "md"


def test_registry_rules_are_known_to_detection():
    """Every sniffing rule a format names exists, and every extension belongs to one format."""
    assert {f.sniff for f in formats.FORMATS if f.sniff} <= known_sniffers()
    assert len(formats.extensions()) == len(set(formats.extensions()))
    for fmt in formats.FORMATS:
        for ext in fmt.extensions:
            assert formats.by_extension(ext) is fmt
