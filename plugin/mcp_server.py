"""DocAnchor's five tools, its two context tools, and document anchors as resources, over MCP (the
official Python SDK).

The tools are the LobeChat plugin APIs under the same names, with the descriptions of
``manifest.json``, the argument and answer schemas of :mod:`plugin.schemas.tools` (``inputSchema``
with ``required`` and bounds, ``outputSchema``; each answer's ``structuredContent`` sits next to
its text) and the same answers (:mod:`plugin.answers` through the handlers of :mod:`plugin.lobechat`):

- ``addDocument(url, title?)``, ``searchDocuments(query, doc_id?, budget_tokens?)``,
  ``readDocument(doc_id, from?, budget_tokens?)``, ``getDocumentAnchor(doc_id)``, ``listDocuments()``.
- The read-only ones also take ``namespace`` (:data:`NAMESPACE_ARGUMENT`, MCP's only addition to
  the manifest's arguments): where a context reference's offloads are (a conversation's namespace,
  as the reference's calls say), under the access check of the context tools.
- Every problem the model can fix (unknown id, missing argument, refused URL, nothing found) or
  tell the user about (a Chroma server that does not answer) is a sentence saying what to do, in a tool result (``isError`` set when DocAnchor refused the call,
  the text then ending with the error's code: :func:`plugin.mcp_context.refusal`), never a
  protocol error; a real fault is a tool result with a fixed sentence and the traceback
  goes to the log.
- ``assembleContext`` and ``compactContext`` (:mod:`plugin.mcp_context`): context assembly for
  agents, MCP only.
- Resources: ``docanchor://documents/{doc_id}/anchor`` for every document of the namespace
  (listed a page at a time with ``nextCursor``, as ``GET /v1/documents`` pages, and as a
  template), whose text is the anchor answer of ``getDocumentAnchor``.

Transports: :func:`run_stdio` (``docanchor mcp``) and :mod:`plugin.mcp_http` (``/mcp`` of the
running service). Over HTTP the namespace follows the service's rules
(:func:`docanchor.access.resolve_namespace` on ``Authorization: Bearer`` and
``X-DocAnchor-Namespace``); over stdio the caller owns the data dir and works in the namespace
it was started with.

DocAnchor's calls block (embedding, Chroma), so they run in worker threads, off the event loop.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
from functools import partial
from pathlib import Path
from typing import Any, Awaitable, Callable

import anyio
import anyio.abc
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from docanchor.access import MAX_NAMESPACE_CHARS, check_namespace, resolve_namespace
from docanchor.errors import ConfigError, DocAnchorError, InvalidRequest
from plugin import answers
from plugin.api import DocAnchor
from plugin.bodies import header_text
from plugin.http_errors import log_error
from plugin.lobechat import APIS, MANIFEST_PATH, Call, _sentence_for, is_fault, run_api
from plugin.mcp_context import TOOLS as CONTEXT_TOOLS, Access, call_context_tool, context_tools, refusal
from plugin.schemas.tools import input_schema, output_schema
from plugin.v1 import NAMESPACE_HEADER, bearer_token

log = logging.getLogger("docanchor.mcp")

SERVER_NAME = "docanchor"
ANCHOR_URI_TEMPLATE = "docanchor://documents/{doc_id}/anchor"
_ANCHOR_URI = re.compile(r"^docanchor://documents/([^/?#]+)/anchor$")
FAULT_SENTENCE = ("DocAnchor hit an internal error and could not answer this call. Tell the user; trying again "
                  "later may work.")
_READ_ONLY = {"searchDocuments", "readDocument", "getDocumentAnchor", "listDocuments"}
NAMESPACE_ARGUMENT = {
    "type": "string", "minLength": 1, "maxLength": MAX_NAMESPACE_CHARS,
    "description": "The namespace to read, when not this connection's: a conversation's offloads are in its own "
                   "(the reference names it, e.g. namespace=\"t2-mcp\"). Leave it out for this connection's documents.",
}
"""The one argument the MCP door adds to the manifest's: the read-only tools (:data:`_READ_ONLY`)
may name the namespace they read, as ``/v1`` requests do (``namespace``). The LobeChat manifest
stays LobeChat's (a plugin acts in the namespace its settings give)."""


# ---------------------------------------------------------------------------- tools from the manifest
def load_manifest(path: Path = MANIFEST_PATH) -> dict[str, Any]:
    """``manifest.json`` as a dict.

    Raises:
        ConfigError: the file is missing or not valid JSON.
    """
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"The manifest {path.name} is missing or not valid JSON; reinstall DocAnchor.") from exc


def manifest_tools(manifest: dict[str, Any]) -> list[types.Tool]:
    """One MCP tool per ``api[]`` entry that DocAnchor answers: name, description and schema as written.

    Raises:
        ConfigError: the manifest names an API DocAnchor has no handler for, or lacks one.
    """
    tools = []
    for api in manifest.get("api", []):
        name = api.get("name")
        if name not in APIS:
            raise ConfigError(f"manifest.json lists an API {name!r} that DocAnchor does not answer.")
        tools.append(types.Tool(
            name=name,
            description=api.get("description", ""),
            input_schema=mcp_input_schema(name),
            output_schema=output_schema(name),
            annotations=types.ToolAnnotations(
                read_only_hint=name in _READ_ONLY,
                destructive_hint=False,
                idempotent_hint=True,
                open_world_hint=name == "addDocument",
            ),
        ))
    missing = set(APIS) - {t.name for t in tools}
    if missing:
        raise ConfigError(f"manifest.json does not describe the API(s) {', '.join(sorted(missing))}.")
    return tools


def mcp_input_schema(name: str) -> dict[str, Any]:
    """Tool ``name``'s ``inputSchema``: :func:`plugin.schemas.tools.input_schema`, and
    :data:`NAMESPACE_ARGUMENT` for a read-only tool."""
    schema = input_schema(name)
    if name in _READ_ONLY:
        schema["properties"]["namespace"] = dict(NAMESPACE_ARGUMENT)
    return schema


# ---------------------------------------------------------------------------- answering
def tool_names() -> list[str]:
    """The name of every tool this server answers: the plugin APIs (:data:`plugin.lobechat.APIS`),
    then the context tools (:data:`plugin.mcp_context.TOOLS`), the two registries
    :func:`build_server` lists."""
    return [*APIS, *CONTEXT_TOOLS]


def call_sentence(da: DocAnchor, name: str, arguments: dict[str, Any] | None, namespace: str) -> tuple[str, bool]:
    """Run one tool call and return ``(answer, is_error)``; never raises (see :func:`call_tool`)."""
    text, is_error, _ = call_tool(da, name, arguments, namespace)
    return text, is_error


def call_tool(da: DocAnchor, name: str, arguments: dict[str, Any] | None, namespace: str,
              access: Access = check_namespace) -> tuple[str, bool, dict[str, Any] | None]:
    """Run one tool call and return ``(answer, is_error, structured)``; never raises.

    ``namespace`` is the connection's; a read-only tool's ``namespace`` argument
    (:data:`NAMESPACE_ARGUMENT`) replaces it when ``access`` allows it (default: any, as over
    stdio). ``is_error`` is true when DocAnchor refused the call (the answer then says what to do)
    or failed (a fixed sentence; the traceback is logged). ``structured`` is the tool's
    ``outputSchema`` object (``answer`` plus the data behind it) for an answer that is not an error.
    """
    if name not in APIS:
        return (f"DocAnchor has no tool named {name!r}; use one of {', '.join(tool_names())}.", True, None)
    args = dict(arguments) if isinstance(arguments, dict) else {}
    named = args.pop("namespace", None) if name in _READ_ONLY else None
    if named is not None:
        try:
            namespace = access(check_namespace(named))
        except DocAnchorError as err:
            return (refusal(f"{err.message} Call {name} again without `namespace` (this connection's documents) or "
                            "with the namespace a DocAnchor reference named.", err), True, None)
    call = Call(da, args, {}, namespace, named=namespace if named is not None else None,
                door_args=("namespace",) if name in _READ_ONLY else ())
    try:
        text = run_api(name, call)
    except DocAnchorError as err:
        log_error(log, f"MCP tool {name}", err)
        if is_fault(err):
            return (FAULT_SENTENCE, True, None)
        return (refusal(_mcp_sentence(err), err), True, None)
    except Exception:  # a crash must not echo internals
        log.exception("MCP tool %s crashed", name)
        return (FAULT_SENTENCE, True, None)
    text = text.strip() or "DocAnchor had nothing to return; try again with other arguments."
    return (text, False, {"answer": text, **(call.data or {})})


def _mcp_sentence(err: DocAnchorError) -> str:
    """The plugin's sentence for ``err``, with MCP's words where the plugin speaks of its settings."""
    if err.code == "unauthorized" or err.code == "invalid_api_key":
        return ("DocAnchor refused the API key. Ask the user to set `Authorization: Bearer <key>` in this MCP "
                "server's configuration.")
    if err.code == "forbidden":
        return f"{err.message} Ask the user to correct the X-DocAnchor-Namespace header of this MCP server."
    sentence = _sentence_for(err)
    return sentence.replace("through DocAnchor's upload page instead",
                            "through DocAnchor's upload page, HTTP API or `docanchor ingest` instead")


def anchor_uri(doc_id: str) -> str:
    return ANCHOR_URI_TEMPLATE.format(doc_id=doc_id)


RESOURCES_PAGE_SIZE = 100
"""Anchor resources per ``resources/list`` page."""


def list_anchor_resources(da: DocAnchor, namespace: str,
                          cursor: str | None = None) -> tuple[list[types.Resource], str | None]:
    """One anchor resource per document of ``namespace`` on one page (by title, as
    ``GET /v1/documents`` lists them), and the next page's cursor (``None`` on the last).

    Raises:
        MCPError: ``INVALID_PARAMS`` for a cursor this server did not give out.
    """
    try:
        found = da.page_documents(namespace=namespace, limit=RESOURCES_PAGE_SIZE, cursor=cursor)
    except InvalidRequest as err:
        raise MCPError(types.INVALID_PARAMS, err.message) from err
    return [
        types.Resource(
            uri=anchor_uri(r.doc_id), name=r.doc_id, title=f"{r.title or 'Untitled'} — anchor",
            description=f"The anchor of “{r.title or r.doc_id}”: what it covers, its outline, central sentences "
                        f"and doc id, in at most {da.settings.anchor_tokens} tokens.",
            mime_type="text/markdown",
        )
        for r in found.documents
    ], found.next_cursor


def read_anchor_resource(da: DocAnchor, uri: str, namespace: str) -> str:
    """The anchor answer behind an anchor URI.

    Raises:
        MCPError: ``INVALID_PARAMS`` (the SDK's code for an unknown resource) when the URI is not
            an anchor URI or names no stored document.
    """
    match = _ANCHOR_URI.match(uri)
    if not match:
        raise MCPError(types.INVALID_PARAMS, f"Unknown resource {uri}; anchors are at {ANCHOR_URI_TEMPLATE}.",
                       data={"uri": uri})
    try:
        return answers.anchor_answer(da.get_document(match.group(1), namespace), counter=da.ctx.counter,
                                     max_tokens=da.settings.anchor_tokens)
    except DocAnchorError as err:
        if err.http_status >= 500:
            raise MCPError(types.INTERNAL_ERROR, FAULT_SENTENCE) from err
        raise MCPError(types.INVALID_PARAMS, _mcp_sentence(err), data={"uri": uri}) from err


# ---------------------------------------------------------------------------- the server
NamespaceOf = Callable[[ServerRequestContext[Any]], str]


def http_namespace(da: DocAnchor) -> NamespaceOf:
    """The namespace of an MCP request from its HTTP headers, as the ``/v1`` API decides it.

    Raises (inside the handler, turned into a tool sentence or a protocol error):
        Unauthorized, Forbidden, InvalidRequest: see :func:`docanchor.access.resolve_namespace`.
    """

    def namespace_of(ctx: ServerRequestContext[Any]) -> str:
        headers = getattr(ctx.request, "headers", None) or {}
        requested = headers.get(NAMESPACE_HEADER.lower())
        if requested is None:
            requested = headers.get(NAMESPACE_HEADER)
        # a blank header is refused as blank (as /v1 does), not taken for none
        return resolve_namespace(da.settings, bearer_token(headers.get("authorization")),
                                 None if requested is None else header_text(requested))

    return namespace_of


AccessOf = Callable[[ServerRequestContext[Any]], Access]


def http_access(da: DocAnchor) -> AccessOf:
    """Which conversation namespaces an MCP request over HTTP may use: those its API key may
    (:func:`docanchor.access.resolve_namespace`)."""

    def access_of(ctx: ServerRequestContext[Any]) -> Access:
        headers = getattr(ctx.request, "headers", None) or {}
        return lambda namespace: resolve_namespace(da.settings, bearer_token(headers.get("authorization")), namespace)

    return access_of


def _anchor_template(da: DocAnchor) -> types.ResourceTemplate:
    """The template of every document's anchor resource (``docanchor://documents/{doc_id}/anchor``)."""
    return types.ResourceTemplate(
        uri_template=ANCHOR_URI_TEMPLATE, name="anchor", title="Document anchor",
        description="A document's anchor: title, size, outline, central sentences and doc id "
                    f"(at most {da.settings.anchor_tokens} tokens). doc_id comes from listDocuments.",
        mime_type="text/markdown",
    )


def _tool_call(da: DocAnchor, params: types.CallToolRequestParams, namespace: str,
               access: Access) -> Callable[[], tuple[str, bool, dict[str, Any] | None]]:
    """The work of one tool call: a context tool (:mod:`plugin.mcp_context`) or a plugin API."""
    if params.name in CONTEXT_TOOLS:
        return partial(call_context_tool, da, params.name, params.arguments or {}, namespace, access)
    return partial(call_tool, da, params.name, params.arguments, namespace, access)


def build_server(da: DocAnchor, namespace_of: NamespaceOf, ready: Callable[[], None] = lambda: None,
                 manifest: dict[str, Any] | None = None, access_of: AccessOf | None = None) -> Server[Any]:
    """A low-level MCP server answering DocAnchor's tools and anchor resources.

    Args:
        da: the instance every call acts on.
        namespace_of: where a request acts (stdio: a constant; HTTP: :func:`http_namespace`).
        ready: called (in a worker thread) before any DocAnchor work, e.g. to wait for the model.
        manifest: the manifest to take tools from (default: ``manifest.json``).
        access_of: which conversation namespaces a request may offload into (HTTP:
            :func:`http_access`); default: any (stdio, where the caller owns the data dir).

    Raises:
        ConfigError: the manifest is missing, unreadable or out of step with the handlers.
    """
    manifest = manifest or load_manifest()
    tools = manifest_tools(manifest) + context_tools()
    in_thread = _worker(ready)
    return Server(
        SERVER_NAME,
        version=_version(),
        title="DocAnchor",
        description=manifest.get("meta", {}).get("description"),
        instructions=manifest.get("systemRole"),
        **_tool_handlers(da, tools, namespace_of, access_of or _any_namespace, in_thread),
        **_resource_handlers(da, namespace_of, in_thread),
    )


InThread = Callable[[Callable[[], Any]], Awaitable[Any]]


def _worker(ready: Callable[[], None]) -> InThread:
    """How handlers run DocAnchor work: in a worker thread (the event loop stays free), after
    ``ready()``."""

    async def in_thread(fn: Callable[[], Any]) -> Any:
        def work() -> Any:
            ready()
            return fn()
        return await anyio.to_thread.run_sync(work)

    return in_thread


def _any_namespace(ctx: ServerRequestContext[Any]) -> Access:
    """stdio's access: the caller owns the data dir, so every namespace a name may be
    (:func:`docanchor.access.check_namespace`)."""
    return check_namespace


def _tool_handlers(da: DocAnchor, tools: list[types.Tool], namespace_of: NamespaceOf, access_of: AccessOf,
                   in_thread: InThread) -> dict[str, Callable[..., Awaitable[Any]]]:
    """``on_list_tools`` and ``on_call_tool``: a refused namespace is the tool's error sentence."""

    async def on_list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def on_call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            namespace = namespace_of(ctx)
        except DocAnchorError as err:
            text, is_error = refusal(_mcp_sentence(err), err), True
        else:
            text, is_error, structured = await in_thread(_tool_call(da, params, namespace, access_of(ctx)))
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error,
                                        structured_content=structured)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)

    return {"on_list_tools": on_list_tools, "on_call_tool": on_call_tool}


def _resource_handlers(da: DocAnchor, namespace_of: NamespaceOf,
                       in_thread: InThread) -> dict[str, Callable[..., Awaitable[Any]]]:
    """``on_list_resources``, ``on_list_resource_templates`` and ``on_read_resource``: the
    documents' anchors; a refused namespace is a protocol error."""

    async def on_list_resources(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourcesResult:
        namespace = _protocol_namespace(namespace_of, ctx, da)
        cursor = getattr(params, "cursor", None) if params is not None else None
        resources, next_cursor = await in_thread(partial(list_anchor_resources, da, namespace, cursor))
        return types.ListResourcesResult(resources=resources, next_cursor=next_cursor)

    async def on_list_resource_templates(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[_anchor_template(da)])

    async def on_read_resource(ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        namespace = _protocol_namespace(namespace_of, ctx, da)
        uri = str(params.uri)
        text = await in_thread(partial(read_anchor_resource, da, uri, namespace))
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="text/markdown", text=text)])

    return {"on_list_resources": on_list_resources, "on_list_resource_templates": on_list_resource_templates,
            "on_read_resource": on_read_resource}


def _protocol_namespace(namespace_of: NamespaceOf, ctx: ServerRequestContext[Any], da: DocAnchor) -> str:
    """The request's namespace for resource calls, where a refusal can only be a protocol error."""
    try:
        return namespace_of(ctx)
    except DocAnchorError as err:
        raise MCPError(types.INVALID_REQUEST, _mcp_sentence(err)) from err


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("docanchor")
    except PackageNotFoundError:
        return "0+source"


# ---------------------------------------------------------------------------- stdio
def warm_up(da: DocAnchor) -> None:
    """:meth:`DocAnchor.start_up`, as ``docanchor serve`` does, and log the jobs resumed."""
    resumed = da.start_up()
    if resumed:
        log.info("resumed %d unfinished ingest job(s)", len(resumed))


class Warmup:
    """:func:`warm_up` in a background thread; :meth:`wait` blocks until it ended.

    The client's handshake and ``tools/list`` answer at once while the model loads (clients give
    a server seconds, not tens of seconds, to start); the first call that needs DocAnchor waits.
    A failed warm-up is logged (a :class:`DocAnchorError` in one line, its traceback at DEBUG); the
    call that needs the model then raises the real error itself.
    """

    def __init__(self, da: DocAnchor) -> None:
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(da,), name="docanchor-warmup", daemon=True)

    def start(self) -> "Warmup":
        self._thread.start()
        return self

    def _run(self, da: DocAnchor) -> None:
        try:
            warm_up(da)
        except DocAnchorError as err:  # e.g. the Chroma server down: one line (a client logs stderr), not a traceback
            log.warning("warming up DocAnchor failed: %s (%s) -- calls answer it until it is fixed", err.code,
                        err.message)
            log.debug("warming up DocAnchor failed", exc_info=True)
        except Exception:
            log.exception("warming up DocAnchor failed")
        finally:
            self._done.set()

    def wait(self) -> None:
        self._done.wait()


def run_stdio(da: DocAnchor, namespace: str | None = None) -> None:
    """Serve MCP over stdin/stdout until the client closes stdin.

    While it serves, the SDK points file descriptor 1 at stderr, so only protocol messages reach
    stdout (nothing the model loader or a library prints). The caller holds the data-dir lock.

    Args:
        namespace: where every call acts (default: ``settings.namespace``).

    Raises:
        InvalidRequest: ``invalid_namespace`` (:func:`docanchor.access.check_namespace`).
    """
    from mcp.server.stdio import stdio_server

    ns = check_namespace(da.settings.namespace if namespace is None else namespace)

    async def main() -> None:
        async with stdio_server() as (raw_read, write_stream), anyio.create_task_group() as tg:
            read_stream = answering_unreadable(tg, raw_read, write_stream)
            warmup = Warmup(da).start()  # after fd 1 is diverted: nothing it prints reaches the wire
            server = build_server(da, lambda ctx: ns, ready=warmup.wait)
            log.info("DocAnchor MCP server on stdio (namespace %r, data dir %s)", ns, da.settings.data_dir)
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)


def answering_unreadable(tg: anyio.abc.TaskGroup, read_stream: Any, write_stream: Any) -> Any:
    """The messages of ``read_stream`` (the SDK's stdio transport), forwarded by a task of ``tg``,
    with every line that is no JSON-RPC message answered on ``write_stream`` as ``/mcp`` over
    HTTP answers it (the SDK's ``streamable_http``): ``-32700 Parse error`` for text that is not
    JSON, ``-32602 Validation error`` for JSON that is no JSON-RPC message, with the line's ``id``
    when it has one a client can wait on (else null); a blank line is skipped. The SDK's stdio
    transport hands such a line on as an exception, which its server drops without a word."""
    forward, messages = anyio.create_memory_object_stream(0)  # the SDK reads it duck-typed

    async def pump() -> None:
        async with forward:
            async for item in read_stream:
                if isinstance(item, Exception):
                    if _blank_line(item):  # nothing was sent: nothing to answer
                        continue
                    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                        await write_stream.send(SessionMessage(unreadable_error(item)))
                else:
                    await forward.send(item)

    tg.start_soon(pump)
    return messages


def unreadable_error(exc: Exception) -> types.JSONRPCError:
    """The JSON-RPC error answering a line the transport could not read (``exc``, pydantic's
    error): as :func:`answering_unreadable` describes, with pydantic's reason for text not JSON."""
    errors = exc.errors() if isinstance(exc, ValidationError) else []
    bad_json = next((e for e in errors if e.get("type") == "json_invalid"), None)
    if bad_json is not None or not errors:
        why = bad_json.get("msg", "") if bad_json else str(exc)
        error = types.ErrorData(code=types.PARSE_ERROR, message=f"Parse error: the line is not JSON ({why}).")
    else:
        error = types.ErrorData(code=types.INVALID_PARAMS, message=(
            "Validation error: the line is JSON but no JSON-RPC 2.0 request, notification or response."))
    return types.JSONRPCError(jsonrpc="2.0", id=_request_id(errors), error=error)


def _request_id(errors: list[dict]) -> str | int | None:
    """The ``id`` of the JSON object pydantic's ``errors`` were raised on, when it is one a
    JSON-RPC client can wait on (a string or an integer); else ``None``."""
    for e in errors:
        value = e.get("input")
        if isinstance(value, dict) and isinstance(value.get("id"), (str, int)) and not isinstance(value["id"], bool):
            return value["id"]
    return None


def _blank_line(exc: Exception) -> bool:
    """``exc`` is pydantic's error on a line of nothing but whitespace."""
    errors = exc.errors() if isinstance(exc, ValidationError) else []
    return bool(errors) and all(isinstance(e.get("input"), str) and not e["input"].strip() for e in errors)
