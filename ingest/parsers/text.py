"""Plain text and Markdown: charset detection, then blocks that are spans of the whole text.

The parsed text is :func:`ingest.normalise.normalise` of the whole decoded file (no whitespace
tidying), so for a UTF-8 file already in NFKC form with LF line ends, offsets into the parsed
text are offsets into the file's characters; otherwise ``source_runs`` maps them back
(:mod:`docanchor.offsets`). Blocks are built here directly (not with
:class:`ingest.builder.DocumentBuilder`, which inserts separators).

Markdown structure follows CommonMark 0.31 where it matters for retrieval: ATX headings
(``#`` to ``######``), setext headings (``===`` / ``---`` under a paragraph), fenced code
blocks (`````` ``` `````` or ``~~~``; a ``#`` inside a fence is not a heading), and GitHub
Flavored Markdown tables (a header row, then a delimiter row such as ``|---|:--:|``; the table
runs to the next blank line and may follow a paragraph's last line directly). A table is one
``table`` block however long, so the chunker can give its later chunks the header row as
context (:mod:`ingest.row_context`).
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import PurePath

from docanchor.errors import DocumentError
from docanchor.offsets import Runs
from docanchor.types import Block, ParsedDocument
from ingest.normalise import normalise_runs
from ingest.titles import chapter_line, plain_text_title

SOFT_BLOCK_CHARS = 1000
"""A blank-line paragraph longer than this many characters is split at a line end that closes
a sentence (or at :data:`HARD_BLOCK_CHARS`), so line-wrapped text without blank lines still has
structure. Characters, not tokens; the chunker enforces token limits."""

HARD_BLOCK_CHARS = 2000

SHORT_AMBIGUOUS_BYTES = 256
"""At most this many non-ASCII bytes: short enough that a statistical detector may read Latin-1
as a CJK double-byte encoding (e.g. ``k\\xf6nnen`` is valid GB18030)."""

_BOMS = (
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)
_CJK_ENCODINGS = ("gb", "big5", "shift_jis", "cp932", "euc", "iso2022", "cp949", "johab", "hz", "cp950")
_LATIN_PUNCT = set("€‚ƒ„…†‡ˆ‰‹Œ‘’“”•–—˜™›œ¡¢£¤¥¦§¨©ª«¬®¯°±²³´µ¶·¸¹º»¼½¾¿×÷")
_SENTENCE_END = tuple(".!?:;。！？；…\"'”’)]")


# --------------------------------------------------------------------------- decoding


def decode_text(data: bytes) -> tuple[str, str]:
    """Decode bytes of unknown encoding.

    Order: a byte-order mark (:func:`_decode_by_bom`); strict UTF-8; otherwise charset-normalizer's
    best guess, except that short, mostly-ASCII input whose guess is a CJK double-byte encoding is
    read as Windows-1252 when that gives only Latin letters and punctuation.

    Returns:
        ``(text, encoding_name)``.

    Raises:
        DocumentError: ``malformed`` when no encoding fits, or when the bytes are not valid in
            the encoding their byte-order mark declares.
    """
    by_bom = _decode_by_bom(data)
    if by_bom is not None:
        return by_bom
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass

    from charset_normalizer import from_bytes

    matches = from_bytes(data)
    best = _prefer_cp1252(matches, matches.best())
    guess = best.encoding if best is not None else None
    non_ascii = sum(1 for b in data if b >= 0x80) if len(data) < 65536 else SHORT_AMBIGUOUS_BYTES + 1
    if (guess is None or guess.lower().startswith(_CJK_ENCODINGS)) and non_ascii <= SHORT_AMBIGUOUS_BYTES:
        latin = _plain_latin(data)
        if latin is not None:
            return latin, "cp1252"
    if best is not None:
        decoded = str(best)
        if guess not in ("cp1252", "windows-1252") and decoded == _plain_latin(data):
            return decoded, "cp1252"  # same characters; name the usual Western encoding
        return decoded, guess
    latin = _plain_latin(data)
    if latin is not None:
        return latin, "cp1252"
    raise DocumentError(
        "The text's character encoding could not be recognised; save it as UTF-8 and upload it again.",
        code="malformed",
    )


def _decode_by_bom(data: bytes) -> tuple[str, str] | None:
    """``(text, encoding_name)`` in the encoding ``data``'s byte-order mark declares; ``None``
    without a mark. FF FE 00 00 is the UTF-32-LE mark or the UTF-16-LE mark and a NUL, so each
    encoding whose mark ``data`` starts with is tried, UTF-32 first (Unicode Standard, 23.8
    "Signatures").

    Raises:
        DocumentError: ``malformed`` (``details.encoding``) when the bytes are valid in none of
            them: a mark is a declaration, so the text is not guessed past it (it was read as
            Windows-1252, the mark shown as "ÿþ"; new-user trial, issue 15).
    """
    declared = [enc for bom, enc in _BOMS if data.startswith(bom)]
    first_error: UnicodeDecodeError | None = None
    for enc in declared:
        try:
            return data.decode(enc), enc.replace("-sig", "")
        except UnicodeDecodeError as exc:
            first_error = first_error or exc
    if first_error is None:
        return None
    name = declared[0].replace("-sig", "").upper()
    raise DocumentError(
        f"The file starts with a {name} byte-order mark but is not valid {name} (from byte "
        f"{first_error.start:,}); save it as UTF-8 and upload it again.",
        code="malformed", encoding=name,
    )


def _prefer_cp1252(matches, best):
    """Windows-1252 instead of ``best`` when charset-normalizer scores it at least as well.

    Short Western text often ties: ``cr\xe8me`` is as "coherent" read as cp1250 (``crčme``) as
    read as cp1252, and the detector then returns whichever it tried first. On a tie (equal or
    lower chaos, equal or higher coherence) Windows-1252 wins, being the legacy encoding of
    Western text (WHATWG Encoding Standard: the ``latin1`` / ``iso-8859-1`` labels mean
    windows-1252).
    """
    if best is None or best.encoding == "cp1252":
        return best
    for m in matches:
        if m.encoding == "cp1252" and m.chaos <= best.chaos and m.coherence >= best.coherence:
            return m
    return best


def _plain_latin(data: bytes) -> str | None:
    """Windows-1252 (then Latin-1) decoding when every non-ASCII character is a Latin letter or
    common punctuation; else ``None``."""
    for enc in ("cp1252", "latin-1"):
        try:
            text = data.decode(enc)
        except UnicodeDecodeError:
            continue
        if all(
            c.isascii() or c in _LATIN_PUNCT or unicodedata.name(c, "").startswith("LATIN")
            for c in text
        ):
            return text
    return None


# --------------------------------------------------------------------------- public parsers


def parse_txt(data: bytes, filename: str | None = None) -> ParsedDocument:
    """Parse plain text: paragraphs separated by blank lines become ``paragraph`` blocks, and
    chapter lines (:func:`ingest.titles.chapter_line`: "第五回 ...", "CHAPTER IV.") ``heading``
    blocks that give the paragraphs after them their ``heading_path``.

    Returns:
        A :class:`ParsedDocument` titled by its title line (:func:`ingest.titles.plain_text_title`),
        else the file name, else its first line; ``flags["encoding"]`` names the encoding used.

    Raises:
        DocumentError: ``empty_file`` for zero bytes, ``malformed`` for undecodable bytes.
    """
    text, encoding, runs = _decode_normalised(data)
    blocks = _plain_blocks(text)
    title = _stem(filename) or _first_line(text) or "Untitled document"
    return ParsedDocument(text=text, blocks=blocks, doc_type="txt", title=plain_text_title(text) or title,
                          flags={"encoding": encoding},
                          source_runs=runs)


def parse_md(data: bytes, filename: str | None = None) -> ParsedDocument:
    """Parse Markdown: ATX and setext headings become ``heading`` blocks with levels and give
    ``heading_path`` to what follows; fenced code is one ``code`` block; other runs of
    non-blank lines are ``paragraph``, ``list`` or ``table`` blocks.

    Returns:
        A :class:`ParsedDocument` titled by its first level-1 heading, else its first heading of
        the highest level it uses (a chapter that starts at ``##``), else the file name.

    Raises:
        DocumentError: ``empty_file`` for zero bytes, ``malformed`` for undecodable bytes.
    """
    text, encoding, runs = _decode_normalised(data)
    blocks, first_h1 = _markdown_blocks(text)
    headings = [b for b in blocks if b.kind == "heading" and b.heading_path]
    top = min(headings, key=lambda b: (b.level, b.start)).heading_path[-1] if headings else None
    title = first_h1 or top or _stem(filename) or _first_line(text) or "Untitled document"
    return ParsedDocument(text=text, blocks=blocks, doc_type="md", title=title, flags={"encoding": encoding},
                          source_runs=runs)


def _decode_normalised(data: bytes) -> tuple[str, str, Runs]:
    """``(normalised text, encoding, runs)``: the runs map normalised offsets to offsets into the
    decoded text (:mod:`docanchor.offsets`)."""
    if not data:
        raise DocumentError("The file is empty (0 bytes); upload a file with content.", code="empty_file")
    decoded, encoding = decode_text(data)
    text, runs = normalise_runs(decoded)
    return text, encoding, runs


def _stem(filename: str | None) -> str:
    return PurePath(filename).stem.strip()[:200] if filename else ""


def _first_line(text: str) -> str:
    for line in text.split("\n"):
        if line.strip():
            return line.strip()[:100]
    return ""


# --------------------------------------------------------------------------- spans




def _lines(text: str, start: int, end: int):
    """Yield ``(line_start, content_end)`` for each line in ``text[start:end]`` (newline excluded)."""
    pos = start
    while pos < end:
        nl = text.find("\n", pos, end)
        if nl < 0:
            yield pos, end
            return
        yield pos, nl
        pos = nl + 1


def _trim(text: str, s: int, e: int) -> tuple[int, int]:
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return s, e


def _split_long(text: str, s: int, e: int) -> list[tuple[int, int]]:
    """Split a long paragraph span at line ends (see :data:`SOFT_BLOCK_CHARS`)."""
    if e - s <= SOFT_BLOCK_CHARS or "\n" not in text[s:e]:
        return [(s, e)]
    out: list[tuple[int, int]] = []
    cur = s
    for ls, le in _lines(text, s, e):
        size = le - cur
        stripped = text[ls:le].rstrip()
        if le < e and (
            (size >= SOFT_BLOCK_CHARS and stripped.endswith(_SENTENCE_END)) or size >= HARD_BLOCK_CHARS
        ):
            a, b = _trim(text, cur, le)
            if a < b:
                out.append((a, b))
            cur = le + 1
    a, b = _trim(text, cur, e)
    if a < b:
        out.append((a, b))
    return out


def _paragraph_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Runs of non-blank lines in ``text[start:end]``, trimmed, long ones split."""
    spans: list[tuple[int, int]] = []
    para_start = None
    last_end = start
    for ls, le in _lines(text, start, end):
        if text[ls:le].strip():
            if para_start is None:
                para_start = ls
            last_end = le
        elif para_start is not None:
            spans.extend(_split_long(text, *_trim(text, para_start, last_end)))
            para_start = None
    if para_start is not None:
        spans.extend(_split_long(text, *_trim(text, para_start, last_end)))
    return [(a, b) for a, b in spans if a < b]


def _plain_blocks(text: str) -> list[Block]:
    """Paragraph blocks of plain text, each chapter line a heading block of its own (a chapter
    line may open a paragraph without a blank line after it, as in sanguo_yanyi_gbk.txt)."""
    blocks: list[Block] = []
    stack: list[tuple[int, str]] = []
    cur = 0
    for ls, le in _lines(text, 0, len(text)):
        level = chapter_line(text[ls:le])
        if not level:
            continue
        path = tuple(t for _, t in stack)
        blocks += [Block(a, b, "paragraph", None, path) for a, b in _paragraph_spans(text, cur, ls)]
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, " ".join(text[ls:le].split())[:_HEADING_CHARS]))
        blocks.append(Block(*_trim(text, ls, le), "heading", None, tuple(t for _, t in stack), level))
        cur = le
    path = tuple(t for _, t in stack)
    return blocks + [Block(a, b, "paragraph", None, path) for a, b in _paragraph_spans(text, cur, len(text))]


# --------------------------------------------------------------------------- markdown

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_LIST = re.compile(r"^ {0,3}(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")
# A GFM table delimiter row: cells of dashes with optional alignment colons, at least one pipe.
_DELIMITER_ROW = re.compile(r"^ {0,3}(?=[^|]*\|)\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
_HEADING_CHARS = 200


def _table_header(text: str, lines: list[tuple[int, int]]) -> int | None:
    """Index in ``lines`` (a run of non-blank lines) of a GFM table's header row: the line before
    the first delimiter row, when it holds a pipe; else ``None``."""
    for i in range(1, len(lines)):
        if _DELIMITER_ROW.match(text[lines[i][0] : lines[i][1]]) and "|" in text[lines[i - 1][0] : lines[i - 1][1]]:
            return i - 1
    return None


def _paragraph_blocks(text: str, para: list[tuple[int, int]], path: tuple[str, ...]) -> list[Block]:
    """The blocks of one run of non-blank lines ``para``: a list, a paragraph (split when long)
    or, from a GFM header row on, one ``table`` block never split here (the chunker cuts it
    between rows and gives the later chunks the header as context)."""
    if not para:
        return []
    head = _table_header(text, para)
    lines, table = (para[:head], para[head:]) if head is not None else (para, [])
    blocks = []
    if lines:
        s, e = _trim(text, lines[0][0], lines[-1][1])
        first = text[lines[0][0] : lines[0][1]]
        kind = "list" if _LIST.match(first) else "table" if first.lstrip().startswith("|") else "paragraph"
        blocks += [Block(a, b, kind, None, path) for a, b in _split_long(text, s, e)]
    if table:
        blocks.append(Block(*_trim(text, table[0][0], table[-1][1]), "table", None, path))
    return blocks


def _fence_close(text: str, lines: list[tuple[int, int]], i: int, marker: str) -> int:
    """Index in ``lines`` of the line closing the code fence opened by ``marker`` on line ``i``
    (at least as many of the same character, nothing else); ``len(lines)`` when none does."""
    j = i + 1
    while j < len(lines):
        inner = text[lines[j][0] : lines[j][1]].strip()
        if inner.startswith(marker[0] * len(marker)) and not inner.strip(marker[0]):
            break
        j += 1
    return j


def _markdown_blocks(text: str) -> tuple[list[Block], str]:
    blocks: list[Block] = []
    stack: list[tuple[int, str]] = []
    first_h1 = ""
    para: list[tuple[int, int]] = []  # lines of the open paragraph

    def path() -> tuple[str, ...]:
        return tuple(t for _, t in stack)

    def flush() -> None:
        blocks.extend(_paragraph_blocks(text, para, path()))
        para.clear()

    def heading(s: int, e: int, level: int, title: str) -> None:
        nonlocal first_h1
        title = " ".join(title.split())[:_HEADING_CHARS]
        if not title:
            return
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        blocks.append(Block(s, e, "heading", None, path(), level))
        if level == 1 and not first_h1:
            first_h1 = title

    lines = list(_lines(text, 0, len(text)))
    i = 0
    while i < len(lines):
        ls, le = lines[i]
        line = text[ls:le]
        fence = _FENCE.match(line)
        if fence and not (fence.group(1)[0] == "`" and "`" in line[fence.end():]):
            flush()
            j = _fence_close(text, lines, i, fence.group(1))
            end = lines[min(j, len(lines) - 1)][1]
            s, e = _trim(text, ls, end)
            blocks.append(Block(s, e, "code", None, path()))
            i = j + 1
            continue
        atx = _ATX.match(line)
        if atx:
            flush()
            s, e = _trim(text, ls, le)
            heading(s, e, len(atx.group(1)), atx.group(2) or "")
            i += 1
            continue
        if not line.strip():
            flush()
            i += 1
            continue
        setext = _SETEXT.match(line)
        if setext and para and not _LIST.match(text[para[0][0] : para[0][1]]):
            s, _ = _trim(text, para[0][0], para[-1][1])
            title = text[s : para[-1][1]]
            para.clear()
            heading(s, _trim(text, ls, le)[1], 1 if setext.group(1)[0] == "=" else 2, title)
            i += 1
            continue
        para.append((ls, le))
        i += 1
    flush()
    return blocks, first_h1
