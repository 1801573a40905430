"""The JSON API under ``/v1``: documents (create, replace, list, get, anchor, delete), jobs, retrieve, read.

Every route answers JSON; errors use the one body of :mod:`plugin.http_errors`. When API keys
are configured, every route here needs ``Authorization: Bearer <key>``. The namespace comes from
the ``X-DocAnchor-Namespace`` header (or ``?namespace=``), or a ``namespace`` field of the body,
else the configured default (see :mod:`plugin.access`).
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from docanchor.errors import DocAnchorError, Forbidden, InvalidRequest, UnsupportedType
from docanchor.jobs import Job
from docanchor.settings import Settings
from docanchor.access import check_namespace, resolve_namespace
from docanchor.display import display_line, plural
from docanchor.settings import MAX_BUDGET_TOKENS
from plugin.api import DocAnchor, check_budget, document_summary, text_upload
from docanchor.library import Filter, check_where
from plugin.bodies import MAX_JSON_BYTES, header_text, multipart_parts, parse_json, refuse_unknown_fields
from plugin.conversation import conversation_namespace
from plugin.runner import job_error
from plugin.http_errors import upload_body_limit, upload_too_large
from plugin.observe import note_namespace
from plugin.schemas.requests import (
    ContextAssembleRequest,
    ContextCompactRequest,
    DocumentPatch,
    DocumentQuery,
    ReadRequest,
    RetrieveRequest,
    SnapshotRequest,
    TextDocument,
)
from plugin.schemas.validate import validate
from retrieval.budget import context_snapshot, derive_budget
from retrieval.read import start_error

NAMESPACE_HEADER = "X-DocAnchor-Namespace"
MAX_CONVERSATION_BYTES = 16 * 1024 * 1024
"""Largest body of the routes that take a whole conversation (``messages``), in bytes."""

bp = Blueprint("v1", __name__, url_prefix="/v1")


def _da() -> DocAnchor:
    return current_app.extensions["docanchor"]


def _settings() -> Settings:
    return current_app.config["DOCANCHOR_SETTINGS"]


def _key() -> str | None:
    return bearer_token(request.headers.get("Authorization"))


def bearer_token(header: str | None) -> str | None:
    """The key in an ``Authorization: Bearer <key>`` header, else ``None``."""
    scheme, _, token = (header or "").strip().partition(" ")
    return (token.strip() or None) if scheme.lower() == "bearer" else None


@bp.before_request
def _require_key() -> None:
    resolve_namespace(_settings(), _key(), None)


def _namespace(field: object = None) -> str:
    """The request's namespace (:func:`_named_namespace`)."""
    return _named_namespace(field)[0]


def _named_namespace(field: object = None) -> tuple[str, bool]:
    """The request's namespace: the ``X-DocAnchor-Namespace`` header, ``?namespace=`` or a
    body/form field (any of them; when several are sent they must agree), else the key's own;
    and whether the request named it (an answer then names it too).

    Raises:
        Unauthorized, Forbidden: see :func:`docanchor.access.resolve_namespace`.
        InvalidRequest: ``invalid_namespace`` for a non-string, or when two of the places disagree
            (one would otherwise be ignored silently).
    """
    if field is not None and not isinstance(field, str):
        check_namespace(field)  # refuses it in the one shape every door answers
    given = _named_in(field)
    if len({value.strip() for value in given.values()}) > 1:
        places = list(given)
        raise InvalidRequest(
            f"T{', '.join(places[:-1])[1:]} and {places[-1]} name different namespaces; send one of them.",
            code="invalid_namespace", field="namespace", sent_in=[p.removeprefix("the ") for p in places],
        )
    namespace = resolve_namespace(_settings(), _key(), next(iter(given.values()), None))
    note_namespace(request.environ, namespace)
    return namespace, bool(given)


def _header(name: str) -> str | None:
    """Header ``name`` as its sender wrote it (:func:`plugin.bodies.header_text`), or ``None``."""
    value = request.headers.get(name)
    return None if value is None else header_text(value)


def _named_in(field: object = None) -> dict[str, str]:
    """Where the request named a namespace (a place's words: its value); empty when it named none."""
    return {place: value for place, value in (
        (f"the {NAMESPACE_HEADER} header", _header(NAMESPACE_HEADER)),
        ("the ?namespace= query parameter", request.args.get("namespace")),
        ("the 'namespace' field", field),
    ) if value is not None}


def _json_object(model: type, limit_bytes: int = MAX_JSON_BYTES) -> dict[str, Any]:
    """The body as a JSON object that ``model`` (:mod:`plugin.schemas.requests`) accepts, at most
    ``limit_bytes`` bytes.

    Raises:
        UnsupportedType: ``unsupported_media_type`` for form bodies.
        InvalidRequest: empty, not JSON, too deep, or not an object; ``invalid_argument`` for a
            field ``model`` does not have or a value it refuses (see :mod:`plugin.schemas.validate`).
        TooLarge: through Flask's 413 when the body exceeds ``limit_bytes``.
    """
    if request.mimetype in ("multipart/form-data", "application/x-www-form-urlencoded"):
        raise UnsupportedType(
            "This route takes a JSON body; send it with 'Content-Type: application/json'.",
            code="unsupported_media_type",
        )
    request.max_content_length = limit_bytes
    body = parse_json(request.get_data(cache=False))
    if not isinstance(body, dict):
        raise InvalidRequest(f"The body must be a JSON object; got a JSON {type(body).__name__}.", code="invalid_json")
    rule = request.url_rule.rule if request.url_rule is not None else request.path
    validate(model, body, f"{request.method} {rule}")
    return body


def _optional_str(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequest(f"'{name}' must be a string.", code="invalid_argument", field=name)
    return value


def _required_str(body: dict[str, Any], name: str) -> str:
    value = _optional_str(body, name)
    if value is None or not value.strip():
        raise InvalidRequest(f"'{name}' is required and must be a non-empty string.", code="invalid_argument",
                             field=name)
    return value.strip()


def _missing_file(with_names: int = 0) -> InvalidRequest:
    """``missing_file``: the multipart body has no file part named ``file``, or a part of that name
    without a filename (``Content-Disposition: form-data; name="file"`` alone), which is a text field
    to RFC 7578 section 4.2 and werkzeug, so it is told apart: that part needs a filename. Such a
    part is refused even beside ``with_names`` parts that have one, so that no part of a bulk
    upload is dropped silently."""
    if "file" in request.form:
        lacking = len(request.form.getlist("file"))
        which = ("The multipart field 'file' has no filename, so it arrived as a text field, not as a document"
                 if not with_names else
                 f"{lacking} of the {lacking + with_names} multipart 'file' parts {plural('has', lacking, 'have')} no "
                 f"filename, so {plural('it', lacking, 'they')} arrived as "
                 f"{plural('a text field', lacking, 'text fields')}, not as {plural('a document', lacking, 'documents')}, and nothing was stored")
        return InvalidRequest(f"{which}; send each file with a filename (curl -F file=@PATH, or "
                              "Content-Disposition: form-data; name=\"file\"; filename=\"NAME\").",
                              code="missing_file")
    return InvalidRequest("Send the document in a multipart field named 'file'.", code="missing_file")


def display_name(filename: str | None) -> str | None:
    """An uploaded file's name reduced to a safe display name (never used as a path).

    Keeps the last path component, made one printable line by
    :func:`docanchor.display.display_line` (escape sequences, control and bidi characters out),
    without leading dots, capped at 200 characters.
    """
    if not filename:
        return None
    name = display_line(re.split(r"[\\/]", filename)[-1], max_chars=400).lstrip(". ")
    return name[:200].rstrip() or None


# ---------------------------------------------------------------------------- documents
@bp.post("/documents")
def create_document() -> tuple[Response, int]:
    """Ingest a multipart ``file``, JSON ``{text, title}`` or JSON ``{url, title}``.

    The ingest runs as a job; the request waits up to ``sync_wait_s`` seconds (or ``wait_s`` from
    the form/body, 0 to 60) for it. Answers 201 with the document (200 with ``duplicate: true``
    when the same bytes exist), 202 with the job when it is still running (poll
    ``GET /v1/jobs/<job_id>``), or the job's error. A ``replace=<doc_id>`` field (form, JSON or
    query string) makes it a replacement, like ``PUT /v1/documents/<doc_id>``.
    """
    upload = _read_upload()
    replace = upload.pop("replace")  # "" in JSON is refused by _submit, not read as absent
    if replace is None:
        replace = request.args.get("replace") or None
    return _submit(upload, replace)


@bp.put("/documents/<doc_id>")
def replace_document(doc_id: str) -> tuple[Response, int]:
    """Replace a document with a new version (same bodies as ``POST /v1/documents``).

    The new version is stored whole and becomes visible before the old one's record and chunks
    are removed (see :meth:`plugin.api.DocAnchor.replace`). The answer is the new document, with
    ``replaced`` (the old doc_id) and ``chunks_removed``; 404 when ``doc_id`` does not exist.
    """
    upload = _read_upload()
    other = upload.pop("replace")
    if other is not None and other != doc_id:
        raise InvalidRequest("'replace' in the body names another document than the URL; send one of them.",
                             code="invalid_argument", field="replace")
    return _submit(upload, doc_id)


_FLAG_WORDS = frozenset({"true", "false", "1", "0", "yes", "no", "on", "off"})
"""``replace`` values a user sends thinking it is a switch; doc_ids are ``doc_<16 hex>``, never these."""


MAX_FILES_PER_UPLOAD = 100
"""Most ``file`` parts one multipart upload may carry; each becomes its own ingest job."""
UPLOAD_FORM_FIELDS = ("file", "title", "namespace", "wait_s", "replace", "source", "tags", "metadata")
"""The fields of a multipart upload (``POST /v1/documents``, ``PUT /v1/documents/<doc_id>``), as
/openapi.json lists them; any other is refused, as in a JSON body (a misspelt ``replce`` would
otherwise store a second document instead of replacing one)."""


def _submit(upload: dict[str, Any], replace: str | None) -> tuple[Response, int]:
    if replace is not None and (not isinstance(replace, str) or not replace.strip()):
        raise InvalidRequest("'replace' must be the doc_id of the document to replace.", code="invalid_argument",
                             field="replace")
    if replace is not None and replace.strip().lower() in _FLAG_WORDS:
        raise InvalidRequest(
            f"'replace' takes the doc_id of the document to replace (replace=<doc_id>), not {replace.strip()!r}; "
            "GET /v1/documents lists the doc_ids. Leave it out to add a new document.", code="invalid_argument",
            field="replace")
    files, wait_s = upload["files"], _wait_s(upload["wait"])
    if upload["url"] is not None:  # fetched by the job (stage "fetching"), never by this request
        job = _da().submit_url(upload["url"], title=upload["title"], namespace=upload["namespace"], wait_s=wait_s,
                               replace=replace.strip() if replace else None, source=upload["source"],
                               tags=upload["tags"], metadata=upload["metadata"])
        return job_response(job, upload["named"])
    if len(files) > 1:
        return _submit_several(files, upload, replace, wait_s)
    data, filename = files[0]
    _refuse_oversize(data)
    job = _da().submit(data, filename=filename, title=upload["title"], namespace=upload["namespace"],
                       wait_s=wait_s, replace=replace.strip() if replace else None, source=upload["source"],
                       tags=upload["tags"], metadata=upload["metadata"])
    return job_response(job, upload["named"])


def _submit_several(files: list[tuple[bytes, str | None]], upload: dict[str, Any], replace: str | None,
                    wait_s: float) -> tuple[Response, int]:
    """Several ``file`` parts: one ingest job each, in order, all waited for up to ``wait_s`` seconds
    in all, and no longer once a wait ends with its job unfinished (:meth:`plugin.runner.JobRunner.wait`
    ends early while the job loads the embedding model or the server's waiters are busy: the jobs
    after it would wait out the whole deadline).

    Answers ``{"count", "jobs": [job, ...]}`` (each as ``GET /v1/jobs/<job_id>`` gives it; a file
    refused before it was queued, e.g. too large or empty, is a ``failed`` entry without
    ``job_id``), with 202 while any job is still queued or running, else 200.
    """
    single = {"replace": replace, "title": upload["title"], "source": upload["source"]}
    if any(v is not None for v in single.values()):
        field = next(k for k, v in single.items() if v is not None)
        raise InvalidRequest(f"'{field}' names one document, and this upload has {len(files)} files; send that file "
                             f"alone with '{field}'.", code="invalid_argument", field=field)
    if len(files) > MAX_FILES_PER_UPLOAD:
        raise InvalidRequest(f"The upload has {len(files)} files; send at most {MAX_FILES_PER_UPLOAD} per request.",
                             code="invalid_argument", field="file")
    da, deadline = _da(), time.monotonic() + wait_s
    entries: list[Job | dict[str, Any]] = []
    for data, filename in files:
        try:
            _refuse_oversize(data)
            entries.append(da.submit(data, filename=filename, namespace=upload["namespace"], tags=upload["tags"],
                                     metadata=upload["metadata"]))
        except DocAnchorError as err:
            entries.append({"job_id": None, "filename": filename, "status": "failed", "doc_id": None,
                            "error_code": err.code, "error_message": err.message, "error_status": err.http_status,
                            "result": None})
    jobs = []
    for entry in entries:
        if isinstance(entry, dict):
            jobs.append(entry)
            continue
        job = da.wait_job(entry.job_id, max(0.0, deadline - time.monotonic()))
        if not job.finished:  # it loads the model, or the waiters are busy: the next ones would wait out the deadline
            deadline = 0.0
        jobs.append(_job_dict(job, upload["named"]))
    pending = any(j["status"] in ("queued", "running") for j in jobs)
    return jsonify({"count": len(jobs), "jobs": jobs}), 202 if pending else 200


def _refuse_oversize(data: bytes) -> None:
    """Refuse a file over ``max_upload_bytes`` before a job is queued (it would be stored to the
    job spool and fail later).

    Raises:
        TooLarge: see :func:`plugin.http_errors.upload_too_large`.
    """
    if len(data) > _settings().max_upload_bytes:
        raise upload_too_large(_settings(), size_bytes=len(data))


def _read_upload() -> dict[str, Any]:
    """The documents in the request: ``files`` (a list of ``(bytes, display name)``, one per
    multipart ``file`` part, else one; empty for a URL), ``url`` (to be fetched by the job, else
    ``None``), ``title``, ``namespace``, ``named`` (whether the request named the namespace),
    ``wait`` and ``replace`` (raw field values, ``None`` when absent), and ``source``: the ``source`` field when sent (the CLI sends a file's path), ``""``
    for text (nothing to record), else ``None`` (the library then records the URL or the file's name).

    Raises:
        InvalidRequest: no ``file`` field, a multipart body cut short (:func:`plugin.bodies.multipart_parts`),
            or JSON without ``text`` or ``url``.
        UnsupportedType: neither multipart nor JSON.
        TooLarge: the body exceeds ``max_upload_bytes`` plus multipart overhead.
    """
    url = None
    if request.mimetype == "multipart/form-data":
        request.max_content_length = upload_body_limit(_settings())
        uploads = multipart_parts(request)[1].getlist("file")
        if not uploads or "file" in request.form:
            raise _missing_file(len(uploads))
        sent = [name if isinstance(name, str) else "" for name in (*request.form, *request.files)]  # None: no name
        refuse_unknown_fields(dict.fromkeys(sent), UPLOAD_FORM_FIELDS, f"a multipart {request.method} {request.path}")
        namespace, named = _named_namespace(request.form.get("namespace"))
        files = [(upload.read(), display_name(upload.filename)) for upload in uploads]
        title = request.form.get("title") or None
        wait, replace = request.form.get("wait_s"), request.form.get("replace") or None
        source = request.form.get("source") or None
        tags, metadata = _form_labels()
    elif request.mimetype in ("application/json", "") or request.mimetype.endswith("+json"):
        body = _json_object(TextDocument, upload_body_limit(_settings()))
        namespace, named = _named_namespace(body.get("namespace"))
        title, wait, replace = _optional_str(body, "title"), body.get("wait_s"), _optional_str(body, "replace")
        source = _optional_str(body, "source")
        tags, metadata = body.get("tags"), body.get("metadata")
        if "url" in body and "text" in body:
            raise InvalidRequest("Send either 'text' or 'url', not both.", code="invalid_argument")
        if "url" in body:
            files, url = [], _required_str(body, "url")
        elif "text" in body:
            files, source = [text_upload(body["text"], title)], source or ""
        else:
            raise InvalidRequest(
                "Send JSON {\"text\": ..., \"title\": ...}, JSON {\"url\": ...}, or a multipart upload "
                "with a 'file' field.", code="invalid_argument",
            )
    else:
        raise UnsupportedType(
            "Upload a document as multipart/form-data (field 'file') or send JSON {text, title} or {url}.",
            code="unsupported_media_type",
        )
    return {"files": files, "url": url, "title": title, "namespace": namespace, "named": named, "wait": wait,
            "replace": replace, "source": source, "tags": tags, "metadata": metadata}


def _form_labels() -> tuple[list[str] | None, dict | None]:
    """A multipart upload's ``tags`` (one field per tag, or several separated by commas) and
    ``metadata`` (a JSON object as text); ``None`` for each one not sent.

    Raises:
        InvalidRequest: ``metadata`` is not a JSON object.
    """
    raw_tags = request.form.getlist("tags")
    tags = [t for raw in raw_tags for t in raw.split(",") if t.strip()] if raw_tags else None
    raw_meta = request.form.get("metadata")
    metadata = None
    if raw_meta is not None and raw_meta.strip():
        try:
            metadata = parse_json(raw_meta)
        except InvalidRequest:
            metadata = raw_meta
        if not isinstance(metadata, dict):
            raise InvalidRequest("The form field 'metadata' must be a JSON object such as {\"year\": 2024}.",
                                 code="invalid_argument", field="metadata")
    return tags, metadata


def _wait_s(value: object) -> float:
    if value is None or value == "":
        return _settings().sync_wait_s
    try:
        wait = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        wait = float("nan")
    if not 0 <= wait <= 60:  # NaN too
        # the sentence a JSON body's wait_s gets (plugin.schemas.validate)
        raise InvalidRequest(f"'wait_s' must be a number from 0 to 60; got {json.dumps(value, default=str)[:40]}.",
                             code="invalid_argument", field="wait_s")
    return wait


def job_response(job: Job, named: bool = False) -> tuple[Response, int]:
    """A finished job as its document (201/200), a failed or cancelled one as its error, else 202 + the job.
    ``named``: the request named the namespace, so the anchor's More line names it
    (:meth:`plugin.api.DocAnchor.named_answer`)."""
    error = job_error(job)
    if error is not None:
        raise error
    if job.status == "done" and job.result:
        result = _da().named_answer(job.result, job.namespace if named else None)
        resp = jsonify({**result, "job_id": job.job_id})
        resp.headers["Location"] = f"/v1/documents/{job.result['doc_id']}"
        return resp, 200 if job.result.get("duplicate") else 201
    resp = jsonify(job.to_dict())
    resp.headers["Location"] = f"/v1/jobs/{job.job_id}"
    return resp, 202


@bp.get("/jobs/<job_id>")
def get_job(job_id: str) -> Response:
    """An ingest job: status, stage, chunks done / total, percent, the document or the error."""
    namespace, named = _job_namespace(job_id)
    return jsonify(_job_dict(_da().get_job(job_id, namespace), named))


def _job_namespace(job_id: str) -> tuple[str, bool]:
    """The namespace to look ``job_id`` up in, and whether an answer names it: the one the request
    names; when it names none, the job's own if the caller may use it (job ids are unique, so the
    ``Location`` an upload answers finds its job as given), else the caller's own, where it is not found.

    Raises:
        Unauthorized, Forbidden, InvalidRequest: as :func:`_named_namespace`.
    """
    namespace, named = _named_namespace()
    job = None if named else _da().jobs.get(job_id)
    if job is None or job.namespace == namespace:
        return namespace, named
    try:
        return resolve_namespace(_settings(), _key(), job.namespace), True
    except Forbidden:  # another key's job: as absent as any other
        return namespace, named


def _job_dict(job: Job, named: bool) -> dict[str, Any]:
    """``job`` as JSON; when the request named its namespace, the result's anchor names it too."""
    body = job.to_dict()
    if named and body.get("result"):
        body["result"] = _da().named_answer(body["result"], job.namespace)
    return body


@bp.delete("/jobs/<job_id>")
def cancel_job(job_id: str) -> tuple[Response, int]:
    """Cancel a queued or running ingest job (see :meth:`plugin.api.DocAnchor.cancel_job`): 200 with
    the job once it is ``cancelled``, 202 while a running job is still stopping (poll
    ``GET /v1/jobs/<job_id>``), 409 ``job_finished`` when it had already ended."""
    job = _da().cancel_job(job_id, _job_namespace(job_id)[0])
    return jsonify(job.to_dict()), 200 if job.status == "cancelled" else 202


@bp.get("/documents")
def list_documents() -> Response:
    """A page of the namespace's documents (:class:`plugin.schemas.requests.DocumentQuery`): ``count``
    on this page, ``total`` matching, ``next_cursor`` for the next page (``null`` on the last)."""
    namespace = _namespace()
    query = _list_query()
    flt = Filter(tags=tuple(t.strip().lower() for t in query.tag or ()), doc_types=tuple(query.type or ()),
                 title=query.title)
    page = _da().page_documents(flt, namespace=namespace, limit=query.limit, cursor=query.cursor, sort=query.sort,
                                order=query.order)
    return jsonify({
        "namespace": namespace,
        "count": len(page.documents),
        "total": page.total,
        "next_cursor": page.next_cursor,
        "documents": [document_summary(d) for d in page.documents],
    })


def _list_query() -> DocumentQuery:
    """The query string of ``GET /v1/documents`` checked by its model (``limit`` read as a number,
    ``tag`` and ``type`` repeatable, each also comma-separated: a document matching any is listed).

    Raises:
        InvalidRequest: an unknown parameter or a value the model refuses.
    """
    args: dict[str, Any] = {}
    for key in request.args:
        values = request.args.getlist(key)
        if key == "tag":
            args[key] = [t for v in values for t in v.split(",") if t.strip()]
        elif key == "type":  # an empty one is refused with the valid types, not dropped
            args[key] = [t.strip() for v in values for t in v.split(",")]
        elif key == "limit":
            try:
                args[key] = int(values[-1])
            except ValueError:
                args[key] = values[-1]
        else:
            args[key] = values[-1]
    return validate(DocumentQuery, args, "GET /v1/documents")


@bp.get("/documents/<doc_id>")
def get_document(doc_id: str) -> Response:
    """The document's record; its anchor as :meth:`plugin.api.DocAnchor.reader_record` gives it."""
    namespace, named = _named_namespace()
    return jsonify(_da().reader_record(doc_id, namespace, named=named).to_dict())


@bp.get("/documents/<doc_id>/anchor")
def get_anchor(doc_id: str) -> Response:
    """The anchor; read in a namespace the request named (``?namespace=`` or the header), its
    "More:" line names it, within ``anchor_tokens`` (:meth:`plugin.api.DocAnchor.reader_record`)."""
    da = _da()
    namespace, named = _named_namespace()
    anchor = da.anchor(doc_id, namespace, named=named)
    return jsonify({"doc_id": doc_id, "anchor": anchor, "anchor_tokens": da.ctx.counter.count(anchor)})


@bp.patch("/documents/<doc_id>")
def update_document(doc_id: str) -> Response:
    """Change a document's ``tags`` (the list replaces the old one) and ``metadata`` (a JSON merge
    patch: a key set to ``null`` is removed); nothing is re-embedded. Answers the document."""
    body = _json_object(DocumentPatch)
    record = _da().update_document(doc_id, tags=body.get("tags"), metadata=body.get("metadata"),
                                   namespace=_namespace(body.get("namespace")))
    return jsonify(record.to_dict())


@bp.delete("/documents/<doc_id>")
def delete_document(doc_id: str) -> Response:
    removed = _da().delete_document(doc_id, _namespace())
    return jsonify({"doc_id": doc_id, "deleted": True, "chunks_removed": removed})


@bp.delete("/documents/<doc_id>/sources")
def forget_source(doc_id: str) -> Response:
    """Take ``?source=`` off a document's sources; the document goes when none remain (how the CLI
    syncs a folder through a running server). Answers ``{doc_id, deleted, chunks_removed, sources}``."""
    source = request.args.get("source", "")
    if not source.strip():
        raise InvalidRequest("Name the source to forget: ?source=<path, URL or file name>.", code="invalid_argument",
                             field="source")
    return jsonify(_da().forget_source(doc_id, source, _namespace()))


@bp.get("/status")
def status() -> Response:
    """The namespace's documents and chunks and how the index is built (``docanchor status``)."""
    return jsonify(_da().status(_namespace()))


# ---------------------------------------------------------------------------- retrieval
def _budget(body: dict[str, Any]) -> int | None:
    """``budget_tokens`` of a body: ``None`` when absent, else checked by :func:`plugin.api.check_budget`
    (an explicit ``null`` is refused like any other value outside 1..``MAX_BUDGET_TOKENS``)."""
    return check_budget(body["budget_tokens"]) if "budget_tokens" in body else None


def doc_ids_of(body: dict[str, Any]) -> list[str] | None:
    """``doc_id`` (one string) or ``doc_ids`` (a list of strings) from a request body already
    checked by :class:`plugin.schemas.requests.RetrieveRequest` (whose ``doc_ids`` rule refuses an
    empty list, blank ids and more than ``MAX_DOC_IDS``); ``None`` (all documents) when neither is sent.

    Raises:
        InvalidRequest: ``invalid_argument`` for both fields, or a blank ``doc_id``.
    """
    one, many = body.get("doc_id"), body.get("doc_ids")
    if one is not None and many is not None:
        raise InvalidRequest("Send either 'doc_id' or 'doc_ids', not both.", code="invalid_argument")
    if one is not None:
        if not isinstance(one, str) or not one.strip():
            raise InvalidRequest("'doc_id' must be a document id string such as 'doc_0123456789abcdef'; leave it "
                                 "out to search all documents.", code="invalid_argument", field="doc_id")
        return [one.strip()]
    if many is None:
        return None
    return [d.strip() for d in many]


@bp.post("/retrieve")
def retrieve() -> Response:
    """The most relevant sections under a token budget; see ``RetrievalResult.to_dict``.

    The budget is ``budget_tokens``, or derived from ``model`` plus ``used_tokens`` or
    ``messages`` (and optional ``reserve_tokens``) by :func:`retrieval.budget.derive_budget`, with
    ``budget_tokens`` then acting as a cap. The derivation is returned under ``budget``; its
    message (no room, an unknown model's assumed window, a cap) is also the top-level ``message``
    when the search has none (and always for a budget of 0). With
    ``explain``, ``trace.budget_source`` says how the budget was set: ``"request"``
    (``budget_tokens``), ``"model"`` (derived) or ``"default"`` (neither; the configured default).
    """
    da = _da()
    body = _json_object(RetrieveRequest, MAX_CONVERSATION_BYTES)
    explain = body.get("explain", False)
    if not isinstance(explain, bool):
        raise InvalidRequest("'explain' must be true or false.", code="invalid_argument", field="explain")
    namespace = _namespace(body.get("namespace"))
    doc_ids = doc_ids_of(body)
    derivation = None
    budget = _budget(body)
    if body.get("model") is not None:
        if not isinstance(body["model"], str) or not body["model"].strip():
            raise InvalidRequest("'model' must be a model name such as 'gpt-4o'.", code="invalid_argument",
                                 field="model")
        derivation = derive_budget(
            model=body["model"], used_tokens=body.get("used_tokens"), messages=body.get("messages"),
            reserve_tokens=body.get("reserve_tokens"), counter=da.ctx.counter, max_budget_tokens=budget,
        )
        budget = min(derivation.budget_tokens, MAX_BUDGET_TOKENS)
    elif any(body.get(k) is not None for k in ("used_tokens", "messages", "reserve_tokens")):
        raise InvalidRequest(
            "'used_tokens', 'messages' and 'reserve_tokens' derive a budget from 'model'; send 'model' too, "
            "or send 'budget_tokens' alone.", code="invalid_argument",
        )
    scope = Filter(tags=tuple(t.strip().lower() for t in body.get("tags") or ()), where=check_where(body.get("where")))
    result = da.retrieve(body.get("query"), budget, doc_ids=doc_ids, namespace=namespace, explain=explain,
                         budget_source="model" if derivation is not None else None, scope=scope)
    if derivation is not None and derivation.message:
        # why there is no room says more than "0 tokens is too small"; an assumed window (unknown
        # model) or a capped budget must be seen by a caller reading only the top-level message,
        # before what the result itself says (e.g. that no passage is a strong match)
        keep = result.message if budget and result.message else ""
        result.message = f"{derivation.message} {keep}".strip()
    payload = result.to_dict()
    if derivation is not None:
        payload["budget"] = derivation.to_dict()
    return jsonify(payload)


@bp.post("/context/snapshot")
def snapshot() -> Response:
    """How full a model's context window is with a conversation; see ``context_snapshot``."""
    body = _json_object(SnapshotRequest, MAX_CONVERSATION_BYTES)
    model, messages = body.get("model"), body.get("messages")
    if not isinstance(model, str) or not model.strip():
        raise InvalidRequest("'model' is required: a model name such as 'gpt-4o'.", code="invalid_argument")
    if not isinstance(messages, list):
        raise InvalidRequest("'messages' is required: a list of {role, content} messages.", code="invalid_argument")
    return jsonify(context_snapshot(messages=messages, model=model.strip(), provider_tokens=body.get("provider_tokens"),
                                    counter=_da().ctx.counter))


@bp.post("/context/assemble")
def assemble_context() -> Response:
    """A prompt that fits the model's window; see :meth:`plugin.api.DocAnchor.assemble_context`.

    The conversation's namespace (``conversation_id``, or the one derived from the messages) must
    be one the API key may use, like any namespace; evidence comes from the request's namespace.
    """
    body = _json_object(ContextAssembleRequest, MAX_CONVERSATION_BYTES)
    namespace = _namespace(body.get("namespace"))
    _conversation_access(body)
    result = _da().assemble_context(
        body.get("model"), body.get("messages"), tools=body.get("tools"), reserve_tokens=body.get("reserve_tokens"),
        conversation_id=body.get("conversation_id"), query=body.get("query"), budget_share=body.get("budget_share"),
        explain_only=body.get("explain_only", False), namespace=namespace,
        spill_threshold_tokens=body.get("spill_threshold_tokens"),
        compaction_threshold_percent=body.get("compaction_threshold_percent"), context_limit=body.get("context_limit"))
    return jsonify(result.to_dict())


@bp.post("/context/compact")
def compact_context() -> Response:
    """A compacted conversation; see :meth:`plugin.api.DocAnchor.compact_context`."""
    body = _json_object(ContextCompactRequest, MAX_CONVERSATION_BYTES)
    _conversation_access(body)
    result = _da().compact_context(
        body.get("model"), body.get("messages"), mode=body.get("mode", "continue"),
        conversation_id=body.get("conversation_id"), keep_rounds=body.get("keep_rounds"),
        summary_tokens=body.get("summary_tokens"), explain_only=body.get("explain_only", False),
        context_limit=body.get("context_limit"))
    return jsonify(result.to_dict())


def _conversation_access(body: dict[str, Any]) -> None:
    """Refuse a conversation namespace the request's API key may not use.

    Raises:
        Forbidden, Unauthorized: see :func:`docanchor.access.resolve_namespace`.
        InvalidRequest: a malformed ``conversation_id``.
    """
    resolve_namespace(_settings(), _key(), conversation_namespace(body.get("conversation_id"), body.get("messages")))


@bp.post("/read")
def read() -> Response:
    """A contiguous window of one document under a budget, with a cursor to continue."""
    body = _json_object(ReadRequest)
    start = body.get("from")
    if start is not None and (isinstance(start, bool) or not isinstance(start, (str, int))):
        raise InvalidRequest("'from' must be a cursor string or a chunk number.", code="invalid_argument",
                             field="from")
    doc_id, namespace = _required_str(body, "doc_id"), _namespace(body.get("namespace"))
    try:
        result = _da().read(doc_id, start=start, budget_tokens=_budget(body), namespace=namespace)
    except InvalidRequest as err:  # the reader names the Python argument `start`; this route calls it `from`
        raise start_error(err, "'from'", "from=") from err
    return jsonify(result.to_dict())
