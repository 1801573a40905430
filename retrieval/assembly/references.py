"""Offloads and the references that replace them in the prompt.

An offload is what leaves the prompt as one document of the conversation's namespace:

- ``spill``: one message or tool result over the spill threshold;
- ``tool_result``: an old tool result replaced while compacting history;
- ``turns``: a block of old rounds (aggressive tier), or what a compaction takes out;
- ``handoff``: the whole conversation, for a new one that starts from its summary.

A spilled message or tool result keeps its place, role, ``tool_call_id`` and tool calls; only its
content becomes the reference::

    [DocAnchor reference] Turn 13 · tool result of read_file (call_7): 41,203 tokens offloaded to
    doc_0123456789abcdef in conversation conv_0a1b2c3d4e5f6a7b.
    Document: Turn 13 · tool result of read_file · conv_0a1b2c3d4e5f6a7b
    ...the document's anchor lines...
    doc_id: doc_0123456789abcdef
    More: searchDocuments(query, doc_id="doc_0123456789abcdef", namespace="conv_0a1b2c3d4e5f6a7b") ...

Every call a reference writes names the conversation's namespace (:mod:`docanchor.tool_calls`):
the offloads are not in the caller's own namespace, and the MCP tools and ``/v1`` take it.

Offloaded turns become one user message: which turns, where they are, how to get more, and an
extractive summary of them. When storing failed, the reference is a placeholder that says so.
A block of turns is a Markdown document: it has one ``## Turns 4–7`` section per round, each message
under its ``**Turn N · speaker:**`` line (an answer's line also names the round's question), so a
citation names the round's turns and the passage its turn; a single spilled message is titled with
its turn, and stored as Markdown only when it reads as Markdown (a plain-text log's ``#`` lines
are no headings).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from docanchor.display import counted, is_not_shown
from docanchor.tokens import TokenCounter
from docanchor.tool_calls import naming_namespace, read_call, search_call
from retrieval.assembly.turns import Message

ANCHOR_LINES_TOKENS = 200
"""Most tokens of anchor lines a reference carries (its first line, ``doc_id`` and ``More`` lines
always; others in order while they fit)."""
QUESTION_CHARS = 300
"""Most characters of a round's question repeated on its answer's line (:func:`turns_document`)."""
_HEADING_LINE = re.compile(r"^( {0,3})(#{1,6}(?:[ \t]|$)|=+[ \t]*$|-+[ \t]*$)", re.M)
_FENCE_LINE = re.compile(r"^ {0,3}(```|~~~)", re.M)


@dataclass
class Offload:
    """One document to store and the messages it replaces.

    Attributes:
        kind: ``spill``, ``tool_result`` or ``turns``.
        indices: the replaced messages' indices in ``messages`` (protected ones never).
        title: the document's title (one line, its first turn first).
        text: the document: Markdown, or, for a single message that does not read as Markdown
            (:func:`docanchor.markdown.looks_like_markdown`), plain text (``markdown`` false).
        doc_id: the id it has once stored.
        tokens_replaced: the replaced messages' tokens (model tokenizer).
        what: the replaced messages in words (``turn 13 · tool result of read_file (call_7)``).
        summary: for ``turns`` and ``handoff``, the summary lines the reference carries.
        summary_source: who wrote the summary (see :data:`retrieval.assembly.ports.Summariser`).
        status: ``planned``, ``stored``, ``not_stored`` (explain_only) or ``failed``.
        error: the error code when storing failed.
        anchor: the stored document's anchor.
        reference: the text that stands in the prompt in its place.
    """

    kind: str
    indices: tuple[int, ...]
    title: str
    text: str
    doc_id: str
    tokens_replaced: int
    what: str
    summary: str = ""
    summary_source: str = ""
    status: str = "planned"
    error: str | None = None
    anchor: str = ""
    reference: str = field(default="", repr=False)
    markdown: bool = True

    def to_dict(self, counter: TokenCounter) -> dict[str, Any]:
        return {"doc_id": self.doc_id, "kind": self.kind, "replaced": self.what,
                "turns": [i + 1 for i in self.indices], "tokens_replaced": self.tokens_replaced,
                "reference_tokens": counter.count(self.reference), "stored": self.status == "stored",
                "status": self.status, "error": self.error}


def message_title(message: Message, conversation_id: str) -> str:
    return f"Turn {message.turn} · {message.label()} · {conversation_id}"


def turns_title(messages: list[Message], conversation_id: str) -> str:
    return f"{span(messages)} · {conversation_id}"


def span(messages: list[Message]) -> str:
    """``Turn 5`` or ``Turns 3–17``."""
    first, last = messages[0].turn, messages[-1].turn
    return f"Turn {first}" if first == last else f"Turns {first}–{last}"


def turns_document(messages: list[Message], offloaded: dict[int, Offload]) -> str:
    """The Markdown document of offloaded turns: a ``## Turns 4–7`` section per round (from a user
    message to the next), so a question and its answer share a section and chunks, and each
    message under a ``**Turn 7 · assistant:**`` line, so a passage names its turn. A message's
    text is its own (headings escaped, an open code fence closed, so the sections hold), or, for
    one already offloaded alone, a line naming that document."""
    rounds: list[list[Message]] = []
    for m in messages:
        if m.role == "user" or not rounds:
            rounds.append([])
        rounds[-1].append(m)
    sections = []
    for members in rounds:
        parts = [f"## {span(members)}"]
        for m in members:
            earlier = offloaded.get(m.index)
            body = (f"({earlier.what}: {earlier.tokens_replaced:,} tokens, stored as {earlier.doc_id})"
                    if earlier is not None else _inert_markdown(m.text) or "(no text)")
            parts.append(f"{_turn_line(m, members[0])}\n{body}")
        sections.append("\n\n".join(parts))
    return "\n\n".join(sections) + "\n"


def _turn_line(m: Message, opener: Message) -> str:
    """``**Turn 7 · assistant:**``; an assistant's answer later in a round opened by a user also
    names the question (``**Turn 11 · assistant, answering turn 8:** What actions …?``, cut to
    :data:`QUESTION_CHARS` characters): the call and its result between them put the answer a few
    chunks after the question, whose chunk alone matched the question asked again."""
    speaker = m.turn_text().speaker
    if speaker != "assistant" or opener.role != "user" or m.turn - opener.turn < 2 or not m.text.strip():
        return f"**Turn {m.turn} · {speaker}:**"
    question = " ".join(opener.text.split())
    if len(question) > QUESTION_CHARS:
        question = question[:QUESTION_CHARS].rsplit(" ", 1)[0] + " …"
    return f"**Turn {m.turn} · assistant, answering turn {opener.turn}:** {_inert_markdown(question)}"


def _first_round(messages: list[Message]) -> str:
    """The heading of the first round section of :func:`turns_document` (``Turns 2–5``)."""
    end = next((i for i, m in enumerate(messages) if i and m.role == "user"), len(messages))
    return span(messages[:end])


def _inert_markdown(text: str) -> str:
    """``text`` with Markdown heading lines escaped and an unclosed code fence closed."""
    text = _HEADING_LINE.sub(lambda m: m.group(1) + "\\" + m.group(2), text.strip())
    if len(_FENCE_LINE.findall(text)) % 2:
        text += "\n```"
    return text


def message_header(offload: Offload, conversation_id: str) -> str:
    """The first line of a spilled or compacted message's reference (or of its placeholder)."""
    what = f"{offload.what[0].upper()}{offload.what[1:]}: {offload.tokens_replaced:,} tokens"
    if offload.status == "failed":
        return (f"[DocAnchor placeholder] {what} left out of this prompt; DocAnchor could not store them "
                f"({offload.error}). Repeat the call if they are needed.")
    if offload.status in ("planned", "not_stored"):
        return f"[DocAnchor reference] {what} to be offloaded to {offload.doc_id} in conversation {conversation_id} " \
               "(explain_only: nothing stored)."
    return f"[DocAnchor reference] {what} offloaded to {offload.doc_id} in conversation {conversation_id}."


def message_reference(offload: Offload, conversation_id: str, counter: TokenCounter) -> str:
    """The content that replaces a spilled or compacted message: the header, then (when stored)
    up to :data:`ANCHOR_LINES_TOKENS` tokens of the document's anchor lines, its ``More:`` line
    naming the conversation's namespace."""
    header = message_header(offload, conversation_id)
    if offload.status != "stored" or not offload.anchor.strip():
        return header
    anchor = naming_namespace(offload.anchor.strip(), offload.doc_id, conversation_id)
    return header + "\n" + anchor_lines(anchor, ANCHOR_LINES_TOKENS, counter)


def anchor_lines(anchor: str, max_tokens: int, counter: TokenCounter) -> str:
    """The anchor's first line, ``doc_id:`` and ``More:`` lines, and as many of its other lines,
    in order, as keep the whole within ``max_tokens`` tokens (the required lines cut to fit). A
    part's heading (``Outline:``, ``Central passages:``) comes only with its first entry; a line
    counting the entries left out (``(+N more headings not shown)``) only when none of its part's
    entries was dropped here (its count would be short)."""
    lines = [ln for ln in anchor.strip().splitlines() if ln.strip()]
    required = {0} | {i for i, ln in enumerate(lines) if ln.startswith(("doc_id:", "More:"))}
    kept = set(required)
    if counter.count("\n".join(lines[i] for i in sorted(kept))) > max_tokens:
        return counter.truncate("\n".join(lines[i] for i in sorted(kept)), max_tokens)
    for i in range(len(lines)):
        group = {i, i + 1} if _part_heading(lines, i) else {i}
        if is_not_shown(lines[i]) and not _whole_part_kept(lines, i, kept):
            continue
        if not group & kept and counter.count("\n".join(lines[j] for j in sorted(kept | group))) <= max_tokens:
            kept |= group
    return "\n".join(lines[i] for i in sorted(kept))


def _whole_part_kept(lines: list[str], i: int, kept: set[int]) -> bool:
    """Every entry line (``-`` or indented) right before ``lines[i]`` is in ``kept``."""
    j = i - 1
    while j >= 0 and lines[j].startswith(("-", " ")):
        if j not in kept:
            return False
        j -= 1
    return True


def _part_heading(lines: list[str], i: int) -> bool:
    """``lines[i]`` heads a part of entries (``Outline:`` then ``- …`` lines) and one follows it."""
    return (lines[i].rstrip().endswith(":") and i + 1 < len(lines)
            and lines[i + 1].startswith(("-", " ")) and not lines[i].startswith(("-", " ")))


def turns_reference(offload: Offload, messages: list[Message], conversation_id: str) -> str:
    """The user message that stands for offloaded turns: where they are, then their summary."""
    count = f"{counted(len(messages), 'message')}, {offload.tokens_replaced:,} tokens"
    doc = offload.doc_id
    if offload.status == "failed":
        head = (f"[DocAnchor: {span(messages).lower()} left out] {count}, could not be stored ({offload.error}); "
                "in short:")
    else:
        stored = "stored" if offload.status == "stored" else "to be stored (explain_only: nothing stored)"
        what = (f"[DocAnchor handoff] This conversation starts from a summary of an earlier one: its "
                f"{span(messages).lower()}" if offload.kind == "handoff"
                else f"[DocAnchor: {span(messages).lower()} offloaded]")
        head = (f"{what} ({count}) {stored} as {doc} in conversation {conversation_id}. "
                f"{search_call(doc, conversation_id)} finds passages; "
                f"{read_call(doc, json.dumps(_first_round(messages), ensure_ascii=False), conversation_id)} reads them "
                "in order.")
    return f"{head}\n{offload.summary}" if offload.summary else head
