"""One process per embedded Chroma data dir: an exclusive ``fcntl.flock`` on ``<data_dir>/docanchor.lock``.

Embedded Chroma must not be written by two processes: another process's writes go missing from
``query()`` (chroma-core/chroma #3792, #7040). ``docanchor serve`` and the CLI's write commands
(ingest, delete) hold this lock; a second one is refused at once with a clear error. The lock is
released by the kernel when its holder exits, even after SIGKILL, so a stale file never blocks.
With a Chroma server (``chroma_host``) several processes may share the index and no lock is taken.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType

from docanchor.errors import Conflict
from docanchor.settings import Settings

LOCK_NAME = "docanchor.lock"


class DataDirLock:
    """An exclusive, non-blocking lock on a data dir, as a context manager.

    Args:
        settings: ``data_dir`` is locked unless ``chroma_host`` is set.
        holder: what holds it, written into the lock file (``server`` or a CLI command name).

    Raises:
        Conflict: ``store_locked`` from :meth:`acquire` when another process holds the lock.
    """

    def __init__(self, settings: Settings, holder: str) -> None:
        self.path = Path(settings.data_dir) / LOCK_NAME
        self.holder = holder
        self.enabled = not settings.chroma_host
        self._fd: int | None = None

    def acquire(self) -> "DataDirLock":
        if not self.enabled or self._fd is not None:
            return self
        try:
            import fcntl
        except ImportError:  # Windows: no flock; the README says to run one process per data dir
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            other = os.pread(fd, 200, 0).decode("utf-8", "replace").split()
            os.close(fd)
            raise _locked(other, self.holder) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {self.holder}\n".encode(), 0)
        self._fd = fd
        return self

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


_THROUGH_SERVER = {
    "ingest": "send the file to the server's API (POST /v1/documents)",
    "delete": "delete it through the server's API (DELETE /v1/documents/<doc_id>)",
}
"""What a CLI command can do instead while a server holds the data dir."""


def _locked(content: list[str], wanted: str) -> Conflict:
    """``store_locked`` for ``wanted`` (the command asking) while ``content``'s holder has the lock."""
    pid = content[0] if content and content[0].isdigit() else "unknown"
    holder = content[1] if len(content) > 1 else "server"
    if holder == "server":
        instead = _THROUGH_SERVER.get(wanted, "use another --data-dir")
        message = f"The data dir is in use by a running server (pid {pid}); {instead}, or stop the server."
    else:
        message = (f"The data dir is in use by another docanchor {holder} (pid {pid}); wait for it to finish "
                   "or use another --data-dir.")
    return Conflict(message, code="store_locked", pid=pid, holder=holder)
