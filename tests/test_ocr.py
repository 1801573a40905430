"""OCR, offline: scanned pages and images are read by RapidOCR (models inside its wheel), only the
pages without a text layer, with confidence and a page cap; DOCANCHOR_OCR=off keeps no_text_layer.
And every new format ingests through the real pipeline and is cited in its own unit."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys

import pytest

from bench.corpus_report import char_accuracy, ocr_columns
from docanchor.errors import DocumentError, TooLarge
from docanchor.settings import Settings
from ingest import scanned
from ingest.ocr import OcrPage
from ingest.sandbox import Sandbox
from ingest.scanned import OcrOptions, parse_document
from tests.conftest import CASES, CORPUS, REPO

FIXTURES = REPO / "tests" / "fixtures" / "formats"


@pytest.mark.parametrize("name, floor", [("scan_zh", 0.95), ("scan_en", 0.9)])
def test_rendered_pages_of_known_text_are_read(name, floor):
    truth = (FIXTURES / f"{name}.txt").read_text(encoding="utf-8")
    seen = []
    doc = parse_document("image", (FIXTURES / f"{name}.png").read_bytes(), f"{name}.png",
                         progress=lambda stage, done, total: seen.append((stage, done, total)))
    assert char_accuracy(truth, doc.text) >= floor, doc.text
    assert seen == [("ocr", 0, 1), ("ocr", 1, 1)]
    assert doc.flags["ocr"]["pages"] == [1] and doc.flags["ocr"]["confidence"]["1"] > scanned.MIN_CONFIDENCE
    assert doc.n_pages == 1 and all(b.page == 1 for b in doc.blocks)
    seconds, accuracy = ocr_columns(FIXTURES / f"{name}.png", doc.flags, doc.text)
    assert float(seconds) > 0 and float(accuracy) >= floor  # what bench/corpus_report.py prints


def test_english_words_keep_their_spaces():
    doc = parse_document("image", (FIXTURES / "scan_en.png").read_bytes(), "scan_en.png")
    assert "must book a pilot two days ahead" in doc.text


def test_only_the_pages_without_a_text_layer_are_read():
    seen = []
    doc = parse_document("pdf", (FIXTURES / "mixed_scan.pdf").read_bytes(), "mixed_scan.pdf",
                         progress=lambda stage, done, total: seen.append((stage, done, total)))
    assert doc.flags["ocr"]["pages"] == [2] and "image_only_pages" not in doc.flags
    assert seen[-1] == ("ocr", 1, 1)
    first = [doc.text[b.start:b.end] for b in doc.blocks if b.page == 1]
    assert first == ["Typed cover page: berth closures, see the scan."]
    assert "OSPREY" in doc.text[doc.blocks[-1].start:] or any("OSPREY" in doc.text[b.start:b.end]
                                                             for b in doc.blocks if b.page == 2)


def test_image_only_case_pdf_is_read():
    doc = parse_document("pdf", (CASES / "a07_pdf_image_only_no_text_layer.pdf").read_bytes(), "a07.pdf")
    assert "TERN 1707" in doc.text
    assert doc.flags["ocr"]["pages"] == [1]


def test_a_scanned_page_is_read_by_a_worker_that_reserved_much_address_space():
    """Before: OCR workers ran under an address-space cap (RLIMIT_AS, 2 GiB) that their libraries,
    thread stacks and per-thread malloc arenas (64 MiB of address space reserved each, memory only
    when used) nearly filled, so case a07 failed with std::bad_alloc, as "OCR found no text",
    depending on the pages the worker had read before and its threads' timing on a busy machine
    (CI of 3da56d1). Here the worker first reserves 1.5 GiB, as a machine with more cores does
    through its thread count; the cap counts what the worker allocates."""
    data = (CASES / "a07_pdf_image_only_no_text_layer.pdf").read_bytes()
    limits = Settings()
    box = Sandbox(cpu_s=limits.parse_cpu_s, wall_s=limits.parse_wall_s, memory_bytes=limits.parse_memory_bytes,
                  max_workers=1)
    try:
        pid = box.run("tests.sandbox_targets:reserve_address_space", 1536 * 1024**2)
        page = box.run("ingest.ocr:ocr_page", "pdf", data, 1)
        assert box.run("os:getpid") == pid
    finally:
        box.close()
    assert "TERN 1707" in "\n".join(page.paragraphs)


def test_the_engines_threads_do_not_grow_with_the_machines_cores():
    """Each thread's stack counts against the memory cap: the engine's three onnxruntime sessions
    run on at most OCR_THREADS threads each, not onnxruntime's one per physical core (before: 0,
    its default)."""
    from ingest.ocr import OCR_THREADS, engine

    e = engine()
    sessions = [e.text_det.infer.session, e.text_cls.infer.session, e.text_rec.session.session]
    threads = [s.get_session_options().intra_op_num_threads for s in sessions]
    assert threads == [min(OCR_THREADS, os.cpu_count() or 1)] * 3


def test_the_engines_idle_threads_sleep_instead_of_spinning():
    """onnxruntime's intra-op threads spin while waiting for work by default, burning CPU a parse
    worker or the embedder beside them would use; the engine's three sessions let them sleep
    (the same answers: only the wait changes), and RapidOCR's option builder is put back after
    the engine is built (before: the entry was absent, onnxruntime's default)."""
    from rapidocr_onnxruntime.utils.infer_engine import OrtInferSession

    from ingest.ocr import engine

    e = engine()
    sessions = [e.text_det.infer.session, e.text_cls.infer.session, e.text_rec.session.session]
    spinning = [s.get_session_options().get_session_config_entry("session.intra_op.allow_spinning")
                for s in sessions]
    assert spinning == ["0"] * 3
    assert OrtInferSession._init_sess_opts.__module__ == "rapidocr_onnxruntime.utils.infer_engine"


def test_ocr_over_the_memory_cap_names_the_limit_and_its_setting():
    """A page whose OCR needs more memory than DOCANCHOR_PARSE_MEMORY_BYTES (onnxruntime raises
    std::bad_alloc) is refused as ``too_large`` naming that setting; before, the page counted as
    damaged and the document was told "OCR found no text; check that the scan holds legible text"."""
    data = (CASES / "a07_pdf_image_only_no_text_layer.pdf").read_bytes()
    with pytest.raises(TooLarge) as info:
        parse_document("pdf", data, "a07.pdf", memory_bytes=512 * 1024**2)
    err = info.value
    assert err.code == "too_large" and err.details["limit"] == "memory"
    assert err.details["setting"] == "DOCANCHOR_PARSE_MEMORY_BYTES" and "DOCANCHOR_PARSE_MEMORY_BYTES" in err.message
    assert "legible" not in err.message and "damaged" not in err.message


def test_image_only_corpus_pdf_is_read_and_a_scan_with_a_text_layer_is_not_ocred():
    doc = parse_document("pdf", (CORPUS / "pdf" / "175.pdf").read_bytes(), "175.pdf")
    assert doc.flags["ocr"]["pages"] == [1, 2] and doc.n_pages == 2
    assert "Oversize Tire Accessory Kit" in doc.text and "installed" in doc.text
    assert {b.page for b in doc.blocks} == {1, 2}
    layered = parse_document("pdf", (CORPUS / "pdf" / "Seige_of_Vicksburg_Sample_OCR.pdf").read_bytes(), "v.pdf",
                             progress=lambda stage, done, total: pytest.fail(f"OCR ran: {stage}"))
    assert "ocr" not in layered.flags and "image_only_pages" not in layered.flags


def test_ocr_off_keeps_no_text_layer():
    off = OcrOptions(enabled=False)
    with pytest.raises(DocumentError) as err:
        parse_document("image", (FIXTURES / "scan_en.png").read_bytes(), "scan_en.png", ocr=off)
    assert err.value.code == "no_text_layer" and "DOCANCHOR_OCR=off" in err.value.message
    with pytest.raises(DocumentError) as err:
        parse_document("pdf", (CORPUS / "pdf" / "175.pdf").read_bytes(), "175.pdf", ocr=off)
    assert err.value.code == "no_text_layer" and err.value.details["n_pages"] == 2
    doc = parse_document("pdf", (FIXTURES / "mixed_scan.pdf").read_bytes(), "mixed_scan.pdf", ocr=off)
    assert doc.flags["image_only_pages"] == [2] and "ocr" not in doc.flags


def test_page_cap_reads_the_first_pages_and_lists_the_rest():
    from PIL import Image

    page = Image.open(FIXTURES / "scan_en.png")
    blank = Image.new("L", page.size, 255)
    buf = io.BytesIO()
    page.save(buf, "TIFF", save_all=True, append_images=[blank, page])
    doc = parse_document("image", buf.getvalue(), "three.tiff", ocr=OcrOptions(max_pages=1))
    assert doc.n_pages == 3 and doc.flags["ocr"]["pages"] == [1]
    assert doc.flags["ocr_skipped_pages"] == [2, 3] and doc.flags["image_only_pages"] == [2, 3]


def test_low_confidence_pages_are_flagged_like_garbled_pages():
    pages = [OcrPage(1, ["Clear text read well."], 0.97, 3), OcrPage(2, ["~~ ii ll 1l ~~"], 0.41, 2)]
    doc = scanned._build(None, pages, [], [], scanned.formats.get("image"), "two.tiff", 2)
    assert doc.flags["garbled_pages"] == [2] and "OCR confidence 0.41" in doc.flags["garbled_reasons"]["2"]
    assert [b.flags for b in doc.blocks] == [(), ("garbled",)]
    assert doc.flags["ocr"]["confidence"] == {"1": 0.97, "2": 0.41}


def test_ocr_never_touches_the_network():
    """The engine loads its models from the wheel and reads a page with sockets disabled."""
    code = (
        "import socket\n"
        "def refuse(*a, **k):\n    raise OSError('network used')\n"
        "socket.socket = refuse; socket.create_connection = refuse; socket.getaddrinfo = refuse\n"
        "from ingest.ocr import ocr_page\n"
        f"page = ocr_page('image', open({str(FIXTURES / 'scan_zh.png')!r}, 'rb').read(), 1)\n"
        "print(page.paragraphs[0].splitlines()[0])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600,
                         env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "云雀港务局通知"


UNITS = [("deck.pptx", "KESTREL-3101", r" — slides? 1\b"), ("workbook.xlsx", "MERLIN-3201", r" — sheets? 1\b"),
         ("book.epub", "PLOVER-4201", r" — chapters? (2|1–2)\b"), ("scan_en.png", "OSPREY", r" — p\. 1\b"),
         ("letter.odt", "HERON-5301", r"^\[1\] Dock lease renewal — "), ("message.eml", "WREN-6101", r"^\[1\] Crane 7 repair quote — ")]
"""Fixture, a word in it, and the citation's unit (a small deck's slides may merge into one
section: ``slides 1–4``)."""


@pytest.mark.parametrize("name, marker, cited", UNITS, ids=[u[0] for u in UNITS])
def test_new_formats_ingest_and_are_cited_in_their_own_unit(da, name, marker, cited):
    doc = da.ingest_file(FIXTURES / name)
    assert doc.record.n_chunks > 0
    result = da.retrieve(marker, budget_tokens=300, doc_ids=[doc.record.doc_id])
    assert result.sections and marker in result.sections[0].text
    assert re.search(cited, result.sections[0].citation), result.sections[0].citation
