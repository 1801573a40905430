"""The text vocabulary every stage shares: CJK letters, words, sentence ends, trimming.

One place for what chunking (:mod:`ingest.chunking`), BM25 (:func:`docanchor.lexical.tokenize`),
retrieval (:mod:`retrieval.search` and its stages, :mod:`retrieval.pack`) and the anchor
(:mod:`summarize.central`) mean by these words. Offsets are in characters.

- **CJK letters** (:data:`CJK`): Han (unified ideographs and extension A, compatibility
  ideographs), Hiragana, Katakana and Hangul syllables -- the Unicode blocks of those names.
- **Words** (:data:`WORD`): runs of letters or digits; in counts (:func:`word_count`) each CJK
  character is one word, because CJK text has no spaces between words.
- **Sentence ends** (:data:`SENTENCE_STOP`): ``.``, ``!`` or ``?`` (with closing quotes or
  brackets) before whitespace, and ``。！？`` (``!`` and ``?`` after a CJK letter too: NFKC's
  forms of ``！？``). A full stop is no sentence end after a common
  abbreviation (:data:`ABBREVIATIONS`: "vs.", "e.g.", "Fig.", "No." ...), after a single
  capital letter (an initial, "J. Smith"), between digits (a decimal, "3.5"), or after a
  number range (pages, "656–657. ISBN"), nor the one of a list item's number at its line's start
  ("1. Open", :func:`ends_list_number`).
- **Line ends** (:func:`ends_sentence`): a table row (:func:`in_row`, a line holding
  :data:`CELL_SEP`) ends at its line's end and starts at its line's start; a line break after a
  colon never ends a sentence (what it introduces follows: a list, a quotation); nor does one
  inside a URL (:func:`wraps_url`, a URL wrapped over any number of lines is one unit, whatever
  its next line starts with; a full stop there that the address goes on after, "www.pinkun." /
  "com/...", is no sentence end either: :func:`stop_in_url`); one before a list item, heading, quote or table row
  (:data:`BLOCK_START`) does; one before a lowercase Latin letter does not, even after a blank
  line (the sentence resumes after a PDF's page break, figure or footnote: "the\n\ndevelopment
  of"); nor does a blank line after a long line of prose broken off without a stop in a text
  with pages (:func:`breaks_off`: a page break, then the next page's footnote); a blank line
  otherwise does (in a text without pages it ends the paragraph, whatever its punctuation); a single line break after a lowercase letter, comma, hyphen,
  colon or Chinese/Japanese character (:data:`WRAP_AFTER`) is a hard wrap inside one (a speech
  tag "曰:" or a label "Note:" is not a sentence of its own); any other line break ends its line
  (a heading, a label line). A passage starts a sentence (:func:`starts_sentence`) where the
  text before it ends one, it does not begin with a lowercase Latin letter and it is not inside
  an open quotation (:func:`in_quotation`: a quoted poem's or speech's next line); a passage ends
  finished (:func:`ends_passage`) at a sentence end outside an open quotation; a table row is one
  unit: a passage starting at its line's start starts it, one starting inside it (at a cell)
  continues it; so is a numbered list entry (:func:`in_list_entry`, a reference list's "57. ..."
  wrapped over lines and holding sentences of its own): a passage starting at its number starts
  it, one starting after that continues it.
- **Citations** (:data:`CITATION_MARK`, :func:`citation_marks`): what marks a reference-list
  entry -- a link or a piece of one wrapped over lines, "Retrieved", "Archived", "ISBN", "doi",
  "et al.", a page number ("p. 14"), a day or month and year in brackets.
- **Joining lines** (:func:`collapse_space`): a line break inside Chinese or Japanese text
  (:data:`NO_SPACE`) is a wrap, not a word gap, so joining lines puts no space there.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Iterator

CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
"""Character ranges of CJK letters (for use inside a regular-expression class)."""
CJK_CHAR = re.compile(f"[{CJK}]")
TERM_RUN = re.compile(rf"[{CJK}]+|[^\W_{CJK}]+", re.UNICODE)
"""A run of CJK letters, or a run of other letters and digits: what BM25 tokenises."""
ASCII_TERM_RUN = re.compile(r"[a-z0-9]+")
""":data:`TERM_RUN` for lower-case ASCII text, where it finds the same runs (no CJK letter can occur,
and the letters and digits of ASCII are ``a-z`` and ``0-9`` once case-folded) about twice as fast:
a class of ranges instead of Unicode categories."""
WORD = re.compile(r"[^\W_]+")
"""A run of letters or digits (CJK letters included)."""
CLOSERS = "\"'”’)\\]」』"
"""Closing quotes and brackets that stay with the punctuation before them."""


NO_SPACE = "\u3001-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
"""Character ranges of scripts written without spaces between words: Han, Hiragana, Katakana and
CJK punctuation (。、「」). Hangul is not among them: Korean puts spaces between words, so a
Korean line usually wraps at a space."""
HANGUL = "\uac00-\ud7af"
"""Character range of Hangul syllables, the letters of Korean, which separates words with spaces."""
_NO_SPACE_CHAR = re.compile(f"[{NO_SPACE}]")
_SPACE_RUN = re.compile(r"\s+")


def collapse_space(text: str) -> str:
    """``text`` with each run of whitespace made one space and the ends stripped, except that a
    run holding a line break between two Chinese or Japanese characters (:data:`NO_SPACE`; one
    side may be a punctuation mark next to such a character, as in "，\\n明公") is removed:
    "然后徐\\n图归耕" -> "然后徐图归耕". A space inside a line ("第一回\\u3000宴桃园") stays a space.
    Lengths are in characters; the one rule for every place that joins lines for display."""

    def join(m: re.Match) -> str:
        if "\n" in m.group() and wraps(text, m.start(), m.end()):
            return ""
        return " "

    return _SPACE_RUN.sub(join, text).strip()


def wraps(text: str, start: int, end: int) -> bool:
    """Whether the whitespace ``text[start:end]`` sits between no-space characters (each side may
    be one punctuation mark next to one, e.g. an NFKC-made "," or an opening quote): a line
    break there is a wrap inside a sentence, not a word gap and not a line that ends."""
    def side(i: int, step: int) -> bool:
        if not 0 <= i < len(text):
            return False
        if _NO_SPACE_CHAR.match(text[i]):
            return True
        j = i + step
        return _is_punct(text[i]) and 0 <= j < len(text) and _NO_SPACE_CHAR.match(text[j]) is not None

    return side(start - 1, -1) and side(end, 1)


def joins_tight(left: str, right: str) -> bool:
    """Whether a line ending in ``left`` and the next one starting with ``right`` (both stripped
    of the whitespace between them) join with no space: the break sits between Chinese or Japanese
    characters (:func:`wraps`, the rule :func:`collapse_space` joins by). Between Hangul, Latin or
    any other letters the line break was a word gap and becomes one space: Korean separates its
    words with spaces, and a PDF's Korean line wraps at one ("일시불 및" / "할부")."""
    if not left or not right:
        return False
    head, tail = left[-2:], right[:2]
    return wraps(f"{head}\n{tail}", len(head), len(head) + 1)


def _is_punct(ch: str) -> bool:
    return unicodedata.category(ch).startswith("P")


def is_cjk(ch: str) -> bool:
    """Whether the character ``ch`` is a CJK letter (:data:`CJK`)."""
    return CJK_CHAR.match(ch) is not None


def cjk_share(text: str) -> float:
    """The share of ``text``'s letters (``str.isalpha``) that are CJK (0.0 for no letters).

    Letters are only counted when the text holds a CJK letter: with none the share is 0.0 however
    many letters there are, so ASCII text (no CJK possible) costs one ``isascii`` check."""
    if text.isascii():
        return 0.0
    cjk = len(CJK_CHAR.findall(text))
    if not cjk:
        return 0.0
    return cjk / sum(map(str.isalpha, text))


def word_count(text: str) -> int:
    """Words of ``text``: runs of letters or digits, each CJK character counting as one."""
    cjk = len(CJK_CHAR.findall(text))
    return cjk + len(WORD.findall(CJK_CHAR.sub(" ", text)))


def has_words(text: str, n: int) -> bool:
    """Whether ``word_count(text) >= n``, reading ``text`` only up to its ``n``-th word (a test
    against a few words costs a few matches, not a pass over the whole chunk). :data:`TERM_RUN`'s
    runs are :func:`word_count`'s: a run of CJK characters counts its characters, any other run one."""
    if n <= 0:
        return True
    count = 0
    for m in TERM_RUN.finditer(text):
        run = m.group()
        count += len(run) if CJK_CHAR.match(run) else 1
        if count >= n:
            return True
    return False


def strip_span(text: str, start: int, end: int) -> tuple[int, int]:
    """``(start, end)`` moved inward past whitespace at either end of ``text[start:end]``."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


ABBREVIATIONS = ("vs", "e.g", "i.e", "cf", "al", "approx", "Fig", "Figs", "Eq", "Eqs", "Vol", "pp", "Mr", "Mrs",
                 "Ms", "Dr", "Prof", "St", "Jr", "Sr", "Sec", "Ch")
"""Words whose full stop never ends a sentence ("vs.", "e.g.", "et al.", "Fig."). "No." and "p."
count as abbreviations only before a number ("No. 5", "p. 12"); "etc." and "Inc." often end a
sentence and are not listed. Case-sensitive, as written."""
_NOT_ABBREVIATED = "".join(rf"(?<!\b{re.escape(a)}\.)" for a in ABBREVIATIONS) + r"(?<!\b[A-Z]\.)"
_NOT_RANGE = "".join(rf"(?<![-‐‑‒–]\d{{{n}}}\.)" for n in range(1, 5))
"""A full stop after a number range ("pp. 636, 656–657. ISBN ...", a reference's pages) ends no
sentence: in reference lists it is followed by more of the same reference, and a passage cut
there was a piece of a number ("57.", new-user trial on norwich-city.txt)."""
_CLOSE = f"[{CLOSERS}]*"
FULL_STOP = rf"(?:\.{_NOT_ABBREVIATED}{_NOT_RANGE}(?:(?<!\bNo\.)(?<!\bp\.)|(?!\s*\d))|[!?]){_CLOSE}(?=\s|$)"
"""A Latin sentence end as a pattern: ``.``, ``!`` or ``?`` and closing quotes before whitespace or
the end, not the full stop of an abbreviation (:data:`ABBREVIATIONS`), of an initial ("J."),
of a number range ("656–657."), of "No." or "p." before a number. (A decimal point, "3.5", has no space after it.)"""
CJK_STOP = f"(?:[。！？]|(?<=[{CJK}])[!?]){_CLOSE}"
"""A CJK sentence end as a pattern: 。！？, or ``!``/``?`` after a CJK letter (NFKC, which every
ingested text and query goes through, turns the fullwidth ！？ into them: "岂忘了桃园结义耶?”飞喝曰"
holds a sentence end), and closing quotes."""
SENTENCE_STOP = re.compile(f"{FULL_STOP}|{CJK_STOP}")
"""A sentence end (Latin or CJK), the one definition every stage builds its boundaries on."""
_STOP_NOT_AFTER_DIGIT = rf"(?<!\d)(?:{FULL_STOP})|{CJK_STOP}"
RUN_BREAK = re.compile(rf"{_STOP_NOT_AFTER_DIGIT}|\n")
"""Where the text of one chunk may break (:func:`run_breaks` decides): a sentence end
(:data:`SENTENCE_STOP`) that does not follow a digit (a full stop after a digit is a list number,
as in the table rows of financial reports), or a line break."""


def run_breaks(text: str) -> Iterator[int]:
    """Character offsets (ascending) where the text of one chunk breaks, for the rules that look
    inside a single chunk without the document around it (:func:`retrieval.stages.expand.boundary_sentence`,
    the run-on rule): after a :data:`RUN_BREAK` sentence end, and after a line break that ends
    its line by :func:`ends_sentence`, judged with the chunk's own text after it -- a hard wrap
    inside a sentence is none (the novel: "袁绍手提宝剑,辞别百官\n而出,...奔冀州去了。"; its lines wrap
    inside sentences), and a line break the chunk ends on is judged by the character before it."""
    for m in RUN_BREAK.finditer(text):
        if m.group() != "\n" or ends_sentence(text, m.start()):
            yield m.end()


RUN_END = re.compile(rf"(?:{_STOP_NOT_AFTER_DIGIT})\s*$")
"""A text that ends with a :data:`RUN_BREAK` sentence end (trailing whitespace aside)."""


WRAP_AFTER = rf"a-z,:\-{NO_SPACE}"
"""Characters (for a regular-expression class) after which a single line break is a hard wrap
inside a sentence, not the end of a line: a lowercase letter, a comma or a hyphen (wrapped prose),
a colon (what it introduces follows: the novel's "布笑曰:" before its quoted speech on the next
line, a label before its value; NFKC makes "：" a colon), or a Chinese or Japanese character or
mark (:data:`NO_SPACE`; such text wraps anywhere)."""
HEADING_MARK = "#{1,6}"
"""A Markdown ATX heading's mark, "#" to "######" (CommonMark: at most six), before a space; the
one definition for :data:`BLOCK_START` and :func:`retrieval.pack.is_heading`."""
BLOCK_START = re.compile(rf"(?:[-*+>|]|{HEADING_MARK}|\d{{1,3}}[.)])(?=\s)")
"""What starts a line that is a block of its own: a Markdown list item ("- ", "* ", "1. "), a
heading of any level ("# ", "## " ... :data:`HEADING_MARK`), a quote or a table row; a line break
before one ends the line before it (:func:`ends_sentence`), a passage starting at one starts a
unit (:func:`starts_sentence`), and a line starting with one is no prose broken off
(:func:`breaks_off`)."""
CLAUSE_END = re.compile(r"[,;、，；](?=\s|[^\W\d_])")
"""A clause boundary: a comma, semicolon or enumeration comma (、) before a space or a letter
(Chinese text has no space after its commas, which NFKC makes ASCII); not a digit's comma
("1,250"). Where a passage cut inside a sentence ends when it can (:func:`retrieval.pack.cut_end`,
a read window's fill, :func:`retrieval.read.read_document`)."""
_GAP = re.compile(r"\s*")
_LOWER_START = re.compile(r"\s*[a-z]")
_WRAPS_AFTER = re.compile(f"[{WRAP_AFTER}]")
URL_TAIL = re.compile(r"(?:(?:https?|ftp)://|www\.)\S*$|\(https?:?/{0,2}$", re.IGNORECASE)
"""A line that stops inside a URL: its last word holds a URL's start ("https://", "www.") or is
one cut short ("(http"). Such a line break is a hard wrap (:func:`wraps_url`); a PDF's or a text
export's references wrap URLs anywhere ("(http\\ns://...", ".../1993112\\n9/439/0045)",
norwich-city.txt)."""
_URL_LOOKBACK = 300
"""Characters looked back for a URL's start (an upper bound on a URL's length on one line)."""


def wraps_url(text: str, end: int) -> bool:
    """Whether the line break at character offset ``end`` falls inside a URL: the line's text
    before it ends inside one (:data:`URL_TAIL`), or its last word continues a URL wrapped from
    the lines before (:func:`url_start`: ".../https://www.pinkun.com/norwich-city/iw" /
    "an-roberts-...-1-636241" / "0) from the original", norwich-city.txt), and a non-space
    character follows the break."""
    gap = _GAP.match(text, end).group()
    after = end + len(gap)
    if gap.count("\n") != 1 or after >= len(text):
        return False
    return URL_TAIL.search(text, max(0, end - _URL_LOOKBACK), end) is not None or url_start(text, end) is not None


_URL_GOES_ON = re.compile(r"[a-z0-9]")


def stop_in_url(text: str, end: int) -> bool:
    """Whether the ``.``, ``!`` or ``?`` just before character offset ``end`` is a character of a
    URL the text wraps onto the next line, not a sentence end: it follows a letter or digit of a
    URL the line ends inside (:func:`wraps_url`), and the next line goes on in lowercase or with a
    digit, as an address does ("(https://www.pinkun." / "com/opinion/...", "http://www." /
    "s4c.cymru/...", norwich-city.txt). A stop after a closing bracket (".../126)." /
    "Soccerbase."), or before a capital or a list item ("33. Roberts"), ends its sentence."""
    if end < 2 or text[end - 1] not in ".!?" or not text[end - 2].isalnum():
        return False
    after = _GAP.match(text, end).end()
    if _URL_GOES_ON.match(text, after) is None or BLOCK_START.match(text, after):
        return False
    return wraps_url(text, end)


_URL_START = re.compile(r"(?:https?|ftp)://|www\.|\(https?$", re.IGNORECASE)


def url_start(text: str, i: int) -> int | None:
    """The character offset where the URL holding offset ``i`` starts (its word's start: "(https://",
    "www."), read back across single line breaks between two non-space characters (a wrapped URL)
    and at most :data:`_URL_LOOKBACK` characters; ``None`` when ``i`` is not inside a URL. A
    passage starting at ``i`` would begin with a piece of an address, and one ending there would
    end inside one."""
    floor, j, starts = max(0, i - _URL_LOOKBACK), i, []
    while True:
        while j > floor and not text[j - 1].isspace():
            j -= 1
        starts.append(j)
        if j > floor + 1 and text[j - 1] == "\n" and not text[j - 2].isspace():
            j -= 1  # the word goes on from the line before
            continue
        break
    for j in reversed(starts):  # the earliest line of the word that holds a URL's start
        m = _URL_START.search(text, j, i)
        if m is not None and not any(ch.isspace() for ch in text[j:m.start()]):
            return j
    return None


def ends_sentence(text: str, end: int, pages: bool = True) -> bool:
    """Whether ``text[:end]`` ends a sentence: a sentence end (:data:`SENTENCE_STOP`) there, the
    end of ``text``, or a line end that is not a hard wrap (see the module's "Line ends"). A
    line break followed by nothing more (what comes after is unknown) is judged by the character
    before it alone. ``end`` is a character offset. ``pages``: whether the text may hold a page
    break (a PDF's or a scan's); without one a blank line ends its paragraph, so prose
    :func:`breaks_off` is not looked for (a Markdown paragraph without a final stop, case a14)."""
    if end >= len(text):
        return True
    stops = SENTENCE_STOP.finditer(text, max(0, end - 8), end + 1)
    if any(m.end() == end for m in stops) and not stop_in_url(text, end) and not ends_list_number(text, end):
        return True
    gap = _GAP.match(text, end).group()
    if "\n" not in gap:
        return False  # inside a line
    if (end and in_row(text, end - 1)) or in_row(text, end + len(gap)):
        return True  # a table row ends at its line's end, and one starts at its line's start
    if end and text[end - 1] == ":":
        return False  # what a colon introduces follows: a passage stopping there stops inside
    if wraps_url(text, end):
        return False  # a URL is one unit, whatever its next line starts with ("0) from", a list number's look)
    if BLOCK_START.match(text, end + len(gap)):
        return True
    if _LOWER_START.match(text, end + len(gap)):
        return False  # the sentence resumes after a page break, a figure or a footnote in between
    if gap.count("\n") > 1:
        return not (pages and breaks_off(text, end))
    return end == 0 or _WRAPS_AFTER.match(text[end - 1]) is None


BROKEN_OFF_MIN_WORDS = 8
"""Fewer words than this (:func:`word_count`) on a line and its blank-line end is the end of a
unit (a heading, a label) even without a sentence stop. Source: dmca.pdf's headings ("General
approach", "Circumvention of Technological Protection Measures") have at most 6 words; its
prose lines cut by a page break run on for dozens."""
_BROKEN_OFF = re.compile(r"[a-z,]")


def breaks_off(text: str, end: int) -> bool:
    """Whether the line ending at character offset ``end`` is prose broken off by a page break:
    it ends in a lowercase Latin letter or a comma (no sentence stop), holds at least
    :data:`BROKEN_OFF_MIN_WORDS` words and is no block of its own (:data:`BLOCK_START`: a list
    item, heading, quote). A PDF's text puts what the page break holds (a footnote of the next
    page, a running line) between such a line and the rest of its sentence (dmca.pdf: "...and
    measures that prevent" / "“Copying” is used in this context ..." / "unauthorized copying"),
    and the PDF parser marks no footnote (its blocks are headings and paragraphs), so the line's
    own shape is the evidence: the sentence does not end there, and what follows the blank line
    starts a unit of its own (:func:`starts_sentence`)."""
    if not end or _BROKEN_OFF.match(text[end - 1]) is None:
        return False
    line_start = text.rfind("\n", 0, end) + 1
    line = text[line_start:end]
    return not BLOCK_START.match(line) and has_words(line, BROKEN_OFF_MIN_WORDS)


CELL_SEP = " | "
"""What joins the cells of a table row in a document's text, the one definition the parsers write
(CSV ``column: value | column: value``, XLSX ``row 3 | column: value``; Markdown-like rows of DOCX,
HTML, ODT and PPTX tables ``cell | cell``), one row a line, and chunking and row labels read. Rows
are not sentences: a row is a unit from its line's start to its line's end (:func:`in_row`)."""


def in_row(text: str, i: int) -> bool:
    """Whether the line holding character offset ``i`` of ``text`` is a table row: it holds
    :data:`CELL_SEP`. (``i`` at a line break belongs to the line it ends.)"""
    if not 0 <= i < len(text):
        return False
    start = text.rfind("\n", 0, i) + 1
    end = text.find("\n", i)
    return text.find(CELL_SEP, start, len(text) if end < 0 else end) >= 0


def starts_sentence(text: str, start: int) -> bool:
    """Whether ``text[start:]`` starts a sentence or a unit of its own: ``start`` is 0 or only
    whitespace is before it, or the text before it (trailing whitespace aside) ends a sentence
    (:func:`ends_sentence`), and it does not begin with a lowercase Latin letter -- a continuation,
    even after a blank line (a PDF's text resumes so after a page break or a figure). A table
    row (:func:`in_row`) is one unit: a start at its line's start starts it, whatever its case
    ("invoice_id: INV-1004 | ..."), and a start inside it (at a cell, "ISO4217-currency_minor_unit:
    2 | ...") continues it. A start inside an open quotation (:func:`in_quotation`) starts no
    sentence. ``start`` is a character offset."""
    at = _GAP.match(text, start).end()
    if in_row(text, at):
        line_start = text.rfind("\n", 0, at) + 1
        return not text[line_start:at].strip()
    if _LOWER_START.match(text, start):
        return False
    if BLOCK_START.match(text, at):
        return True  # a list item, heading, quote or table row starts a block of its own
    if in_quotation(text, at):
        return False  # a line of a quoted poem or speech, after a sentence end inside the quotation
    if in_list_entry(text, at):
        return False  # a sentence or line of a numbered entry ("Soccerbase. Centurycomm. Archived ...")
    end = len(text[:start].rstrip())
    if end and text.count("\n", end, at) > 1 and breaks_off(text, end):
        return True  # a block between a page break and the rest of its sentence (a footnote)
    return not end or ends_sentence(text, end)


LIST_ENTRY_MAX_CHARS = 1000
"""The longest numbered list entry :func:`in_list_entry` looks through, in characters. Source:
norwich-city.txt's reference entries (a title and wrapped archive URLs) run to about 500, the
longest (33, with a quoted chant) to 749."""
_NUMBER_LINE = re.compile(r"^[ \t]*(\d{1,3})[.)][ \t]", re.MULTILINE)


def in_list_entry(text: str, i: int) -> bool:
    """Whether character offset ``i`` of ``text`` lies inside entry N of a numbered list, after its
    number: a line starting "N." or "N)" begins before ``i``, a line starting "N+1." or "N+1)"
    after it, at most :data:`LIST_ENTRY_MAX_CHARS` characters apart, and no blank line lies
    between them (a reference list, norwich-city.txt: "87. Dunk, Peter, ed.
    (1986). Rothmans Football Yearbook 1986-87.\\nQueen Anne Press. ..."). A numbered line with
    no next number near it (a heading "1. Introduction" before its prose) makes no list."""
    lo = max(0, i - LIST_ENTRY_MAX_CHARS)
    lo = max(lo, text.rfind("\n\n", lo, i) + 1)
    last = None
    for m in _NUMBER_LINE.finditer(text, lo, i):
        last = m
    if last is None or last.end() > i:
        return False
    hi = min(len(text), last.start() + LIST_ENTRY_MAX_CHARS)
    blank = text.find("\n\n", i, hi)
    following = re.compile(rf"^[ \t]*{int(last.group(1)) + 1}[.)][ \t]", re.MULTILINE)
    return following.search(text, i, hi if blank < 0 else blank) is not None


QUOTE_OPEN, QUOTE_CLOSE = "“「『", "”」』"
"""Opening and closing quotation marks that tell an open quotation (curly and CJK corner
brackets; straight quotes open and close alike and are not used)."""


def ends_passage(text: str, end: int, pages: bool = True) -> bool:
    """Whether a passage ``text[:end]`` ends finished (a reader needs no "…" after it):
    at the end of ``text``, or at a sentence end (:func:`ends_sentence`) outside an open quotation
    (:func:`in_quotation`) or at its paragraph's end. A passage stopping at a 。 inside a speech or a
    quoted poem whose ” comes later ("后人有诗赞陆逊曰:“持矛举火破连营,玄德穷奔白帝城。", the novel)
    stops inside the quotation, as one starting there starts inside it (:func:`starts_sentence`);
    a quotation never runs past its paragraph (:func:`in_quotation`), so one left open there
    (the novel's chapter end "正是:\n“才离虎窟愈生去,又遇龙潭鼓浪来。毕竟子龙怎地脱身,且听下回分解。",
    its ” missing) does not. ``end`` is a character offset; ``pages`` as for :func:`ends_sentence`."""
    if end >= len(text):
        return True
    return ends_sentence(text, end, pages) and (not in_quotation(text, end) or _PARAGRAPH_END.match(text, end) is not None)


_PARAGRAPH_END = re.compile(r"[^\S\n]*(?:\n[^\S\n]*\n|\s*$)")
"""What follows the last character of a paragraph: a blank line, or only whitespace to the end."""


def in_quotation(text: str, i: int) -> bool:
    """Whether character offset ``i`` of ``text`` lies inside a quotation opened earlier in its
    paragraph (since the last blank line) and not closed before ``i``: a line of a quoted poem
    ("...空负栋梁材。辅主真堪敬,辞亲实可哀。白门身死日,谁肯\\n似公台!”", the novel) or of a speech. A
    passage starting there starts inside the quotation, whatever sentence end precedes it."""
    para = text.rfind("\n\n", 0, i) + 1
    opened = max(text.rfind(q, para, i) for q in QUOTE_OPEN)
    closed = max(text.rfind(q, para, i) for q in QUOTE_CLOSE)
    return opened > closed


def ends_list_number(text: str, end: int) -> bool:
    """Whether the full stop just before character offset ``end`` closes a numbered list item's
    number at its line's start ("1. Open the file", "  12. Rothmans ...": :data:`_NUMBER_LINE`,
    the number :data:`BLOCK_START` starts a block with): the item's text follows, so it ends no
    sentence. A full stop after a number inside a line ("ended in 1945. Then") is not one."""
    if end < 2 or text[end - 1] != "." or not text[end - 2].isdigit():
        return False
    m = _NUMBER_LINE.match(text, text.rfind("\n", 0, end) + 1)
    return m is not None and m.end() == end + 1


_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
CITATION_MARK = re.compile(
    r"(?<!\S)(?:"  # a word that is
    r"\S*?(?:://|www\.)\S*"  # a link
    r"|(?=[^\s/]*[a-z])[^\s/]*/\S*?/\S*|(?=[^\s/]*/[^\s/]*[a-z])[^\s/]*/[^\s/]*/\S*"  # a path with letters:
    r"|\S+?\.(?:com|org|net|uk|html?|stm|aspx?|php|pdf)\b\S*"  # a piece of a wrapped link, a host, a file
    r")|\b(?:Retrieved|Archived|ISBN|doi)\b|\bet al\.|\bpp?\.\s?\d"  # citation words, page numbers
    rf"|\((?:\d{{1,2}} )?(?:{_MONTHS}) \d{{4}}\)",  # a date in brackets: "(23 April 2005)"
    re.IGNORECASE,
)
"""One mark of a reference-list entry (:func:`citation_marks` counts them). A bare year in brackets
or a slash date is no mark: a financial table's negative numbers "(2046)" and dates "12/31/05"
look like them."""


_CITATION_HINTS = ("/", "www.", ".com", ".org", ".net", ".uk", ".htm", ".stm", ".asp", ".php", ".pdf", "retrieved",
                   "archived", "isbn", "doi", "et al.", "p.", "(")
"""Substrings every :data:`CITATION_MARK` holds one of (in lower case): their count bounds the
marks from above, so most prose is judged without the regular expression."""


def non_space_chars(text: str) -> int:
    """Characters of ``text`` other than ASCII whitespace (space, ``\n``, ``\t``, ``\r``, ``\f``,
    ``\v``): what a density of marks per character is measured against."""
    return len(text) - sum(map(text.count, " \n\t\r\f\v"))


def citation_marks(text: str, at_least: int = 0) -> int:
    """How many :data:`CITATION_MARK` marks ``text`` holds; when an upper bound from
    :data:`_CITATION_HINTS` is under ``at_least``, that bound (the caller only needs to know the
    count falls short)."""
    bound = sum(map(text.lower().count, _CITATION_HINTS))  # no generator: it runs for every candidate
    if bound < at_least or bound == 0:
        return bound
    return len(CITATION_MARK.findall(text))


def normalise_query(query: str) -> str:
    """The query normalised like ingested text: NFKC, control characters out, spaces collapsed."""
    text = unicodedata.normalize("NFKC", query)
    text = "".join(ch for ch in text if ch in "\n\t" or unicodedata.category(ch) not in ("Cc", "Cf", "Cs"))
    return " ".join(text.split())
