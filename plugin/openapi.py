"""The OpenAPI 3.1 description of DocAnchor's HTTP API, written by hand (served at /openapi.json)."""

from __future__ import annotations

from typing import Any

from docanchor.settings import Settings
from plugin.api import MAX_BUDGET_TOKENS

_ERROR = {"$ref": "#/components/responses/Error"}
_NS_HEADER = {"$ref": "#/components/parameters/Namespace"}
_DOC_ID = {"name": "doc_id", "in": "path", "required": True, "schema": {"type": "string"}}


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
            "title": {"type": "string"}, "namespace": {"type": "string"},
            "wait_s": {"type": "number", "description": "Seconds to wait for the ingest job (0-60)."},
            "replace": {"type": "string", "description": "The doc_id this upload replaces (POST only)."}}}},
        "application/json": {"schema": {"$ref": "#/components/schemas/TextDocument"}},
    }}


def openapi_document(settings: Settings) -> dict[str, Any]:
    """The OpenAPI document, with ``settings.public_base_url`` as its server."""
    errors = {"400": _ERROR, "401": _ERROR, "404": _ERROR, "409": _ERROR, "413": _ERROR, "415": _ERROR,
              "422": _ERROR, "500": _ERROR}  # 409: document_indexing, store_locked, embedding_model_mismatch
    doc_errors = {k: v for k, v in errors.items() if k not in ("413", "415", "422")}
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


def _schemas() -> dict[str, Any]:
    string, integer, number = {"type": "string"}, {"type": "integer"}, {"type": "number"}
    nullable_int = {"type": ["integer", "null"]}
    section = {"type": "object", "properties": {
        "doc_id": string, "title": string, "text": string, "start_char": integer, "end_char": integer,
        "page_start": nullable_int, "page_end": nullable_int, "heading_path": {"type": "array", "items": string},
        "score": number, "n_tokens": integer, "chunk_ids": {"type": "array", "items": string}, "citation": string}}
    return {
        "Error": {"type": "object", "required": ["error"], "properties": {"error": {
            "type": "object", "required": ["code", "message", "status"],
            "properties": {"code": string, "message": string, "status": integer, "details": {"type": "object"}}}}},
        "TextDocument": {"type": "object", "properties": {
            "text": {"type": "string", "description": "The document as text (send text or url)."},
            "url": {"type": "string", "description": "A public http(s) URL to fetch the document from."},
            "title": {"type": "string", "description": "Ending in .md makes headings structure."},
            "wait_s": {"type": "number", "description": "Seconds to wait for the ingest job (0-60)."},
            "replace": {"type": "string", "description": "The doc_id this upload replaces."},
            "namespace": string}},
        "Ingested": {"type": "object", "properties": {
            "doc_id": string, "title": string, "doc_type": string, "anchor": string, "n_chunks": integer,
            "n_tokens": integer, "flags": {"type": "object", "description": "As in Document: hidden text, "
                                                                            "garbled pages and the like."},
            "duplicate": {"type": "boolean"}, "job_id": string,
            "replaced": {"type": "string", "description": "The doc_id of the version this one replaced."},
            "chunks_removed": {"type": "integer", "description": "Chunks of the replaced version removed."}}},
        "DocumentSummary": {"type": "object", "properties": {
            "doc_id": string, "title": string, "doc_type": string, "n_chunks": integer, "n_tokens": integer,
            "n_pages": nullable_int, "source_name": string}},
        "DocumentList": {"type": "object", "properties": {
            "namespace": string, "count": integer,
            "documents": {"type": "array", "items": {"$ref": "#/components/schemas/DocumentSummary"}}}},
        "Document": {"type": "object", "properties": {
            "doc_id": string, "title": string, "doc_type": string, "n_chunks": integer, "n_tokens": integer,
            "n_chars": integer, "n_pages": nullable_int, "anchor": string,
            "outline": {"type": "array", "items": string}, "flags": {"type": "object"}, "source_name": string}},
        "Anchor": {"type": "object", "properties": {"doc_id": string, "anchor": string, "anchor_tokens": integer}},
        "Deleted": {"type": "object", "properties": {"doc_id": string, "deleted": {"type": "boolean"},
                                                      "chunks_removed": integer}},
        "RetrieveRequest": {"type": "object", "required": ["query"], "properties": {
            "query": {"type": "string", "maxLength": 4000},
            "budget_tokens": {"type": "integer", "minimum": 1, "maximum": MAX_BUDGET_TOKENS,
                              "description": "Budget for the rendered context; with model, a cap on the derived one."},
            "doc_id": string, "doc_ids": {"type": "array", "items": string, "minItems": 1, "maxItems": 100,
                        "description": "Search only these documents; omit to search all (an empty list is refused)."},
            "explain": {"type": "boolean"}, "namespace": string,
            "model": {"type": "string", "description": "Derive the budget from this model's context window."},
            "used_tokens": {"type": "integer", "minimum": 0, "description": "Tokens the conversation uses (with model)."},
            "messages": {"type": "array", "items": {"type": "object"},
                         "description": "The conversation, counted instead of used_tokens (with model)."},
            "reserve_tokens": {"type": "integer", "minimum": 0, "description": "Tokens kept for the answer."}}},
        "SnapshotRequest": {"type": "object", "required": ["model", "messages"], "properties": {
            "model": string, "messages": {"type": "array", "items": {"type": "object"}},
            "provider_tokens": {"type": "integer", "minimum": 0}}},
        "ReadRequest": {"type": "object", "required": ["doc_id"], "properties": {
            "doc_id": string, "from": {"type": ["string", "integer"],
                                       "description": "A cursor from a previous read, or where to start."},
            "budget_tokens": {"type": "integer", "minimum": 1, "maximum": MAX_BUDGET_TOKENS},
            "namespace": string}},
        "RetrievalResult": {"type": "object", "properties": {
            "query": string, "budget_tokens": integer, "context_tokens_used": integer,
            "sections": {"type": "array", "items": section}, "context": string, "message": string,
            "trace": {"type": "object", "description": (
                "With explain: the retrieval's parameters, candidates and token accounting. Its budget_source "
                "says how the budget was set: request (budget_tokens), model (derived from model; see budget) "
                "or default (neither; the server's default budget).")},
            "budget": {"type": "object", "description": "The derivation, with model."}}},
    }
