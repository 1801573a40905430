"""DocAnchor's errors: one root, each class with a stable code, an HTTP status and a sentence a
user can act on. Only the HTTP layer and the CLI translate them (``to_body``); library code
raises them and maps every dependency's exception to the most specific one (``raise X from e``).

Exception tree::

    DocAnchorError                     500 internal
    ├── ConfigError                    500 config_error
    ├── InvalidRequest                 400 invalid_request   (bad argument, bad JSON, unknown_model,
    │                                                          budget_too_small, ...)
    ├── Unauthorized                   401 unauthorized
    ├── Forbidden                      403 forbidden
    ├── NotFound                       404 not_found          (document_not_found, job_not_found)
    ├── MethodNotAllowed               405 method_not_allowed
    ├── Conflict                       409 conflict           (embedding_model_mismatch,
    │                                                          embedding_precision_mismatch,
    │                                                          store_locked, document_indexing,
    │                                                          document_deleted)
    ├── TooLarge                       413 too_large
    ├── UnsupportedType                415 unsupported_type
    ├── FetchError                     502 url_fetch_failed   (url_timeout 504, url_http_error)
    ├── DocumentError                  422 (one code per fault: empty_file, pdf_encrypted,
    │                                       pdf_unreadable, no_text_layer, docx_unsupported,
    │                                       malformed, text_quality, parse_cpu_limit,
    │                                       parse_timeout, no_text, unreadable_file)
    ├── StoreUnavailable               503 store_unavailable
    └── DiskFull                       507 disk_full
"""

from __future__ import annotations

from typing import Any

from docanchor import formats


class DocAnchorError(Exception):
    """Root of every error DocAnchor raises on purpose.

    Attributes:
        code: stable machine-readable name (``snake_case``).
        http_status: the HTTP status the API answers with.
        message: one sentence saying what went wrong and what to do; safe to show a user.
        details: extra JSON-serialisable facts (never stack traces or internal paths).
    """

    code = "internal"
    http_status = 500
    default_message = "DocAnchor hit an internal error; the request was not completed. Try again, and report it if it repeats."

    def __init__(self, message: str | None = None, *, code: str | None = None, **details: Any) -> None:
        self.message = as_sentence(message or self.default_message)
        if code is not None:
            self.code = code
        self.details = details
        super().__init__(self.message)

    def with_status(self, http_status: int) -> "DocAnchorError":
        """This error answering with ``http_status`` (an error rebuilt from its stored code)."""
        self.http_status = http_status
        return self

    def to_body(self) -> dict[str, Any]:
        """The one JSON error body: ``{"error": {"code", "message", "status", "details"}}``."""
        return {
            "error": {
                "code": self.code,
                "message": self.message,
                "status": self.http_status,
                "details": self.details,
            }
        }


SENTENCE_ENDS = ".!?\u2026\u3002\uff01\uff1f"
"""Characters that end a sentence (``. ! ? …`` and the CJK full stop, exclamation and question marks)."""
_CLOSING = "\"')]}`\u00bb\u201d\u2019"
"""Characters that may follow a sentence's end (closing quotes, brackets, a code span's backtick)."""


def as_sentence(text: str) -> str:
    """``text`` (stripped) ending as a sentence does: a full stop is added when its last character,
    past any closing quotes or brackets, is none of :data:`SENTENCE_ENDS` -- so that a message a
    library built (click's ``Got unexpected extra argument (y)``, an ``OSError``'s ``No such file
    or directory``) can be followed by the next sentence. An empty ``text`` stays empty."""
    text = text.strip()
    if text and not text.rstrip(_CLOSING).endswith(tuple(SENTENCE_ENDS)):
        text += "."
    return text


def sentences(*parts: str) -> str:
    """``parts`` as one text, each part a sentence (:func:`as_sentence`), one space apart; empty
    parts are left out. The one way a message is built from other messages."""
    return " ".join(filter(None, (as_sentence(p) for p in parts)))


class ConfigError(DocAnchorError):
    code = "config_error"
    default_message = "DocAnchor's configuration is invalid; check the DOCANCHOR_* variables."


class InvalidRequest(DocAnchorError):
    code = "invalid_argument"
    http_status = 400
    default_message = "The request is not valid; check its arguments."


class Unauthorized(DocAnchorError):
    code = "unauthorized"
    http_status = 401
    default_message = "An API key is required: send 'Authorization: Bearer <key>'."


class Forbidden(DocAnchorError):
    code = "forbidden"
    http_status = 403
    default_message = ("This API key may not use that namespace; name one the key is granted, or ask the operator to grant "
                       "it in DOCANCHOR_API_KEYS.")


class NotFound(DocAnchorError):
    code = "not_found"
    http_status = 404
    default_message = "Nothing exists at that address; check the path (GET /openapi.json lists the routes)."


class MethodNotAllowed(DocAnchorError):
    code = "method_not_allowed"
    http_status = 405
    default_message = "That HTTP method is not allowed here; check the route's methods in GET /openapi.json."


class Conflict(DocAnchorError):
    code = "conflict"
    http_status = 409
    default_message = "The request conflicts with the current state; look at the current state, then try again."


class TooLarge(DocAnchorError):
    code = "too_large"
    http_status = 413
    default_message = "The input is larger than DocAnchor accepts; send a smaller one."


class UnsupportedType(DocAnchorError):
    code = "unsupported_type"
    http_status = 415
    default_message = f"{formats.supported_sentence()}; this file is none of them: convert it to one of them."


class DocumentError(DocAnchorError):
    """The document itself cannot be ingested; ``code`` names the fault."""

    code = "malformed"
    http_status = 422
    default_message = ("The document could not be read; check that it opens in its own application, or save it again "
                       "and upload that.")


class FetchError(DocAnchorError):
    """A URL could not be fetched (the remote side failed, not the request)."""

    code = "url_fetch_failed"
    codes = frozenset({"url_fetch_failed", "url_http_error", "url_timeout"})
    http_status = 502
    default_message = "The URL could not be fetched; check that it is reachable and try again."


class StoreUnavailable(DocAnchorError):
    code = "store_unavailable"
    http_status = 503
    default_message = "The vector store is not reachable; check that Chroma is running and try again."


class DiskFull(DocAnchorError):
    """The data dir's disk has no room for the write (see :mod:`docanchor.disk`); reads still work."""

    code = "disk_full"
    codes = frozenset({"disk_full"})
    http_status = 507
    default_message = "The disk holding DocAnchor's data dir is full; free space on it, then try again."


def restored(code: str | None, message: str | None, http_status: int | None, **details: Any) -> DocAnchorError:
    """An error kept as its code, message and status (a failed job's), as an instance of the class
    that owns the code when one does (``FetchError``'s and ``DiskFull``'s ``codes``), else the root."""
    for cls in (FetchError, DiskFull):
        if code in cls.codes:
            return cls(message, code=code, **details).with_status(http_status or cls.http_status)
    return DocAnchorError(message, code=code or "internal", **details).with_status(http_status or 500)


def unreadable_file(exc: OSError, path: Any = None) -> DocumentError:
    """The error of a file on disk that cannot be read -- missing, a folder, no permission, a name
    too long (422 ``unreadable_file``), with the system's reason (``strerror``). The one sentence
    for the Python API's ``ingest_file``, a bulk ingest's sources and the command line's files;
    ``path`` (the path as the caller gave it) is named when given: the command line prints each
    file's path beside its line, and the Python API has only the message to say which file."""
    what = f"The file {path}" if path is not None else "The file"
    return DocumentError(f"{what} cannot be read ({exc.strerror or exc}); check the path and its permissions.",
                         code="unreadable_file")


def document_not_found(doc_id: str) -> NotFound:
    """The error for an unknown ``doc_id``."""
    return NotFound(
        f"No document with id {doc_id!r}; list documents to see the ids that exist.",
        code="document_not_found",
        doc_id=doc_id,
    )


def unknown_model(model: str) -> InvalidRequest:
    """The error of a context request for a model whose window DocAnchor does not know (400
    ``unknown_model``): assuming one could overflow a smaller window, so the caller names it."""
    return InvalidRequest(
        f"DocAnchor does not know the context window of {model!r} (it is not in its context-limit table); send "
        "context_limit, the model's window in tokens, with the request, or check the model name.",
        code="unknown_model", field="context_limit", model=model,
    )


def budget_too_small(message: str, budget_tokens: int, **details: Any) -> InvalidRequest:
    """The refusal of a budget too small for any text (400 ``budget_too_small``), where a door
    refuses rather than answers empty: ``docanchor read`` (the reader's empty window, whose
    ``message`` names the least budget that fits) and the plugin tools' ``budget_tokens`` under
    their least (:meth:`plugin.lobechat.Call.check_budget`). ``budget_tokens`` is the budget
    asked for, in budget tokens; ``details`` are more facts (e.g. the argument's name)."""
    return InvalidRequest(message, code="budget_too_small", budget_tokens=budget_tokens, **details)


def document_indexing(doc_id: str, job_id: str, percent: int, stage: str) -> Conflict:
    """The error for a ``doc_id`` whose ingest job is still queued or running (409
    ``document_indexing``): the document will exist once job ``job_id`` is done."""
    return Conflict(
        f"Document {doc_id} is still being indexed ({percent} %, {stage}); try again in a few seconds or poll "
        f"GET /v1/jobs/{job_id}.",
        code="document_indexing",
        doc_id=doc_id, job_id=job_id, percent=percent, stage=stage,
    )


def document_deleted(doc_id: str) -> Conflict:
    """The error of a write to a document's record (an upload of the same bytes adding its source,
    tags or metadata) that finds the document deleted since it was looked up (409
    ``document_deleted``): the record is not written back, since its chunks are gone."""
    return Conflict(f"Document {doc_id} was deleted while this request was adding to it, so it is not stored; "
                    "send the file again to store it.", code="document_deleted", doc_id=doc_id)


def job_finished(job_id: str, status: str, doc_id: str | None = None) -> Conflict:
    """The error for cancelling a job that has already ended -- done, failed or cancelled (409
    ``job_finished``): there is nothing left to cancel; a done job's document is deleted instead."""
    remedy = f". To remove its document, DELETE /v1/documents/{doc_id}." if status == "done" and doc_id else "."
    return Conflict(f"Job {job_id} has already ended ({status}); there is nothing to cancel{remedy}",
                    code="job_finished", job_id=job_id, status=status)
