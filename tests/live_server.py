"""Helpers to run the real ``docanchor serve`` on a loopback port and talk to it with urllib.

Every wait is for a state (the server answers, a job ends), with :mod:`tests.waiting`'s backstop.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Iterator

from tests.waiting import BACKSTOP_S, job_ended, wait_until

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving_fake(settings, threads: int = 4):
    """The real waitress server in this process (:func:`in_process`) on a DocAnchor with the fake
    embedder (its data dir is ``settings.data_dir``). Yields ``(base URL, the DocAnchor)``."""
    from plugin.api import DocAnchor
    from tests.fakes import HashEmbedder

    da = DocAnchor(settings, embedder=HashEmbedder())
    try:
        with in_process(settings, da, threads=threads) as server:
            yield f"http://127.0.0.1:{server.effective_port}", da
    finally:
        da.close()


class LiveServer:
    """A ``docanchor serve`` subprocess on 127.0.0.1:<free port> with its own data dir."""

    def __init__(self, data_dir: Path, env: dict[str, str] | None = None, prefix: list[str] | None = None) -> None:
        """``prefix`` runs the server under another command (e.g. ``nsenter`` into a namespace where
        the data dir is a small filesystem); the log stays in ``data_dir.parent`` as seen by the test."""
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.data_dir = data_dir
        full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "DOCANCHOR_PUBLIC_BASE_URL": self.base, **(env or {})}
        self.log = open(data_dir.parent / f"server-{self.port}.log", "wb")
        self.proc = subprocess.Popen(
            [*(prefix or []), sys.executable, "-m", "plugin.cli", "--data-dir", str(data_dir), "serve",
             "--host", "127.0.0.1", "--port", str(self.port)],
            cwd=REPO, env=full_env, stdout=self.log, stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout_s: float = BACKSTOP_S) -> None:
        """Poll ``GET /healthz`` until it answers 200 (loading the model can take minutes on a busy
        machine). Raises RuntimeError at once if the process exits, AssertionError after ``timeout_s``."""

        def healthy() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.read_log()}")
            try:
                return self.request("GET", "/healthz", timeout_s=timeout_s)[0] == 200
            except OSError:  # not listening yet
                return False

        try:
            wait_until(healthy, "the server to answer /healthz", timeout_s, interval_s=0.3)
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {self.read_log()}") from None

    def read_log(self) -> str:
        self.log.flush()
        return (self.data_dir.parent / f"server-{self.port}.log").read_text(errors="replace")[-4000:]

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None,
                timeout_s: float = BACKSTOP_S) -> tuple[int, bytes]:
        req = urllib.request.Request(self.base + path, data=body, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    def json(self, method: str, path: str, payload: object | None = None,
             timeout_s: float = BACKSTOP_S) -> tuple[int, dict]:
        body = None if payload is None else json.dumps(payload).encode()
        status, raw = self.request(method, path, body, {"Content-Type": "application/json"}, timeout_s)
        return status, json.loads(raw)

    def upload(self, path: Path, timeout_s: float = BACKSTOP_S, headers: dict | None = None,
               follow: bool = True) -> tuple[int, dict]:
        """POST a file to /v1/documents. With ``follow``, a 202 is polled until its job ends and the
        answer is what a synchronous upload would have given: (201 or 200, the document) or
        (the error status, the JSON error body)."""
        boundary = uuid.uuid4().hex
        body = (
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{path.name}\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode() + path.read_bytes() + f"\r\n--{boundary}--\r\n".encode()
        status, raw = self.request(
            "POST", "/v1/documents", body,
            {**(headers or {}), "Content-Type": f"multipart/form-data; boundary={boundary}"}, timeout_s
        )
        body = json.loads(raw)
        if not (follow and status == 202):
            return status, body
        job = job_ended(lambda: self.job(body["job_id"], headers), f"the ingest job of {path.name} to end")
        if job["status"] == "done":
            return (200 if job["result"]["duplicate"] else 201), {**job["result"], "job_id": job["job_id"]}
        return job["error_status"], {"error": {"code": job["error_code"], "message": job["error_message"],
                                               "status": job["error_status"], "details": {}}}

    def job(self, job_id: str, headers: dict | None = None) -> dict:
        """``GET /v1/jobs/<job_id>``; anything but 200 fails the test (no point polling on)."""
        status, raw = self.request("GET", f"/v1/jobs/{job_id}", headers=headers)
        assert status == 200, f"GET /v1/jobs/{job_id}: {status} {raw[:500]!r}"
        return json.loads(raw)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@contextlib.contextmanager
def in_process(settings, da, threads: int = 4) -> Iterator[Any]:
    """``da`` served by the real waitress server (:func:`plugin.serve.make_server`) in this
    process on 127.0.0.1:<free port>, for tests that hand it fakes (a ``docanchor serve``
    subprocess would load the real model). Yields the server (``.effective_port``); stopped on
    the way out by :func:`plugin.serve.close_server` (requests being answered finish first, so no
    handler thread writes to a closed socket)."""
    from plugin.serve import close_server, make_server

    server = make_server(settings, da, host="127.0.0.1", port=0, threads=threads)
    loop = threading.Thread(target=server.run, daemon=True)
    loop.start()
    try:
        yield server
    finally:
        close_server(server, loop)


@contextlib.contextmanager
def running(data_dir: Path, env: dict[str, str] | None = None):
    """A :class:`LiveServer` that answers ``/healthz``, stopped on the way out."""
    server = LiveServer(data_dir, env)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()
