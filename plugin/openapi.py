"""The OpenAPI 3.1 description of DocAnchor's HTTP API, written by hand (served at /openapi.json).

The JSON request bodies (:func:`request_schemas`) are the one source of their field names and
limits: :mod:`plugin.v1` accepts exactly their properties, and the limits are the constants the
code enforces (``MAX_QUERY_CHARS``, ``MAX_BUDGET_TOKENS``, ``MAX_NAMESPACE_CHARS``,
:data:`MAX_DOC_IDS`). The LobeChat routes take their argument schemas from ``manifest.json``.
"""

from __future__ import annotations

from typing import Any

from docanchor.access import MAX_NAMESPACE_CHARS
from docanchor.settings import Settings
from plugin.api import MAX_BUDGET_TOKENS, MAX_QUERY_CHARS, MAX_SOURCE_CHARS

MAX_DOC_IDS = 100
"""Most documents one retrieve request may name (``doc_ids``)."""

_ERROR = {"$ref": "#/components/responses/Error"}
_NS_HEADER = {"$ref": "#/components/parameters/Namespace"}
_DOC_ID = {"name": "doc_id", "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}
_ID = {"type": "string", "minLength": 1}
_NAMESPACE = {"type": "string", "minLength": 1, "maxLength": MAX_NAMESPACE_CHARS,
              "description": "The namespace to work in (or the X-DocAnchor-Namespace header; both must agree)."}
_SOURCE = {"type": "string", "maxLength": MAX_SOURCE_CHARS,
           "description": "Where the document came from (a path, URL or file name), added to its sources; "
                          "default: the URL fetched, else the file's name."}
_SOURCES = {"type": "array", "items": {"type": "string"},
            "description": "Where the document's bytes came from, oldest first (identical bytes from several "
                           "places are one document); empty for documents stored before sources were recorded."}


def _json_body(schema_ref: str) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema_ref}"}}}}


def _ok(schema_ref: str, description: str) -> dict[str, Any]:
    return {"description": description,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema_ref}"}}}}


def _upload_body() -> dict[str, Any]:
    return {"required": True, "content": {
        "multipart/form-data": {"schema": {"type": "object", "required": ["file"], "properties": {
            "file": {"type": "string", "format": "binary",
                     "description": "The document; its name is a type hint and display name only."},
            "title": {"type": "string"}, "namespace": _NAMESPACE,
            "wait_s": {"type": "number", "description": "Seconds to wait for the ingest job (0-60)."},
            "replace": {**_ID, "description": "The doc_id this upload replaces (POST only)."},
            "source": _SOURCE}}},
        "application/json": {"schema": {"$ref": "#/components/schemas/TextDocument"}},
    }}


def openapi_document(settings: Settings) -> dict[str, Any]:
    """The OpenAPI document, with ``settings.public_base_url`` as its server."""
    errors = {"400": _ERROR, "401": _ERROR, "404": _ERROR, "409": _ERROR, "413": _ERROR, "415": _ERROR,
              "422": _ERROR, "500": _ERROR}  # 409: document_indexing, store_locked, embedding_model_mismatch
    doc_errors = {k: v for k, v in errors.items() if k not in ("413", "415", "422")}
    # a url the caller sent could not be fetched: the remote side failed (url_fetch_failed,
    # url_http_error 502; url_timeout 504)
    errors = {**errors, "502": _ERROR, "504": _ERROR}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "DocAnchor",
            "version": "1",
            "description": (
                "Long documents out of the chat: upload once, keep a <=300-token anchor, and fetch cited "
                "sections on demand under a token budget. Token counts are budget tokens (cl100k_base by default)."
            ),
        },
        "servers": [{"url": settings.public_base_url}],
        "security": [{"bearer": []}] if settings.api_keys else [],
        "paths": {
            "/healthz": {"get": {"summary": "Liveness check", "security": [],
                                  "responses": {"200": {"description": "The service is up."}}}},
            "/ui/upload": {
                "get": {"summary": "The upload page LobeChat shows in an iframe (HTML; see plugin/ui.py)", "security": [],
                        "responses": {"200": {"description": "The page.", "content": {"text/html": {}}}}},
                "post": {"summary": "The API URL of the standalone upload manifest: one plain-text sentence",
                         "security": [], "responses": {"200": {"description": "A sentence.",
                                                               "content": {"text/plain": {}}}}},
            },
            "/ui/static/{name}": {
                "get": {"summary": "The upload page's script and style sheet", "security": [],
                        "parameters": [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
                        "responses": {"200": {"description": "The file."}, "404": _ERROR}},
            },
            "/ui/manifest.json": {
                "get": {"summary": "LobeChat manifest of the standalone upload plugin (CORS open)", "security": [],
                        "responses": {"200": {"description": "The manifest.",
                                              "content": {"application/json": {"schema": {"type": "object"}}}}}},
            },
            "/v1/documents": {
                "post": {
                    "summary": "Ingest a document (multipart 'file', JSON {text, title} or JSON {url, title}) as a job; "
                               "waits up to sync_wait_s (or wait_s) seconds for it; replace=<doc_id> replaces that "
                               "document as PUT /v1/documents/{doc_id} does",
                    "parameters": [_NS_HEADER, {"name": "replace", "in": "query", "required": False,
                                                "schema": {"type": "string"},
                                                "description": "The doc_id this upload replaces."}],
                    "requestBody": _upload_body(),
                    "responses": {"201": _ok("Ingested", "Stored; the anchor is ready."),
                                  "200": _ok("Ingested", "The same bytes were already stored (duplicate: true)."),
                                  "202": {"description": "Still indexing: poll the job at the Location header.",
                                          "content": {"application/json": {"schema": {"type": "object"}}}},
                                  **errors},
                },
                "get": {"summary": "List documents", "parameters": [_NS_HEADER],
                        "responses": {"200": _ok("DocumentList", "The namespace's documents."), **doc_errors}},
            },
            "/v1/documents/{doc_id}": {
                "get": {"summary": "A document's metadata, anchor and outline", "parameters": [_DOC_ID, _NS_HEADER],
                        "responses": {"200": _ok("Document", "The document record."), **doc_errors}},
                "put": {
                    "summary": "Replace a document with a new version (same bodies as POST /v1/documents): the new "
                               "version is stored and visible whole before every chunk of the old one is removed",
                    "parameters": [_DOC_ID, _NS_HEADER],
                    "requestBody": _upload_body(),
                    "responses": {"201": _ok("Ingested", "The new version; 'replaced' names the old doc_id."),
                                  "200": _ok("Ingested", "The new bytes were already stored (duplicate: true); "
                                                         "the old version was removed unless it is the same."),
                                  "202": {"description": "Still indexing: poll the job at the Location header; "
                                                         "the old version stays until the job is done.",
                                          "content": {"application/json": {"schema": {"type": "object"}}}},
                                  **errors},
                },
                "delete": {"summary": "Delete a document and all of its chunks", "parameters": [_DOC_ID, _NS_HEADER],
                           "responses": {"200": _ok("Deleted", "Deleted."), **doc_errors}},
            },
            "/v1/documents/{doc_id}/sources": {
                "delete": {"summary": "Take a source off a document's sources; the document is deleted when none "
                                      "remain (how 'docanchor ingest --sync' forgets a file that is gone)",
                           "parameters": [_DOC_ID, _NS_HEADER, {"name": "source", "in": "query", "required": True,
                                                                "schema": {"type": "string"}}],
                           "responses": {"200": _ok("SourceForgotten", "The document's remaining sources."),
                                         **doc_errors}},
            },
            "/v1/status": {
                "get": {"summary": "The namespace's documents and chunks and how the index is built",
                        "parameters": [_NS_HEADER],
                        "responses": {"200": _ok("Status", "The status."), **doc_errors}},
            },
            "/v1/jobs/{job_id}": {
                "get": {"summary": "An ingest job: status, stage, chunks done/total, percent, result or error",
                        "parameters": [{"name": "job_id", "in": "path", "required": True, "schema": {"type": "string"}},
                                       _NS_HEADER],
                        "responses": {"200": {"description": "The job.",
                                              "content": {"application/json": {"schema": {"type": "object"}}}},
                                      **doc_errors}},
            },
            "/v1/documents/{doc_id}/anchor": {
                "get": {"summary": "A document's anchor only", "parameters": [_DOC_ID, _NS_HEADER],
                        "responses": {"200": _ok("Anchor", "The anchor."), **doc_errors}},
            },
            "/v1/retrieve": {
                "post": {"summary": "Cited sections for a query, rendered context at most budget_tokens",
                         "parameters": [_NS_HEADER], "requestBody": _json_body("RetrieveRequest"),
                         "responses": {"200": _ok("RetrievalResult", "Sections and their rendered context."),
                                       **doc_errors, "413": _ERROR}},
            },
            "/v1/read": {
                "post": {"summary": "Read a document in order, under a budget, with a cursor to continue",
                         "parameters": [_NS_HEADER], "requestBody": _json_body("ReadRequest"),
                         "responses": {"200": {"description": "A window of the document and the cursor to continue.",
                                               "content": {"application/json": {"schema": {"type": "object"}}}},
                                       **doc_errors, "413": _ERROR}},
            },
            "/v1/context/snapshot": {
                "post": {"summary": "How full a model's context window is with a conversation, and what to do",
                         "parameters": [_NS_HEADER], "requestBody": _json_body("SnapshotRequest"),
                         "responses": {"200": {"description": "Tokens used, the limit, severity and advice.",
                                               "content": {"application/json": {"schema": {"type": "object"}}}},
                                       **doc_errors, "413": _ERROR}},
            },
            "/openapi.json": {"get": {"summary": "This document", "security": [],
                                      "responses": {"200": {"description": "OpenAPI 3.1."}}}},
            "/manifest.json": {"get": {"summary": "The LobeChat plugin manifest (CORS open)", "security": [],
                                       "responses": {"200": {"description": "The manifest."}}}},
            **_plugin_paths(settings),
            "/mcp": _mcp_path(),
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                           "description": "Required when DOCANCHOR_API_KEYS is set."}},
            "parameters": {"Namespace": {"name": "X-DocAnchor-Namespace", "in": "header", "required": False,
                                         "schema": {"type": "string", "maxLength": 200},
                                         "description": "The namespace to work in; the configured default when absent."}},
            "responses": {"Error": {"description": "Any error: one JSON body.",
                                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}},
            "schemas": _schemas(),
        },
    }


def _plugin_paths(settings: Settings) -> dict[str, Any]:
    """``POST /lobechat/<api>`` for every API of the served LobeChat manifest, as LobeChat's server
    calls them (../shared/LOBECHAT.md): the model's JSON arguments as the raw body (usually
    ``text/plain``, possibly empty), the user's settings in ``X-Lobe-Plugin-Settings``; every
    answer the model can act on is a 200 sentence, only real faults are 5xx in the SDK's shape."""
    from plugin.lobechat import SETTINGS_HEADER, served_manifest

    settings_header = {"name": SETTINGS_HEADER, "in": "header", "required": False, "schema": {"type": "string"},
                       "description": "The user's plugin settings as a JSON object (apiKey, namespace, "
                                      "defaultBudgetTokens); an unusable value counts as {}."}
    fault = {"description": "A real fault, in the plugin SDK's error shape.", "content": {"application/json": {
        "schema": {"type": "object", "properties": {"errorType": {"type": "string"}, "body": {"type": "object"}}}}}}
    paths = {}
    for api in served_manifest(settings).get("api", []):
        arguments = api.get("parameters") or {"type": "object", "properties": {}}
        paths[f"/lobechat/{api['name']}"] = {"post": {
            "summary": f"LobeChat plugin API {api['name']}: {api.get('description', '')}"[:300],
            "security": [], "parameters": [settings_header],
            "requestBody": {"required": False, "content": {
                "text/plain": {"schema": {"type": "string", "description": "The arguments as a JSON string."}},
                "application/json": {"schema": arguments}}},
            "responses": {"200": {"description": "The answer for the model: short Markdown, or a sentence saying "
                                                 "what to do.", "content": {"text/plain": {"schema": {"type": "string"}}}},
                          "500": fault, "503": fault},
        }}
    return paths


def _mcp_path() -> dict[str, Any]:
    """``POST /mcp``: MCP over Streamable HTTP, stateless, one JSON-RPC message per request and
    one JSON answer (see :mod:`plugin.mcp_http`); GET and DELETE answer 405."""
    return {"post": {
        "summary": "MCP (Streamable HTTP, stateless, JSON responses): the LobeChat plugin's five tools and each "
                   "document's anchor as a resource (docanchor://documents/{doc_id}/anchor)",
        "parameters": [_NS_HEADER, {"name": "Accept", "in": "header", "required": False, "schema": {"type": "string"},
                                    "description": "MCP clients send 'application/json, text/event-stream'."}],
        "requestBody": {"required": True, "content": {"application/json": {"schema": {
            "type": "object", "required": ["jsonrpc", "method"], "properties": {
                "jsonrpc": {"const": "2.0"}, "id": {"type": ["integer", "string"]}, "method": {"type": "string"},
                "params": {"type": "object"}}}}}},
        "responses": {"200": {"description": "The JSON-RPC answer.",
                              "content": {"application/json": {"schema": {"type": "object"}}}},
                      "202": {"description": "A notification or response was accepted."},
                      **{code: _ERROR for code in ("400", "401", "403", "405", "413", "421")},
                      "406": {"description": "The Accept header does not allow JSON."}},
    }}


def _schemas() -> dict[str, Any]:
    string, integer, number = {"type": "string"}, {"type": "integer"}, {"type": "number"}
    nullable_int = {"type": ["integer", "null"]}
    section = {"type": "object", "properties": {
        "doc_id": string, "title": string, "text": string, "start_char": integer, "end_char": integer,
        "page_start": nullable_int, "page_end": nullable_int, "heading_path": {"type": "array", "items": string},
        "score": number, "n_tokens": integer, "chunk_ids": {"type": "array", "items": string}, "citation": string}}
    return {
        **request_schemas(),
        "Error": {"type": "object", "required": ["error"], "properties": {"error": {
            "type": "object", "required": ["code", "message", "status"],
            "properties": {"code": string, "message": string, "status": integer, "details": {"type": "object"}}}}},
        "Ingested": {"type": "object", "properties": {
            "doc_id": string, "title": string, "doc_type": string, "anchor": string, "n_chunks": integer,
            "n_tokens": integer, "flags": {"type": "object", "description": "As in Document: hidden text, "
                                                                            "garbled pages and the like."},
            "sources": _SOURCES, "duplicate": {"type": "boolean"}, "job_id": string,
            "replaced": {"type": "string", "description": "The doc_id of the version this one replaced."},
            "chunks_removed": {"type": "integer", "description": "Chunks of the replaced version removed."}}},
        "DocumentSummary": {"type": "object", "properties": {
            "doc_id": string, "title": string, "doc_type": string, "n_chunks": integer, "n_tokens": integer,
            "n_pages": nullable_int, "source_name": string, "sources": _SOURCES, "flags": {"type": "object"}}},
        "DocumentList": {"type": "object", "properties": {
            "namespace": string, "count": integer,
            "documents": {"type": "array", "items": {"$ref": "#/components/schemas/DocumentSummary"}}}},
        "Document": {"type": "object", "properties": {
            "doc_id": string, "title": string, "doc_type": string, "n_chunks": integer, "n_tokens": integer,
            "n_chars": integer, "n_pages": nullable_int, "anchor": string,
            "outline": {"type": "array", "items": string}, "flags": {"type": "object"}, "source_name": string,
            "sources": _SOURCES}},
        "Anchor": {"type": "object", "properties": {"doc_id": string, "anchor": string, "anchor_tokens": integer}},
        "Deleted": {"type": "object", "properties": {"doc_id": string, "deleted": {"type": "boolean"},
                                                      "chunks_removed": integer}},
        "SourceForgotten": {"type": "object", "properties": {
            "doc_id": string, "deleted": {"type": "boolean", "description": "No source remained: document deleted."},
            "chunks_removed": integer, "sources": _SOURCES}},
        "Status": {"type": "object", "properties": {
            "namespace": string, "documents": integer, "chunks": integer, "embedding_model": string,
            "embedding_dimension": integer,
            "indexed_with": {"type": ["string", "null"],
                             "description": "The model the index was built with, when not the configured one."},
            "chunk_tokens": integer, "chunk_overlap_tokens": integer, "anchor_tokens": integer,
            "budget_encoding": string, "store": string}},
        "RetrievalResult": {"type": "object", "properties": {
            "query": string, "budget_tokens": integer, "context_tokens_used": integer,
            "sections": {"type": "array", "items": section}, "context": string, "message": string,
            "no_strong_match": {"type": "boolean", "description": (
                "True when no passage is a strong match for the query: the sections, at most 150 tokens, are "
                "the closest ones and may not answer it.")},
            "trace": {"type": "object", "description": (
                "With explain: the retrieval's parameters, candidates and token accounting. Its budget_source "
                "says how the budget was set: request (budget_tokens), model (derived from model; see budget) "
                "or default (neither; the server's default budget).")},
            "budget": {"type": "object", "description": "The derivation, with model."}}},
    }


def request_schemas() -> dict[str, dict[str, Any]]:
    """The JSON request bodies, by component name: the fields each route accepts (its
    ``properties``, in the order messages list them) and their limits.

    ``TextDocument`` is ``POST``/``PUT /v1/documents``, ``RetrieveRequest`` ``POST /v1/retrieve``,
    ``ReadRequest`` ``POST /v1/read`` and ``SnapshotRequest`` ``POST /v1/context/snapshot``.
    """
    budget = {"type": "integer", "minimum": 1, "maximum": MAX_BUDGET_TOKENS}
    return {
        "TextDocument": {"type": "object", "properties": {
            "text": {"type": "string", "minLength": 1, "description": "The document as text (send text or url)."},
            "url": {"type": "string", "minLength": 1, "description": "A public http(s) URL to fetch the document from."},
            "title": {"type": "string", "description": "Ending in .md makes headings structure."},
            "wait_s": {"type": "number", "minimum": 0, "maximum": 60,
                       "description": "Seconds to wait for the ingest job (0-60)."},
            "replace": {**_ID, "description": "The doc_id this upload replaces."},
            "namespace": _NAMESPACE, "source": _SOURCE}},
        "RetrieveRequest": {"type": "object", "required": ["query"], "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS},
            "budget_tokens": {**budget,
                              "description": "Budget for the rendered context; with model, a cap on the derived one."},
            "doc_id": {**_ID, "description": "Search only this document."},
            "doc_ids": {"type": "array", "items": _ID, "minItems": 1, "maxItems": MAX_DOC_IDS,
                        "description": "Search only these documents; omit to search all (an empty list is refused)."},
            "explain": {"type": "boolean"}, "namespace": _NAMESPACE,
            "model": {"type": "string", "minLength": 1,
                      "description": "Derive the budget from this model's context window."},
            "used_tokens": {"type": "integer", "minimum": 0, "description": "Tokens the conversation uses (with model)."},
            "messages": {"type": "array", "items": {"type": "object"},
                         "description": "The conversation, counted instead of used_tokens (with model)."},
            "reserve_tokens": {"type": "integer", "minimum": 0, "description": "Tokens kept for the answer."}}},
        "ReadRequest": {"type": "object", "required": ["doc_id"], "properties": {
            "doc_id": _ID, "from": {"type": ["string", "integer"],
                                    "description": "A cursor from a previous read, or where to start."},
            "budget_tokens": budget,
            "namespace": _NAMESPACE}},
        "SnapshotRequest": {"type": "object", "required": ["model", "messages"], "properties": {
            "model": {"type": "string", "minLength": 1, "description": "A model name such as gpt-4o."},
            "messages": {"type": "array", "items": {"type": "object"}},
            "provider_tokens": {"type": "integer", "minimum": 0}}},
    }


def request_fields(schema: str) -> tuple[str, ...]:
    """The field names request body ``schema`` accepts, in order (see :func:`request_schemas`)."""
    return tuple(request_schemas()[schema]["properties"])
