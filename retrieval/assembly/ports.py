"""What assembly needs from outside, passed in: storing offloaded text as a document, summarising
turns, and retrieving evidence. The planning code never touches a store itself, so it runs the
same with DocAnchor's store, with ``explain_only`` (nothing stored) and in tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from docanchor.types import TurnText


@dataclass(frozen=True)
class ConversationRequest:
    """What both flows are asked about: the ``model`` (its window and tokenizer), the OpenAI chat
    ``messages``, the namespace offloads go to (``conversation_id``; derived from the conversation's
    start when ``None``), ``explain_only`` (plan and trace, store nothing) and ``context_limit``
    (the model's window in tokens; ``None``: DocAnchor's table's, see
    :func:`retrieval.assembly.pressure.window`)."""

    model: str
    messages: Any
    conversation_id: str | None = field(default=None, kw_only=True)
    explain_only: bool = field(default=False, kw_only=True)
    context_limit: Any = field(default=None, kw_only=True)


@dataclass(frozen=True)
class StoredDocument:
    """A stored offload: its ``doc_id`` and its anchor (budget tokens, at most the anchor size)."""

    doc_id: str
    anchor: str


class Offloader(Protocol):
    """Stores offloaded text as an ordinary document of a conversation's namespace."""

    def doc_id(self, text: str) -> str:
        """The id ``text`` has once stored (ids derive from content), without storing it."""

    def store(self, namespace: str, title: str, text: str, markdown: bool = True) -> StoredDocument:
        """Store ``text`` titled ``title`` in ``namespace`` (the conversation id), as Markdown when
        ``markdown``, else as plain text; the same text again is the same document.

        Raises:
            Exception: anything; assembly then fails open (a placeholder and a trace entry).
        """


Summariser = Callable[[Sequence[TurnText], int], tuple[str, str]]
"""``summarise(turns, max_tokens) -> (summary, source)``: at most ``max_tokens`` tokens of the
prompt's tokenizer; ``source`` says who wrote it (``extractive``, ``abstractive``, or
``extractive (<error code>)`` when a configured endpoint failed)."""

Evidence = Callable[[str, int], str]
"""``evidence(query, budget_tokens) -> context``: cited passages of the caller's documents whose
rendered context has at most ``budget_tokens`` budget tokens (``""`` when nothing matched)."""
