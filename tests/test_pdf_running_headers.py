"""Running headers and footers of PDFs (ingest/parsers/pdf_running.py) on the real corpus files
and on small page lists.

The user report behind it: every page of ../shared/corpus/pdf/dmca.pdf began with "The Digital
Millennium Copyright Act of 1998 / Copyright Office Summary December 1998 Page N", which led the
anchor's central passage, every ``read --from page:N`` window and many chunks. Each real file is
parsed twice, with and without the removal, so a test can check that only the running lines
went (word by word, per page)."""

from __future__ import annotations

import functools
import logging
from collections import Counter

import pytest

from ingest.parsers import pdf as pdf_parser
from ingest.parsers.pdf_running import RunningLines, running_keys, strip_running_lines
from tests.conftest import CORPUS

PDF = CORPUS / "pdf"
DMCA_TOP = "The Digital Millennium Copyright Act of 1998"
DMCA_PAGE = "Copyright Office Summary December 1998 Page"


@functools.lru_cache(maxsize=None)
def _both(name: str):
    """``(parsed with running-line removal, parsed without it)`` for one corpus PDF."""
    data = (PDF / name).read_bytes()
    stripped = pdf_parser.parse_pdf(data, name)
    real = pdf_parser.strip_running_lines
    pdf_parser.strip_running_lines = lambda texts: (list(texts), RunningLines())
    try:
        kept = pdf_parser.parse_pdf(data, name)
    finally:
        pdf_parser.strip_running_lines = real
    return stripped, kept


def _page_text(parsed, page: int, flagged: bool = False) -> str:
    return " ".join(parsed.text[b.start : b.end] for b in parsed.blocks
                    if b.page == page and (flagged or not b.flags))


def _words(text: str) -> Counter:
    return Counter(text.split())


def _lost(name: str, page: int) -> tuple[Counter, Counter]:
    """Words the removal took from a page, and words it added (must be none)."""
    stripped, kept = _both(name)
    before, after = _words(_page_text(kept, page, True)), _words(_page_text(stripped, page, True))
    return before - after, after - before


@pytest.fixture(autouse=True)
def _quiet_pdf_warnings():
    logging.getLogger("pypdf").setLevel(logging.ERROR)


# ------------------------------------------------------------------ dmca.pdf: the reported file


def test_dmca_header_is_gone_from_every_page():
    stripped, kept = _both("dmca.pdf")
    assert stripped.n_pages == 18
    for page in range(1, 19):
        text = _page_text(stripped, page)
        assert text.strip(), f"page {page} lost all its text"
        assert DMCA_PAGE not in text, f"page {page} still has its running header"
        assert DMCA_TOP not in text, f"page {page} still has its running title"
    # the unstripped parse did have them: the test can fail
    assert sum(DMCA_PAGE in _page_text(kept, p) for p in range(1, 19)) == 18


def test_dmca_removes_only_the_running_lines():
    """Per page, the words that went are exactly those of the header lines ("Page N" included)."""
    for page in range(1, 19):
        lost, added = _lost("dmca.pdf", page)
        assert not added, (page, added)
        header = _words(f"{DMCA_PAGE} {page}") + (_words(DMCA_TOP) if page > 1 else Counter())
        assert lost == header, (page, lost - header, header - lost)


def test_dmca_body_text_and_pages_are_kept():
    stripped, kept = _both("dmca.pdf")
    where = {  # body phrase -> page it is printed on (read from the unstripped parse)
        "THE DIGITAL MILLENNIUM COPYRIGHT ACT OF 1998": 1,
        "World Intellectual Property Organization": 1,
        "Registration as a Prerequisite to Suit": 3,
        "is used in this context as a short-hand": 4,  # a footnote extracted before the header
        "Limitation for Transitory Communications": 10,
        "does not take effect until two years from enactment": 18,
    }
    for phrase, page in where.items():
        assert phrase in " ".join(_page_text(kept, page).split()), (phrase, "fixture moved")
        assert phrase in " ".join(_page_text(stripped, page).split()), (phrase, page)
    assert {b.page for b in stripped.blocks} == set(range(1, 19))
    assert stripped.title == kept.title == DMCA_TOP


def test_dmca_flag_records_what_went():
    stripped, kept = _both("dmca.pdf")
    flag = stripped.flags["running_headers"]
    assert flag["count"] == 18 + 17  # "Page N" on all 18 pages, the title line on pages 2-18
    assert any(e.startswith(DMCA_PAGE) for e in flag["examples"])
    assert DMCA_TOP in flag["examples"]
    assert "running_headers" not in kept.flags


# ------------------------------------------------------------------ other corpus files


def test_report_page_numbers_and_header_go_but_table_numbers_stay():
    """issue-67-example.pdf (22 pp, Chinese quarterly report): header line plus page number."""
    stripped, _ = _both("issue-67-example.pdf")
    assert stripped.flags["running_headers"]["count"] == 44
    for page in (4, 9, 20):
        lost, added = _lost("issue-67-example.pdf", page)
        assert not added
        assert lost == _words(f"东北电气发展股份有限公司 2018 年第一季度报告全文 {page}"), (page, lost)
    good = " ".join(stripped.text.split())
    assert "公司第一季度报告未经审计" in good and "31,760,858.70" in good


def test_slide_numbers_go_but_a_table_cell_above_them_stays():
    """nlp2004slides.pdf: slide 17 ends with a score column "7" right above its number "17"."""
    stripped, _ = _both("nlp2004slides.pdf")
    assert stripped.flags["running_headers"]["count"] == 30  # slides 2-31 carry their number
    lost, added = _lost("nlp2004slides.pdf", 17)
    assert lost == Counter({"17": 1}) and not added
    assert "New York University" in stripped.text


@pytest.mark.parametrize("name, markers", [
    ("multi-column.pdf", ["Dense Passage Retrieval", "39.8 exact match score"]),
    ("Seige_of_Vicksburg_Sample_OCR.pdf", ["THE SIEGE OF VICKSBURG", "The Yankee Lookout"]),
    ("zen_of_python_corrupted.pdf", ["Beautiful is better than ugly."]),
])
def test_pdf_without_running_headers_loses_nothing(name, markers):
    stripped, kept = _both(name)
    assert "running_headers" not in stripped.flags
    assert stripped.text == kept.text
    good = " ".join(stripped.text.split())
    for marker in markers:
        assert marker in good, marker


# ------------------------------------------------------------------ the rule on page lists


_WORDS = ("harbours", "cranes", "tides", "ledgers", "ferries", "pilots", "berths", "buoys", "quays", "tugs", "locks")


def _pages(n: int, top: str | None = None, bottom: str | None = None) -> list[str]:
    """``n`` page texts of two body lines, with ``top``/``bottom`` lines formatted with the page
    number ``i`` and ``j = i + 10``."""
    out = []
    for i in range(1, n + 1):
        lines = [top.format(i=i)] if top else []
        word = _WORDS[i % len(_WORDS)]
        lines += [f"Body sentence about {word} (digits alone would mask to one line).",
                  f"Another body line on {word} and {_WORDS[(i + 3) % len(_WORDS)]}."]
        lines += [bottom.format(i=i, j=i + 10)] if bottom else []
        out.append("\n".join(lines))
    return out


def test_masked_digits_make_one_running_line():
    texts = _pages(5, top="Annual Report 2019 - page {i}")
    out, removed = strip_running_lines(texts)
    assert removed.count == 5 and removed.pages == [0, 1, 2, 3, 4]
    assert removed.examples == ["Annual Report 2019 - page 1"]
    assert all("Annual Report" not in t and "Body sentence" in t for t in out)


def test_a_line_on_one_page_or_few_pages_stays():
    texts = _pages(10)
    texts[0] = "Chapter 1 Introduction\n" + texts[0]
    for i in (3, 5, 7, 9):  # 4 of 10 pages: under half
        texts[i] = "Draft\n" + texts[i]
    out, removed = strip_running_lines(texts)
    assert out == texts and removed.count == 0
    assert running_keys(texts) == set()


def test_two_pages_are_too_few():
    texts = _pages(2, top="Same header")
    assert strip_running_lines(texts) == (texts, RunningLines())


def test_alternating_book_headers_at_half_the_pages_go():
    texts = _pages(8)
    texts = [("Book Title\n" if i % 2 == 0 else "Chapter Two\n") + t for i, t in enumerate(texts)]
    out, removed = strip_running_lines(texts)
    assert removed.count == 8
    assert not any("Book Title" in t or "Chapter Two" in t for t in out)


def test_alternating_headers_after_a_cover_page_go():
    """Before: a book's left pages carry its title and page number, its right pages the
    chapter's title, and the cover carries neither (handbook-like): on 9 pages each header is
    on 4, under half, and both stayed in the text. The chapter title is typed with an en dash
    on some pages and a hyphen on one; dashes compare as one."""
    texts = _pages(9)
    for i in range(1, 9):
        top = (f"Handbook for Chapter 13 Standing Trustees Page {i + 1}-" if i % 2 == 0
               else "CHAPTER 1 - INTRODUCTION" if i == 3 else "CHAPTER 1 \u2013 INTRODUCTION")
        texts[i] = top + "\n" + texts[i]
    out, removed = strip_running_lines(texts)
    assert removed.count == 8 and removed.pages == list(range(1, 9))
    assert out[0] == texts[0]
    assert not any("Handbook for" in t or "INTRODUCTION" in t for t in out)
    assert all("Body sentence about" in t for t in out)


def test_a_line_on_every_other_page_alone_stays():
    """The parity rule needs headers on both sides: one line on 4 of 5 even pages and nothing
    on the odd ones is not taken for a header."""
    texts = _pages(10)
    for i in (3, 5, 7, 9):
        texts[i] = "Draft\n" + texts[i]
    assert strip_running_lines(texts) == (texts, RunningLines())


def test_header_words_inside_the_body_stay():
    texts = _pages(4, top="Confidential")
    texts[2] = texts[2].replace("Another body line", "Line a\nLine b\nLine c\nLine d\nLine e\nLine f\nConfidential\nLine g\nLine h\nLine i\nLine j\nLine k\nLine l")
    out, _ = strip_running_lines(texts)
    assert out[2].count("Confidential") == 1 and not out[2].startswith("Confidential")


def test_the_only_text_is_never_removed():
    texts = ["Quarterly memo 1", "Quarterly memo 2", "Quarterly memo 3"]
    out, removed = strip_running_lines(texts)
    assert out == texts and removed.count == 0


def test_numeric_rows_are_not_page_numbers():
    texts = _pages(6, bottom="12 340 5.6")  # the same numeric row ending every page
    out, removed = strip_running_lines(texts)
    assert out == texts and removed.count == 0


def test_page_numbers_with_an_offset_go():
    texts = _pages(6, bottom="- {j} -")  # front matter counted apart: page 1 is printed "11"
    out, removed = strip_running_lines(texts)
    assert removed.count == 6
    assert not any(t.rstrip().endswith("-") for t in out)
    assert all("Another body line" in t for t in out)


def test_lines_drawn_before_the_top_running_line_move_to_the_page_end():
    """A footnote extracted before the page's header (dmca.pdf draws them first) goes after the
    body, as a paragraph of its own; on a short page whose footer is among its first lines
    (nlp2004slides.pdf page 9) nothing moves."""
    words = ["alpha", "bravo", "charlie", "delta"]
    pages = [f"Footnote on {w}\nAcme Report Page {n}\nThe {w} body starts\nmore about {w}\n{w} again\n{w} ends."
             for n, w in enumerate(words, 1)]
    texts, removed = strip_running_lines(pages)
    assert removed.count == 4
    assert texts[0] == "The alpha body starts\nmore about alpha\nalpha again\nalpha ends.\n\nFootnote on alpha"
    short = ["Slide title\nBody\nAcme Report Page 1\nAxis 0 10 20"] + pages[1:]
    texts, _ = strip_running_lines(short)
    assert texts[0] == "Slide title\nBody\nAxis 0 10 20"


@pytest.mark.parametrize("a, b", [
    ("Page 3 of 40", "Page 4 of 40"),
    ("Effective October 1, 2012", "Effective October 2, 2013"),  # a date
    ("CHAPTER 1 – INTRODUCTION", "CHAPTER 2 - INTRODUCTION"),
    ("_" * 73, "_" * 75),  # a rule typed with underscores, not always of one length
])
def test_running_lines_that_differ_only_by_a_number_or_a_rule_s_length_are_one(a, b):
    from ingest.parsers.running import line_key
    assert line_key(a) == line_key(b)


def test_running_lines_keep_the_first_of_each_key_and_count_the_rest():
    """RunningLines owns "first of its key? else count it" (the DOCX parser kept its own set of
    keys beside it): "Page 1-" is kept, "Page 2-" (the same line but its number) counted and
    quoted, another line kept, a blank one neither."""
    from ingest.parsers.running import RunningLines

    running = RunningLines()
    assert running.keep_first("Handbook Page 1-\nEffective October 1, 2012")
    assert not running.keep_first("Handbook  Page 2-\nEffective October 1, 2012")
    assert running.keep_first("Another footer")
    assert not running.keep_first("  \n ")
    assert running.as_flag() == {"count": 1, "examples": ["Handbook Page 2- Effective October 1, 2012"]}
