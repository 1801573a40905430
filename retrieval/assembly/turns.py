"""A conversation in OpenAI's chat format, read for assembly: each message with its turn and
tokens, the protected prefix, the rounds, and which tool result answers which tool call.

- A message is ``{"role", "content", "name"?, "tool_calls"?, "tool_call_id"?}``; roles are
  :data:`ROLES`. ``system`` and ``developer`` messages are *protected*: never compacted or spilled.
- Turn ``n`` is ``messages[n - 1]`` (turns count messages, from 1).
- The *prefix* is the run of protected messages the conversation starts with; it always comes
  first in an assembled prompt, byte for byte.
- A *round* starts at a user message and runs to the next one (messages between the prefix and
  the first user message form a round of their own).
- As OpenAI's API requires, a ``tool`` message follows the assistant message whose ``tool_calls``
  it answers (or another answer to the same message), naming one of its call ids.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from docanchor.errors import InvalidRequest
from docanchor.tokens import TokenCounter
from docanchor.types import TurnText
from retrieval.budget import TOKENS_REPLY_PRIMER, count_message_tokens

ROLES = ("system", "developer", "user", "assistant", "tool")
PROTECTED_ROLES = frozenset({"system", "developer"})


@dataclass(frozen=True)
class Message:
    """One input message.

    Attributes:
        index: its position in ``messages`` (0-based; its turn is ``index + 1``).
        role: one of :data:`ROLES`.
        raw: the message as sent.
        tokens: its tokens in the model's tokenizer, chat-format overhead included (see
            :func:`message_tokens`).
        text: its text: the content's text parts, then each tool call as ``name(arguments)``.
        call_ids: the ids of its ``tool_calls`` (assistant messages).
        tool_call_id: the call a ``tool`` message answers.
        tool_name: the function that call named (``tool`` messages).
    """

    index: int
    role: str
    raw: Mapping[str, Any]
    tokens: int
    text: str
    call_ids: tuple[str, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None

    @property
    def turn(self) -> int:
        return self.index + 1

    @property
    def protected(self) -> bool:
        return self.role in PROTECTED_ROLES

    def label(self) -> str:
        """What the message is, in words: ``tool result of read_file (call_7)``, ``user message``."""
        if self.role == "tool":
            return f"tool result of {self.tool_name} ({self.tool_call_id})"
        if self.call_ids:
            return f"assistant message with {len(self.call_ids)} tool call(s)"
        return f"{self.role} message"

    def turn_text(self) -> TurnText:
        """The message for summaries and offloaded documents; its speaker is the role, ``tool <name>``
        for a tool result, ``assistant (tool call)`` for an assistant message of tool calls only."""
        speaker = self.role
        if self.role == "tool":
            speaker = f"tool {self.tool_name}"
        elif self.call_ids and not _content_text(self.raw.get("content")).strip():
            speaker = "assistant (tool call)"
        return TurnText(self.turn, speaker, self.text)


@dataclass(frozen=True)
class Conversation:
    """A parsed conversation: its messages, how many lead as the protected prefix, and its rounds
    (tuples of message indices after the prefix, oldest first)."""

    messages: tuple[Message, ...]
    prefix: int
    rounds: tuple[tuple[int, ...], ...]


def message_tokens(message: Mapping[str, Any], counter: TokenCounter) -> int:
    """Tokens one message adds to a prompt: :func:`retrieval.budget.count_message_tokens` of it
    alone, without the reply primer that a whole prompt pays once."""
    return count_message_tokens([message], counter) - TOKENS_REPLY_PRIMER


def parse_conversation(messages: Any, counter: TokenCounter) -> Conversation:
    """Read and check ``messages`` (see the module docstring for the rules).

    Raises:
        InvalidRequest: ``invalid_argument`` naming the message and what is wrong: not a list,
            an unknown role, a malformed tool call, a tool result without its call.
    """
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("'messages' must be a non-empty list of {role, content} messages.", field="messages")
    parsed: list[Message] = []
    open_calls: dict[str, str] = {}  # call id -> function name, of the assistant message tool results follow
    for i, raw in enumerate(messages):
        tokens = message_tokens(raw, counter) if isinstance(raw, Mapping) else count_message_tokens([raw], counter)
        role = raw["role"]
        if role not in ROLES:
            raise InvalidRequest(f"messages[{i}].role is {role!r}; use one of {', '.join(ROLES)}.", field="messages")
        calls = _tool_calls(raw, i)
        call_id = raw.get("tool_call_id")
        name = None
        if role == "tool":
            if not isinstance(call_id, str) or call_id not in open_calls:
                raise InvalidRequest(
                    f"messages[{i}] is a tool result for call {call_id!r}, but the assistant message before it has no "
                    "tool call with that id; a tool message must follow the assistant message whose call it answers.",
                    field="messages")
            name = open_calls[call_id]
        else:
            open_calls = {c[0]: c[1] for c in calls}
        text = "\n".join(filter(None, [_content_text(raw.get("content"))] + [f"{n}({a})" for _, n, a in calls]))
        parsed.append(Message(i, role, raw, tokens, text, tuple(c[0] for c in calls),
                              call_id if role == "tool" else None, name))
    return _shape(tuple(parsed))


def _tool_calls(raw: Mapping[str, Any], i: int) -> list[tuple[str, str, str]]:
    """``(id, name, arguments)`` of each of an assistant message's tool calls."""
    calls = raw.get("tool_calls")
    if calls is None:
        return []
    shape = "{id, type: 'function', function: {name, arguments}}"
    if raw["role"] != "assistant" or not isinstance(calls, list):
        raise InvalidRequest(f"messages[{i}].tool_calls must be a list of {shape} on an assistant message.",
                             field="messages")
    out = []
    for k, call in enumerate(calls):
        function = call.get("function") if isinstance(call, Mapping) else None
        if not (isinstance(function, Mapping) and isinstance(call.get("id"), str) and call["id"]
                and isinstance(function.get("name"), str) and isinstance(function.get("arguments", ""), str)):
            raise InvalidRequest(f"messages[{i}].tool_calls[{k}] must be {shape} with string id, name and "
                                 "arguments.", field="messages")
        out.append((call["id"], function["name"], function.get("arguments") or ""))
    return out


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, Mapping) and p.get("type") == "text")
    return ""


def _shape(messages: tuple[Message, ...]) -> Conversation:
    prefix = 0
    while prefix < len(messages) and messages[prefix].protected:
        prefix += 1
    rounds: list[list[int]] = []
    for m in messages[prefix:]:
        if m.role == "user" or not rounds:
            rounds.append([])
        rounds[-1].append(m.index)
    return Conversation(messages, prefix, tuple(tuple(r) for r in rounds))


def conversation_key(messages: Sequence[Any]) -> str:
    """A conversation id derived from how the conversation starts: ``conv_`` and 16 hex digits of
    the SHA-256 of its leading system/developer messages and first user message (canonical JSON).
    Later turns of the same conversation give the same id, so a caller that sends none still
    offloads into one namespace. Takes the messages as sent (nothing is checked here)."""
    start: list[Any] = []
    leading = True
    for m in messages:
        role = m.get("role") if isinstance(m, Mapping) else None
        role = role if isinstance(role, str) else None  # any other value is refused later, naming it
        leading = leading and role in PROTECTED_ROLES
        if leading or role == "user":
            start.append(m)
        if role == "user":
            break
    digest = hashlib.sha256(json.dumps(start, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()
    return "conv_" + digest[:16]


def unpaired(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """How ``messages`` break tool-call pairing, in words (empty when every tool result follows
    the assistant message whose call it answers, and every call is answered before the next
    non-tool message, or is the conversation's last)."""
    problems: list[str] = []
    pending: set[str] = set()
    answered: set[str] = set()
    for i, m in enumerate(messages):
        if m.get("role") == "tool":
            if m.get("tool_call_id") not in pending:
                problems.append(f"messages[{i}] answers call {m.get('tool_call_id')!r}, which does not precede it")
            answered.add(m.get("tool_call_id"))
            continue
        problems += [f"call {c!r} is not answered" for c in sorted(pending - answered)]
        pending = {c["id"] for c in m.get("tool_calls") or ()}
        answered = set()
    return problems
