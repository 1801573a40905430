"""Page text by pdfminer.six, the same for the same bytes in every process.

pdfminer.six's layout analysis (``LTLayoutContainer.group_textboxes``) merges the closest pair of
text boxes first and breaks ties in distance by ``id()`` of the boxes, that is by their memory
addresses. Equal distances are common (table cells, evenly spaced lines), so the reading order
of a page depended on the state of the heap: the same PDF gave different text in a fresh CLI
process and in a long-running server's parse worker (issue 17: 45 chunks through the CLI, 44
through HTTP). :func:`pages` replaces ``id`` in ``pdfminer.layout`` by the order in which the
layout code first asks for an object's id (:func:`_creation_order`), which follows the page's
content, so ties break the same way every time. Checked with pdfminer.six 20260107, whose
``group_textboxes`` is the only user of ``id`` in that module.

pdfminer.six's tokenizer and interpreter call ``log.debug`` for every token and operator (about
1.5 million calls over ../shared/corpus/pdf), each a function call even when DEBUG is off;
:func:`pages` gives those two modules a logger whose ``debug`` does nothing while their loggers
do not log DEBUG (:func:`_quiet_debug`), so the text is the same and the calls cost nothing.

:func:`rows` reads a table page one row per line (:mod:`ingest.parsers.pdf_table`): characters
on one baseline join a line across any gap (:data:`ROW_CHAR_MARGIN`), and the page is laid out
in the orientation in which its characters stand upright. pdfminer turns a page by its
``/Rotate`` first (``PDFPageInterpreter.process_page``); a page whose text is drawn upright
before that turn (the NICS table: ``/Rotate 90``, horizontal strings) then holds only sideways
characters, which pdfminer sets one per line (10,155 characters for 5,560 of text) and groups in
about 15 s of CPU instead of 0.2 s.
"""

from __future__ import annotations

import importlib
import io
import itertools
import logging
from collections.abc import Iterator
from typing import Any

_ORDER = itertools.count()
_PER_TOKEN_LOGGERS = ("pdfminer.psparser", "pdfminer.pdfinterp")
"""pdfminer.six modules whose ``log.debug`` runs per token or operator."""


ROW_CHAR_MARGIN = 50.0
"""``LAParams.char_margin`` of :func:`rows`: characters closer than this many character widths
join one line. On the NICS table (5.76-point digits; the widest gap is between a state's name
and its first figure) 30 left 3 of its 58 rows whole, 40 and 50 all 58 (measured); 50 leaves a
margin. pdfminer's default, 2, sets each cell apart and reads the page column by column."""
UPRIGHT_SHARE = 0.5
"""A page turned by its ``/Rotate`` is laid out unturned when fewer than this share of its
characters stand upright after the turn (``LTChar.upright``)..."""
ORIENTATION_SAMPLE_CHARS = 200
"""... judged on the first this many characters drawn (the page's interpretation stops there:
reading the whole NICS page once more cost 0.14 s of CPU, 0.17 s for the whole parse before)."""


class TooManyPages(Exception):
    """The file has more pages than the caller's ``max_pages``."""


def _creation_order(obj: object) -> int:
    """A number for ``obj`` that grows with the order objects are first seen (stored on it)."""
    try:
        return obj.__dict__["_docanchor_order"]
    except KeyError:
        number = obj.__dict__["_docanchor_order"] = next(_ORDER)
        return number
    except AttributeError:  # pragma: no cover - pdfminer's layout objects all have a __dict__
        return id(obj)


def _stable_layout() -> None:
    """Make pdfminer.six's text box grouping independent of memory addresses (idempotent)."""
    import pdfminer.layout

    if getattr(pdfminer.layout, "id", None) is not _creation_order:
        pdfminer.layout.id = _creation_order  # module global: shadows the builtin there only


class _WithoutDebug:
    """A logger whose ``debug`` does nothing; everything else is the wrapped logger's."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger

    def debug(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self.logger, name)


def _quiet_debug() -> None:
    """Give the modules of :data:`_PER_TOKEN_LOGGERS` a :class:`_WithoutDebug` logger while
    their logger does not log DEBUG, and their own logger back when it does (checked on each
    call of :func:`pages`)."""
    for name in _PER_TOKEN_LOGGERS:
        module = importlib.import_module(name)
        logger = logging.getLogger(name)
        module.log = logger if logger.isEnabledFor(logging.DEBUG) else _WithoutDebug(logger)


def pages(data: bytes, wanted: set[int] | None, *, max_pages: int) -> Iterator[tuple[int, str]]:
    """Yield ``(page number, text)`` by pdfminer.six for ``wanted`` pages (all when None), in
    page order, reading each page only when the caller asks for the next one.

    Raises:
        TooManyPages: the file has more than ``max_pages`` pages; pdfminer's own exceptions
            pass through.
    """
    from pdfminer.converter import TextConverter
    from pdfminer.layout import LAParams
    from pdfminer.pdfinterp import PDFPageInterpreter

    for number, page, rsrc in _wanted_pages(data, wanted, max_pages=max_pages):
        buf = io.StringIO()
        device = TextConverter(rsrc, buf, laparams=LAParams())
        try:
            PDFPageInterpreter(rsrc, device).process_page(page)
        finally:
            device.close()
        yield number, buf.getvalue()


def _wanted_pages(data: bytes, wanted: set[int] | None, *, max_pages: int) -> Iterator[tuple[int, Any, Any]]:
    """Yield ``(page number, PDFPage, PDFResourceManager)`` for the ``wanted`` pages (all when
    None), in page order, stopping after the last wanted one.

    Raises:
        TooManyPages: the file has more than ``max_pages`` pages.
    """
    from pdfminer.pdfinterp import PDFResourceManager
    from pdfminer.pdfpage import PDFPage

    _stable_layout()
    _quiet_debug()
    rsrc = PDFResourceManager(caching=True)
    last = max(wanted, default=0) if wanted is not None else None
    for index, page in enumerate(PDFPage.get_pages(io.BytesIO(data), password="")):
        number = index + 1
        if number > max_pages:
            raise TooManyPages(number)
        if last is not None and number > last:
            break
        if wanted is None or number in wanted:
            yield number, page, rsrc


def rows(data: bytes, wanted: set[int], *, max_pages: int) -> Iterator[tuple[int, str]]:
    """Yield ``(page number, text)`` for the ``wanted`` pages, in page order, each row of a
    table on one line (:data:`ROW_CHAR_MARGIN`), the page upright (:data:`UPRIGHT_SHARE`).

    Raises:
        TooManyPages: the file has more than ``max_pages`` pages; pdfminer's own exceptions
            pass through.
    """
    from pdfminer.layout import LAParams

    for number, page, rsrc in _wanted_pages(data, wanted, max_pages=max_pages):
        yield number, _layout_text(rsrc, _upright_layout(rsrc, page), LAParams(char_margin=ROW_CHAR_MARGIN))


def _upright_layout(rsrc: Any, page: Any) -> Any:
    """The page's characters before layout analysis (an ``LTPage``), upright
    (:func:`unturn_sideways`)."""
    unturn_sideways(rsrc, page)
    return _characters(rsrc, page)


def unturn_sideways(rsrc: Any, page: Any) -> None:
    """Leave a pdfminer ``PDFPage``'s ``/Rotate`` out (``page.rotate`` and its ``Rotate``
    attribute set to 0) when turning by it leaves fewer than :data:`UPRIGHT_SHARE` of its first
    :data:`ORIENTATION_SAMPLE_CHARS` characters drawn upright."""
    if page.rotate % 360:
        sample = [c.upright for c in _characters(rsrc, page, ORIENTATION_SAMPLE_CHARS)]
        if sample and sum(sample) < UPRIGHT_SHARE * len(sample):
            page.rotate = 0
            page.attrs["Rotate"] = 0


class _Enough(Exception):
    """The sampling device has its characters."""


def _characters(rsrc: Any, page: Any, limit: int | None = None) -> Any:
    """The page's ``LTPage`` without layout analysis; with ``limit``, the list of its first
    ``limit`` characters (``LTChar``) instead, the page's interpretation stopped there."""
    from pdfminer.converter import PDFPageAggregator
    from pdfminer.layout import LTChar
    from pdfminer.pdfinterp import PDFPageInterpreter

    chars: list = []

    class Device(PDFPageAggregator):
        def render_char(self, *args: Any, **kwargs: Any) -> float:
            advance = super().render_char(*args, **kwargs)
            if limit is not None:
                chars.append(self.cur_item._objs[-1])
                if len(chars) >= limit:
                    raise _Enough
            return advance

    device = Device(rsrc, laparams=None)
    try:
        PDFPageInterpreter(rsrc, device).process_page(page)
    except _Enough:
        pass
    finally:
        device.close()
    return [c for c in chars if isinstance(c, LTChar)] if limit is not None else device.get_result()


def _layout_text(rsrc: Any, layout: Any, laparams: Any) -> str:
    """``layout`` analysed with ``laparams`` and written out as pdfminer's ``TextConverter`` does."""
    from pdfminer.converter import TextConverter

    layout.analyze(laparams)
    buf = io.StringIO()
    device = TextConverter(rsrc, buf, laparams=laparams)
    try:
        device.receive_layout(layout)
    finally:
        device.close()
    return buf.getvalue()
