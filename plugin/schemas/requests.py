"""The JSON bodies and query strings of the ``/v1`` routes (see README.md's route table).

Each body's ``properties`` are, in order, the fields the route accepts (the order messages list
them in); limits are the constants the code enforces. A ``namespace`` field may instead be sent as
the ``X-DocAnchor-Namespace`` header or ``?namespace=`` (they must agree).
"""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from docanchor.access import MAX_NAMESPACE_CHARS
from docanchor.errors import InvalidRequest
from docanchor.library import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, SORT_KEYS
from docanchor.settings import SETTING_RANGES
from plugin.api import MAX_QUERY_CHARS, MAX_SOURCE_CHARS, check_query
from plugin.conversation import (check_budget_share, check_conversation_id, check_flag, check_messages, check_model,
                                 check_setting)
from retrieval.assembly.compact import MODES, check_mode
from retrieval.assembly.draft import check_tools
from retrieval.assembly.pressure import CONTEXT_LIMIT_RANGE, check_context_limit
from plugin.schemas.common import Body, Budget, DocId, DocType, Id, Metadata, Namespace, Tags, Where

MAX_DOC_IDS = 100
"""Most documents one retrieve request may name (``doc_ids``)."""


def _doc_id_list(value: object) -> object:
    """``doc_ids`` refused with sentences that say what to do instead.

    Raises:
        InvalidRequest: an empty list (it would otherwise search every document, the opposite of
            naming none), not a list of non-blank strings, or more than :data:`MAX_DOC_IDS` ids.
    """
    if value == []:
        raise InvalidRequest("'doc_ids' is an empty list; name at least one document, or omit doc_ids to search "
                             "all documents.", code="invalid_argument", field="doc_ids")
    if not isinstance(value, list) or not all(isinstance(d, str) and d.strip() for d in value):
        raise InvalidRequest("'doc_ids' must be a list of document id strings.", code="invalid_argument",
                             field="doc_ids")
    if len(value) > MAX_DOC_IDS:
        raise InvalidRequest(f"'doc_ids' names {len(value)} documents; the limit is {MAX_DOC_IDS}.",
                             code="invalid_argument", field="doc_ids")
    return value


class TextDocument(Body):
    """``POST``/``PUT /v1/documents`` as JSON: a document as text or a URL to fetch it from."""

    text: Annotated[str, Field(min_length=1, description="The document as text (send text or url).")] = None
    url: Annotated[str, Field(min_length=1, description="A public http(s) URL to fetch the document from.")] = None
    title: Annotated[str, Field(description=(
        "A display title; ending in .md makes headings structure. Bytes stored already keep their title (it is "
        "their anchor's first line, which stays byte-identical); tags and metadata are applied to them."))] = None
    wait_s: Annotated[float, Field(ge=0, le=60, description="Seconds to wait for the ingest job (0-60).")] = None
    replace: Annotated[str, Field(min_length=1, description="The doc_id this upload replaces.")] = None
    namespace: Namespace = None
    source: Annotated[str, Field(max_length=MAX_SOURCE_CHARS, description=(
        "Where the document came from (a path, URL or file name), added to its sources; default: the URL "
        "fetched, else the file's name."))] = None
    tags: Tags = None
    metadata: Metadata = None


class RetrieveRequest(Body):
    """``POST /v1/retrieve``: a query, a budget (given or derived from a model) and a scope."""

    query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS), BeforeValidator(check_query)]
    budget_tokens: Annotated[Budget, Field(
        description="Budget for the rendered context; with model, a cap on the derived one.")] = None
    doc_id: Annotated[DocId, Field(description="Search only this document.")] = None
    doc_ids: Annotated[list[Id], Field(min_length=1, max_length=MAX_DOC_IDS), BeforeValidator(_doc_id_list), Field(
        description="Search only these documents; omit to search all (an empty list is refused).")] = None
    explain: bool = None
    namespace: Namespace = None
    model: Annotated[str, Field(min_length=1, description="Derive the budget from this model's context window.")] = None
    used_tokens: Annotated[int, Field(ge=0, description="Tokens the conversation uses (with model).")] = None
    messages: Annotated[list[Any], Field(description="The conversation, counted instead of used_tokens (with model).",
                                         json_schema_extra={"items": {"type": "object"}})] = None
    reserve_tokens: Annotated[int, Field(ge=0, description="Tokens kept for the answer.")] = None
    tags: Annotated[Tags, Field(description="Search only documents with any of these tags.")] = None
    where: Annotated[Where, Field(description="Search only documents whose metadata meets these conditions.")] = None


class ReadRequest(Body):
    """``POST /v1/read``: a window of one document."""

    doc_id: DocId
    from_: Annotated[str | int, Field(alias="from",
                                      description="A cursor from a previous read, or where to start.")] = None
    budget_tokens: Budget = None
    namespace: Namespace = None


class SnapshotRequest(Body):
    """``POST /v1/context/snapshot``: how full a model's window is with a conversation."""

    model: Annotated[str, Field(min_length=1, description="A model name such as gpt-4o.")]
    messages: Annotated[list[Any], Field(json_schema_extra={"items": {"type": "object"}})]
    provider_tokens: Annotated[int, Field(ge=0)] = None


class DocumentPatch(Body):
    """``PATCH /v1/documents/<doc_id>``: new tags (replacing the old ones) and metadata (a JSON merge
    patch, RFC 7386: a key set to null is removed). Nothing is re-embedded."""

    tags: Tags = None
    metadata: Annotated[dict[str, str | int | float | bool | None], Field(
        description="Keys to set; a key set to null is removed.")] = None
    namespace: Namespace = None


class DocumentQuery(Body):
    """The query string of ``GET /v1/documents``: a page of the namespace's documents."""

    limit: Annotated[int, Field(ge=1, le=MAX_PAGE_SIZE, description="Documents per page.")] = DEFAULT_PAGE_SIZE
    cursor: Annotated[str, Field(min_length=1, max_length=2000,
                                 description="next_cursor of the previous page (opaque).")] = None
    type: Annotated[list[DocType], Field(
        description="Only documents of any of these types (repeat the parameter for more).")] = None
    tag: Annotated[list[Annotated[str, Field(min_length=1)]], Field(
        description="Only documents with any of these tags (repeat the parameter for more).")] = None
    title: Annotated[str, Field(min_length=1, max_length=200,
                                description="Only documents whose title contains this (any case).")] = None
    sort: Literal[SORT_KEYS] = "title"  # type: ignore[valid-type]
    order: Literal["asc", "desc"] = "asc"
    namespace: Namespace = None


def _bounds(setting: str) -> dict[str, int]:
    """The JSON Schema bounds of a request field that is also a setting (:data:`SETTING_RANGES`)."""
    low, high = SETTING_RANGES[setting]
    return {"minimum": low, "maximum": high}


class ConversationRequest(Body):
    """The fields both context routes take: the model, the conversation, where offloads go and
    ``explain_only``. Each field's checker is :mod:`plugin.conversation`'s (the one every door uses)."""

    model: Annotated[str, Field(min_length=1), BeforeValidator(check_model),
                     Field(description="A model name such as gpt-4o.")]
    messages: Annotated[list[Any], BeforeValidator(check_messages), Field(
        description="OpenAI chat messages: system/developer/user/assistant/tool, with tool_calls and tool_call_id.",
        json_schema_extra={"minItems": 1, "items": {"type": "object", "required": ["role"]}})]
    conversation_id: Annotated[str, Field(min_length=1, max_length=MAX_NAMESPACE_CHARS),
                               BeforeValidator(check_conversation_id), Field(description=(
                                   "The namespace offloaded content goes to; derived from the conversation's start "
                                   "when absent."))] = None
    explain_only: Annotated[bool, BeforeValidator(check_flag),
                            Field(description="Plan and trace only; nothing is stored.")] = None
    context_limit: Annotated[int, BeforeValidator(check_context_limit), Field(
        description="The model's context window in tokens; required for a model not in DocAnchor's context-limit "
                    "table (else 400 unknown_model), and wins over the table's.",
        json_schema_extra={"minimum": CONTEXT_LIMIT_RANGE[0], "maximum": CONTEXT_LIMIT_RANGE[1]})] = None


class ContextAssembleRequest(ConversationRequest):
    """``POST /v1/context/assemble``: a prompt that fits the model's window less the reserve."""

    tools: Annotated[list[Any], BeforeValidator(check_tools), Field(
        description="Tool schemas sent with the request; they count into the prompt. droppable: true lets the "
                    "trim tier drop one.",
        json_schema_extra={"items": {"type": "object", "required": ["function"], "properties": {
            "type": {"const": "function"}, "function": {"type": "object", "required": ["name"]},
            "droppable": {"type": "boolean"}}}})] = None
    reserve_tokens: Annotated[int, Field(description=(  # its bounds depend on the model: the library checks them
        "Tokens kept for the answer (up to the model's window less one); predicted from earlier answers when absent."),
        json_schema_extra={"minimum": 0})] = None
    query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description=(
        "Add evidence for this query from the caller's documents (namespace).")), BeforeValidator(check_query)] = None
    budget_share: Annotated[float, Field(gt=0, le=1), BeforeValidator(check_budget_share), Field(
        description="Share of the room left that evidence may take (default 0.5).")] = None
    namespace: Annotated[Namespace, Field(description="Where the evidence comes from (the caller's documents).")] = None
    spill_threshold_tokens: Annotated[int, BeforeValidator(partial(check_setting, "spill_threshold_tokens")), Field(
        description="Spill a message or tool result over this many tokens (default DOCANCHOR_SPILL_THRESHOLD_TOKENS).",
        json_schema_extra=_bounds("spill_threshold_tokens"))] = None
    compaction_threshold_percent: Annotated[int, BeforeValidator(partial(check_setting, "compaction_threshold_percent")),
                                            Field(description=(
        "Pressure (percent of the window) at which old tool results are compacted "
        "(default DOCANCHOR_COMPACTION_THRESHOLD_PERCENT)."),
        json_schema_extra=_bounds("compaction_threshold_percent"))] = None


class ContextCompactRequest(ConversationRequest):
    """``POST /v1/context/compact``: a summary and the recent rounds, or a handoff."""

    mode: Annotated[Literal[MODES], BeforeValidator(check_mode), Field(description=(  # type: ignore[valid-type]
        "continue: summary + the recent rounds; handoff: a new conversation from the summary."))] = "continue"
    keep_rounds: Annotated[int, Field(ge=0, le=1000, description=(
        "Recent rounds kept after the summary (continue; default 4)."))] = None
    summary_tokens: Annotated[int, BeforeValidator(partial(check_setting, "summary_tokens")), Field(
        description="Largest summary, in tokens (default DOCANCHOR_SUMMARY_TOKENS).",
        json_schema_extra=_bounds("summary_tokens"))] = None


REQUESTS = {m.__name__: m for m in (TextDocument, RetrieveRequest, ReadRequest, SnapshotRequest, DocumentPatch,
                                    ContextAssembleRequest, ContextCompactRequest)}
"""The JSON request bodies by component name in /openapi.json."""
