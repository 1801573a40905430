"""Free space on the disk of the data dir: refuse writes before it runs out, and recognise a full
disk; and the one way a file is replaced whole (:func:`replaced_atomically`).

A full disk is not a transient store error: embedded Chroma's Rust core answers a failed write
with ``Error in compaction: Failed to apply logs to the hnsw segment writer`` or ``(code: 13)
database or disk is full``, and a later write to it may then block for good while holding
Python's GIL, freezing every thread of the server. So :class:`DiskGuard` keeps writes away from
the last :attr:`~docanchor.settings.Settings.min_free_disk_bytes` of the disk:

- :meth:`DiskGuard.check` raises :class:`~docanchor.errors.DiskFull` (507 ``disk_full``) before a
  write that would leave less than that free (callers pass what they are about to write, e.g.
  :func:`chunk_store_bytes` for a document's chunks);
- :meth:`DiskGuard.guard` turns an error raised while writing into ``DiskFull`` when the disk is
  the cause (``ENOSPC``/``EDQUOT`` anywhere in the exception chain, SQLite's ``SQLITE_FULL``, or
  a failed write -- a store, OS or SQLite error -- while less than the reserve is free);
- :meth:`DiskGuard.health` says whether the disk is (nearly) full, for ``GET /healthz``.
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from docanchor.errors import DiskFull, StoreUnavailable

_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_SQLITE_FULL = 13
_FULL_TEXT = ("database or disk is full", "no space left on device", "disk quota exceeded", "(code: 13)")
"""How a full disk reads in SQLite's and Chroma's Rust messages (which carry no errno)."""

_WRITE_ERRORS = (StoreUnavailable, OSError, sqlite3.Error)
"""Errors a failed write raises (Chroma's and the BM25 index's are mapped to StoreUnavailable):
with the disk short of space, such an error is put down to the disk."""

CHUNK_OVERHEAD_BYTES = 4096
"""Bytes one stored chunk takes besides its vector copies: its text and metadata in Chroma's SQLite
(with Chroma's full-text index of it), its BM25 row, and page slack. An upper estimate: the bench
(``bench/big_ingest.py``) prints the measured bytes per chunk next to :func:`chunk_store_bytes`."""


def chunk_store_bytes(n_chunks: int, dimension: int) -> int:
    """Bytes the store may need for ``n_chunks`` chunks of ``dimension``-float vectors: each vector
    is written three times as float32 (Chroma's write-ahead log, its HNSW segment, and a copy in
    flight while compacting) plus :data:`CHUNK_OVERHEAD_BYTES`."""
    return n_chunks * (3 * 4 * dimension + CHUNK_OVERHEAD_BYTES)


@contextmanager
def replaced_atomically(target: Path, mode: int = 0o644) -> Iterator[Path]:
    """A temporary path beside ``target`` (in its folder, made if missing) for the caller to write;
    when the block ends without an exception, the file there gets ``mode`` and is renamed over
    ``target`` (``os.replace``: a reader, or another process doing the same, sees the old file or
    the new one whole, never a part). The temporary file is removed whatever happens.

    Raises:
        OSError: the folder or the temporary file cannot be made, or the rename fails (a full
            disk, no permission); the block's own exceptions pass through.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    partial = Path(name)
    try:
        yield partial
        os.chmod(partial, mode)  # mkstemp's file is the owner's alone
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def free_bytes(path: Path) -> int | None:
    """Free bytes for an unprivileged writer on the filesystem holding ``path`` (or its nearest
    existing parent); ``None`` when that cannot be read."""
    path = Path(path)
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def is_disk_full(exc: BaseException | None) -> bool:
    """Whether ``exc`` or an exception it was raised from says the disk is full."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, DiskFull):
            return True
        if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
            return True
        if isinstance(exc, sqlite3.Error) and getattr(exc, "sqlite_errorcode", None) == _SQLITE_FULL:
            return True
        if any(text in str(exc).lower() for text in _FULL_TEXT):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


class DiskGuard:
    """Free-space checks for one data dir.

    The guard remembers the last write it refused (or that failed for space): until the disk has
    room for that write plus the reserve, :meth:`health` reports the disk as full, even when a
    smaller write would still fit.

    Args:
        data_dir: the folder whose filesystem is watched.
        min_free_bytes: the reserve writes must leave free, in bytes (0 turns the checks off,
            but a failed write with ``ENOSPC`` is still reported as ``disk_full``).
    """

    def __init__(self, data_dir: Path, min_free_bytes: int) -> None:
        self.data_dir = Path(data_dir)
        self.min_free_bytes = max(0, int(min_free_bytes))
        self._lock = threading.Lock()
        self._refused: tuple[float, int] | None = None
        """(Unix seconds, free bytes it needed) of the write last refused or failed for space."""

    def error(self, need_bytes: int = 0) -> DiskFull:
        """The ``disk_full`` error for the current state (with the free bytes and the reserve)."""
        free = free_bytes(self.data_dir)
        shown = f"{free:,} bytes are free" if free is not None else "its free space cannot be read"
        needs = f"; this write needs about {need_bytes:,} bytes" if need_bytes else ""
        return DiskFull(
            f"The disk holding DocAnchor's data dir ({self.data_dir}) is full: {shown}{needs}, and DocAnchor keeps "
            f"{self.min_free_bytes:,} bytes free (DOCANCHOR_MIN_FREE_DISK_BYTES). Nothing was stored; free space "
            "on that disk (or move the data dir to a larger one), then try again. Reading and searching still work.",
            free_bytes=free, min_free_bytes=self.min_free_bytes, need_bytes=need_bytes,
        )

    def check(self, need_bytes: int = 0) -> None:
        """Raise before a write of about ``need_bytes`` bytes that would eat into the reserve.

        Raises:
            DiskFull: ``disk_full`` (507), remembered for :meth:`health`.
        """
        need_bytes = max(0, need_bytes)
        free = free_bytes(self.data_dir)
        if free is not None and self.min_free_bytes and free - need_bytes < self.min_free_bytes:
            raise self._mark(self.error(need_bytes), need_bytes)

    @contextmanager
    def guard(self) -> Iterator[None]:
        """Re-raise an error of the enclosed writes as :class:`DiskFull` when the disk is its cause."""
        try:
            yield
        except DiskFull as exc:
            raise self._mark(exc, int(exc.details.get("need_bytes") or 0))
        except Exception as exc:
            free = free_bytes(self.data_dir)
            short = free is not None and free < max(self.min_free_bytes, 1)
            if is_disk_full(exc) or (short and isinstance(exc, _WRITE_ERRORS)):
                # the write needed more than was free then: report full until the disk grows past that
                raise self._mark(self.error(), (free or 0) + 1) from exc
            raise

    def health(self) -> dict[str, Any] | None:
        """``{"code": "disk_full", "message", "free_bytes", "since"}`` while less than the reserve is
        free, or the last refused write would still not fit; else ``None``."""
        free = free_bytes(self.data_dir)
        if free is None:
            return None
        with self._lock:
            refused = self._refused
            if refused is not None and free - refused[1] >= self.min_free_bytes:
                self._refused = refused = None  # space was freed: the refused write fits now
        if refused is None and free >= max(self.min_free_bytes, 1):
            return None
        err = self.error(refused[1] if refused else 0)
        return {"code": err.code, "message": err.message, "free_bytes": free,
                "since": refused[0] if refused else time.time()}

    def _mark(self, exc: DiskFull, need_bytes: int) -> DiskFull:
        with self._lock:
            self._refused = (self._refused[0] if self._refused else time.time(), max(0, need_bytes))
        return exc
