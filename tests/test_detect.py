"""Type detection: content first, extension second, over every real file in the corpus and cases."""

from __future__ import annotations

import io
import zipfile

import pytest

from docanchor.errors import DocumentError, UnsupportedType
from ingest.detect import detect_type
from tests.conftest import CASES, CORPUS

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
        (b"\x89PNG\r\n\x1a\n" + b"\x00" * 100, "scan.pdf"),
        (b"\xff\xd8\xff\xe0" + b"\x00" * 100, "photo.docx"),
        (b"MZ\x90\x00" + b"\x00" * 100, "setup.txt"),
        (b"\x7fELF\x02\x01\x01" + b"\x00" * 100, None),
        (_zip({"data.json": b"{}"}), "archive.docx"),
        (_zip({"xl/workbook.xml": b"<workbook/>"}), "book.xlsx"),
        (bytes(range(256)) * 4, "blob.bin"),
    ],
    ids=["png-as-pdf", "jpeg-as-docx", "exe-as-txt", "elf", "zip-not-word", "xlsx", "random-binary"],
)
def test_unsupported_content_is_refused_with_the_supported_list(data, name):
    with pytest.raises(UnsupportedType) as err:
        detect_type(data, name)
    assert err.value.code == "unsupported_type"
    assert "PDF, DOCX, TXT, Markdown, HTML and CSV" in err.value.message


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
