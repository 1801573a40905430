"""Request ids and the access log: what an operator reads to follow one request.

:class:`Observed` wraps the whole WSGI app (``/mcp`` included). For every request it

- takes the caller's ``X-Request-Id`` when it is usable (:func:`request_id_from`), else makes one,
  and sends it back as ``X-Request-Id`` on every answer (errors too);
- makes the id known to every log line written while the request runs (:class:`RequestIdFilter`
  puts it on each record as ``request_id``);
- when the answer is sent, writes one access line to the ``docanchor.access`` logger (INFO) with
  ``request_id``, ``method``, ``route`` (the route pattern, e.g. ``/v1/documents/<doc_id>``),
  ``status``, ``duration_ms`` and ``namespace``, and hands the same facts to a listener (the
  metrics of :mod:`plugin.metrics`).

Never logged: headers (so never the API key), query strings and bodies (so never document text).
:func:`json_formatter` writes each record as one JSON object per line (python-json-logger);
``docanchor serve`` uses it.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from werkzeug.wsgi import ClosingIterator

REQUEST_ID_HEADER = "X-Request-Id"
MAX_REQUEST_ID_CHARS = 128
_USABLE_ID = re.compile(r"[A-Za-z0-9._:/+=@-]{1,%d}" % MAX_REQUEST_ID_CHARS)
"""A caller's id is kept when it is 1 to 128 of these characters (a UUID, a trace id, a ULID...);
anything else (spaces, quotes, control characters) could forge log lines, so it is replaced."""
ROUTE_KEY = "docanchor.route"
NAMESPACE_KEY = "docanchor.namespace"
UNMATCHED_ROUTE = "(unmatched)"
"""The ``route`` of a request no route matched (its path is not a label: paths are unbounded)."""

access_log = logging.getLogger("docanchor.access")
current_request_id: ContextVar[str | None] = ContextVar("docanchor_request_id", default=None)


@dataclass(frozen=True)
class Served:
    """One answered request, as the access log and the metrics see it. ``duration_s`` in seconds."""

    request_id: str
    method: str
    route: str
    status: int
    duration_s: float
    namespace: str | None


def request_id_from(environ: dict[str, Any]) -> str:
    """The caller's ``X-Request-Id`` when usable (see :data:`_USABLE_ID`), else a new 32-hex-digit id."""
    given = environ.get("HTTP_X_REQUEST_ID", "")
    return given if _USABLE_ID.fullmatch(given) else uuid.uuid4().hex


def note_namespace(environ: dict[str, Any], namespace: str) -> None:
    """Record the namespace a request resolved to, for its access line."""
    environ[NAMESPACE_KEY] = namespace


def note_route(environ: dict[str, Any], rule: str | None) -> None:
    """Record the route pattern that matched (Flask's ``request.url_rule.rule``)."""
    if rule:
        environ[ROUTE_KEY] = rule


class RequestIdFilter(logging.Filter):
    """Puts the running request's id on every record as ``request_id`` (``None`` outside requests)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = current_request_id.get()
        return True


def json_formatter() -> logging.Formatter:
    """One JSON object per line: ``time`` (ISO 8601, UTC), ``level``, ``logger``, ``message``,
    ``request_id`` and any ``extra`` fields; a traceback as ``exc_info``."""
    from pythonjsonlogger.json import JsonFormatter

    fmt = JsonFormatter("%(asctime)s %(levelname)s %(name)s %(message)s",
                        rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
                        datefmt="%Y-%m-%dT%H:%M:%S%z", json_ensure_ascii=False)
    fmt.converter = time.gmtime  # type: ignore[assignment]
    return fmt


class Observed:
    """WSGI middleware: request ids, the access line and a listener per answered request.

    Args:
        app: the WSGI app.
        listener: called with each :class:`Served` (e.g. the metrics); its errors are logged, never raised.
    """

    def __init__(self, app: Callable, listener: Callable[[Served], None] | None = None) -> None:
        self.app = app
        self.listener = listener

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        rid = request_id_from(environ)
        started = time.perf_counter()
        status: list[int] = []

        def start(line: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable:
            headers = [(k, v) for k, v in headers if k.lower() != "x-request-id"]
            headers.append((REQUEST_ID_HEADER, rid))
            status[:] = [int(line.split(" ", 1)[0])]
            return start_response(line, headers, exc_info)

        token = current_request_id.set(rid)
        try:
            body = self.app(environ, start)
        except BaseException:
            self._done(environ, rid, 500, started)
            raise
        finally:
            current_request_id.reset(token)
        return ClosingIterator(body, lambda: self._done(environ, rid, status[0] if status else 500, started))

    def _done(self, environ: dict[str, Any], rid: str, status: int, started: float) -> None:
        path = environ.get("PATH_INFO", "")
        route = environ.get(ROUTE_KEY) or ("/mcp" if path.rstrip("/") == "/mcp" else UNMATCHED_ROUTE)
        served = Served(rid, environ.get("REQUEST_METHOD", ""), route, status, time.perf_counter() - started,
                        environ.get(NAMESPACE_KEY))
        access_log.info("%s %s %s", served.method, route, status, extra={
            "request_id": rid, "method": served.method, "route": route, "status": status,
            "duration_ms": round(served.duration_s * 1000, 2), "namespace": served.namespace})
        if self.listener is not None:
            try:
                self.listener(served)
            except Exception:
                logging.getLogger("docanchor.http").exception("recording the request's metrics failed")
