"""What ``docanchor ingest`` will do with each file, decided before anything is written.

A document remembers its sources (absolute paths for files the CLI read). A file is

- ``unchanged`` when a document with its bytes already lists its path (nothing is sent);
- ``replace`` when documents list its path but hold other bytes (an edited file): the new version
  is stored first, then the path is taken off the old one, which goes when no other file has it;
- ``add`` otherwise (new bytes, or bytes stored from elsewhere: the path is added to that document);
- ``error`` when it cannot be read or is too large.

With ``--sync``, a path under a synced folder that a document lists but that no longer exists is
taken off it (:class:`Removal`); the document is deleted when no source remains and no file being
ingested has its bytes (a renamed file keeps its document).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from docanchor.errors import DocAnchorError, unreadable_file
from docanchor.types import make_doc_id, path_source


@dataclass
class FileWork:
    """One file's planned work.

    Attributes:
        path: the file as walked or named.
        source: its absolute path (what documents record).
        doc_id: the id its bytes give (``None`` when it cannot be read).
        action: ``add``, ``replace``, ``unchanged`` or ``error``.
        stored: the document that already holds these bytes, if any (a summary dict).
        previous: documents that list this source but hold other bytes (earlier versions).
        error: why the file cannot be ingested (``action == "error"``).
    """

    path: Path
    source: str
    doc_id: str | None = None
    action: str = "add"
    stored: dict | None = None
    previous: list[dict] = field(default_factory=list)
    error: DocAnchorError | None = None


@dataclass
class Removal:
    """A source that is gone from a synced folder, and the document that lists it.

    Attributes:
        deletes: no source of the document remains and no ingested file has its bytes: the
            document and its chunks go (this is what ``--sync`` asks about first).
    """

    doc: dict
    source: str
    deletes: bool


def plan_files(paths: list[Path], docs: list[dict], max_bytes: int, precheck: bool = False) -> list[FileWork]:
    """Each file's :class:`FileWork` against the stored ``docs`` (summaries with ``sources``).

    ``precheck`` (``--dry-run``): a file that would be sent is also checked as far as it can be
    without parsing or embedding (:func:`ingest.pipeline.precheck`); one that fails is an ``error``.
    """
    from plugin.api import clean_source  # when it runs: the package stays light

    by_id = {d["doc_id"]: d for d in docs}
    listing: dict[str, list[dict]] = {}
    for d in docs:
        for s in d.get("sources") or ():
            listing.setdefault(s, []).append(d)
    works = []
    for path in paths:
        work = FileWork(path, path_source(path))
        data = b""
        try:
            clean_source(work.source)  # the API's check: a path over its limit is invalid_argument
            data = read_limited(path, max_bytes)
            work.doc_id = make_doc_id(data)
        except DocAnchorError as err:
            work.action, work.error = "error", err
        except OSError as exc:
            work.action = "error"
            work.error = unreadable_file(exc)
        if work.doc_id is not None:
            work.stored = by_id.get(work.doc_id)
            work.previous = [d for d in listing.get(work.source, []) if d["doc_id"] != work.doc_id]
            if work.previous:
                work.action = "replace"
            elif work.stored is not None and work.source in (work.stored.get("sources") or ()):
                work.action = "unchanged"
            if precheck and work.stored is None:
                _precheck(work, data)
        works.append(work)
    return works


def _precheck(work: FileWork, data: bytes) -> None:
    from ingest.pipeline import precheck

    try:
        precheck(data, work.path.name)
    except DocAnchorError as err:
        work.action, work.error = "error", err


def read_limited(path: Path, max_bytes: int) -> bytes:
    """A file's bytes, refused when larger than ``max_bytes``.

    Raises:
        TooLarge: the file is larger than ``max_bytes``.
        OSError: it cannot be read.
    """
    from ingest.pipeline import check_size  # the one sentence for a file over the upload limit

    check_size(path.stat().st_size, max_bytes)
    return path.read_bytes()


def plan_removals(folders: list[Path], docs: list[dict], works: list[FileWork]) -> list[Removal]:
    """Sources under ``folders`` that documents list but that no longer exist, in list order."""
    roots = [os.path.abspath(f) for f in folders]
    arriving = {w.doc_id for w in works if w.doc_id is not None}
    removals = []
    for d in docs:
        sources = d.get("sources") or []
        gone = [s for s in sources if _under(s, roots) and not os.path.lexists(s)]
        for s in gone:
            deletes = len(gone) == len(sources) and d["doc_id"] not in arriving
            removals.append(Removal(d, s, deletes))
    return removals


def _under(source: str, roots: list[str]) -> bool:
    return os.path.isabs(source) and any(source.startswith(root.rstrip(os.sep) + os.sep) for root in roots)
