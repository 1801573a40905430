"""The five plugin tools (LobeChat ``/lobechat/<name>`` and MCP ``tools/call``): arguments and
structured answers, defined once.

From :data:`TOOL_ARGS` come the MCP tools' ``inputSchema`` (:func:`input_schema`: ``required`` and
numeric bounds) and the LobeChat manifest's ``parameters`` (:func:`manifest_parameters`: forgiving,
as LobeChat's gateway validates arguments before calling and a strict schema fails calls where
DocAnchor never sees them -- ../shared/LOBECHAT.md). From :data:`TOOL_OUTPUTS` come the MCP tools'
``outputSchema``; each answer's ``structuredContent`` holds ``answer`` (the text the model reads,
also the text content) and the data behind it.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.fields import FieldInfo

from plugin.schemas.common import DocType, Schema, Tags, Where, sent_fields

MIN_TOOL_BUDGET_TOKENS = 150
"""Fewest budget tokens a tool answer may be asked for (see ``plugin.lobechat.MIN_BUDGET_TOKENS``)."""
MAX_TOOL_BUDGET_TOKENS = 1500
"""Most budget tokens one tool answer carries (see ``plugin.lobechat.MAX_BUDGET_TOKENS``)."""


class Args(BaseModel):
    """Tool arguments: unknown keys are tolerated, and every tool's answer names the ones it ignored
    (``plugin.lobechat.Call.ignored``) -- unlike ``/v1``, whose bodies refuse them
    (:class:`plugin.schemas.common.Body`). On purpose: a tool's caller is a model, which adds keys
    of its own (a ``reason``, a ``budget`` beside ``budget_tokens``); a refusal would cost it a
    second call and the user a wait for an answer the call could have given, while ignoring them
    and saying so answers at once and lets the model correct a misnamed argument next time. An API
    client is a program, which a refusal tells at once, in development, that a field is misspelt."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


ToolBudget = Annotated[float, Field(ge=MIN_TOOL_BUDGET_TOKENS, le=MAX_TOOL_BUDGET_TOKENS, description=(
    f"Most tokens of passages to return, from {MIN_TOOL_BUDGET_TOKENS} to {MAX_TOOL_BUDGET_TOKENS}; a larger value is "
    f"used as {MAX_TOOL_BUDGET_TOKENS} (default from the plugin settings)."))]
DOC_ID_EXAMPLE = "doc_1a2b3c4d5e6f7a8b"
"""The form of a doc id, as every tool argument that takes one shows it."""


def doc_id_arg(role: str) -> Any:
    """The type of a tool argument that is a document's id: text of at least one character, its
    description ``role`` (what the tool does with the document) then the form of an id
    (:data:`DOC_ID_EXAMPLE`), said here once for every tool."""
    return Annotated[str, Field(min_length=1, description=f"{role}: its doc id, such as {DOC_ID_EXAMPLE}.")]


class AddDocument(Args):
    url: Annotated[str, Field(min_length=1, description="A public http or https link to the document.")]
    title: Annotated[str, Field(description="A display title for the document.")] = None
    tags: Annotated[Tags, Field(description="Short labels to file the document under (e.g. [\"contracts\"]).")] = None


class SearchDocuments(Args):
    query: Annotated[str, Field(min_length=1, max_length=4000,
                                description="What to look for: a specific question or key phrase.")]
    doc_id: doc_id_arg("Search only this document") = None
    budget_tokens: ToolBudget = None
    tags: Annotated[Tags, Field(description="Search only documents with any of these tags.")] = None
    where: Annotated[Where, Field(description=(
        "Search only documents whose metadata meets these conditions, e.g. {\"year\": {\"$gte\": 2020}}."))] = None


class ReadDocument(Args):
    doc_id: doc_id_arg("The document to read")
    from_: Annotated[str, Field(alias="from", description=(
        "Where to start: a heading, 'page:N', 'chunk:N' or a cursor from a previous read."))] = None
    budget_tokens: Annotated[ToolBudget, Field(description=(
        f"Most tokens to return, from {MIN_TOOL_BUDGET_TOKENS} to {MAX_TOOL_BUDGET_TOKENS}; a larger value is used as "
        f"{MAX_TOOL_BUDGET_TOKENS} (default from the plugin settings)."))] = None


class GetDocumentAnchor(Args):
    doc_id: doc_id_arg("The document")


class ListDocuments(Args):
    cursor: Annotated[str, Field(min_length=1, description="The cursor the previous listDocuments answer gave, for "
                                                          "the next page.")] = None
    limit: Annotated[float, Field(ge=1, le=50, description="Documents per page, 1 to 50 (default 50).")] = None
    budget_tokens: Annotated[ToolBudget, Field(description=(
        f"Most tokens the list may take, from {MIN_TOOL_BUDGET_TOKENS} to {MAX_TOOL_BUDGET_TOKENS}; a larger value is "
        f"used as {MAX_TOOL_BUDGET_TOKENS} (default from the plugin settings). Documents beyond it are left to the "
        "next page."))] = None
    tag: Annotated[str, Field(min_length=1, description="Only documents with this tag.")] = None
    type: DocType = None
    title: Annotated[str, Field(min_length=1, description="Only documents whose title contains this.")] = None


TOOL_ARGS: dict[str, type[Args]] = {
    "addDocument": AddDocument, "searchDocuments": SearchDocuments, "readDocument": ReadDocument,
    "getDocumentAnchor": GetDocumentAnchor, "listDocuments": ListDocuments,
}


class Output(BaseModel):
    """A tool's structured answer: the text answer and the data behind it."""

    model_config = ConfigDict(extra="allow")
    answer: str = Field(description="The answer as the model reads it (the same as the text content).")


class Passage(BaseModel):
    doc_id: str
    title: str
    citation: str
    text: str
    page_start: int | None = None
    page_end: int | None = None
    heading_path: list[str] = Field(default_factory=list)


class SearchOutput(Output):
    query: str = None
    budget_tokens: int = None
    context_tokens_used: int = None
    no_strong_match: bool = None
    passages: list[Passage] = None


class ReadOutput(Output):
    doc_id: str = None
    title: str = None
    text: str = None
    next_cursor: str | None = None
    context_tokens_used: int = None


class AnchorOutput(Output):
    doc_id: str = None
    title: str = None
    anchor: str = None


class ListedDocument(BaseModel):
    doc_id: str
    title: str
    doc_type: str
    n_pages: int | None = None
    n_tokens: int
    tags: list[str] = Field(default_factory=list)


class ListOutput(Output):
    total: int = None
    next_cursor: str | None = None
    documents: list[ListedDocument] = None


class AddOutput(Output):
    status: str = Field(None, description="done, queued, running or failed.")
    doc_id: str | None = None
    job_id: str | None = None
    percent: int = None
    title: str = None
    duplicate: bool = None


TOOL_OUTPUTS: dict[str, type[Output]] = {
    "addDocument": AddOutput, "searchDocuments": SearchOutput, "readDocument": ReadOutput,
    "getDocumentAnchor": AnchorOutput, "listDocuments": ListOutput,
}


def tool_fields(name: str) -> dict[str, FieldInfo]:
    """Tool ``name``'s arguments by the names a caller sends (``from``, not ``from_``), in order;
    ``{}`` for a name that is no tool."""
    model = TOOL_ARGS.get(name)
    return sent_fields(model) if model else {}


def input_schema(name: str) -> dict[str, Any]:
    """The MCP ``inputSchema`` of tool ``name``: types, ``required`` and bounds."""
    return inline_schema(TOOL_ARGS[name].model_json_schema(schema_generator=Schema, by_alias=True))


def output_schema(name: str) -> dict[str, Any]:
    """The MCP ``outputSchema`` of tool ``name``."""
    return inline_schema(TOOL_OUTPUTS[name].model_json_schema(schema_generator=Schema, by_alias=True))


def manifest_parameters(name: str) -> dict[str, Any]:
    """The LobeChat manifest's ``parameters`` of tool ``name``: each property's type and its
    description, opened by "Required." or "Optional." -- no ``required`` list, no bounds, numbers
    as ``number`` (the gateway refuses what a strict schema refuses before DocAnchor sees it)."""
    schema = input_schema(name)
    required = set(schema.get("required", ()))
    props = {}
    for key, prop in schema["properties"].items():
        kind = prop.get("type") or "string"
        entry: dict[str, Any] = {"type": "number" if kind == "integer" else kind}
        if kind == "array":
            entry["items"] = {"type": prop.get("items", {}).get("type", "string")}
        entry["description"] = f"{'Required' if key in required else 'Optional'}. {prop.get('description', '')}".strip()
        props[key] = entry
    return {"type": "object", "properties": props}


def inline_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` without ``$defs``/``$ref`` (MCP clients and LobeChat read tool schemas flat) and
    without the model's docstring title."""
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return walk(dict(defs[node["$ref"].rsplit("/", 1)[-1]]))
            return {k: walk(v) for k, v in node.items() if k not in ("title",) or not isinstance(v, str)}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    out = walk(schema)
    out.pop("description", None)
    return out
