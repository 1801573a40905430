"""A loopback HTTP server that answers as slowly as an attacker's: one byte at a time, forever.

Paths (the query string is ignored) choose what drips (each byte after ``interval_s`` seconds, until the client hangs up or the
server stops):

- ``/length``: status and headers at once with ``Content-Length: 1000000``, then the body drips;
- ``/close``: no length (the body ends when the connection closes), the body drips;
- ``/chunked``: ``Transfer-Encoding: chunked``, one one-byte chunk per drip;
- ``/headers``: the status line and headers themselves drip (an endless header);
- ``/short``: ``Content-Length: 1000``, then 10 bytes and the connection closes;
- ``/ok.md``: a small Markdown document at once (to check the server is usable).
"""

from __future__ import annotations

import socket
import socketserver
import threading

from tests.waiting import BACKSTOP_S

OK_BODY = b"# Dripping\n\nA small document served at once, to show the drip server answers normally too.\n"


class _Handler(socketserver.BaseRequestHandler):
    server: "DripServer"

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.settimeout(BACKSTOP_S)  # a client that never sends its request (a backstop, not a figure)
        try:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 65536:
                block = sock.recv(4096)
                if not block:
                    return
                head += block
            target = head.split(b" ", 2)[1].decode("latin-1") if head.count(b" ") >= 2 else "/"
            self.server.requests.append(target)
            path = target.split("?", 1)[0]
            if path == "/ok.md":
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/markdown\r\nContent-Length: "
                             + str(len(OK_BODY)).encode() + b"\r\nConnection: close\r\n\r\n" + OK_BODY)
                return
            if path == "/short":  # promises 1,000 bytes, sends 10, hangs up
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 10)
                return
            if path == "/headers":
                self._drip(sock, b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 10_000_000)
                return
            head_out = {
                "/length": b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n",
                "/close": b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n",
                "/chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            }.get(path, b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            sock.sendall(head_out)
            if path == "/chunked":
                self._drip(sock, b"1\r\nx\r\n" * 1_000_000, step=6)
            elif path in ("/length", "/close"):
                self._drip(sock, b"x" * 1_000_000)
        except OSError:
            return

    def _drip(self, sock: socket.socket, data: bytes, step: int = 1) -> None:
        with self.server.lock:
            self.server.dripping += 1
        try:
            for i in range(0, len(data), step):
                if self.server.stopping.wait(self.server.interval_s):
                    return
                sock.sendall(data[i:i + step])
        finally:
            with self.server.lock:
                self.server.dripping -= 1


class DripServer(socketserver.ThreadingTCPServer):
    """Serve on 127.0.0.1:<free port> in a daemon thread; :meth:`stop` ends every drip at once."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, interval_s: float = 0.5) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.interval_s = interval_s
        self.stopping = threading.Event()
        self.requests: list[str] = []
        """Request targets (path and query) in the order they arrived."""
        self.dripping = 0
        """Connections being dripped to right now (the client has not hung up yet)."""
        self.lock = threading.Lock()
        self.base = f"http://127.0.0.1:{self.server_address[1]}"
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def stop(self) -> None:
        """End every drip and stop serving (again: a no-op)."""
        if self.stopping.is_set():
            return
        self.stopping.set()
        self.shutdown()
        self.server_close()
