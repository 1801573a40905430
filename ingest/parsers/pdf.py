"""PDF parser: pypdf first, pdfminer.six where pypdf gives up or decodes a page badly.

``parse_pdf(data, filename) -> ParsedDocument``. Every block carries its 1-based page; the PDF
outline (bookmarks), when present, becomes headings at the pages it points to; without one,
numbered section lines and lines in a larger or bold font do
(:mod:`ingest.parsers.pdf_outline`).

What is checked on the way (issue 4, ../shared/cases/CASES.md a01-a08, a16):

- Encryption: the empty user password is tried first (RC4 and AES through ``cryptography``);
  a file that needs a real password raises ``DocumentError(code="pdf_encrypted")``.
- Not a PDF, no cross-reference, or pypdf gives up: pdfminer.six parses it instead; if both fail,
  ``DocumentError(code="pdf_unreadable")``. pypdf's decompression limits
  (``LimitReachedError``, a bomb such as case a06) raise ``TooLarge(code="too_large")``.
- No text on any page: ``DocumentError(code="no_text_layer", n_pages=N)``; pages without text among
  text pages are listed in ``flags["image_only_pages"]`` (both are read by OCR in :mod:`ingest.scanned`).
- Hidden text, judged as a reader sees the page by :mod:`ingest.parsers.pdf_visibility`
  (invisible render modes away from images, tiny glyphs, outside the page box, clipped away,
  covered by a later opaque fill, too little contrast with what is painted beneath, in the page
  and in its Form XObjects), is kept out of the good text: it goes into blocks flagged
  ``("hidden_text",)`` and ``flags["hidden_text"] = {"pages": [...], "count": n}`` (n = text-showing
  operators). Text drawn twice at almost the same spot (fake bold) is kept once.
- Vertical CJK text (fonts in writing mode 1) is read in columns right to left, each top to
  bottom (:func:`ingest.parsers.pdf_extract.vertical_text`).
- Glued words (case a02): a page whose letters sit mostly in implausibly long runs is
  re-extracted in pypdf's layout mode, then by pdfminer; layout text is used only when it loses
  no letters (layout mode drops rotated text, case a16). If neither helps the page is listed in
  ``flags["glued_pages"]`` and kept.
- Garbled text (fonts without a Unicode map, case a03): a page where many characters sit in runs
  mixing unrelated scripts, unassigned code points or pdfminer ``(cid:N)`` codes is re-read with
  pdfminer (which applies the CMaps pypdf lacks); if that is still garbled the page's blocks are
  flagged ``("garbled",)`` (the chunker skips them) and listed in ``flags["garbled_pages"]`` with
  the reason in ``flags["garbled_reasons"]``. Chinese, Japanese and Korean text is one script
  family here, so properly mapped CJK pages are kept.
- Word spacing: strings drawn with a word spacing (``Tw``) are handed to pypdf with that spacing
  written out, so a string a producer starts inside a word is not read as a new word
  (dmca.pdf: "computer programs i n section 117"; :mod:`ingest.parsers.pdf_extract`).
- Footnote marks: a small raised mark after a word and the same mark starting a note lower on
  the page are left out of the text ("signed into law by1" reads "signed into law by"), and
  counted in ``flags["footnote_marks"] = {"pages": [...], "count": n}``
  (:mod:`ingest.parsers.pdf_marks`).
- Split words (dmca.pdf): where pypdf leaves the last letter of a line's last word apart
  ("copyrigh t", "th e") or splits a word inside a line ("sect ion"), the pieces are joined
  back when pdfminer.six's text of the same page has the joined word and not the two pieces
  (:mod:`ingest.parsers.pdf_split`); pypdf's lines
  are kept. Only pages with such a line end are read by pdfminer, and no more of them once
  :data:`SPLIT_PROBE_PAGES` were read without a confirmed join. Joins are counted in
  ``flags["split_words_joined"] = {"pages": [...], "count": n}``.
- Numeric tables (../shared/corpus/pdf/nics-background-checks-2015-11-rotated.pdf): a page that
  is mostly rows of figures (:func:`ingest.parsers.pdf_table.is_table_page`) has its cells read
  by pdfplumber (:func:`ingest.parsers.pdf_cells.tables`, the page's ruled table cut one row per
  line, upright); when they hold a run of rows of figures under a header row and lose no digit,
  each of those rows is a ``row`` block that names the column of each value, as a CSV row does
  (:func:`ingest.parsers.pdf_table.labelled_table`), and the page's other lines are paragraphs.
  Otherwise the page is re-read by pdfminer.six one row per line, upright
  (:func:`ingest.parsers.pdf_miner.rows`), and that text is kept when it separates cells pypdf
  glued and loses nothing (:func:`ingest.parsers.pdf_table.separates_cells`); either way its
  table, a header line and the run of rows under it
  (:func:`ingest.parsers.pdf_table.table_span`), becomes one ``table`` block, one row per line,
  and each of its other lines a paragraph. Such pages are listed in ``flags["table_pages"]``.
- Private-use characters (icon fonts) are removed and counted in ``flags["private_use_chars"]``;
  NFKC and control characters are handled by :mod:`ingest.builder`.
- Running headers and footers (a line such as "Copyright Office Summary December 1998 Page 4"
  at the top or bottom of most pages) are removed from the text by
  :mod:`ingest.parsers.pdf_running` and recorded in
  ``flags["running_headers"] = {"count": n, "examples": [...]}`` (n = lines removed); blocks
  keep their page numbers.
"""

from __future__ import annotations

import io
import logging
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import PurePath

from docanchor.errors import DocumentError, TooLarge
from docanchor.text import HANGUL, NO_SPACE, joins_tight
from docanchor.types import ParsedDocument
from ingest.builder import DocumentBuilder
from ingest.normalise import compose_spacing_diacritics, spacing_accent_side
from ingest.parsers import pdf_cells, pdf_miner
from ingest.parsers.pdf_extract import only, text_without, vertical_text
from ingest.parsers.pdf_fonts import name_symbol_glyphs, private_use_letters
from ingest.parsers.pdf_marks import footnote_marks
from ingest.parsers.pdf_outline import (HEADING_LINE_SHARE, StyledLine, heading_form, short_line, styled_key,
                                        styled_lines, typographic_outline, wraps)
from ingest.parsers.pdf_running import strip_running_lines
from ingest.parsers.pdf_split import has_candidates, join_confirmed
from ingest.parsers.pdf_table import is_table_page, labelled_table, separates_cells, table_span
from ingest.parsers.pdf_title import first_line_title, metadata_title
from ingest.parsers.pdf_visibility import content_operations, walk_page

log = logging.getLogger(__name__)

MAX_PAGES = 20_000
"""More pages than this is refused as ``too_large`` (the largest real books are ~5,000 pages)."""
MAX_TEXT_CHARS = 50_000_000
"""Extracted characters beyond this are refused as ``too_large`` (about 50 MB of text)."""
MAX_OUTLINE_ITEMS = 5_000
"""Outline entries read at most; deeper or longer outlines are cut (hostile files loop)."""
GLUED_RUN_CHARS = 20
"""A run of this many letters without a space is implausible in running Latin-script text
(the longest common English words have ~20 letters; German compounds rarely pass it)."""
GLUED_SHARE = 0.35
"""A page is 'glued' when at least this share of its Latin letters sit in such runs..."""
GLUED_MIN_RUNS = 3
"""... and there are at least this many of them."""
GARBLED_SHARE = 0.15
"""A page is 'garbled' when at least this share of its non-space characters are suspicious..."""
MANY_SCRIPTS = 4
"""A page mixing letters of this many non-Latin, non-CJK scripts, some within one word, is a
font without a Unicode map: all those letters count as suspicious (isolated code points)."""
GARBLED_MIN_CHARS = 10
GARBLED_MIN_SHARE = 0.03
"""... or when at least this many suspicious characters make at least this share (a mostly
numeric slide with a garbled title, corpus nlp2004slides.pdf page 17)."""
MIN_LETTERS_FOR_QUALITY = 20
"""Pages with fewer letters than this are too short to judge and are taken as they are."""
MAX_HEADING_LINES = 2
"""Successive styled lines beyond this many are prose drawn larger or bold, not a heading
(:func:`_heading_lines`): a heading that wraps takes two lines (dmca.pdf's longest, "Limitation
for Information Residing on Systems or Networks at the / Direction of Users")."""
SPLIT_PROBE_PAGES = 3
"""Split-word candidate pages read by pdfminer before giving up on a file where none of them
had a confirmed join (the gap comes from the producer, so a file has it on most pages:
dmca.pdf on 17 of 18). Bounds the cost on math texts whose lines end in variables ("von x":
GeoTopo-komprimiert.pdf has 53 such pages, about 0.08 s each in pdfminer, none with a join)."""

_CJK_FAMILY = {"CJK", "HIRAGANA", "KATAKANA", "KATAKANA-HIRAGANA", "HANGUL", "BOPOMOFO", "HALFWIDTH", "FULLWIDTH", "IDEOGRAPHIC", "KANGXI"}
_NEUTRAL_SCRIPTS = {"LATIN", "MODIFIER", "COMBINING", "DIGIT", "SUPERSCRIPT", "SUBSCRIPT", "MATHEMATICAL",
                    "DOUBLE-STRUCK", "SCRIPT", "BLACK-LETTER", "PLANCK", "ANGSTROM"}
_LATIN_RUN = re.compile(r"[A-Za-z\u00c0-\u024f]+")
_CID = re.compile(r"\(cid:\d+\)")
_TERMINAL = tuple(".!?:;。！？；")
_PRIVATE = re.compile("[\ue000-\uf8ff]")
_LOST_LETTER = re.compile("(?<=[a-z\u00df-\u00ff])[\ue000-\uf8ff]|[\ue000-\uf8ff](?=[a-z\u00df-\u00ff])")
"""A private-use character against a lowercase letter: a ligature glyph without a Unicode
mapping ("\ue001nal" for "final"), not an icon (icons stand apart or before capitals)."""
_NO_SPACE_CHAR = re.compile(f"[{NO_SPACE}]")
_HANGUL = re.compile(f"[{HANGUL}]")
_NO_SPACE_LETTER = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff](?<![\u30a0\u30fb])")


# ---------------------------------------------------------------- page records


@dataclass
class _Page:
    """What one page yields: visible text, hidden text and quality facts."""

    number: int
    text: str = ""
    hidden: str = ""
    hidden_ops: int = 0
    has_image: bool = False
    garbled_reason: str = ""
    glued: bool = False
    source: str = "pypdf"
    notes: list[str] = field(default_factory=list)
    marks: int = 0
    """Footnote marks and note labels left out of the text (:mod:`ingest.parsers.pdf_marks`)."""
    joined: int = 0
    """Split words re-joined on this page (:func:`_join_split_words`)."""
    glyph_map: dict[str, str] = field(default_factory=dict)
    """Private-use characters and ``/name`` glyph names pypdf emitted -> the letters they
    stand for (:func:`ingest.parsers.pdf_fonts.private_use_letters`)."""
    quality: str = ""
    """Why the page's text is doubtful although it is kept (the ``text_quality`` flag)."""
    styled: list[StyledLine] = field(default_factory=list)
    """Lines in a larger or bold font, with a heading level (:func:`pdf_outline.styled_lines`);
    read only for a PDF without bookmarks."""
    table: bool = False
    """A page of rows of figures (:func:`ingest.parsers.pdf_table.is_table_page`, set by
    :func:`_read_tables`): its table is ``row`` blocks (``cells``) or a ``table`` block, its
    other lines paragraphs
    (:func:`_page_paragraphs`)."""
    cells: tuple[list[str], list[str], list[str]] | None = None
    """A table page whose cells pdfplumber read (:func:`ingest.parsers.pdf_table.labelled_table`):
    its lines before the table, its rows labelled by column, its lines after."""


# ---------------------------------------------------------------- entry point


def parse_pdf(data: bytes, filename: str | None = None) -> ParsedDocument:
    """Parse a PDF's bytes into normalised text and page-numbered blocks.

    Args:
        data: the whole file (non-empty; zero bytes is rejected earlier as ``empty_file``).
        filename: the original name; its stem is the title of last resort.

    Returns:
        A :class:`ParsedDocument` with ``doc_type="pdf"``, ``n_pages`` and quality flags
        (``garbled_pages``, ``garbled_reasons``, ``glued_pages``, ``hidden_text``, ``table_pages``,
        ``private_use_chars``, ``pages_from_pdfminer``, ``unreadable_pages``,
        ``image_only_pages``, ``running_headers``, ``split_words_joined``, ``footnote_marks``;
        ``parser="pdfminer"`` when pypdf could not open the file).

    Raises:
        DocumentError: ``empty_file``, ``pdf_encrypted``, ``pdf_unreadable`` or ``no_text_layer``.
        TooLarge: a decompression limit was hit, or more than :data:`MAX_PAGES` pages.
    """
    if not data:
        raise DocumentError("The file is empty (0 bytes); upload a file with content.", code="empty_file")
    reader = _open_pypdf(data)
    if reader is not None:
        pages, title_meta, outline = _read_with_pypdf(reader, data)
    else:
        pages, title_meta, outline = _read_with_pdfminer(data), "", []
    return _build(pages, title_meta, outline, filename)


# ---------------------------------------------------------------- opening


def check_opens(data: bytes) -> None:
    """Open the PDF as :func:`parse_pdf` would (its cross-reference table and encryption, no page
    content): a cheap look for ``ingest --dry-run``.

    Raises:
        DocumentError: ``empty_file`` or ``pdf_encrypted`` (a password is needed).
        TooLarge: a decompression limit was hit.
    """
    _open_pypdf(data)


def _open_pypdf(data: bytes):
    """A decrypted pypdf reader, or ``None`` when pypdf cannot read the file at all."""
    import pypdf
    from pypdf.errors import DependencyError, EmptyFileError, LimitReachedError

    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        encrypted = reader.is_encrypted
    except EmptyFileError as exc:
        raise DocumentError("The file is empty (0 bytes); upload a file with content.", code="empty_file") from exc
    except LimitReachedError as exc:
        raise _too_large() from exc
    except (DependencyError, NotImplementedError) as exc:
        raise _encrypted(unsupported=True) from exc
    except (MemoryError, TooLarge):
        raise
    except Exception as exc:  # noqa: BLE001 - any pypdf failure means: try the fallback parser
        log.info("pypdf could not open the PDF (%s); trying pdfminer.six", type(exc).__name__)
        return None
    if encrypted:
        try:
            ok = reader.decrypt("")
        except (DependencyError, NotImplementedError) as exc:
            raise _encrypted(unsupported=True) from exc
        except Exception as exc:  # noqa: BLE001
            raise _encrypted() from exc
        if not ok:
            raise _encrypted()
    return reader


def _encrypted(unsupported: bool = False) -> DocumentError:
    if unsupported:
        return DocumentError(
            "The PDF uses an encryption method DocAnchor cannot open; save an unencrypted copy and upload that.",
            code="pdf_encrypted",
        )
    return DocumentError(
        "The PDF is protected by a password; remove the password (for example print or export it to a new PDF) "
        "and upload it again.",
        code="pdf_encrypted",
    )


def _too_large() -> TooLarge:
    return TooLarge(
        "The PDF expands to more data than DocAnchor accepts (a compressed stream is too large, as in a "
        "decompression bomb); upload a smaller or uncompressed file.",
        code="too_large",
    )


def _unreadable() -> DocumentError:
    return DocumentError(
        "The file could not be read as a PDF (it is damaged or not a PDF); re-export it from its source "
        "application and upload it again.",
        code="pdf_unreadable",
    )


# ---------------------------------------------------------------- pypdf path


def _read_with_pypdf(reader, data: bytes) -> tuple[list[_Page], str, list[tuple[int, str, int]]]:
    from pypdf.errors import LimitReachedError

    try:
        n_pages = len(reader.pages)
    except LimitReachedError as exc:
        raise _too_large() from exc
    except (MemoryError, TooLarge):
        raise
    except Exception as exc:  # noqa: BLE001 - page tree unreadable: fall back to pdfminer
        log.info("pypdf could not read the page tree (%s); trying pdfminer.six", type(exc).__name__)
        return _read_with_pdfminer(data), "", []
    if n_pages > MAX_PAGES:
        raise TooLarge(f"The PDF has {n_pages:,} pages; DocAnchor reads at most {MAX_PAGES:,}: split it and upload the parts.", code="too_large")
    if n_pages == 0:
        return _read_with_pdfminer(data), _meta_title(reader), []

    pages: list[_Page] = []
    total = 0
    outline = _outline(reader)
    metrics: dict = {}  # font metrics by object number, shared by the pages (walk_page)
    for i in range(n_pages):
        page = _Page(i + 1)
        try:
            _extract_page(reader, reader.pages[i], page, styles=not outline, metrics=metrics)
        except LimitReachedError as exc:
            raise _too_large() from exc
        except (MemoryError, TooLarge):
            raise
        except RecursionError:
            page.notes.append("unreadable")
        except Exception as exc:  # noqa: BLE001 - one bad page must not sink the document
            log.info("pypdf failed on page %d (%s)", i + 1, type(exc).__name__)
            page.notes.append("unreadable")
        total += len(page.text) + len(page.hidden)
        if total > MAX_TEXT_CHARS:
            raise TooLarge(f"The PDF holds more than {MAX_TEXT_CHARS:,} characters of text; split it into parts.")
        _judge(page)
        if page.glued and not page.hidden_ops:
            _try_layout(reader.pages[i], page)
        pages.append(page)

    _repair_with_pdfminer(data, pages)
    _read_tables(data, pages)
    _join_split_words(data, pages)
    return pages, _meta_title(reader), outline


def _extract_page(reader, pobj, page: _Page, styles: bool = False, metrics: dict | None = None) -> None:
    """Fill ``page.text`` (visible) and ``page.hidden`` from one pypdf page
    (:mod:`ingest.parsers.pdf_visibility` judges each draw, :mod:`ingest.parsers.pdf_extract`
    extracts the chosen ones), and with ``styles`` its larger and bold lines. ``metrics``:
    the document's font metrics cache (see :func:`ingest.parsers.pdf_visibility.walk_page`)."""
    page.has_image = _has_image(pobj)
    content = _operations(reader, pobj)
    if content is None:
        return
    ink = walk_page(reader, pobj, *content, metrics=metrics)
    _page_text(reader, pobj, ink, page)
    if styles:
        page.styled = styled_lines(reader, pobj, ink, page.text)


def _page_text(reader, pobj, ink, page: _Page) -> None:
    """Fill ``page.text`` and ``page.hidden`` from the walked page ``ink``."""
    name_symbol_glyphs(list(ink.fonts.values()))
    hidden = [s for s in ink.shows if s.hidden]
    repeated = [s for s in ink.shows if s.duplicate and not s.hidden]
    vertical = [s for s in ink.shows if s.vertical and s.stream == 0 and not s.hidden and not s.duplicate]
    marks = footnote_marks(ink)
    page.marks = len(marks)
    if not hidden and not repeated and not vertical:
        page.text = text_without(reader, pobj, ink, marks)
        _glyph_names(page, ink)
        return
    page.text = text_without(reader, pobj, ink, marks | {(s.stream, s.index) for s in hidden + repeated + vertical})
    if vertical:
        page.text = "\n".join(t for t in (page.text.strip("\n"), vertical_text(reader, pobj, ink, vertical)) if t)
    if hidden:
        page.hidden_ops = len(hidden)
        page.hidden = text_without(reader, pobj, ink, only(ink, hidden))
    _glyph_names(page, ink)


def _glyph_names(page: _Page, ink) -> None:
    """Note what the page's private-use characters and raw glyph names stand for."""
    text = page.text + page.hidden
    if _PRIVATE.search(text) or "/" in text:
        page.glyph_map = private_use_letters(list(ink.fonts.values()))


def _operations(reader, pobj) -> tuple[list, bytes] | None:
    """The page's content operators and bytes
    (:func:`ingest.parsers.pdf_visibility.content_operations`), or ``None`` for a page without
    content."""
    from pypdf.generic import ArrayObject, StreamObject

    if pobj.get("/Contents") is None:
        return None
    obj = pobj["/Contents"].get_object()
    if not isinstance(obj, (ArrayObject, StreamObject)):
        return None
    return content_operations(obj, reader)


def _has_image(pobj) -> bool:
    try:
        xobjects = pobj.get("/Resources", {}).get_object().get("/XObject", {}).get_object()
        return any(x.get_object().get("/Subtype") == "/Image" for x in xobjects.values())
    except Exception:  # noqa: BLE001 - a damaged resource dictionary just means "no image found"
        return False



# ---------------------------------------------------------------- quality


def _script(ch: str) -> str:
    try:
        word = unicodedata.name(ch).split()[0]
    except ValueError:
        return "UNNAMED"
    if word in _CJK_FAMILY:
        return "CJK"
    return word


def garbled_reason(text: str) -> str:
    """Why ``text`` looks like undecoded glyph codes, or ``""`` when it looks like real text.

    Suspicious characters: unassigned code points, pdfminer ``(cid:N)`` codes, and characters
    of whitespace-separated runs whose letters come from two or more different non-Latin
    scripts (Chinese, Japanese and Korean count as one family; Latin, digits and symbols
    mix with anything). Garbled when they are at least :data:`GARBLED_SHARE` of the
    non-space characters, or at least :data:`GARBLED_MIN_CHARS` making
    :data:`GARBLED_MIN_SHARE`.
    """
    cids = _CID.findall(text)
    stripped = _CID.sub("", text)
    nonspace = sum(1 for c in stripped if not c.isspace()) + len(cids)
    if nonspace < MIN_LETTERS_FOR_QUALITY:
        return "" if not cids else "unmapped glyph codes (cid)"
    unassigned = sum(1 for c in stripped if unicodedata.category(c) == "Cn")
    mixed = 0
    page_scripts: set[str] = set()
    scripted = 0  # characters of letters in a non-Latin, non-CJK script
    for run in stripped.split():
        scripts = set()
        for c in run:
            cat = unicodedata.category(c)
            if cat[0] in "LN" and not c.isascii():
                s = _script(c)
                if s not in _NEUTRAL_SCRIPTS:
                    scripts.add(s)
                    if s != "CJK":
                        scripted += 1
        page_scripts |= scripts
        if len(scripts) >= 2:
            mixed += len(run)
    if mixed and len(page_scripts - {"CJK"}) >= MANY_SCRIPTS:
        mixed = max(mixed, scripted)
    if len(cids) / nonspace >= GARBLED_SHARE:
        return "unmapped glyph codes (cid)"
    bad = mixed + unassigned
    if bad / nonspace >= GARBLED_SHARE or (bad >= GARBLED_MIN_CHARS and bad / nonspace >= GARBLED_MIN_SHARE):
        if unassigned > mixed:
            return "unassigned code points (font without a Unicode map)"
        return "runs of unrelated scripts (font without a Unicode map)"
    return ""


def is_glued(text: str) -> bool:
    """True when at least :data:`GLUED_SHARE` of the Latin letters sit in runs of
    :data:`GLUED_RUN_CHARS` or more letters (words run together without spaces), and there are
    at least :data:`GLUED_MIN_RUNS` such runs (one or two long compounds are German, not glue)."""
    runs = [len(r) for r in _LATIN_RUN.findall(text)]
    letters = sum(runs)
    long_runs = [n for n in runs if n >= GLUED_RUN_CHARS]
    if letters < MIN_LETTERS_FOR_QUALITY or len(long_runs) < GLUED_MIN_RUNS:
        return False
    return sum(long_runs) / letters >= GLUED_SHARE


def _letters(text: str) -> int:
    return sum(1 for c in text if c.isalnum())


def _judge(page: _Page) -> None:
    page.garbled_reason = garbled_reason(page.text)
    page.glued = not page.garbled_reason and is_glued(page.text)


# ---------------------------------------------------------------- pdfminer


def _pdfminer_pages(data: bytes, wanted: set[int] | None) -> dict[int, str]:
    """Page number (1-based) -> text, by pdfminer.six, for ``wanted`` pages (all when None)."""
    return dict(_pdfminer_iter(data, wanted))


def _pdfminer_iter(data: bytes, wanted: set[int] | None):
    """Yield ``(page number, text)`` by pdfminer.six (:func:`ingest.parsers.pdf_miner.pages`)."""
    try:
        yield from pdf_miner.pages(data, wanted, max_pages=MAX_PAGES)
    except pdf_miner.TooManyPages as exc:
        raise _too_many_pages() from exc


def _read_with_pdfminer(data: bytes) -> list[_Page]:
    """The whole document by pdfminer.six (pypdf could not open it)."""
    try:
        from pdfminer.pdfdocument import PDFPasswordIncorrect
    except ImportError:  # pragma: no cover - declared dependency
        raise _unreadable() from None
    try:
        texts = _pdfminer_pages(data, None)
    except PDFPasswordIncorrect as exc:
        raise _encrypted() from exc
    except (MemoryError, TooLarge):
        raise
    except Exception as exc:  # noqa: BLE001 - RecursionError, PDFSyntaxError, ...: both parsers failed
        raise _unreadable() from exc
    if not texts:
        raise _unreadable()
    pages = []
    for number in sorted(texts):
        page = _Page(number, text=texts[number], source="pdfminer-only")
        _judge(page)
        pages.append(page)
    return pages


def _repair_with_pdfminer(data: bytes, pages: list[_Page]) -> None:
    """Re-read glued, garbled or unreadable pages: layout mode first (glued), then pdfminer."""
    need = {p.number for p in pages if p.garbled_reason or p.glued or "unreadable" in p.notes}
    if not need:
        return
    try:
        alt = _pdfminer_pages(data, need)
    except (MemoryError, TooLarge):
        raise
    except Exception as exc:  # noqa: BLE001 - the fallback failing leaves the pages as they are
        log.info("pdfminer.six could not re-read pages (%s)", type(exc).__name__)
        alt = {}
    for page in pages:
        if page.number not in need or page.number not in alt:
            continue
        text = _drop_hidden_lines(alt[page.number], page.hidden)
        if garbled_reason(text) or is_glued(text):
            continue
        if not page.garbled_reason and _letters(text) < 0.9 * _letters(page.text):
            continue  # pdfminer lost text (e.g. a glued page): keep pypdf's
        page.text, page.source = text, "pdfminer"
        page.garbled_reason, page.glued = "", False
        if "unreadable" in page.notes:
            page.notes.remove("unreadable")


def _read_tables(data: bytes, pages: list[_Page]) -> None:
    """Mark the table pages (:func:`ingest.parsers.pdf_table.is_table_page`) and read their
    cells by pdfplumber (:func:`_read_cells`); the others are re-read by pdfminer one row per
    line (:func:`ingest.parsers.pdf_miner.rows`), and the rows replace the page's text when
    they separate cells and lose nothing (:func:`ingest.parsers.pdf_table.separates_cells`). A
    failure of either leaves the text."""
    for page in pages:
        page.table = not page.garbled_reason and is_table_page(page.text)
    need = {p.number for p in pages if p.table}
    if not need:
        return
    by_number = {p.number: p for p in pages}
    need -= _read_cells(data, by_number, need)
    if not need:
        return
    try:
        for number, text in pdf_miner.rows(data, need, max_pages=MAX_PAGES):
            page = by_number[number]
            text = _drop_hidden_lines(text, page.hidden)
            if separates_cells(page.text, text):
                page.text, page.source = text, "pdfminer"
    except pdf_miner.TooManyPages as exc:
        raise _too_many_pages() from exc
    except (MemoryError, TooLarge):
        raise
    except Exception as exc:  # noqa: BLE001 - the second reading failing leaves pypdf's text
        log.info("pdfminer.six could not re-read table pages (%s)", type(exc).__name__)


def _too_many_pages() -> TooLarge:
    return TooLarge(f"The PDF has more than {MAX_PAGES:,} pages; DocAnchor reads at most {MAX_PAGES:,}: split it and upload the parts.")


def _read_cells(data: bytes, by_number: dict[int, _Page], need: set[int]) -> set[int]:
    """Read the table pages' cells by pdfplumber (:func:`ingest.parsers.pdf_cells.tables`); a
    page whose table labels its rows (:func:`ingest.parsers.pdf_table.labelled_table`) and
    loses no digit of its text gets ``cells`` and that text (the labels add letters; lines
    pypdf found hidden are left out of the lines around the table). Returns the numbers of
    those pages; a failure leaves the text."""
    done: set[int] = set()
    try:
        for number, found in pdf_cells.tables(data, need, max_pages=MAX_PAGES):
            page = by_number[number]
            table = labelled_table(found.rows)
            if table is None:
                continue
            before = _drop_hidden_lines("\n".join([*found.above, *table[0]]), page.hidden).splitlines()
            after = _drop_hidden_lines("\n".join([*table[2], *found.below]), page.hidden).splitlines()
            text = "\n".join([*before, *table[1], *after])
            if _digits(text) >= _digits(page.text):
                page.cells = before, table[1], after
                page.text, page.source = text, "pdfplumber"
                done.add(number)
    except pdf_miner.TooManyPages as exc:
        raise _too_many_pages() from exc
    except (MemoryError, TooLarge):
        raise
    except Exception as exc:  # noqa: BLE001 - the cell reading failing leaves the page to pdfminer's rows
        log.info("pdfplumber could not read table pages' cells (%s)", type(exc).__name__)
    return done


def _digits(text: str) -> int:
    return sum(1 for c in text if c.isdigit())


def _join_split_words(data: bytes, pages: list[_Page]) -> None:
    """Re-join pypdf's line-end split words on its own pages, confirmed by pdfminer's words.

    Candidate pages (:func:`ingest.parsers.pdf_split.has_candidates`, text from pypdf, not
    garbled) are read by pdfminer one at a time in page order; reading stops after
    :data:`SPLIT_PROBE_PAGES` of them when none gave a join. ``page.text`` keeps its lines
    (see :func:`ingest.parsers.pdf_split.join_confirmed`) and ``page.joined`` counts the joins.
    A pdfminer failure leaves the remaining pages as they are.
    """
    need = {p.number for p in pages
            if p.source == "pypdf" and not p.garbled_reason and has_candidates(p.text)}
    if not need:
        return
    by_number = {p.number: p for p in pages}
    read = 0
    try:
        for number, alt in _pdfminer_iter(data, need):
            page = by_number[number]
            page.text, page.joined = join_confirmed(page.text, _drop_hidden_lines(alt, page.hidden))
            read += 1
            if read >= SPLIT_PROBE_PAGES and not any(p.joined for p in pages):
                break
    except (MemoryError, TooLarge):
        raise
    except Exception as exc:  # noqa: BLE001 - the check failing leaves the words as pypdf split them
        log.info("pdfminer.six could not re-read split-word pages (%s)", type(exc).__name__)


def _drop_hidden_lines(text: str, hidden: str) -> str:
    """Remove from pdfminer's text the lines pypdf found hidden (pdfminer cannot tell)."""
    if not hidden.strip():
        return text
    gone = {" ".join(line.split()) for line in hidden.splitlines() if line.strip()}
    return "\n".join(line for line in text.splitlines() if " ".join(line.split()) not in gone)


# ---------------------------------------------------------------- glued: layout mode


def _try_layout(pobj, page: _Page) -> None:
    """Replace a glued page by pypdf's layout-mode text when that un-glues it and loses nothing."""
    try:
        text = pobj.extract_text(extraction_mode="layout") or ""
    except Exception:  # noqa: BLE001 - layout mode is an optional second try
        return
    if not is_glued(text) and _letters(text) >= _letters(page.text):
        page.text, page.glued, page.source = text, False, "pypdf-layout"


# ---------------------------------------------------------------- metadata and outline


def _meta_title(reader) -> str:
    try:
        meta = reader.metadata
        title = str(meta.title) if meta and meta.title else ""
    except Exception:  # noqa: BLE001 - damaged metadata is simply absent
        return ""
    return metadata_title(title)


def _outline(reader) -> list[tuple[int, str, int]]:
    """Flattened outline: ``(page number, title, level)`` in outline order, cut at
    :data:`MAX_OUTLINE_ITEMS` entries and level 6."""
    out: list[tuple[int, str, int]] = []
    try:
        root = reader.outline
    except Exception:  # noqa: BLE001 - a broken outline means no headings, not a failed parse
        return out

    def walk(items, level: int) -> None:
        for item in items:
            if len(out) >= MAX_OUTLINE_ITEMS:
                return
            if isinstance(item, list):
                if level < 6:
                    walk(item, level + 1)
                continue
            try:
                number = reader.get_destination_page_number(item)
                title = str(item.title or "")
            except Exception:  # noqa: BLE001
                continue
            if number is not None and number >= 0 and title.strip():
                out.append((number + 1, title, level))

    try:
        walk(root, 1)
    except RecursionError:
        pass
    return out


# ---------------------------------------------------------------- building


def _paragraphs(text: str, styled: list[StyledLine] = ()) -> list[str]:
    """Split one page's text into paragraphs.

    A paragraph ends at a blank line, or after a line that is clearly shorter than the page's
    typical line (under 80 % of the median length) and ends in sentence punctuation; a very short
    line without closing punctuation (under 50 %, e.g. "Abstract"; one ending in a Chinese or
    Japanese character may be a wrap anywhere and does not, :data:`docanchor.text.NO_SPACE`; a
    Korean one does: "적립 제외 대상" before its list) stands alone, and so does a
    line of a heading's form under :data:`ingest.parsers.pdf_outline.HEADING_LINE_SHARE` of the
    median ("5 Experiments: Passage Retrieval", :func:`ingest.parsers.pdf_outline.heading_form`). Lines of a
    paragraph are joined with a space (none between Chinese or Japanese characters,
    :func:`docanchor.text.joins_tight`; Korean keeps its word gaps); a lowercase word
    split by a hyphen at a line end is rejoined, and a hyphen before a capital or digit is kept
    without a space ("Lucene-BM25").

    A line that is a whole ``styled`` line (:func:`ingest.parsers.pdf_outline.styled_lines`) and
    may be a heading (:func:`ingest.parsers.pdf_outline.short_line`) stands alone too; the next
    line joins it when that is a styled line of the same level, font and size
    (:func:`ingest.parsers.pdf_outline.wraps`): a heading wrapped over two lines (dmca.pdf's
    "... Transfers of Rights in" / "Motion Pictures", "... Develop-" / "ment"). Only runs of at
    most :data:`MAX_HEADING_LINES` styled lines count (:func:`_heading_lines`).
    """
    raw = text.split("\n")
    lines = [ln.rstrip() for ln in raw]
    lengths = sorted(len(ln.strip()) for ln in lines if ln.strip())
    if not lengths:
        return []
    median = lengths[len(lengths) // 2]
    marks = _heading_lines(lines, styled)
    wrapped = _wrapped_blanks(lines)
    paras: list[str] = []
    current = ""
    head = None  # the styled line that is ``current`` and may go on to the next line
    for i, (ln, styled_line) in enumerate(zip(lines, marks)):
        s, after_space = ln.strip(), i > 0 and raw[i - 1][-1:].isspace()
        if i in wrapped:
            continue
        if head is not None:
            if styled_line is not None and wraps(head, styled_line):
                paras.append(_join(current, s))
                current, head = "", None
                continue
            paras.append(current)
            current, head = "", None
        if styled_line is not None and short_line(s):
            if current:
                paras.append(current)
            current, head = s, styled_line
            continue
        if not s:
            if current:
                paras.append(current)
                current = ""
            continue
        if _own_line(s, median, bool(current) and after_space):
            if current:
                paras.append(current)
            paras.append(s)
            current = ""
            continue
        current = _join(current, s)
        if (len(s) < 0.8 * median and s.endswith(_TERMINAL)) or len(current) > 2000:
            paras.append(current)
            current = ""
    if current:
        paras.append(current)
    return paras


WRAP_LINE_SHARE = 0.8
"""Share of the width of a page's widest line from which a Chinese or Japanese line that a blank
line follows is read as wrapped (:func:`_wrapped_blanks`); widths in columns, a full-width
character two (Unicode East Asian Width W or F). Source: nlp2004slides.pdf, whose wrapped slide
lines ("• 頻度 (DF) の少ない単語がすべて固", 37 columns of the page's 40) are full, and whose chart
labels ("頻度", "固有表現の", against an axis line of 60 and more) and headings are not."""


def _width(line: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def _wrapped_blanks(lines: list[str]) -> set[int]:
    """Indices of the single blank lines in ``lines`` that sit inside a wrapped Chinese or
    Japanese line: the line before is at least :data:`WRAP_LINE_SHARE` of the widest line's width
    wide, and no narrower than the line after (a wrapped line is a full one), and ends in a
    Chinese or Japanese letter (no stop, no punctuation), and the line after starts with one.
    pdfminer.six sets each line of widely spaced slides in a text box of its own, with a blank
    line between boxes (nlp2004slides.pdf: "...すべて固" / "" / "有表現であるとは限らない。", a word
    cut by a paragraph break)."""
    out: set[int] = set()
    widest = max((_width(ln.strip()) for ln in lines), default=0)
    for i in range(1, len(lines) - 1):
        before, after = lines[i - 1].strip(), lines[i + 1].strip()
        if lines[i].strip() or not before or not after:
            continue
        if not (_NO_SPACE_LETTER.match(before[-1]) and _NO_SPACE_LETTER.match(after[0])):
            continue
        if _width(before) >= max(WRAP_LINE_SHARE * widest, _width(after)):
            out.add(i)
    return out


def _unwrapped(text: str) -> str:
    """``text`` with each Chinese or Japanese line wrapped over a blank line
    (:func:`_wrapped_blanks`) joined to the line after it, with no space (nlp2004slides.pdf's
    title "コンパラブルな新聞記事からの" / "" / "固有表現の発見")."""
    lines = text.split("\n")
    wrapped = _wrapped_blanks(lines)
    if not wrapped:
        return text
    out: list[str] = []
    for i, line in enumerate(lines):
        if i - 1 in wrapped:
            out[-1] = out[-1].rstrip() + line.strip()
        elif i not in wrapped:
            out.append(line)
    return "\n".join(out)


def _own_line(s: str, median: int, goes_on: bool) -> bool:
    """Whether the stripped line ``s`` is a paragraph of its own (:func:`_paragraphs`): a heading's
    form ("5 Experiments: Passage Retrieval"), or a short line (under half the ``median`` line
    length, in characters) without closing punctuation ("Abstract", "적립 제외 대상") that does
    not end in a Chinese or Japanese character (such text wraps anywhere), nor, ending in Hangul,
    is one the line before runs on into (``goes_on``: that line ended in a space, the word gap
    Korean wraps at, "높은 적립률의  " / "포인트 적립" in korean-text-with-tables.pdf)."""
    if len(s) < HEADING_LINE_SHARE * median and heading_form(s):
        return True
    if len(s) >= 0.5 * median or s.endswith(_TERMINAL + (",", "-")) or _NO_SPACE_CHAR.search(s[-1:]):
        return False
    return not (goes_on and _HANGUL.search(s[-1:]))


def _page_paragraphs(text: str, page: _Page) -> list[str]:
    """The paragraphs of a page's ``text`` (:func:`_paragraphs`). On a table page: its table
    (:func:`ingest.parsers.pdf_table.table_span`) as one paragraph of lines, one row each, and
    each other line a paragraph of its own (runs of spaces made one)."""
    if not page.table:
        return _paragraphs(text, page.styled)
    if page.cells:
        before, labelled, after = page.cells
        return [*before, "\n".join(labelled), *after]
    lines = [" ".join(line.split()) for line in text.split("\n") if line.strip()]
    span = table_span(lines)
    if span is None:
        return lines
    start, end = span
    return [*lines[:start], "\n".join(lines[start:end]), *lines[end:]]


def _heading_lines(lines: list[str], styled: list[StyledLine]) -> list[StyledLine | None]:
    """For each of a page's lines, the styled line it is whole, or ``None``; ``None`` for all
    lines of a run of more than :data:`MAX_HEADING_LINES` successive styled lines of one level
    (styled prose: multi-column.pdf page 13 sets its last paragraph larger than the table
    that fills the page)."""
    heads: dict[str, StyledLine] = {}
    for line in styled:
        heads.setdefault(styled_key(line.text), line)
    marks = [heads.get(styled_key(ln)) if ln.strip() else None for ln in lines]
    start = 0
    for i in range(1, len(marks) + 1):
        if i < len(marks) and marks[i] and marks[i - 1] and marks[i].level == marks[i - 1].level:
            continue
        if i - start > MAX_HEADING_LINES:
            marks[start:i] = [None] * (i - start)
        start = i
    return marks


def _join(left: str, right: str) -> str:
    if not left:
        return right
    if re.search(r"[a-z]-$", left) and right[:1].islower():
        return left[:-1] + right
    if re.search(r"\w-$", left) and right[:1].isalnum():  # "Lucene-" + "BM25": a compound, no space
        return left + right
    if joins_tight(left, right):
        return left + right
    return left + " " + right


def _clean(text: str) -> tuple[str, int]:
    """Drop private-use characters; return the text and how many were dropped."""
    n = 0
    out = []
    for c in text:
        if unicodedata.category(c) == "Co":
            n += 1
        else:
            out.append(c)
    return "".join(out), n


def _title(title_meta: str, pages: list[_Page], filename: str | None) -> str:
    """Metadata title, else a first line (:mod:`ingest.parsers.pdf_title`; a Chinese or Japanese
    line wrapped over a blank line is one, :func:`_unwrapped`), else the file name's stem; pages whose first line is unmapped glyphs get their ``quality`` note."""
    candidates = [(p.number, "" if p.garbled_reason else _unwrapped(p.text)) for p in pages]
    line, doubtful = first_line_title(candidates)
    for page in pages:
        if page.number in doubtful and not page.quality:
            page.quality = doubtful[page.number]
    stem = PurePath(filename).stem if filename else ""
    return title_meta or line or stem or "Untitled PDF"


def _restore_letters(page: _Page, accent_side: str) -> None:
    """Put back letters behind private-use characters and glyph names, compose spacing
    diacritics with their letter (on ``accent_side``, see
    :func:`ingest.normalise.spacing_accent_side`), and note letters that are still missing."""
    page.text = compose_spacing_diacritics(_apply_glyphs(page.text, page.glyph_map), accent_side)
    page.hidden = compose_spacing_diacritics(_apply_glyphs(page.hidden, page.glyph_map), accent_side)
    lost = len(_LOST_LETTER.findall(page.text))
    if lost:
        page.quality = (f"{lost} letter(s) missing: ligature glyphs mapped to private-use code points "
                        "that name no letters")


def _apply_glyphs(text: str, glyph_map: dict[str, str]) -> str:
    if not glyph_map or not text:
        return text
    pattern = re.compile("|".join(re.escape(k) for k in sorted(glyph_map, key=len, reverse=True)))
    return pattern.sub(lambda m: glyph_map[m.group()], text)


def _build(pages: list[_Page], title_meta: str, outline: list[tuple[int, str, int]], filename: str | None) -> ParsedDocument:
    n_pages = len(pages)
    if not any(p.text.strip() or p.hidden.strip() for p in pages):
        if not pages:
            raise _unreadable()
        raise DocumentError(
            f"The PDF's {n_pages} page(s) are scanned images without a text layer; DocAnchor reads them by OCR "
            "unless DOCANCHOR_OCR=off (or run OCR elsewhere, for example with ocrmypdf, and upload the result).",
            code="no_text_layer",
            n_pages=n_pages,
        )

    side = spacing_accent_side("\n".join(p.text for p in pages))
    for page in pages:
        _restore_letters(page, side)
    builder = DocumentBuilder("pdf", title=_title(title_meta, pages, filename))
    image_only = [p.number for p in pages if p.has_image and not p.text.strip() and not p.hidden.strip()]
    running = _strip_running(pages)
    if not outline:  # no bookmarks: headings from numbering and typography, found in the text
        outline = typographic_outline([(p.number, _page_paragraphs(_clean(p.text)[0], p), p.styled)
                                       for p in pages if not p.garbled_reason])
    by_page: dict[int, list[tuple[str, int]]] = {}
    for number, htitle, level in outline:
        by_page.setdefault(number, []).append((htitle, level))
    private = sum(_add_page(builder, page, by_page.get(page.number, [])) for page in pages)
    builder.flags.update(_page_flags(pages))
    if private:
        builder.flags["private_use_chars"] = private
    if pages[0].source == "pdfminer-only":
        builder.flags["parser"] = "pdfminer"
    if image_only:
        builder.flags["image_only_pages"] = image_only  # scanned pages among text pages: OCR reads them (ingest.scanned)
    if running:
        builder.flags["running_headers"] = running
    parsed = builder.build(n_pages=n_pages)
    if len(parsed.flags.get("garbled_pages", [])) == n_pages:
        parsed.flags["error_code"] = "text_quality"
    return parsed


def _add_page(builder: DocumentBuilder, page: _Page, headings: list[tuple[str, int]]) -> int:
    """Add one page's paragraphs (outline headings placed where their title starts a
    paragraph) and its hidden text; return the private-use characters dropped."""
    text, private = _clean(page.text)
    flags: tuple[str, ...] = ("garbled",) if page.garbled_reason else ()
    paras = _page_paragraphs(text, page)
    for htitle, level in headings:
        found = _find_heading(paras, htitle) if not flags else None
        if found is not None:
            idx, rest = found
            for p in paras[:idx]:
                _add_paragraph(builder, p, page, flags)
            paras = ([rest] if rest else []) + paras[idx + 1 :]
        builder.heading(htitle, level=level, page=page.number)
    for p in paras:
        _add_paragraph(builder, p, page, flags)
    if page.hidden.strip():
        hidden, n = _clean(page.hidden)
        private += n
        for p in _paragraphs(hidden):
            builder.add(p, page=page.number, flags=("hidden_text",))
    return private


def _add_paragraph(builder: DocumentBuilder, text: str, page: _Page, flags: tuple[str, ...]) -> None:
    """Add a paragraph of :func:`_page_paragraphs`; a table page's table (its only paragraph of
    several lines) is a ``table`` block that keeps its lines."""
    if page.cells and "\n" in text:
        for row in text.split("\n"):
            builder.add(row, kind="row", page=page.number, flags=flags)
    elif page.table and "\n" in text:
        builder.add(text, kind="table", page=page.number, flags=flags, raw=True)
    else:
        builder.add(text, page=page.number, flags=flags)


def _page_flags(pages: list[_Page]) -> dict:
    """The document flags that list pages: garbled, glued, hidden text, text quality, table
    pages, pages read by pdfminer, unreadable pages, split words joined, footnote marks."""
    flags: dict = {}
    garbled = [p for p in pages if p.garbled_reason]
    if garbled:
        flags["garbled_pages"] = [p.number for p in garbled]
        flags["garbled_reasons"] = {str(p.number): p.garbled_reason for p in garbled}
    if any(p.glued for p in pages):
        flags["glued_pages"] = [p.number for p in pages if p.glued]
    hidden = [p for p in pages if p.hidden.strip()]
    if hidden:
        flags["hidden_text"] = {"pages": [p.number for p in hidden], "count": sum(p.hidden_ops for p in hidden)}
    doubtful = [p for p in pages if p.quality]
    if doubtful:
        flags["text_quality"] = {"pages": [p.number for p in doubtful],
                                 "reasons": {str(p.number): p.quality for p in doubtful}}
    if any(p.table for p in pages):
        flags["table_pages"] = [p.number for p in pages if p.table]
    if any(p.source == "pdfminer" for p in pages):
        flags["pages_from_pdfminer"] = [p.number for p in pages if p.source == "pdfminer"]
    if any("unreadable" in p.notes for p in pages):
        flags["unreadable_pages"] = [p.number for p in pages if "unreadable" in p.notes]
    marked = [p for p in pages if p.marks]
    if marked:
        flags["footnote_marks"] = {"pages": [p.number for p in marked], "count": sum(p.marks for p in marked)}
    joined = [p for p in pages if p.joined]
    if joined:
        flags["split_words_joined"] = {"pages": [p.number for p in joined], "count": sum(p.joined for p in joined)}
    return flags


def _strip_running(pages: list[_Page]) -> dict:
    """Remove running headers and footers from the pages' visible text, in place (hidden text
    is left alone); return the ``running_headers`` flag, or ``{}`` when nothing was removed."""
    texts, removed = strip_running_lines([p.text for p in pages])
    if not removed.count:
        return {}
    for page, text in zip(pages, texts):
        page.text = text
    return removed.as_flag()


def _find_heading(paras: list[str], title: str) -> tuple[int, str] | None:
    """``(index, rest)`` of the paragraph that starts with the outline title (``rest`` is what
    follows the title in it), or ``None`` when the title is not at a paragraph start."""
    want = " ".join(title.split())
    if not want:
        return None
    for i, p in enumerate(paras[:60]):
        got = " ".join(p.split())
        if got.casefold().startswith(want.casefold()):
            return i, got[len(want):].strip()
    return None
