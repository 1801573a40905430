"""The context tools of DocAnchor's MCP server: ``assembleContext`` and ``compactContext``, the
bodies of ``POST /v1/context/assemble`` and ``POST /v1/context/compact`` as tool calls.

They are for agents managing their own context window, not for a chat model looking things up,
so they are served over MCP only (the LobeChat manifest does not list them). Their
``inputSchema`` and ``outputSchema`` are the routes' request and response models
(:mod:`plugin.schemas.requests`, :mod:`plugin.schemas.responses`; one source); the answer is the
route's JSON object as ``structuredContent`` and, serialised, as the text content (as the MCP
specification asks of structured results). A refusal (a malformed conversation, a namespace the
caller may not use) is a tool result with ``isError`` and the error's sentence.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, Callable

import mcp_types as types

from docanchor.access import check_namespace
from docanchor.errors import DocAnchorError
from plugin.conversation import conversation_namespace
from plugin.schemas.common import Schema
from plugin.schemas.requests import REQUESTS
from plugin.schemas.responses import RESPONSES
from plugin.schemas.tools import inline_schema

if TYPE_CHECKING:
    from plugin.api import DocAnchor

log = logging.getLogger("docanchor.mcp")
TOOLS = {
    "assembleContext": ("ContextAssembleRequest", "ContextAssembled",
                        "Fit a long agent conversation into the model's context window: oversized messages and old "
                        "tool results and rounds are stored in DocAnchor (the conversation's namespace) and replaced by "
                        "references; returns the assembled messages, tokens, pressure, tier and an EXPLAIN trace."),
    "compactContext": ("ContextCompactRequest", "ContextCompacted",
                       "Compact a conversation: mode 'continue' keeps a summary and the recent rounds, 'handoff' starts "
                       "a new conversation from the summary; the old turns become a DocAnchor document."),
}
Access = Callable[[str], str]
"""``access(namespace) -> namespace``: the conversation namespace if the caller may use it, else raises."""


def refusal(sentence: str, err: DocAnchorError) -> str:
    """The text of a tool result refusing a call (``isError``): the sentence saying what to do,
    then the error's code in parentheses, as every MCP tool of DocAnchor ends its refusals."""
    return f"{sentence} ({err.code})"


def context_tools() -> list[types.Tool]:
    """The two tools, with the request and response models of their HTTP routes as they are: one
    schema (``assembleContext``'s ``namespace``, where evidence comes from, defaults to the
    connection's)."""
    tools = []
    for name, (request, response, description) in TOOLS.items():
        schema = _schema(REQUESTS[request], "validation")
        tools.append(types.Tool(
            name=name, description=description, input_schema=schema,
            output_schema=_schema(RESPONSES[response], "serialization"),
            annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                              open_world_hint=False),
        ))
    return tools


def _schema(model: Any, mode: str) -> dict[str, Any]:
    return inline_schema(model.model_json_schema(schema_generator=Schema, by_alias=True, mode=mode))


def call_context_tool(da: "DocAnchor", name: str, arguments: dict[str, Any], namespace: str,
                      access: Access) -> tuple[str, bool, dict[str, Any] | None]:
    """Run ``assembleContext`` or ``compactContext``; returns ``(answer, is_error, structured)``
    (``structured`` is ``None`` for an error) and never raises. ``namespace`` is the connection's;
    ``assembleContext``'s ``namespace`` argument (evidence from there) replaces it when ``access``
    allows it, as ``namespace`` of ``POST /v1/context/assemble`` does."""
    args = dict(arguments)
    try:
        access(conversation_namespace(args.get("conversation_id"), args.get("messages")))
        if name == "assembleContext" and args.get("namespace") is not None:
            namespace = access(check_namespace(args.pop("namespace")))
        model, messages = args.pop("model", None), args.pop("messages", None)
        if name == "assembleContext":
            result = da.assemble_context(model, messages, namespace=namespace, **args).to_dict()
        else:
            result = da.compact_context(model, messages, **args).to_dict()
    except DocAnchorError as err:
        return (refusal(err.message, err), True, None)
    except TypeError:  # an argument the tool does not take
        accepted = ", ".join(REQUESTS[TOOLS[name][0]].model_fields)
        return (f"{name} takes only {accepted}.", True, None)
    except Exception:  # a crash must not echo internals
        log.exception("MCP tool %s crashed", name)
        return ("DocAnchor hit an internal error and could not answer this call.", True, None)
    return (json.dumps(result, ensure_ascii=False), False, result)
