"""Running headers and footers of a PDF: lines repeated at the top or bottom of many pages.

``strip_running_lines(texts) -> (texts, RunningLines)``. A PDF's text layer carries the page
furniture (document title, "Page 3", a confidentiality footer) as ordinary lines; left in, it
leads every page's passage, every ``read --from page:N`` window and many chunks (found with
../shared/corpus/pdf/dmca.pdf, whose 18 pages begin with "The Digital Millennium Copyright Act
of 1998 / Copyright Office Summary December 1998 Page N").

The rule (from that fresh-user report; the thresholds are this module's own choice, checked
against every PDF in ../shared/corpus/pdf and ../shared/cases):

- Only the first and last :data:`EDGE_LINES` non-blank lines of a page are candidates.
- Lines are compared in one form (:func:`ingest.parsers.running.line_key`: NFKC, whitespace
  collapsed, every digit run masked as ``#``, dashes as one, a typed rule of any length as one),
  so "Page 3" and "Page 4" are one line.
- A candidate is running when it sits at an edge of at least :data:`RUNNING_MIN_PAGES` pages
  and at least :data:`RUNNING_MIN_SHARE` of the pages that have text, or of at least
  :data:`PARITY_MIN_SHARE` of the odd or of the even pages that have text when the other
  parity has such a line too (a book's left and right pages carry different headers; with a
  cover or a blank page, each is on fewer than half the pages).
- A candidate without letters ("12", "- 12 -", "12/40") is a page number only when it is at
  most :data:`MAX_NUMERIC_CHARS` characters and its first number is the page's number plus
  the document's usual offset (the most common one among such lines): a table cell or a
  numeric row that happens to end a page is not taken for a footer (a slide of
  nlp2004slides.pdf ends with a score column "7" just above its slide number "17").
- A running line with letters is removed from the first and last :data:`SEARCH_LINES`
  non-blank lines of every page (text extraction may put a footnote before the header, as
  on dmca.pdf pages 4 and 8); page numbers only from the edge lines. The same words further
  inside a page stay. When removal would leave no text on any page, nothing is removed.
- Lines that come before a page's last running line among its first :data:`SEARCH_LINES`
  and in the first half of its lines were drawn before the page furniture: they move to the
  end of the page, where a reader sees them (dmca.pdf draws each page's footnotes first, so
  footnote 1 came before the title and footnote 3 took page 8's heading into its paragraph).
  On a short page a footer is among the first lines too, hence the half (nlp2004slides.pdf
  page 9: seven lines, the slide number sixth, a chart's axis labels after it).

Pure functions: no PDF access, page texts in, page texts out (same length and order, so the
page numbers of the blocks built from them do not change).
"""

from __future__ import annotations

from collections import Counter

from ingest.parsers.running import DIGITS as _DIGITS, RunningLines, flat as _flat, line_key

EDGE_LINES = 2
"""Non-blank lines at the top and at the bottom of a page that may be running lines (a header
is often two lines: title, then a line with the page number, as on dmca.pdf)."""
SEARCH_LINES = 6
"""Non-blank lines at the top and bottom of a page from which a known running line with letters
is removed (dmca.pdf pages 4 and 8 put up to four footnote lines before their header)."""
RUNNING_MIN_PAGES = 3
"""A line repeated on fewer pages than this is never a running line (two pages may share a
first line by chance, e.g. a continued table's caption)."""
RUNNING_MIN_SHARE = 0.5
"""... and it must sit at an edge of at least this share of the pages with text..."""
PARITY_MIN_SHARE = 0.8
"""... or of this share of the odd, or of the even, pages with text while the other parity
has such a line too (a book's alternating headers: a cover without one leaves each on fewer
than half of all pages). A line on every other page with nothing on the others stays."""
MAX_NUMERIC_CHARS = 12
"""A letterless running line ("12", "- 12 -", "12/40") is at most this many characters."""
def _filled(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if line.strip()]


def _ends(filled: list[int], n: int) -> list[int]:
    """The first and last ``n`` of ``filled``, in order, no repeats."""
    return sorted(set(filled[:n] + filled[-n:]))


def _number(line: str) -> int | None:
    """The first number of a short letterless line, else ``None``."""
    flat = _flat(line)
    if len(flat) > MAX_NUMERIC_CHARS or any(c.isalpha() for c in flat):
        return None
    m = _DIGITS.search(flat)
    return int(m.group()) if m else None


def _page_offset(pages: list[list[str]]) -> int | None:
    """The most common ``number - page number`` of letterless edge lines (``None``: none)."""
    offsets: Counter[int] = Counter()
    for index, lines in enumerate(pages):
        for i in _ends(_filled(lines), EDGE_LINES):
            value = _number(lines[i])
            if value is not None:
                offsets[value - (index + 1)] += 1
    return offsets.most_common(1)[0][0] if offsets else None


def _candidate(line: str, page_number: int, offset: int | None) -> str | None:
    """The key of an edge line that may be page furniture, or ``None`` when it may not."""
    key = line_key(line)
    if any(c.isalpha() for c in key):
        return key
    value = _number(line)
    if value is None or offset is None or value - page_number != offset:
        return None
    return key


def running_keys(texts: list[str]) -> set[str]:
    """Keys (:func:`line_key`) of the running lines of a document's pages.

    Args:
        texts: one text per page in page order (the first is page 1), lines separated by ``\\n``.

    Returns:
        The keys found at an edge of at least :data:`RUNNING_MIN_PAGES` pages and
        :data:`RUNNING_MIN_SHARE` of the pages with text; empty when there are too few pages.
    """
    return _scan(texts)[0]


def _scan(texts: list[str]) -> tuple[set[str], list[list[str]], int | None]:
    """``(keys, pages, offset)``: :func:`running_keys`, with the pages split into lines and the
    page-number offset (:func:`_page_offset`) it found them with (``[]`` and ``None`` when
    there are too few pages with text to look)."""
    with_text = sum(1 for t in texts if t.strip())
    if with_text < RUNNING_MIN_PAGES:
        return set(), [], None
    pages = [t.split("\n") for t in texts]
    offset = _page_offset(pages)
    seen: tuple[Counter[str], Counter[str]] = (Counter(), Counter())  # on even, on odd pages
    for index, lines in enumerate(pages):
        keys = {_candidate(lines[i], index + 1, offset) for i in _ends(_filled(lines), EDGE_LINES)}
        seen[(index + 1) % 2].update(keys - {None})
    return _running(seen, texts), pages, offset


def _running(seen: tuple[Counter[str], Counter[str]], texts: list[str]) -> set[str]:
    """The keys ``seen`` (at an edge of how many even, and odd, pages) often enough to run:
    on :data:`RUNNING_MIN_SHARE` of the pages with text, or, when both the even and the odd
    pages have such a key, on :data:`PARITY_MIN_SHARE` of the pages of one parity."""
    with_text = [sum(1 for t in texts[start::2] if t.strip()) for start in (1, 0)]  # even, odd pages
    need = max(RUNNING_MIN_PAGES, RUNNING_MIN_SHARE * sum(with_text))
    keys = {key for key in seen[0].keys() | seen[1].keys() if seen[0][key] + seen[1][key] >= need}
    sides = [{key for key, n in side.items() if n >= max(RUNNING_MIN_PAGES, PARITY_MIN_SHARE * w)}
             for side, w in zip(seen, with_text)]
    return keys | sides[0] | sides[1] if all(sides) else keys


def _drop(lines: list[str], page_number: int, keys: set[str], offset: int | None) -> set[int]:
    """Indexes of the running lines of one page (see the module docstring for where)."""
    filled = _filled(lines)
    drop = set()
    for i in _ends(filled, SEARCH_LINES):
        key = line_key(lines[i])
        if key in keys and any(c.isalpha() for c in key):
            drop.add(i)
    for i in _ends(filled, EDGE_LINES):
        if _candidate(lines[i], page_number, offset) in keys:
            drop.add(i)
    return drop


def strip_running_lines(texts: list[str]) -> tuple[list[str], RunningLines]:
    """Remove running headers and footers from page texts.

    Args:
        texts: one text per page in page order (the first is page 1; ``\\n`` between lines).

    Returns:
        ``(texts, removed)``: the page texts in the same order without their running lines
        (other lines untouched), and what was removed. When nothing runs, or removing would
        leave no text on any page, the input texts come back unchanged with an empty
        :class:`RunningLines`.
    """
    keys, pages, offset = _scan(texts)
    if not keys:
        return list(texts), RunningLines()
    out: list[str] = []
    removed = RunningLines()
    for index, lines in enumerate(pages):
        drop = _drop(lines, index + 1, keys, offset)
        if drop:
            removed.pages.append(index)
            for i in sorted(drop):
                removed.add(lines[i])
        out.append(_page_text(lines, drop))
    if not any(t.strip() for t in out):
        return list(texts), RunningLines()
    return out, removed


def _page_text(lines: list[str], drop: set[int]) -> str:
    """One page's kept lines; those drawn before its top running line last, after a blank line
    (a paragraph of their own)."""
    filled = _filled(lines)
    top = [i for i in filled[:min(SEARCH_LINES, len(filled) // 2)] if i in drop]
    kept = [lines[i] for i in range(len(lines)) if i not in drop]
    if not top:
        return "\n".join(kept)
    early = [lines[i] for i in range(top[-1]) if i not in drop]
    late = [lines[i] for i in range(top[-1] + 1, len(lines)) if i not in drop]
    if not any(ln.strip() for ln in early) or not any(ln.strip() for ln in late):
        return "\n".join(kept)
    return "\n".join(late) + "\n\n" + "\n".join(early)

