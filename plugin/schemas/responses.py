"""What the ``/v1`` routes answer, errors included (the ``responses`` of ``/openapi.json``).

Each model lists the fields DocAnchor sends, with their JSON types; more may be added later
(:class:`plugin.schemas.common.Reply` allows them). Sizes named ``n_tokens`` are budget tokens.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, get_type_hints

from pydantic import Field, create_model

from plugin.schemas.common import Reply
from retrieval import read
from summarize.outline import OUTLINE_LIMIT


Sources = Annotated[list[str], Field(description=(
    "Where the document's bytes came from, oldest first (identical bytes from several places are one document); "
    "empty for documents stored before sources were recorded."))]

class ErrorDetail(Reply):
    code: str = Field(description="Stable error code, e.g. document_not_found.")
    message: str = Field(description="A sentence saying what went wrong and what to do.")
    status: int
    details: dict[str, Any] = Field(default_factory=dict)


class Error(Reply):
    """Every error: ``{"error": {code, message, status, details}}``."""

    error: ErrorDetail



class Ingested(Reply):
    """A stored document, as an upload answers it."""

    doc_id: str
    title: str
    doc_type: str
    anchor: str
    n_chunks: int
    n_tokens: int
    flags: dict[str, Any]
    duplicate: bool = Field(description="True when the same bytes were stored already.")
    job_id: str | None = None
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    sources: Sources = []
    replaced: str = Field(None, description="The doc_id of the version this one replaced.")
    chunks_removed: int = Field(None, description="Chunks of the replaced version removed.")


class Job(Reply):
    """An ingest job: where it is, and its document or its error once it ended."""

    job_id: str | None = Field(description="null for a file refused before it was queued (several files).")
    namespace: str = None
    filename: str | None
    status: str = Field(description="queued, running, done, failed or cancelled.")
    stage: str = None
    done: int = None
    total: int = None
    percent: int = None
    doc_id: str | None
    error_code: str | None = None
    error_message: str | None = None
    error_status: int | None = None
    result: Ingested | None
    replaces: str | None = Field(None, description="The doc_id this job replaces (PUT, or replace=<doc_id>).")
    url: str | None = Field(None, description="The address a URL job fetches (stage fetching).")
    cancel_requested: bool = Field(False, description="True once DELETE /v1/jobs/{job_id} asked it to stop.")
    restarts: int = Field(0, description="Times a server's stop made the job start over (its percent began again "
                                         "from 0).")


class Upload(Reply):
    """Several files in one multipart upload: one job each, in the order sent."""

    count: int
    jobs: list[Job]


class DocumentSummary(Reply):
    """A document in a list."""

    doc_id: str
    title: str
    doc_type: str
    n_chunks: int
    n_tokens: int
    n_pages: int | None
    source_name: str
    sources: Sources = []
    tags: list[str]
    metadata: dict[str, Any]
    flags: dict[str, Any]
    added_at: str = Field(description="When it was stored (ISO 8601, UTC); empty for older documents.")


class DocumentList(Reply):
    """One page of the namespace's documents."""

    namespace: str
    count: int = Field(description="Documents on this page.")
    total: int = Field(description="Documents matching the filter, on every page.")
    next_cursor: str | None = Field(description="Pass as cursor for the next page; null on the last page.")
    documents: list[DocumentSummary]


class Document(DocumentSummary):
    """A document's record: what a list shows, and its length, anchor and outline."""

    n_chars: int
    anchor: str
    outline: list[str] = Field(description=f"The first {OUTLINE_LIMIT} headings in reading order (each one a "
                               "valid 'from' of POST /v1/read).")
    outline_total: int = Field(description="Headings in the whole document; more than the outline lists when it "
                               f"has over {OUTLINE_LIMIT} (POST /v1/read reads from any of them).")


class SourceForgotten(Reply):
    """``DELETE /v1/documents/<doc_id>/sources``: what is left of the document."""

    doc_id: str
    deleted: bool = Field(description="No source remained: the document was deleted.")
    chunks_removed: int
    sources: Sources = []


class Status(Reply):
    """``GET /v1/status``: the namespace's documents and chunks and how the index is built."""

    namespace: str
    documents: int
    chunks: int
    embedding_model: str
    embedding_dimension: int
    indexed_with: str | None = Field(description="The model the index was built with, when not the configured one.")
    chunk_tokens: int
    chunk_overlap_tokens: int
    anchor_tokens: int
    budget_encoding: str
    store: str


class Anchor(Reply):
    doc_id: str
    anchor: str
    anchor_tokens: int


class Deleted(Reply):
    doc_id: str
    deleted: bool
    chunks_removed: int


class Section(Reply):
    """A contiguous passage: one or more merged chunks of one document."""

    doc_id: str
    title: str
    text: str = Field(description="Exactly the document's normalised text from start_char to end_char.")
    start_char: int
    end_char: int
    source_start: int | None = Field(None, description=(
        "The passage's start as a character offset into the decoded text of the uploaded file (plain text and "
        "Markdown; null for PDF, DOCX, HTML and CSV, whose text is extracted), for highlighting it there."))
    source_end: int | None = Field(None, description="The passage's end (exclusive) in the decoded file text.")
    page_start: int | None
    page_end: int | None
    heading_path: list[str]
    score: float
    n_tokens: int
    chunk_ids: list[str]
    citation: str


class RetrievalResult(Reply):
    """Cited sections whose rendered context fits the budget."""

    query: str
    budget_tokens: int
    context_tokens_used: int = Field(description="Budget tokens of exactly 'context'; never above budget_tokens.")
    sections: list[Section]
    context: str
    message: str
    no_strong_match: bool = Field(description=(
        "True when no passage is a strong match for the query: the sections, at most 100 tokens, are the closest "
        "ones and may not answer it."))
    trace: dict[str, Any] = Field(None, description=(
        "With explain: the retrieval's parameters, candidates and token accounting. Its budget_source says how the "
        "budget was set: request (budget_tokens), model (derived from model; see budget) or default."))
    budget: dict[str, Any] = Field(None, description="The derivation, with model.")


def _reply_of(result: type, doc: str, descriptions: dict[str, str] | None = None) -> type[Reply]:
    """A :class:`Reply` with the fields of a library result dataclass, in its order and with its
    types, all required (the route always sends every one), so the fields are written once; a field
    marked :data:`retrieval.read.INTERNAL` is never sent and is left out. ``descriptions`` gives
    fields their description in the schema."""
    hints = get_type_hints(result)
    words = descriptions or {}
    fields = {f.name: (hints[f.name], Field(..., description=words.get(f.name)))
              for f in dataclasses.fields(result) if not f.metadata.get(read.INTERNAL)}
    return create_model(result.__name__, __base__=Reply, __doc__=doc, __module__=__name__, **fields)


ReadResult = _reply_of(read.ReadResult, "A contiguous window of one document and the cursor to continue.", {
    "message": "A sentence when nothing fits (the window is empty), else \"\".",
    "note": ("A sentence when the window starts later than 'from' asked because that holds no indexed text (page:1 "
             "of a PDF whose page 1 was garbled and not indexed: \"Page 1 has no indexed text; this read starts at "
             "page 2, the next one that has.\"), else \"\". Show it with the text."),
})


class Snapshot(Reply):
    """How full a model's context window is (tokens)."""

    model: str
    estimated_tokens: int
    provider_tokens: int | None
    input_tokens: int
    tokens_source: str
    tokenizer: str
    tokenizer_source: str
    context_limit: int
    limit_source: str
    usage_ratio: float
    severity: str
    recommended_action: str


class Reference(Reply):
    """A message, tool result or run of rounds replaced by a reference to the document it was stored as."""

    doc_id: str
    kind: str = Field(description="spill (one oversized message), tool_result, turns (old rounds) or handoff.")
    replaced: str = Field(description="What was replaced, in words.")
    turns: list[int] = Field(description="The replaced messages' 1-based positions in the request.")
    tokens_replaced: int
    reference_tokens: int
    stored: bool = Field(description="False with explain_only, or when storing failed (the reference still stands).")
    status: str
    error: str | None


class TraceEntry(Reply):
    """One transformation applied or skipped (the EXPLAIN trace); tokens are the model tokenizer's."""

    phase: str = Field(description="plan, bind, optimise, execute or feedback.")
    action: str
    applied: bool
    reason: str
    tokens_before: int
    tokens_after: int


class ContextResult(Reply):
    """What both context routes answer; tokens are the model tokenizer's."""

    conversation_id: str = Field(description="The namespace offloaded content went to.")
    messages: list[dict[str, Any]]
    context_tokens_used: int
    context_limit: int
    references: list[Reference]
    explain_only: bool
    tokenizer: str
    trace: list[TraceEntry]


class ContextAssembled(ContextResult):
    """``POST /v1/context/assemble``: messages that fit ``budget_tokens`` (the window less the reserve)."""

    model: str
    tools: list[dict[str, Any]] = Field(None, description="The tool schemas kept, when tools were sent.")
    reserve_tokens: int
    reserve_source: str
    budget_tokens: int
    pressure: dict[str, float] = Field(description="before and after: tokens needed / window.")
    tier: str
    severity: str
    evidence: dict[str, Any] | None = Field(description="query, tokens and budget_tokens of the evidence added.")


class ContextCompacted(ContextResult):
    """``POST /v1/context/compact``: the summary and what is kept."""

    mode: str
    summary: str
    summary_source: str = Field(description="extractive or abstractive (with the fallback's reason).")
    tokens_before: int


class Problem(Reply):
    """Something that keeps the service from working fully (the server itself still answers)."""

    code: str = Field(description=(
        "store_unavailable: the Chroma server does not answer its heartbeat, so documents, searches and reads "
        "answer 503 until it is back; disk_full: ingests, changes and deletes are refused until space is freed "
        "(reads work)."))
    message: str


class Health(Reply):
    status: str = Field(description="ok, or degraded (see problems).")
    problems: list[Problem] = Field(None, description="Only when degraded.")
    worker: int = Field(None, description="Only with docanchor serve --workers: which worker process answered "
                                          "(0 to workers - 1).")
    pid: int = Field(None, description="Only with docanchor serve --workers: that worker's process id.")


RESPONSES = {m.__name__: m for m in (Error, Ingested, Job, Upload, DocumentSummary, DocumentList, Document, Anchor,
                                     Deleted, SourceForgotten, Status, Section, RetrievalResult, ReadResult, Snapshot,
                                     ContextAssembled, ContextCompacted, Health)}
"""Response bodies by component name in /openapi.json."""
