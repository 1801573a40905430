"""Parsers, one module per format, each ``parse_<name>(data: bytes, filename: str | None) ->
ParsedDocument``. :func:`parse` picks one by detected type from the format registry
(:mod:`docanchor.formats`: its ``parser`` and ``sandboxed`` fields).

Every parser returns normalised text and blocks (:mod:`ingest.builder`) and raises
:class:`~docanchor.errors.DocumentError` with a specific code (``pdf_encrypted``,
``pdf_unreadable``, ``no_text_layer``, ``docx_unsupported``, ``malformed`` ...) or
:class:`~docanchor.errors.TooLarge`; never a dependency's own exception.

Binary and archive formats are parsed in a killable worker process (:mod:`ingest.sandbox`)
under :data:`PARSE_TIMEOUT_S` and :data:`PARSE_MEMORY_BYTES`: their parsers walk untrusted object
graphs and compressed streams, where one hostile file could otherwise stall or exhaust the
server. Text, Markdown, HTML and CSV parse in process. Pages that hold only an image are read by
OCR afterwards (:mod:`ingest.ocr`), one page per sandboxed call under the same caps.
"""

from __future__ import annotations

from importlib import import_module

from docanchor import formats
from docanchor.errors import UnsupportedType
from docanchor.types import ParsedDocument
from ingest.sandbox import run_sandboxed

SANDBOXED = frozenset(f.name for f in formats.FORMATS if f.sandboxed)
"""Types parsed in a worker process (the registry's ``sandboxed`` field)."""
PARSE_TIMEOUT_S = 60.0
"""Wall-clock seconds one sandboxed parse may take. The slowest corpus file (117-page
GeoTopo PDF) parses in ~5 s and the 872-page handbook DOCX in ~10 s; 60 s leaves room for slow
machines and the largest accepted upload while still freeing a stalled worker within a minute."""
PARSE_MEMORY_BYTES = 2 * 1024**3
"""Address-space cap (RLIMIT_AS) of a parse worker, in bytes: 2 GiB. Corpus parses peak under
~300 MB resident; address space runs above resident (allocator arenas, mapped libraries), so
2 GiB stops bombs (case a06 expands to 1 GiB; a12 declares 200 MB) without refusing real files."""


def parse(doc_type: str, data: bytes, filename: str | None = None) -> ParsedDocument:
    """Parse ``data`` as ``doc_type`` (a :attr:`docanchor.formats.Format.name`), in the sandbox
    when the format says so.

    Raises:
        UnsupportedType: ``doc_type`` is no registered format.
        DocumentError, TooLarge: the parser's, or the sandbox's (``parse_timeout`` ...).
    """
    fmt = formats.get(doc_type)
    if fmt is None:
        raise UnsupportedType()
    return call(fmt.parser, data, filename, sandboxed=fmt.sandboxed)


def call(target: str, *args, sandboxed: bool = True, timeout_s: float = PARSE_TIMEOUT_S):
    """Call ``target`` (``"module:function"``) with ``args``: in a sandbox worker under
    ``timeout_s`` and :data:`PARSE_MEMORY_BYTES`, or in process."""
    if sandboxed:
        return run_sandboxed(target, *args, timeout_s=timeout_s, memory_bytes=PARSE_MEMORY_BYTES)
    module, func = target.split(":")
    return getattr(import_module(module), func)(*args)
