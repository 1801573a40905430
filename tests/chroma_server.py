"""Start and stop a real ``chroma run`` server from the installed chromadb package."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.live_server import free_port


class ChromaServer:
    def __init__(self, path: Path) -> None:
        exe = Path(sys.executable).parent / "chroma"
        if not exe.exists():
            exe = Path(shutil.which("chroma") or "chroma")
        self.port = free_port()
        self.host = "127.0.0.1"
        self.log_path = path.parent / f"chroma-{self.port}.log"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [str(exe), "run", "--path", str(path), "--host", self.host, "--port", str(self.port)],
            stdout=self.log, stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        url = f"http://{self.host}:{self.port}/api/v2/heartbeat"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chroma exited: {self.log_path.read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.3)
        raise TimeoutError("chroma server did not answer its heartbeat")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
