"""Parsers, one module per type, each ``parse_<type>(data: bytes, filename: str | None) ->
ParsedDocument``. :func:`parse` picks one by detected type.

Every parser returns normalised text and blocks (:mod:`ingest.builder`) and raises
:class:`~docanchor.errors.DocumentError` with a specific code (``pdf_encrypted``,
``pdf_unreadable``, ``no_text_layer``, ``docx_unsupported``, ``malformed`` ...) or
:class:`~docanchor.errors.TooLarge`; never a dependency's own exception.

PDF and DOCX are parsed in a killable worker process (:mod:`ingest.sandbox`) under
:data:`PARSE_TIMEOUT_S` and :data:`PARSE_MEMORY_BYTES`: their parsers walk untrusted object
graphs and compressed streams, where one hostile file could otherwise stall or exhaust the
server. Text, Markdown, HTML and CSV parse in process.
"""

from __future__ import annotations

from importlib import import_module

from docanchor.errors import UnsupportedType
from docanchor.types import ParsedDocument
from ingest.sandbox import run_sandboxed

PARSERS = {
    "pdf": "ingest.parsers.pdf:parse_pdf",
    "docx": "ingest.parsers.docx:parse_docx",
    "txt": "ingest.parsers.text:parse_txt",
    "md": "ingest.parsers.text:parse_md",
    "html": "ingest.parsers.html:parse_html",
    "csv": "ingest.parsers.csv:parse_csv",
}

SANDBOXED = frozenset({"pdf", "docx"})
"""Types parsed in a worker process."""
PARSE_TIMEOUT_S = 60.0
"""Wall-clock seconds one sandboxed parse may take. The slowest corpus file (117-page
GeoTopo PDF) parses in ~5 s and the 872-page handbook DOCX in ~10 s; 60 s leaves room for slow
machines and the largest accepted upload while still freeing a stalled worker within a minute."""
PARSE_MEMORY_BYTES = 2 * 1024**3
"""Address-space cap (RLIMIT_AS) of a parse worker, in bytes: 2 GiB. Corpus parses peak under
~300 MB resident; address space runs above resident (allocator arenas, mapped libraries), so
2 GiB stops bombs (case a06 expands to 1 GiB; a12 declares 200 MB) without refusing real files."""


def parse(doc_type: str, data: bytes, filename: str | None = None) -> ParsedDocument:
    """Parse ``data`` as ``doc_type`` (one of :data:`docanchor.types.DOC_TYPES`)."""
    target = PARSERS.get(doc_type)
    if target is None:
        raise UnsupportedType()
    if doc_type in SANDBOXED:
        return run_sandboxed(target, data, filename, timeout_s=PARSE_TIMEOUT_S, memory_bytes=PARSE_MEMORY_BYTES)
    module, func = target.split(":")
    return getattr(import_module(module), func)(data, filename)
