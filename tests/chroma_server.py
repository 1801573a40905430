"""Start and stop a real ``chroma run`` server from the installed chromadb package."""

from __future__ import annotations

import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.live_server import free_port
from tests.waiting import BACKSTOP_S, wait_until


class ChromaServer:
    """``chroma run`` on ``path``; on ``port`` when given (a server started again where one was
    stopped), else on a free one."""

    def __init__(self, path: Path, port: int | None = None) -> None:
        exe = Path(sys.executable).parent / "chroma"
        if not exe.exists():
            exe = Path(shutil.which("chroma") or "chroma")
        self.port = port or free_port()
        self.host = "127.0.0.1"
        self.log_path = path.parent / f"chroma-{self.port}.log"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [str(exe), "run", "--path", str(path), "--host", self.host, "--port", str(self.port)],
            stdout=self.log, stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout_s: float = BACKSTOP_S) -> None:
        """Poll the heartbeat until it answers 200. Raises RuntimeError at once if ``chroma`` exits,
        AssertionError after ``timeout_s``."""
        url = f"http://{self.host}:{self.port}/api/v2/heartbeat"

        def beating() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chroma exited: {self.log_path.read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(url, timeout=timeout_s) as r:
                    return r.status == 200
            except OSError:  # not listening yet
                return False

        wait_until(beating, "the chroma server's heartbeat", timeout_s, interval_s=0.3)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@contextmanager
def running_chroma(path: Path, port: int | None = None) -> Iterator[ChromaServer]:
    """A ``chroma run`` on ``path`` (on ``port`` when given), answering its heartbeat, stopped at the
    end (also when it never became ready)."""
    server = ChromaServer(path, port)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()
