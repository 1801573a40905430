"""MCP over Streamable HTTP at ``/mcp`` of the running service (same host, port and API keys).

The service is a WSGI app under waitress; the SDK's Streamable HTTP transport is ASGI. The
transport runs **stateless, with JSON responses**: every ``POST /mcp`` carries one JSON-RPC
message and is answered with one ``application/json`` body, so no request holds a waitress
thread longer than its tool call, and nothing depends on streaming through WSGI. a2wsgi (a
maintained ASGI-to-WSGI adapter) carries those requests to the transport, which runs on one event
loop in a background thread, started on the first ``/mcp`` request. ``GET /mcp`` (a stream of
server-initiated messages) and ``DELETE /mcp`` (end a session) answer 405: a stateless server has
neither, which the MCP spec allows and clients handle. DocAnchor's tools need neither: each is
one request and one answer.

Gate, before the transport sees a request (errors are the service's one JSON error body):
- API keys on (``DOCANCHOR_API_KEYS``): ``Authorization: Bearer <key>`` is required (401 with
  ``WWW-Authenticate: Bearer`` otherwise); ``X-DocAnchor-Namespace`` picks a namespace the key
  may use (403 otherwise), exactly as on ``/v1``.
- API keys off: DNS-rebinding protection, as the SDK does for local servers: the ``Host`` header
  must be a loopback address or the host of ``DOCANCHOR_PUBLIC_BASE_URL`` (421), and an
  ``Origin``, when sent, one of those (403).
- The body: at most :data:`MAX_MCP_BODY_BYTES` bytes (413 ``too_large``), and no lone UTF-16
  surrogate in any string of it (400 ``invalid_argument`` naming the field, e.g.
  ``params.arguments.query``; see :func:`plugin.bodies.refuse_surrogates`). The SDK's own
  checks would answer plain text and a parse error that names no field.
- The body: no object holding a key twice (:func:`plugin.bodies.unique_keys`, the check of every
  JSON door), answered as the SDK answers a body that is not JSON: ``400`` with JSON-RPC's parse
  error (``-32700``, id ``null``: which id was meant cannot be told), its message naming the key.
  The SDK's parser keeps the last of the two silently.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import threading
from typing import Any, Callable, Iterable
from urllib.parse import urlsplit

from docanchor.access import resolve_namespace
from docanchor.errors import DocAnchorError, Forbidden, InvalidRequest, MethodNotAllowed, TooLarge
from docanchor.settings import Settings
from plugin.api import DocAnchor
from plugin.bodies import header_text, refuse_surrogates, unique_keys
from plugin.v1 import bearer_token

log = logging.getLogger("docanchor.mcp")

MCP_PATH = "/mcp"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
MAX_MCP_BODY_BYTES = 1024 * 1024
"""Largest ``POST /mcp`` body, in bytes: one JSON-RPC message with a query or a URL."""
START_TIMEOUT_S = 30.0

WSGIApp = Callable[[dict, Callable], Iterable[bytes]]


class McpMount:
    """WSGI middleware: ``/mcp`` goes to the MCP transport, every other path to ``app``.

    Args:
        app: the service's WSGI app (Flask's ``app.wsgi_app``).
        settings: API keys and public base URL of the service.
        docanchor: the instance the tools act on (the service's own).

    Nothing MCP is imported or started until the first ``/mcp`` request.
    """

    def __init__(self, app: WSGIApp, settings: Settings, docanchor: DocAnchor) -> None:
        self.app = app
        self.settings = settings
        self.docanchor = docanchor
        self._lock = threading.Lock()
        self._transport: WSGIApp | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        if environ.get("PATH_INFO", "").rstrip("/") != MCP_PATH:
            return self.app(environ, start_response)
        try:
            self._gate(environ)
            _check_body(environ)
        except _ParseError as err:
            return _parse_error(str(err), start_response)
        except DocAnchorError as err:
            return _error(err, start_response)
        return self._started()(environ, start_response)

    # ------------------------------------------------------------------ gate
    def _gate(self, environ: dict) -> None:
        """Raises the error a request to ``/mcp`` must get before the transport sees it."""
        method = environ.get("REQUEST_METHOD", "GET").upper()
        if method != "POST":
            raise MethodNotAllowed(
                f"{method} is not served at {MCP_PATH}: this MCP server is stateless and answers each POST with "
                "JSON (no server-sent event stream, no sessions).", allowed=["POST"])
        raw = environ.get("HTTP_X_DOCANCHOR_NAMESPACE")  # a blank header is refused as blank, not taken for none
        requested = None if raw is None else header_text(raw)
        resolve_namespace(self.settings, bearer_token(environ.get("HTTP_AUTHORIZATION")), requested)
        if not self.settings.api_keys:
            self._check_host(environ.get("HTTP_HOST", ""), environ.get("HTTP_ORIGIN"))

    def _check_host(self, host: str, origin: str | None) -> None:
        public = urlsplit(self.settings.public_base_url)
        if not _host_allowed(host, public.netloc):
            err = DocAnchorError(
                f"This server does not answer MCP requests for the host {host!r}. Connect through a loopback "
                f"address or {self.settings.public_base_url}, or set DOCANCHOR_PUBLIC_BASE_URL to the address "
                "clients use (or turn on API keys).", code="invalid_host", host=host)
            raise err.with_status(421)
        if origin and not _host_allowed(urlsplit(origin).netloc, public.netloc):
            raise Forbidden(
                f"MCP requests from web pages at {origin} are refused (DNS-rebinding protection). Set "
                "DOCANCHOR_PUBLIC_BASE_URL to that address or turn on API keys.", code="invalid_origin", origin=origin)

    # ------------------------------------------------------------------ transport
    def _started(self) -> WSGIApp:
        """The MCP transport as a WSGI app, started on first use (once)."""
        with self._lock:
            if self._transport is None:
                self._transport = self._start()
            return self._transport

    def _start(self) -> WSGIApp:
        from a2wsgi import ASGIMiddleware
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
        from mcp.server.transport_security import TransportSecuritySettings

        from plugin.mcp_server import build_server, http_access, http_namespace

        server = build_server(self.docanchor, http_namespace(self.docanchor), access_of=http_access(self.docanchor))
        manager = StreamableHTTPSessionManager(
            app=server, json_response=True, stateless=True, max_request_body_size=MAX_MCP_BODY_BYTES,
            # Host/Origin are checked in the gate above, with DocAnchor's error body.
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        loop = asyncio.new_event_loop()
        threading.Thread(target=loop.run_forever, name="docanchor-mcp", daemon=True).start()
        ready = threading.Event()
        held = asyncio.run_coroutine_threadsafe(self._hold(manager, ready), loop)
        held.add_done_callback(lambda _: ready.set())  # wake up at once if it failed
        ready.wait(START_TIMEOUT_S)
        if self._stop is None:
            if held.done():
                held.result()  # raises what stopped the transport
            raise DocAnchorError("The MCP transport did not start in time; see the server log.")
        self._loop = loop
        log.info("MCP (Streamable HTTP, stateless JSON) at %s%s", self.settings.public_base_url, MCP_PATH)
        return ASGIMiddleware(manager.handle_request, loop=loop)

    async def _hold(self, manager: Any, ready: threading.Event) -> None:
        """Keep the session manager running (its task group serves every request) until :meth:`close`."""
        async with manager.run():
            self._stop = asyncio.Event()
            ready.set()
            await self._stop.wait()

    def close(self) -> None:
        """Stop the transport's loop (a no-op if it never started)."""
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)


def _check_body(environ: dict) -> None:
    """Read the request body (at most :data:`MAX_MCP_BODY_BYTES` bytes), refuse it if it is larger
    or a string in it holds a lone surrogate, and put it back for the transport to read.

    A body without ``Content-Length`` is read only when the server marks the input terminated
    (PEP 3333; waitress always sets the length, also for chunked bodies, which it buffers).

    Raises:
        TooLarge: ``too_large`` for a body over the limit.
        InvalidRequest: ``invalid_argument`` naming the field with a lone surrogate.
        _ParseError: an object in it holds a key twice (:func:`plugin.bodies.unique_keys`).
    """
    try:
        length = int(environ.get("CONTENT_LENGTH") or -1)
    except ValueError:
        length = -1
    if length > MAX_MCP_BODY_BYTES:
        raise _too_large()
    stream = environ.get("wsgi.input")
    if stream is None or (length < 0 and not environ.get("wsgi.input_terminated")):
        return
    body = stream.read(length if length >= 0 else MAX_MCP_BODY_BYTES + 1)
    if len(body) > MAX_MCP_BODY_BYTES:
        raise _too_large()
    environ["wsgi.input"], environ["CONTENT_LENGTH"] = io.BytesIO(body), str(len(body))
    try:
        message = json.loads(body, object_pairs_hook=unique_keys)
    except InvalidRequest as err:  # unique_keys: a key twice
        raise _ParseError(err.message) from None
    except (ValueError, RecursionError):
        return  # not JSON: the transport answers with JSON-RPC's parse error
    refuse_surrogates(message)


class _ParseError(Exception):
    """A body the transport's parser would read but must not: answered by :func:`_parse_error`."""


def _parse_error(reason: str, start_response: Callable) -> list[bytes]:
    """JSON-RPC's parse error (``-32700``, id ``null``; JSON-RPC 2.0 section 5.1) with HTTP ``400``,
    as the SDK's transport answers a body that is not JSON."""
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": f"Parse error: {reason}"}}
    body = json.dumps(error, ensure_ascii=False).encode("utf-8")
    start_response("400 Bad Request", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def _too_large() -> TooLarge:
    return TooLarge(f"An MCP request body may be at most {MAX_MCP_BODY_BYTES:,} bytes; send a shorter message.",
                    limit_bytes=MAX_MCP_BODY_BYTES)


def _host_allowed(host: str, public_netloc: str) -> bool:
    """``host`` (a Host header or an origin's netloc) is a loopback address or the public one."""
    host = host.strip().lower()
    if host and host == public_netloc.lower():
        return True
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    return name in LOOPBACK_HOSTS


def _error(err: DocAnchorError, start_response: Callable) -> list[bytes]:
    """The service's one JSON error body (see :mod:`plugin.http_errors`) for a refused ``/mcp`` request."""
    body = json.dumps(err.to_body(), ensure_ascii=False).encode("utf-8")
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    if err.http_status == 401:
        headers.append(("WWW-Authenticate", 'Bearer realm="docanchor"'))
    if err.http_status == 405:
        headers.append(("Allow", "POST"))
    start_response(f"{err.http_status} {_REASONS.get(err.http_status, 'Error')}", headers)
    return [body]


_REASONS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 405: "Method Not Allowed",
            413: "Content Too Large", 421: "Misdirected Request"}
