"""Parsers, one module per type, each ``parse_<type>(data: bytes, filename: str | None) ->
ParsedDocument``. :func:`parse` picks one by detected type.

Every parser returns normalised text and blocks (:mod:`ingest.builder`) and raises
:class:`~docanchor.errors.DocumentError` with a specific code (``pdf_encrypted``,
``pdf_unreadable``, ``no_text_layer``, ``docx_unsupported``, ``malformed`` ...) or
:class:`~docanchor.errors.TooLarge`; never a dependency's own exception.
"""

from __future__ import annotations

from importlib import import_module

from docanchor.errors import UnsupportedType
from docanchor.types import ParsedDocument

PARSERS = {
    "pdf": "ingest.parsers.pdf:parse_pdf",
    "docx": "ingest.parsers.docx:parse_docx",
    "txt": "ingest.parsers.text:parse_txt",
    "md": "ingest.parsers.text:parse_md",
    "html": "ingest.parsers.html:parse_html",
    "csv": "ingest.parsers.csv:parse_csv",
}


def parse(doc_type: str, data: bytes, filename: str | None = None) -> ParsedDocument:
    """Parse ``data`` as ``doc_type`` (one of :data:`docanchor.types.DOC_TYPES`)."""
    target = PARSERS.get(doc_type)
    if target is None:
        raise UnsupportedType()
    module, func = target.split(":")
    return getattr(import_module(module), func)(data, filename)
