"""The prompt being assembled: which messages are replaced by references, which blocks of rounds
are offloaded, which tool schemas are dropped, and what all that costs in tokens.

Token accounting is incremental (each message's tokens are counted once, when parsed); a
reference not yet stored is costed at its upper bound (its header plus
:data:`retrieval.assembly.references.ANCHOR_LINES_TOKENS`), so what is planned never grows when
the anchors arrive, and the plan is the same whether or not anything is stored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from docanchor.errors import InvalidRequest
from docanchor.markdown import looks_like_markdown
from docanchor.tokens import TokenCounter
from retrieval.assembly.ports import Offloader, Summariser
from retrieval.assembly.references import (
    ANCHOR_LINES_TOKENS, Offload, message_header, message_reference, message_title, turns_document, turns_reference,
    turns_title,
)
from retrieval.assembly.turns import Conversation, Message, message_tokens
from retrieval.budget import TOKENS_REPLY_PRIMER

BIG_ARGUMENTS_CHARS = 800
"""A spilled assistant message's tool-call arguments longer than this many characters (about 200
tokens) are replaced by a short JSON object naming the document; shorter ones stay as they are."""


@dataclass
class Tool:
    """One tool schema: as the caller sent it, without the ``droppable`` marker, and its tokens."""

    index: int
    name: str
    schema: dict[str, Any]
    droppable: bool
    tokens: int


@dataclass
class Draft:
    """The prompt as planned so far (see the module docstring)."""

    conversation: Conversation
    conversation_id: str
    tools: list[Tool]
    counter: TokenCounter
    items: dict[int, Offload] = field(default_factory=dict)
    blocks: list[Offload] = field(default_factory=list)
    dropped: set[int] = field(default_factory=set)
    cost: dict[int, int] = field(default_factory=dict)
    """Tokens each replaced message or offloaded block (by its first index) costs in the prompt."""

    def tokens(self) -> int:
        """The prompt's tokens as planned: kept messages, references, kept tool schemas, primer."""
        total = TOKENS_REPLY_PRIMER + sum(t.tokens for t in self.tools if t.index not in self.dropped)
        offloaded = self.offloaded()
        for m in self.conversation.messages:
            block = offloaded.get(m.index)
            if block is not None:
                total += self.cost[block.indices[0]] if m.index == block.indices[0] else 0
            else:
                total += self.cost.get(m.index, m.tokens)
        return total

    def offloaded(self) -> dict[int, Offload]:
        return {i: block for block in self.blocks for i in block.indices}

    def replace(self, message: Message, kind: str, offloader: Offloader) -> Offload:
        """Plan ``message`` as an offload of its own (``spill`` or ``tool_result``)."""
        item = Offload(kind, (message.index,), message_title(message, self.conversation_id), message.text,
                       offloader.doc_id(message.text), message.tokens, f"turn {message.turn} · {message.label()}",
                       markdown=looks_like_markdown(message.text))
        self.items[message.index] = item
        self.cost[message.index] = message_tokens(replaced_message(message, item, message_header(item, self.conversation_id)),
                                                  self.counter) + ANCHOR_LINES_TOKENS + 1
        return item

    def offload(self, indices: list[int], offloader: Offloader, summarise: Summariser, summary_tokens: int,
                kind: str = "turns") -> Offload:
        """Plan the messages ``indices`` (not protected, in order) as one offloaded block (``turns``
        or ``handoff``) whose reference carries a summary of at most ``summary_tokens`` tokens."""
        messages = [self.conversation.messages[i] for i in indices]
        text = turns_document(messages, self.items)
        summary, source = summarise([m.turn_text() for m in messages], summary_tokens)
        block = Offload(kind, tuple(indices), turns_title(messages, self.conversation_id), text,
                        offloader.doc_id(text), sum(self.cost.get(i, m.tokens) for i, m in zip(indices, messages)),
                        f"turns {messages[0].turn}–{messages[-1].turn}", summary=summary, summary_source=source)
        self.blocks.append(block)
        self.cost[indices[0]] = self.reference_tokens(block)
        return block

    def reference_tokens(self, block: Offload) -> int:
        messages = [self.conversation.messages[i] for i in block.indices]
        return message_tokens({"role": "user", "content": turns_reference(block, messages, self.conversation_id)},
                              self.counter)

    def render(self) -> list[dict[str, Any]]:
        """The prompt's messages: kept ones as sent, references in place of the rest. A block's
        reference is a user message; when a user message follows it (the next kept round's
        question), the reference is joined in front of that message's content instead
        (:func:`joined`), so user and assistant turns alternate (some providers refuse two user
        messages in a row). Its cost (:meth:`reference_tokens`, a message of its own) stays an
        upper bound: joining saves the message overhead and adds a blank line."""
        out: list[dict[str, Any]] = []
        references: list[int] = []
        offloaded = self.offloaded()
        for m in self.conversation.messages:
            block = offloaded.get(m.index)
            if block is not None:
                if m.index == block.indices[0]:
                    references.append(len(out))
                    out.append({"role": "user", "content": block.reference})
                continue
            item = self.items.get(m.index)
            out.append(dict(m.raw) if item is None else replaced_message(m, item, item.reference))
        for at in reversed(references):  # from the last, so references in a row join one message
            if at + 1 < len(out) and out[at + 1].get("role") == "user":
                out[at:at + 2] = [joined(out[at]["content"], out[at + 1])]
        return out

    def finish_reference(self, offload: Offload) -> None:
        """Write ``offload.reference`` for its status (after storing or explain_only)."""
        if offload.kind in ("spill", "tool_result"):
            offload.reference = message_reference(offload, self.conversation_id, self.counter)
        else:
            messages = [self.conversation.messages[i] for i in offload.indices]
            offload.reference = turns_reference(offload, messages, self.conversation_id)

    def measure(self) -> None:
        """Cost every reference at its real size (after :meth:`finish_reference`), not its bound."""
        offloaded = self.offloaded()
        for index in list(self.cost):
            if index in offloaded:
                self.cost[index] = self.reference_tokens(offloaded[index])
            elif index in self.items:
                item = self.items[index]
                message = self.conversation.messages[index]
                self.cost[index] = message_tokens(replaced_message(message, item, item.reference), self.counter)

    def kept_tools(self) -> list[dict[str, Any]]:
        return [t.schema for t in self.tools if t.index not in self.dropped]


def replaced_message(message: Message, item: Offload, content: str) -> dict[str, Any]:
    """``message`` with ``content`` in place of its own; its role, name, ``tool_call_id`` and tool
    calls stay, so pairing holds (arguments over :data:`BIG_ARGUMENTS_CHARS` name the document)."""
    out = dict(message.raw)
    out["content"] = content
    if message.call_ids:
        out["tool_calls"] = [_short_call(call, item.doc_id) for call in message.raw["tool_calls"]]
    return out


def joined(text: str, message: dict[str, Any], after: bool = False) -> dict[str, Any]:
    """The user ``message`` with ``text`` in front of its content (``after``: behind it): a blank
    line between them when the content is text, a text part of its own when it is a list of content
    parts (OpenAI's ``[{"type": "text", "text": ...}, ...]``). A block reference goes in front of
    the next question; evidence goes after the question it answers."""
    content = message.get("content")
    if isinstance(content, list):
        part = [{"type": "text", "text": text}]
        return {**message, "content": [*content, *part] if after else [*part, *content]}
    if not content:
        return {**message, "content": text}
    return {**message, "content": f"{content}\n\n{text}" if after else f"{text}\n\n{content}"}


def _short_call(call: Mapping[str, Any], doc_id: str) -> dict[str, Any]:
    function = dict(call["function"])
    arguments = function.get("arguments") or ""
    if len(arguments) > BIG_ARGUMENTS_CHARS:
        function["arguments"] = json.dumps({"offloaded_to": doc_id})
    return {**call, "function": function}


def check_tools(tools: Any) -> list[Any]:
    """``tools`` as given when it is a list of ``{type: 'function', function: {name, ...},
    droppable?: bool}``.

    Raises:
        InvalidRequest: ``invalid_argument`` (field ``tools``) naming the first tool that is not.
    """
    shape = "{type: 'function', function: {name, description?, parameters?}, droppable?: bool}"
    if not isinstance(tools, list):
        raise InvalidRequest(f"'tools' must be a list of {shape}.", field="tools")
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise InvalidRequest(f"tools[{i}] must be {shape}.", field="tools")
        if not isinstance(tool.get("droppable", False), bool):
            raise InvalidRequest(f"tools[{i}].droppable must be true or false.", field="tools")
    return tools


def parse_tools(tools: Any, counter: TokenCounter) -> list[Tool]:
    """The caller's tool schemas (``[{"type": "function", "function": {"name", ...}, "droppable"?:
    bool}]``, or ``None``), each counted as its compact JSON without the ``droppable`` marker
    (providers render schemas their own way; this is the estimate).

    Raises:
        InvalidRequest: not a list of such objects, or ``droppable`` not a boolean.
    """
    if tools is None:
        return []
    out = []
    for i, tool in enumerate(check_tools(tools)):
        function, droppable = tool["function"], tool.get("droppable", False)
        schema = {k: v for k, v in tool.items() if k != "droppable"}
        tokens = counter.count(json.dumps(schema, ensure_ascii=False, separators=(",", ":")))
        out.append(Tool(i, function["name"], schema, droppable, tokens))
    return out
