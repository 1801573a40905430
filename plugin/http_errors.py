"""One JSON error body for every HTTP error: DocAnchor's own, Flask's routing ones, and crashes.

Every error answer is ``DocAnchorError.to_body()``::

    {"error": {"code": "document_not_found", "message": "...", "status": 404, "details": {...}}}

Handlers are registered on the app, not on a blueprint, because blueprint handlers never see
routing 404/405 (Flask docs, "Handling Application Errors"). A 500 logs the traceback and answers
with code ``internal`` and a fixed sentence: internals are never echoed.
"""

from __future__ import annotations

import logging

from flask import Flask, Response, current_app, jsonify, request
from werkzeug.exceptions import HTTPException

from docanchor.errors import (
    DiskFull,
    DocAnchorError,
    FetchError,
    InvalidRequest,
    MethodNotAllowed,
    NotFound,
    StoreUnavailable,
    TooLarge,
    Unauthorized,
    UnsupportedType,
)
from docanchor.settings import Settings

log = logging.getLogger("docanchor.http")

MULTIPART_OVERHEAD_BYTES = 64 * 1024
"""Bytes an upload's HTTP body may carry beyond ``max_upload_bytes`` (multipart boundaries and
form fields, or JSON quoting of ``text``). Internal: a 413 quotes ``max_upload_bytes`` alone."""


def upload_body_limit(settings: Settings) -> int:
    """The largest HTTP body of an upload, in bytes: the file limit plus :data:`MULTIPART_OVERHEAD_BYTES`."""
    return settings.max_upload_bytes + MULTIPART_OVERHEAD_BYTES


def error_response(err: DocAnchorError) -> Response:
    """The JSON answer for ``err``, with its status (and ``WWW-Authenticate`` for a 401)."""
    resp = jsonify(err.to_body())
    resp.status_code = err.http_status
    if err.http_status == 401:
        resp.headers["WWW-Authenticate"] = 'Bearer realm="docanchor"'
    allowed = err.details.get("allowed") if isinstance(err.details, dict) else None
    if err.http_status == 405 and allowed:
        resp.headers["Allow"] = ", ".join(allowed)
    return resp


def from_http_exception(exc: HTTPException) -> DocAnchorError:
    """Map a Werkzeug/Flask HTTP exception to the DocAnchor error with the same status."""
    status = exc.code or 500
    if status == 404:
        return NotFound(f"Nothing is served at {request.path}; see /openapi.json for the routes.", path=request.path)
    if status == 405:
        allowed = sorted(getattr(exc, "valid_methods", None) or [])
        return MethodNotAllowed(
            f"{request.method} is not allowed on {request.path}; use {' or '.join(allowed) or 'another method'}.",
            allowed=allowed,
        )
    if status == 413:
        return _too_large(request.max_content_length)
    if status == 415:
        return UnsupportedType("The request's Content-Type is not accepted here; see /openapi.json.",
                               code="unsupported_media_type")
    if status == 401:
        return Unauthorized()
    if status == 400:
        return InvalidRequest("The request could not be read; check its body and Content-Type.")
    err = DocAnchorError(
        f"The request failed with HTTP status {status}." if status < 500 else None, code=_code(exc)
    )
    err.http_status = status
    return err


def upload_too_large(settings: Settings, **details: int) -> TooLarge:
    """The 413 for an upload over the file limit: it names the limit a user can set
    (``DOCANCHOR_MAX_UPLOAD_BYTES``), not the HTTP cap with its multipart allowance.

    ``details`` (e.g. ``size_bytes``) join ``limit_bytes`` in the error's details.
    """
    files = settings.max_upload_bytes
    return TooLarge(f"The upload is larger than DocAnchor accepts: files may be at most {files:,} bytes "
                    "(DOCANCHOR_MAX_UPLOAD_BYTES); send a smaller file.", limit_bytes=files, **details)


def _too_large(limit: int | None) -> TooLarge:
    """The 413 for a body over ``limit`` bytes: an upload's is :func:`upload_too_large`."""
    settings = current_app.config.get("DOCANCHOR_SETTINGS")
    if isinstance(settings, Settings) and (limit is None or limit == upload_body_limit(settings)):
        return upload_too_large(settings)
    size = f" of {limit:,} bytes" if limit else ""
    return TooLarge(f"The request body is larger than this route's limit{size}; send a smaller body.",
                    limit_bytes=limit)


_TRACED: set[str] = set()
"""The causes (exception type names) of :class:`StoreUnavailable` whose traceback this process logged."""


def log_error(logger: logging.Logger, what: str, err: DocAnchorError) -> None:
    """Log an error a door answers with: a real fault (5xx) at ERROR with its traceback; a remote
    server's or the caller's URL failing (:class:`FetchError`, 502/504: nothing is wrong here) or
    a full disk (:class:`DiskFull`, 507: the operator's to fix, /healthz says so) at WARNING, one
    line; a refused request (4xx) at INFO, one line.

    A vector store that does not answer (:class:`StoreUnavailable`, 503: a Chroma server down fails
    every request until it is back, /healthz says so) is one WARNING line per request, naming the
    code and the server's host:port (:func:`docanchor.store.unreachable`'s sentence); its traceback
    is logged once per process and kind of cause, later ones at DEBUG.

    Args:
        what: the request or call, e.g. ``"POST /v1/documents"``.
    """
    line = f"{what} failed: {err.code} ({err.message})"
    if isinstance(err, (FetchError, DiskFull)):
        logger.warning(line)
    elif isinstance(err, StoreUnavailable):
        cause = type(err.__cause__).__name__ if err.__cause__ is not None else ""
        first = bool(cause) and cause not in _TRACED
        _TRACED.add(cause)
        logger.warning(line, exc_info=err if first else None)
        if cause and not first:
            logger.debug("%s: traceback of the store's error", what, exc_info=err)
    elif err.http_status >= 500:
        logger.error(line, exc_info=err if err.__cause__ is not None else None)
    else:
        logger.info(line)


def register_error_handlers(app: Flask) -> None:
    """Make every error on ``app`` answer with the one JSON body."""

    @app.errorhandler(DocAnchorError)
    def _domain(err: DocAnchorError) -> Response:
        log_error(log, f"{request.method} {request.path}", err)
        return error_response(err)

    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException) -> Response:
        return error_response(from_http_exception(exc))

    @app.errorhandler(Exception)
    def _crash(exc: Exception) -> Response:
        log.exception("%s %s crashed", request.method, request.path)
        return error_response(DocAnchorError())


def _code(exc: HTTPException) -> str:
    name = (exc.name or "http_error").lower()
    return "".join(ch if ch.isalnum() else "_" for ch in name).strip("_")
