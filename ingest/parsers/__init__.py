"""Parsers, one module per format, each ``parse_<name>(data: bytes, filename: str | None) ->
ParsedDocument``. :func:`parse` picks one by detected type from the format registry
(:mod:`docanchor.formats`: its ``parser`` and ``sandboxed`` fields).

Every parser returns normalised text and blocks (:mod:`ingest.builder`) and raises
:class:`~docanchor.errors.DocumentError` with a specific code (``pdf_encrypted``,
``pdf_unreadable``, ``no_text_layer``, ``docx_unsupported``, ``malformed`` ...) or
:class:`~docanchor.errors.TooLarge`; never a dependency's own exception.

Binary and archive formats are parsed in a killable worker process (:mod:`ingest.sandbox`)
under a CPU-time limit (``Settings.parse_cpu_s``), a wall-clock backstop (``Settings.parse_wall_s``)
and a memory cap (``Settings.parse_memory_bytes``): their parsers walk untrusted object
graphs and compressed streams, where one hostile file could otherwise stall or exhaust the
server. Text, Markdown, HTML and CSV parse in process. Pages that hold only an image are read by
OCR afterwards (:mod:`ingest.ocr`), one page per sandboxed call under the same caps.
"""

from __future__ import annotations

from importlib import import_module

from docanchor import formats
from docanchor.errors import UnsupportedType
from docanchor.settings import Settings
from docanchor.types import ParsedDocument
from ingest.sandbox import run_sandboxed

SANDBOXED = frozenset(f.name for f in formats.FORMATS if f.sandboxed)
"""Types parsed in a worker process (the registry's ``sandboxed`` field)."""


def parse(doc_type: str, data: bytes, filename: str | None = None, *, cpu_s: float = Settings.parse_cpu_s,
          wall_s: float = Settings.parse_wall_s,
          memory_bytes: int = Settings.parse_memory_bytes) -> ParsedDocument:
    """Parse ``data`` as ``doc_type`` (a :attr:`docanchor.formats.Format.name`), in the sandbox
    when the format says so.

    Args:
        cpu_s: CPU seconds a sandboxed parse may use (``DOCANCHOR_PARSE_CPU_S``).
        wall_s: wall-clock seconds a sandboxed parse may take, a backstop against stalls
            (``DOCANCHOR_PARSE_WALL_S``).
        memory_bytes: memory a sandboxed parse may allocate, in bytes (``DOCANCHOR_PARSE_MEMORY_BYTES``).

    Raises:
        UnsupportedType: ``doc_type`` is no registered format.
        DocumentError, TooLarge: the parser's, or the sandbox's (``parse_cpu_limit``,
            ``parse_timeout`` ..., see :meth:`ingest.sandbox.Sandbox.run`).
    """
    fmt = formats.get(doc_type)
    if fmt is None:
        raise UnsupportedType()
    return call(fmt.parser, data, filename, sandboxed=fmt.sandboxed, cpu_s=cpu_s, wall_s=wall_s,
                memory_bytes=memory_bytes)


def call(target: str, *args, sandboxed: bool = True, cpu_s: float = Settings.parse_cpu_s,
         wall_s: float = Settings.parse_wall_s, memory_bytes: int = Settings.parse_memory_bytes,
         pool: str = "parse"):
    """Call ``target`` (``"module:function"``) with ``args``: in a sandbox worker of ``pool``
    under ``cpu_s`` seconds of CPU time, a ``wall_s`` wall-clock backstop and ``memory_bytes`` of
    memory, or in process."""
    if sandboxed:
        return run_sandboxed(target, *args, cpu_s=cpu_s, wall_s=wall_s, memory_bytes=memory_bytes, pool=pool)
    module, func = target.split(":")
    return getattr(import_module(module), func)(*args)
