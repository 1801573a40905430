"""Another process holding a data dir's lock, as a server, an MCP session or a CLI command would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

_SCRIPT = """
import sys
from docanchor.settings import Settings
from plugin.lock import DataDirLock
lock = DataDirLock(Settings(data_dir=sys.argv[1]), sys.argv[2]).acquire()
if len(sys.argv) > 3:
    lock.advertise(sys.argv[3])
print("held", flush=True)
sys.stdin.read()
"""


class LockHolder:
    """A subprocess that holds ``data_dir``'s lock as ``holder`` (advertising ``address`` when given)
    until :meth:`stop`; also a context manager. ``pid`` is its process id."""

    def __init__(self, data_dir: Path, holder: str = "server", address: str | None = None) -> None:
        args = [sys.executable, "-c", _SCRIPT, str(data_dir), holder] + ([address] if address else [])
        self.proc = subprocess.Popen(args, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if line.strip() != "held":
            self.stop()
            raise RuntimeError(f"the lock holder did not start (exit {self.proc.returncode})")
        self.pid = self.proc.pid

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=120)

    def __enter__(self) -> "LockHolder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
