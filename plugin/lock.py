"""One process per embedded Chroma data dir: an exclusive ``fcntl.flock`` on ``<data_dir>/docanchor.lock``.

Embedded Chroma must not be written by two processes: another process's writes go missing from
``query()`` (chroma-core/chroma #3792, #7040). ``docanchor serve``, the CLI's write commands and
the Python API's writes hold this lock (:func:`hold`, shared by everything in one process); a
second process is refused at once with a clear error. The lock is released by the kernel when its
holder exits, even after SIGKILL, so a stale file never blocks. With a Chroma server
(``chroma_host``) several processes share the index through it, each on its own data dir, but a data
dir's BM25 index and job log still belong to one process: the same rule holds, so ``docanchor mcp``,
``reindex``, ``check --repair`` or a Python program beside a server on its data dir is refused (the
CLI's other commands go through the server's API). The workers of ``docanchor serve --workers`` share
their supervisor's lock (:func:`inherit`).

Taking the lock is the first write to a data dir: the store the holder's settings name is recorded
then, or checked against the data dir's record (:func:`docanchor.store_record.claim`).

The lock file says who holds it, one line ``<pid> <holder> [<address>]``: a server adds the base
URL it answers at, so the CLI sends its commands there (:func:`current_holder`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from docanchor.errors import ConfigError, Conflict
from docanchor.settings import Settings
from docanchor.store_record import claim

LOCK_NAME = "docanchor.lock"
_LINE_BYTES = 1000
"""Most bytes of the lock file's line that are read back (a pid, a holder name and a URL)."""


class DataDirLock:
    """An exclusive, non-blocking lock on a data dir, as a context manager.

    Args:
        settings: ``data_dir`` is locked.
        holder: what holds it, written into the lock file (``server``, ``python`` or a CLI command name).
        enabled: False for a lock another process holds for this one (:func:`inherit`).

    Raises:
        Conflict: ``store_locked`` from :meth:`acquire` when another process holds the lock (or
            another :class:`DataDirLock` of this process: use :func:`hold` to share one).
        ConfigError: from :meth:`acquire` when ``settings`` name another store than the one the data
            dir belongs to (:func:`docanchor.store_record.claim`, which records it on the first write).
    """

    def __init__(self, settings: Settings, holder: str, enabled: bool = True) -> None:
        self.settings = settings
        self.path = Path(settings.data_dir) / LOCK_NAME
        self.holder = holder
        self.enabled = enabled
        self._fd: int | None = None

    def acquire(self) -> "DataDirLock":
        if not self.enabled or self._fd is not None:
            return self
        try:
            import fcntl
        except ImportError:  # Windows: no flock; the README says to run one process per data dir
            claim(self.settings)
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            other = os.pread(fd, _LINE_BYTES, 0).decode("utf-8", "replace").split()
            os.close(fd)
            raise refusal(_holder(other), self.holder) from None
        self._fd = fd
        try:
            claim(self.settings)  # the data dir's first writer records its store; later ones must name it
        except ConfigError:
            self.release()
            raise
        self._write(None)
        return self

    def advertise(self, address: str) -> None:
        """Say that a server holds the lock and answers at ``address`` (``http://127.0.0.1:8765``),
        whoever of this process took it first."""
        self.holder = "server"
        self._write(address)

    def _write(self, address: str | None) -> None:
        if self._fd is not None:
            line = f"{os.getpid()} {self.holder}" + (f" {address}" if address else "") + "\n"
            try:
                os.ftruncate(self._fd, 0)
                os.pwrite(self._fd, line.encode(), 0)
            except OSError:  # a full disk: the flock holds anyway; only the holder's line is missing
                pass

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

    def __enter__(self) -> "DataDirLock":
        return self.acquire()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


class Hold:
    """One user's share of this process's lock on a data dir (see :func:`hold`)."""

    def __init__(self, key: str, lock: DataDirLock) -> None:
        self.key = key
        self.lock = lock
        self._released = False

    def advertise(self, address: str) -> None:
        """See :meth:`DataDirLock.advertise`."""
        self.lock.advertise(address)

    def release(self) -> None:
        """Give this share back; the last share of the process releases the lock. Idempotent."""
        with _held_guard:
            if self._released:
                return
            self._released = True
            lock, count = _held[self.key]
            if count > 1:
                _held[self.key] = (lock, count - 1)
                return
            del _held[self.key]
        lock.release()


_held: dict[str, tuple[DataDirLock, int]] = {}
_held_guard = threading.Lock()


def hold(settings: Settings, holder: str) -> Hold:
    """This process's lock on ``settings.data_dir``, taken on first use and shared by every caller
    of the process (one process may open a data dir several times; Chroma shares its client per
    path within a process).

    Raises:
        Conflict: ``store_locked`` when another process holds the data dir.
        ConfigError: ``settings`` name another store than the data dir's (:class:`DataDirLock`).
    """
    return _share(settings, lambda: DataDirLock(settings, holder).acquire())


def inherit(settings: Settings) -> Hold:
    """This process's share of a lock its parent holds for it: a worker of ``docanchor serve
    --workers``, whose supervisor holds the data dir (:mod:`plugin.workers`). The process's own
    writes (:func:`hold`) then share it instead of being refused by the supervisor's lock."""
    return _share(settings, lambda: DataDirLock(settings, "server", enabled=False))


def _share(settings: Settings, take: Callable[[], DataDirLock]) -> Hold:
    key = str(Path(settings.data_dir).resolve())
    with _held_guard:
        lock, count = _held.get(key, (None, 0))
        if lock is None:
            lock = take()
        _held[key] = (lock, count + 1)
    return Hold(key, lock)


@dataclass(frozen=True)
class Holder:
    """Who holds a data dir's lock: its ``pid``, what it is (``server``, ``python`` or a CLI
    command) and, for a server, the base URL it answers at (else ``None``)."""

    pid: str
    name: str
    address: str | None = None


def current_holder(settings: Settings) -> Holder | None:
    """Who holds the lock of ``settings.data_dir`` now; ``None`` when nobody does or when there is
    no lock file. Creates nothing (read-only commands use it)."""
    path = Path(settings.data_dir) / LOCK_NAME
    try:
        import fcntl

        fd = os.open(path, os.O_RDONLY)
    except (ImportError, OSError):
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _holder(os.pread(fd, _LINE_BYTES, 0).decode("utf-8", "replace").split())
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _holder(content: list[str]) -> Holder:
    """The lock file's words (``pid holder [address]``) as a :class:`Holder`; an empty or partly
    written line (the holder is between truncate and write) reads as an unknown server."""
    pid = content[0] if content and content[0].isdigit() else "unknown"
    name = content[1] if len(content) > 1 else "server"
    address = content[2] if len(content) > 2 and content[2].startswith(("http://", "https://")) else None
    return Holder(pid, name, address)


FORWARDED = frozenset({"ingest", "delete"})
"""CLI write commands that go through a server's API once it has written its address (reading
commands always do); while it starts they are refused."""
_INSTEAD = {
    "python": "send documents to its HTTP API (POST /v1/documents)",
}
ALONE = frozenset({"reindex"})
"""Commands that need the data dir to themselves: a running server has to stop first."""
"""What a writer other than a forwarded CLI command can do while a server holds the data dir."""


def refusal(other: Holder, wanted: str) -> Conflict:
    """``store_locked`` for ``wanted`` (the command asking) while ``other`` holds the lock."""
    if other.name == "server" and wanted in FORWARDED:
        message = (f"The data dir is in use by a server (pid {other.pid}) that is still starting; try again once it "
                   f"answers (docanchor {wanted} then goes through its API), or stop the server.")
    elif other.name == "server":
        at = f" at {other.address}" if other.address else ""
        instead = (f"{wanted} needs the data dir to itself: stop the server" if wanted in ALONE
                   else f"{_INSTEAD.get(wanted, 'use another data dir')}, or stop the server")
        message = f"The data dir is in use by a running server (pid {other.pid}){at}; {instead}."
    elif other.name == "python":
        message = (f"The data dir is in use by a program using DocAnchor's Python API (pid {other.pid}); wait for "
                   "it to close() its DocAnchor or end, or use another data dir.")
    else:
        message = (f"The data dir is in use by another docanchor {other.name} (pid {other.pid}); wait for it to "
                   "finish or use another --data-dir.")
    return Conflict(message, code="store_locked", pid=other.pid, holder=other.name)
