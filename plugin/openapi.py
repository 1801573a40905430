"""``/openapi.json``: DocAnchor's HTTP API described from its route table and its models.

Each route is one :class:`Op` (method, path, ``operationId``, summary, request body, responses)
in :data:`OPERATIONS`; every JSON body and answer is a model of :mod:`plugin.schemas`, rendered
by pydantic into ``components.schemas``. The LobeChat routes take their argument schemas from
:mod:`plugin.schemas.tools` (as the served manifest does). A test checks that every Flask route
has an operation here and that the server's answers match these schemas (schemathesis).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic.json_schema import models_json_schema

from docanchor import formats
from docanchor.settings import Settings
from plugin.schemas.common import Schema
from plugin.schemas.requests import REQUESTS, DocumentQuery, TextDocument
from plugin.schemas.responses import RESPONSES
from plugin.schemas.tools import TOOL_ARGS, input_schema

LICENSE = {"name": "MIT", "identifier": "MIT"}
"""The license of pyproject.toml and LICENSE."""
NAMESPACE_HEADER = {"name": "X-DocAnchor-Namespace", "in": "header", "required": False,
                    "schema": {"type": "string", "minLength": 1, "maxLength": 200},
                    "description": "The namespace to work in; the configured default when absent."}
DOC_ID = {"name": "doc_id", "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}
JOB_ID = {"name": "job_id", "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}
REQUEST_ID = {"X-Request-Id": {"description": "The request's id (the caller's X-Request-Id when it sent one); "
                                              "the server's log lines carry it.", "schema": {"type": "string"}}}

ERRORS_READ = ("400", "401", "403", "404", "409", "500", "503")
"""Errors of a route that reads (409: document_indexing, store_locked, embedding_model_mismatch)."""
ERRORS_WRITE = (*ERRORS_READ, "507")
"""A route that changes a stored document may find the disk full (507 disk_full; see docanchor/disk.py)."""
ERRORS_BODY = (*ERRORS_READ, "413", "415")
ERRORS_UPLOAD = (*ERRORS_BODY, "422", "502", "504", "507")
"""An upload may also find its document unreadable (422), its URL unfetchable (502, 504) or the disk full (507);
409 also answers replace_in_progress (another replacement of that document runs)."""


@dataclass(frozen=True)
class Op:
    """One operation: ``body`` names a model of :data:`plugin.schemas.requests.REQUESTS`, ``"upload"``
    (multipart or JSON TextDocument) or ``None``; ``ok`` maps statuses to a response model name, or
    to a ready response object for non-JSON answers; ``errors`` lists the error statuses."""

    method: str
    path: str
    operation_id: str
    summary: str
    ok: dict[str, Any]
    body: str | None = None
    errors: tuple[str, ...] = ERRORS_READ
    params: tuple[dict[str, Any], ...] = ()
    public: bool = False
    """No API key needed (pages, manifests, health)."""
    plugin_settings: bool = False
    """The key and namespace come in LobeChat's settings header, as for ``/lobechat/<api>``."""
    extra: dict[str, Any] = field(default_factory=dict)


def _text(kind: str, description: str) -> dict[str, Any]:
    return {"description": description, "content": {kind: {"schema": {"type": "string"}}}}


OPERATIONS: tuple[Op, ...] = (
    Op("get", "/healthz", "getHealth", "Liveness, and whether the vector store answers and the disk has room "
       "(503 with the same body while the store does not answer)", {"200": "Health", "503": "Health"}, errors=(),
       public=True),
    Op("get", "/favicon.ico", "getFavicon", "No icon (what a browser asks for with every page)",
       {"204": {"description": "No content."}}, errors=(), public=True),
    Op("get", "/openapi.json", "getOpenApi", "This document", {"200": {"description": "OpenAPI 3.1.", "content": {
        "application/json": {"schema": {"type": "object"}}}}}, errors=(), public=True),
    Op("get", "/manifest.json", "getManifest", "The LobeChat plugin manifest (CORS open)", {"200": {
        "description": "The manifest.", "content": {"application/json": {"schema": {"type": "object"}}}}},
       errors=(), public=True),
    Op("get", "/metrics", "getMetrics", "Prometheus metrics: requests, latency, ingest jobs, queue depth, documents "
       "and chunks per namespace (API key when keys are set, or DOCANCHOR_METRICS_TOKEN)",
       {"200": _text("text/plain", "The Prometheus text format.")}, errors=("401", "403")),
    Op("get", "/ui/", "getLibraryPage", "The document library page (HTML): list, filter, open, read, delete, "
       "replace and upload documents",
       {"200": _text("text/html", "The page.")}, errors=(), public=True),
    Op("get", "/ui/upload", "getUploadPage", "The upload page LobeChat shows in its iframe (the standalone plugin)",
       {"200": _text("text/html", "The page.")}, errors=(), public=True),
    Op("post", "/ui/upload", "callUploadPlugin", "The API URL of the standalone manifest: one plain-text sentence "
       "(the user's key and namespace in the plugin settings header, as for /lobechat/<api>)",
       {"200": _text("text/plain", "A sentence.")}, errors=(), public=True, plugin_settings=True),
    Op("get", "/ui/static/{name}", "getPageAsset", "The pages' scripts and style sheets",
       {"200": {"description": "The file."}}, errors=("404",), public=True,
       params=({"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},)),
    Op("get", "/ui/manifest.json", "getUploadManifest", "LobeChat manifest of the standalone upload plugin (CORS open)",
       {"200": {"description": "The manifest.", "content": {"application/json": {"schema": {"type": "object"}}}}},
       errors=(), public=True),
    Op("post", "/v1/documents", "createDocument",
       "Ingest documents (multipart 'file', one job per file part; or JSON {text | url}) with optional tags and "
       "metadata; waits up to wait_s seconds; replace=<doc_id> replaces that document",
       {"201": "Ingested", "200": "Ingested", "202": "Job"}, body="upload", errors=ERRORS_UPLOAD,
       params=({"name": "replace", "in": "query", "required": False, "schema": {"type": "string", "minLength": 1},
                "description": "The doc_id this upload replaces."},)),
    Op("get", "/v1/documents", "listDocuments", "A page of documents: filter by type, tag and title; sort; next_cursor "
       "pages on", {"200": "DocumentList"}),
    Op("get", "/v1/documents/{doc_id}", "getDocument", "A document's metadata, anchor and outline",
       {"200": "Document"}, params=(DOC_ID,)),
    Op("patch", "/v1/documents/{doc_id}", "updateDocument", "Change a document's tags and metadata (nothing is "
       "re-embedded)", {"200": "Document"}, body="DocumentPatch", errors=(*ERRORS_BODY, "507"), params=(DOC_ID,)),
    Op("put", "/v1/documents/{doc_id}", "replaceDocument", "Replace a document with a new version (same bodies as "
       "POST /v1/documents): the new one is visible whole before the old one is removed",
       {"201": "Ingested", "200": "Ingested", "202": "Job"}, body="upload", errors=ERRORS_UPLOAD, params=(DOC_ID,)),
    Op("delete", "/v1/documents/{doc_id}", "deleteDocument", "Delete a document and all of its chunks",
       {"200": "Deleted"}, errors=ERRORS_WRITE, params=(DOC_ID,)),
    Op("delete", "/v1/documents/{doc_id}/sources", "forgetSource", "Take a source off a document's sources; the "
       "document is deleted when none remain (how 'docanchor ingest --sync' forgets a file that is gone)",
       {"200": "SourceForgotten"}, errors=ERRORS_WRITE,
       params=(DOC_ID, {"name": "source", "in": "query", "required": True, "schema": {"type": "string", "minLength": 1}})),
    Op("get", "/v1/status", "getStatus", "The namespace's documents and chunks and how the index is built",
       {"200": "Status"}),
    Op("get", "/v1/documents/{doc_id}/anchor", "getAnchor", "A document's anchor only", {"200": "Anchor"},
       params=(DOC_ID,)),
    Op("get", "/v1/jobs/{job_id}", "getJob", "An ingest job: status, stage, chunks done/total, percent, result or error",
       {"200": "Job"}, params=(JOB_ID,)),
    Op("delete", "/v1/jobs/{job_id}", "cancelJob", "Cancel a queued or running ingest job: nothing of it stays stored "
       "and a restart does not run it again (409 job_finished when it had already ended)",
       {"200": "Job", "202": "Job"}, params=(JOB_ID,)),
    Op("post", "/v1/retrieve", "retrieve", "Cited sections for a query, rendered context at most budget_tokens; "
       "tags and where search only the documents they match", {"200": "RetrievalResult"}, body="RetrieveRequest",
       errors=ERRORS_BODY),
    Op("post", "/v1/read", "readDocument", "Read a document in order, under a budget, with a cursor to continue",
       {"200": "ReadResult"}, body="ReadRequest", errors=ERRORS_BODY),
    Op("post", "/v1/context/snapshot", "contextSnapshot", "How full a model's context window is with a conversation",
       {"200": "Snapshot"}, body="SnapshotRequest", errors=ERRORS_BODY),
    Op("post", "/v1/context/assemble", "assembleContext", "A prompt that fits the model's window less the reserve: "
       "oversized messages spilled, old tool results and rounds offloaded to the conversation's namespace, evidence "
       "added; with the EXPLAIN trace", {"200": "ContextAssembled"}, body="ContextAssembleRequest", errors=ERRORS_BODY),
    Op("post", "/v1/context/compact", "compactContext", "Compact a conversation: continue (summary + recent rounds) "
       "or handoff (a new conversation from the summary); the old turns become a document",
       {"200": "ContextCompacted"}, body="ContextCompactRequest", errors=ERRORS_BODY),
)


def openapi_document(settings: Settings) -> dict[str, Any]:
    """The OpenAPI 3.1 document, with ``settings.public_base_url`` as its server."""
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        paths.setdefault(op.path, {})[op.method] = _operation(op, settings)
    paths.update(_plugin_paths(settings))
    paths["/mcp"] = _mcp_path()
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "DocAnchor",
            "version": "1",
            "license": LICENSE,
            "description": (
                "Long documents out of the chat: upload once, keep a <=300-token anchor, and fetch cited "
                "sections on demand under a token budget. Token counts are budget tokens (cl100k_base by default)."
            ),
        },
        "servers": [{"url": settings.public_base_url}],
        "security": [{"bearer": []}] if settings.api_keys else [],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                           "description": "Required when DOCANCHOR_API_KEYS is set."}},
            "responses": {"Error": {"description": "Any error: one JSON body.", "headers": REQUEST_ID,
                                    "content": {"application/json": {"schema": _ref("Error")}}}},
            "schemas": component_schemas(),
        },
    }


def component_schemas() -> dict[str, Any]:
    """Every request and response model as JSON Schema, by name."""
    models = [*REQUESTS.values(), *RESPONSES.values()]
    _, top = models_json_schema([(m, "validation" if m in REQUESTS.values() else "serialization") for m in models],
                                by_alias=True, ref_template="#/components/schemas/{model}", schema_generator=Schema)
    return top.get("$defs", {})


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _operation(op: Op, settings: Settings) -> dict[str, Any]:
    out: dict[str, Any] = {"operationId": op.operation_id, "summary": op.summary}
    params = list(op.params)
    if not op.public:
        params.append(NAMESPACE_HEADER)
    if op.operation_id == "listDocuments":
        params += _query_parameters()
    if op.plugin_settings:
        params.append(_settings_header())
    if params:
        out["parameters"] = params
    if op.public:
        out["security"] = []
    if op.body == "upload":
        out["requestBody"] = _upload_body(several=op.operation_id == "createDocument")
    elif op.body:
        out["requestBody"] = {"required": True, "content": {"application/json": {"schema": _ref(op.body)}}}
    responses: dict[str, Any] = {}
    for status, answer in op.ok.items():
        if isinstance(answer, str):
            responses[status] = {"description": _DESCRIPTIONS.get((op.operation_id, status), "OK."),
                                 "headers": REQUEST_ID, "content": {"application/json": {"schema": _ref(answer)}}}
        else:
            responses[status] = answer
    if op.operation_id == "createDocument":  # several file parts: one job each
        responses["200"] = responses["202"] = {
            "description": "One file: the document (200 when already stored) or its job (202, still indexing). "
                           "Several files: {count, jobs}, 202 while any job runs.",
            "headers": REQUEST_ID, "content": {"application/json": {"schema": {"anyOf": [
                _ref("Ingested"), _ref("Job"), _ref("Upload")]}}}}
    for status in op.errors:
        responses[status] = {"$ref": "#/components/responses/Error"}
    out["responses"] = responses
    return out


_DESCRIPTIONS = {
    ("createDocument", "201"): "Stored; the anchor is ready.",
    ("replaceDocument", "201"): "The new version; 'replaced' names the old doc_id.",
    ("replaceDocument", "200"): "The new bytes were already stored (duplicate: true).",
    ("replaceDocument", "202"): "Still indexing: poll the job at the Location header; the old version stays until "
                                "the job is done.",
    ("cancelJob", "200"): "The job, now cancelled.",
    ("cancelJob", "202"): "The job is still stopping (it stops at its next step): poll GET /v1/jobs/{job_id}.",
}


def _query_parameters() -> list[dict[str, Any]]:
    """``GET /v1/documents``'s query string, from :class:`plugin.schemas.requests.DocumentQuery`."""
    schema = DocumentQuery.model_json_schema(schema_generator=Schema)
    out = []
    for name, prop in schema["properties"].items():
        if name == "namespace":
            continue
        param: dict[str, Any] = {"name": name, "in": "query", "required": False, "schema": prop}
        if prop.get("description"):
            param["description"] = prop["description"]
        if prop.get("type") == "array":
            param.update(style="form", explode=True)
        out.append(param)
    return out


def _upload_body(several: bool) -> dict[str, Any]:
    """A multipart upload (its text fields are TextDocument's, sent as form strings) or a JSON TextDocument.

    With ``several`` (``POST``), ``file`` is an array of files: one or more 'file' parts, up to
    :data:`plugin.v1.MAX_FILES_PER_UPLOAD` (OpenAPI 3.1 sends an array as repeated parts), so a
    generated client can send several; ``PUT`` replaces one document with one file.
    """
    from plugin.v1 import MAX_FILES_PER_UPLOAD

    text_fields = TextDocument.model_json_schema(schema_generator=Schema)["properties"]
    what = (f"{formats.phrase()} ({', '.join(formats.extensions())}); its type is read from its content, its name is "
            "a hint and display name only.")
    binary = {"type": "string", "format": "binary"}
    form: dict[str, Any] = {"file": {"type": "array", "items": binary, "minItems": 1, "maxItems": MAX_FILES_PER_UPLOAD,
                                     "description": f"The documents, one 'file' part each (one job each): {what}"}
                            if several else {**binary, "description": f"The document: {what}"}}
    for name in ("title", "wait_s", "replace", "namespace", "source"):
        form[name] = {**text_fields[name], "type": "string"} if name == "wait_s" else text_fields[name]
    form["tags"] = {"type": "string", "description": "Tags, separated by commas (or one 'tags' field per tag)."}
    form["metadata"] = {"type": "string", "description": "Metadata as a JSON object: " +
                        text_fields["metadata"].get("description", "")}
    form["wait_s"].pop("minimum", None)
    form["wait_s"].pop("maximum", None)
    return {"required": True, "content": {
        "multipart/form-data": {"schema": {"type": "object", "required": ["file"], "properties": form}},
        "application/json": {"schema": _ref("TextDocument")},
    }}


def _settings_header() -> dict[str, Any]:
    """The ``X-Lobe-Plugin-Settings`` header parameter of the plugin's calls."""
    from plugin.lobechat import MAX_SETTINGS_HEADER_CHARS, SETTINGS_HEADER

    return {"name": SETTINGS_HEADER, "in": "header", "required": False, "schema": {"type": "string"},
            "description": "The user's plugin settings as a JSON object (apiKey, namespace, defaultBudgetTokens); "
                           "a JSON value that is not an object counts as {}, one that is not JSON (or over "
                           f"{MAX_SETTINGS_HEADER_CHARS:,} characters) is answered with a sentence asking the user "
                           "to correct the settings."}


def _plugin_paths(settings: Settings) -> dict[str, Any]:
    """``POST /lobechat/<api>`` for every tool, as LobeChat's server calls them (../shared/LOBECHAT.md):
    the model's JSON arguments as the raw body (usually ``text/plain``, possibly empty), the user's
    settings in ``X-Lobe-Plugin-Settings``; every answer the model can act on is a 200 sentence (a
    Chroma server that does not answer too), only real faults are 5xx in the SDK's shape
    (:func:`plugin.lobechat.is_fault`: 500, or 507 for a full disk)."""
    settings_header = _settings_header()
    fault = {"description": "A real fault, in the plugin SDK's error shape.", "content": {"application/json": {
        "schema": {"type": "object", "required": ["errorType", "body"], "properties": {
            "errorType": {"type": "string"}, "body": {"type": "object"}}}}}}
    paths = {}
    for name in TOOL_ARGS:
        paths[f"/lobechat/{name}"] = {"post": {
            "operationId": f"lobechat_{name}",
            "summary": f"LobeChat plugin API {name} (the MCP tool of the same name)",
            "security": [], "parameters": [settings_header],
            "requestBody": {"required": False, "content": {
                "text/plain": {"schema": {"type": "string", "description": "The arguments as a JSON string."}},
                "application/json": {"schema": input_schema(name)}}},
            "responses": {"200": {"description": "The answer for the model: short Markdown, or a sentence saying "
                                                 "what to do.", "content": {"text/plain": {"schema": {"type": "string"}}}},
                          "500": fault, "507": fault},
        }}
    return paths


def _mcp_path() -> dict[str, Any]:
    """``POST /mcp``: MCP over Streamable HTTP, stateless, one JSON-RPC message per request and
    one JSON answer (see :mod:`plugin.mcp_http`); GET and DELETE answer 405."""
    error = {"$ref": "#/components/responses/Error"}
    return {"post": {
        "operationId": "mcp",
        "summary": "MCP (Streamable HTTP, stateless, JSON responses): the plugin's tools, the context tools "
                   "(assembleContext, compactContext) and each document's anchor as a resource "
                   "(docanchor://documents/{doc_id}/anchor)",
        "parameters": [NAMESPACE_HEADER, {"name": "Accept", "in": "header", "required": False,
                                          "schema": {"type": "string"},
                                          "description": "MCP clients send 'application/json, text/event-stream'."}],
        "requestBody": {"required": True, "content": {"application/json": {"schema": {
            "type": "object", "required": ["jsonrpc", "method"], "properties": {
                "jsonrpc": {"const": "2.0"}, "id": {"type": ["integer", "string"]}, "method": {"type": "string"},
                "params": {"type": "object"}}}}}},
        "responses": {"200": {"description": "The JSON-RPC answer.",
                              "content": {"application/json": {"schema": {"type": "object"}}}},
                      "202": {"description": "A notification or response was accepted."},
                      **{code: error for code in ("400", "401", "403", "405", "413", "421")},
                      "406": {"description": "The Accept header does not allow JSON."}},
    }}
