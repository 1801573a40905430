"""The format registry's contract: every registered parser over its fixture, over empty and cut-off
copies, and every place that lists formats agrees with the registry (README table, manifest,
upload page, CLI folder ingest, the unsupported_type message)."""

from __future__ import annotations

import io
import json
import zipfile

import pytest

from docanchor import formats
from docanchor.errors import DocAnchorError, DocumentError, TooLarge, UnsupportedType
from docanchor.types import ParsedDocument
from ingest.detect import detect_type
from ingest.normalise import normalise
from ingest.parsers import parse
from ingest.scanned import parse_document
from tests.conftest import REPO

FIXTURE_DIR = REPO / "tests" / "fixtures" / "formats"
FIXTURES = {
    "pdf": "typed.pdf", "docx": "report.docx", "pptx": "deck.pptx", "xlsx": "workbook.xlsx", "epub": "book.epub",
    "odt": "letter.odt", "eml": "message.eml", "image": "scan_en.png", "html": "page.html", "md": "notes.md",
    "csv": "table.csv", "txt": "notes.txt",
}
"""One fixture per registered format (made by tests/fixtures/formats/make_fixtures.py)."""
MARKERS = {
    "pdf": "GANNET-8201", "docx": "TERN-8101", "pptx": "KESTREL-3101", "xlsx": "MERLIN-3201", "epub": "PLOVER-4201",
    "odt": "HERON-5301", "eml": "WREN-6101", "image": "OSPREY", "html": "AUK-8301", "md": "SKUA-8401",
    "csv": "EIDER-8601", "txt": "PUFFIN-8501",
}
STRUCTURED = {"docx", "pptx", "xlsx", "epub", "odt", "html", "md"}
"""Formats whose fixture has headings."""
BINARY = {f.name for f in formats.FORMATS if f.sandboxed}


def test_every_format_has_a_fixture():
    assert set(FIXTURES) == set(formats.names())


@pytest.fixture(scope="module")
def parsed() -> dict[str, ParsedDocument]:
    """Each fixture detected and parsed the way an upload is (sandbox, OCR for the image)."""
    out = {}
    for name, file in FIXTURES.items():
        data = (FIXTURE_DIR / file).read_bytes()
        assert detect_type(data, file) == name
        out[name] = parse_document(name, data, file)
    return out


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_parser_contract(parsed, name):
    doc = parsed[name]
    assert doc.doc_type == name
    assert MARKERS[name] in doc.text
    assert normalise(doc.text) == doc.text, "the text is normalised"
    assert doc.title.strip()
    last_end = 0
    for block in doc.blocks:
        piece = doc.text[block.start:block.end]
        assert last_end <= block.start < block.end <= len(doc.text), "blocks ascend and do not overlap"
        assert piece.strip() == piece and piece, "a block's offsets map to its text exactly"
        last_end = block.end
    covered = "".join(doc.text[b.start:b.end] for b in doc.blocks)
    assert len(covered.replace("\n", "")) >= 0.9 * len(doc.text.replace("\n", "")), "blocks cover the text"
    heads = [b for b in doc.blocks if b.kind == "heading"]
    if name in STRUCTURED:
        assert heads, "headings give structure"
        for b in doc.blocks:
            if b.kind != "heading" and b.heading_path:
                assert any(h.heading_path == b.heading_path for h in heads), "a block sits under a real heading"
    unit = formats.get(name).unit
    if unit is not None:
        assert doc.n_pages and all(b.page is not None and 1 <= b.page <= doc.n_pages for b in doc.blocks)
    else:
        assert all(b.page is None for b in doc.blocks)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_empty_input_is_empty_file(name):
    with pytest.raises(DocumentError) as err:
        parse(name, b"", FIXTURES[name])
    assert err.value.code == "empty_file"


@pytest.mark.parametrize("name", sorted(FIXTURES))
@pytest.mark.parametrize("keep", [0.5, 0.9])
def test_cut_off_file_fails_with_a_clear_code(name, keep):
    """A truncated binary file is refused with a 4xx code (never a 500, never a dependency's own
    exception); text formats may still parse what is there."""
    data = (FIXTURE_DIR / FIXTURES[name]).read_bytes()
    cut = data[: int(len(data) * keep)]
    try:
        doc = parse_document(name, cut, FIXTURES[name])
    except DocAnchorError as err:
        assert 400 <= err.http_status < 500, (err.code, err.message)
        assert err.code not in ("internal", "parse_crashed")
        if name in BINARY - {"pdf", "eml"}:
            assert err.http_status == 422 and err.code in ("malformed", "no_text", "no_text_layer")
        return
    assert name not in BINARY - {"pdf", "eml", "image"}, f"a cut-off {name} parsed"
    assert isinstance(doc, ParsedDocument)


def _zip(entries: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, body in entries.items():
            zf.writestr(name, body)
    return buf.getvalue()


def _with_part(fixture: str, part: str, body: bytes) -> bytes:
    src = zipfile.ZipFile(FIXTURE_DIR / fixture)
    return _zip({**{i.filename: src.read(i) for i in src.infolist()}, part: body})


LAUGHS = (b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;">]>'
          b"<lolz>&lol2;</lolz>")


@pytest.mark.parametrize("name", ["pptx", "xlsx", "epub", "odt"])
def test_zip_and_xml_bombs_refused_before_inflating(name):
    bomb = _with_part(FIXTURES[name], "media/zeros.bin", b"\0" * (40 * 1024 * 1024))
    with pytest.raises(TooLarge) as err:
        parse(name, bomb, FIXTURES[name])
    assert err.value.code == "too_large" and err.value.details["ratio"] > 100
    laughs = _with_part(FIXTURES[name], "extra/laughs.xml", LAUGHS)
    with pytest.raises(DocumentError) as err:
        parse(name, laughs, FIXTURES[name])
    assert err.value.code == "xml_entities"


def test_drm_epub_refused_with_its_code():
    enc = (b'<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
           b'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData><enc:EncryptionMethod '
           b'Algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc"/></enc:EncryptedData></encryption>')
    with pytest.raises(DocumentError) as err:
        parse("epub", _with_part("book.epub", "META-INF/encryption.xml", enc), "book.epub")
    assert err.value.code == "epub_drm"


def test_hidden_parts_counted_and_not_indexed(parsed):
    assert "HIDDEN-SLIDE-9" not in parsed["pptx"].text
    assert parsed["pptx"].flags["hidden_slides"] == {"pages": [3], "count": 1}
    assert "HIDDEN-SHEET-7" not in parsed["xlsx"].text and "SECRET-ROW-5" not in parsed["xlsx"].text
    assert parsed["xlsx"].flags["hidden_sheets"] == 1 and parsed["xlsx"].flags["hidden_rows"] == 1


def test_slides_sheets_chapters_and_mail_are_read_as_people_see_them(parsed):
    deck = parsed["pptx"]
    assert [b.page for b in deck.blocks if b.kind == "heading"] == [1, 2, 4]
    assert "Speaker notes: Mention the repair budget of 40,000 EUR." in deck.text
    assert "Berth 5 | 28,000 | City" in deck.text and "Grouped note: costs exclude VAT" in deck.text
    book = parsed["xlsx"]
    assert "row 4 | Crane: C7 | Inspected: 2025-05-04 | Cost EUR: 28000 | Double cost: 56000" in book.text
    assert book.text.count("Merged heading over two columns") == 2  # the schema line and its row, once each
    assert book.summary[0] == "2 sheets, 4 rows"
    epub = parsed["epub"]
    assert [(b.page, epub.text[b.start:b.end]) for b in epub.blocks if b.kind == "heading"] == [
        (1, "Arrival"), (2, "The Storm"), (2, "Night")]
    mail = parsed["eml"]
    assert mail.title == "Crane 7 repair quote"
    assert mail.flags["email"]["from"] == "Ada Harbour <ada@larkspur.example>"
    assert [a["name"] for a in mail.flags["attachments"]] == ["quote.csv", "blob.bin"]
    assert mail.flags["attachments"][0]["format"] == "csv"
    odt = parsed["odt"]
    assert "Footnote: the rent is indexed to inflation." in odt.text and "2026 | 49,440" in odt.text


# ------------------------------------------------------------------ one list of formats everywhere


def test_readme_format_table_is_the_registry():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert formats.markdown_table() in readme, "regenerate the table: formats.markdown_table()"


def test_manifest_and_plugin_descriptions_list_exactly_the_registry():
    manifest = json.loads((REPO / "manifest.json").read_text(encoding="utf-8"))
    add = next(a for a in manifest["api"] if a["name"] == "addDocument")
    assert f"({formats.phrase()})" in add["description"]
    from plugin.ui import upload_manifest
    from docanchor.settings import Settings

    upload = upload_manifest(Settings())["api"][0]["description"]
    assert f"({formats.phrase()})" in upload


def test_openapi_upload_lists_exactly_the_registry():
    from docanchor.settings import Settings
    from plugin.openapi import openapi_document

    paths = openapi_document(Settings())["paths"]
    bodies = [op["requestBody"] for item in paths.values() for op in item.values()
              if isinstance(op, dict) and "multipart/form-data" in op.get("requestBody", {}).get("content", {})]
    assert bodies, "the upload operations take multipart/form-data"
    for body in bodies:
        text = body["content"]["multipart/form-data"]["schema"]["properties"]["file"]["description"]
        assert formats.phrase() in text
        assert f"({', '.join(formats.extensions())})" in text


def test_upload_page_accepts_exactly_the_registry(tmp_path):
    from docanchor.settings import Settings
    from plugin.app import create_app

    app = create_app(Settings(data_dir=tmp_path))
    html = app.test_client().get("/ui/upload").get_data(as_text=True)
    accept = html.split('accept="', 1)[1].split('"', 1)[0].split(",")
    assert set(accept) == set(formats.extensions()) | set(formats.mime_types())
    assert formats.phrase() in html
    library = app.test_client().get("/ui/").get_data(as_text=True)  # the library page's upload inputs
    lists = [part.split('"', 1)[0].split(",") for part in library.split('accept="')[1:]]
    assert lists and all(set(a) == set(accept) for a in lists)


def test_folder_ingest_takes_exactly_the_registry(tmp_path):
    from plugin.cli.files import FOLDER_EXTENSIONS, collect_files

    assert FOLDER_EXTENSIONS == set(formats.extensions())
    for name in (*FIXTURES.values(), "code.py", "archive.zip"):
        (tmp_path / name).write_bytes(b"x")
    files, skipped, _ = collect_files((tmp_path,))
    assert sorted(f.name for f in files) == sorted(FIXTURES.values())
    assert sorted(f.name for f in skipped) == ["archive.zip", "code.py"]


def test_unsupported_type_names_the_registry():
    message = UnsupportedType().message
    assert formats.supported_sentence() in message
    assert all(f.label in message for f in formats.FORMATS)


def test_every_format_read_by_ocr_names_how_its_page_becomes_a_picture():
    from ingest.ocr import PAGE_PICTURES

    read_by_ocr = [f for f in formats.FORMATS if f.ocr]
    assert {f.name for f in read_by_ocr} == {"pdf", "image"}
    assert all(f.ocr in PAGE_PICTURES for f in read_by_ocr)


def test_a_named_source_file_is_read_as_text_and_a_folder_leaves_it_out(da, tmp_path):
    """The trial of 3d88e0c (its defect 8f): ``docanchor ingest tool.py`` stored the script as text,
    which no list of formats said. It is what a user naming a file expects (source code is text to
    search), so it stays, and the registry's text format says so (README's format table is made
    from it): a named or uploaded text file of another ending is plain text; a folder ingest
    still takes only the registry's endings, so a code folder is not indexed by accident."""
    from click.testing import CliRunner

    from plugin.cli import main

    code = tmp_path / "code"
    code.mkdir()
    script = code / "tool.py"
    script.write_text('def ledger_total(carts):\n    """Sum the zephyrite carts in the green ledger."""\n'
                      "    return sum(cart.weight for cart in carts)\n", encoding="utf-8")
    (code / "notes.md").write_text("# Notes\n\nThe foreman checks the ledger on Fridays.\n", encoding="utf-8")
    text = formats.get(formats.TEXT_FALLBACK)
    assert "source code" in text.summary and "named or uploaded" in text.summary and "folder" in text.summary
    assert ".py" not in formats.extensions()

    folder = CliRunner().invoke(main, ["ingest", str(code), "--json"], obj=da, catch_exceptions=False)
    assert folder.exit_code == 0, folder.output
    assert [d.title for d in da.list_documents()] == ["Notes"], folder.output  # tool.py is not picked

    named = CliRunner().invoke(main, ["ingest", str(script)], obj=da, catch_exceptions=False)
    assert named.exit_code == 0 and named.output.startswith("ok doc_"), named.output
    [doc] = [d for d in da.list_documents() if d.title != "Notes"]
    assert doc.doc_type == formats.TEXT_FALLBACK and doc.title == "tool", doc
    found = da.retrieve("ledger_total zephyrite carts", budget_tokens=300, doc_ids=[doc.doc_id])
    assert "return sum(cart.weight for cart in carts)" in found.context, found.context
