"""The compaction flows, on their own:

- ``continue`` (compact and continue): every round but the last ``keep_rounds`` becomes one
  offloaded document; the prompt keeps the protected prefix, then one user message with the
  document's reference and a summary of at most ``summary_tokens`` tokens, then the recent rounds.
- ``handoff`` (start a summarised chat): the whole conversation becomes one document; the new
  conversation is the protected prefix and one user message with its reference and summary.

The summary is the extractive one (deterministic) unless an OpenAI-compatible endpoint is
configured (see :mod:`summarize.abstractive`); the new conversation keeps the same
``conversation_id``, so what was offloaded stays findable. Storing fails open as in assembly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from docanchor.display import counted
from docanchor.errors import InvalidRequest
from docanchor.settings import SETTING_RANGES
from docanchor.tokens import TokenCounter
from retrieval.assembly.draft import Draft
from retrieval.assembly.execute import store_offloads
from retrieval.assembly.explain import Trace
from retrieval.assembly.ports import ConversationRequest, Offloader, Summariser
from retrieval.assembly.pressure import KEEP_ROUNDS, window
from retrieval.assembly.turns import conversation_key, parse_conversation
from retrieval.budget import conversation_counter, count_message_tokens

MODES = ("continue", "handoff")


@dataclass(frozen=True)
class CompactionRequest(ConversationRequest):
    """What the caller asks for (see ``POST /v1/context/compact`` in README.md): the shared fields
    and the flow (``mode``), the rounds kept and the summary's size (tokens)."""

    mode: str = "continue"
    keep_rounds: int = KEEP_ROUNDS
    summary_tokens: int = 1_000


@dataclass
class Compaction:
    """The compacted conversation; tokens are the model tokenizer's."""

    conversation_id: str
    mode: str
    messages: list[dict[str, Any]]
    summary: str
    summary_source: str
    tokens_before: int
    context_tokens_used: int
    context_limit: int
    references: list[dict[str, Any]]
    explain_only: bool
    tokenizer: str
    trace: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"conversation_id": self.conversation_id, "mode": self.mode, "messages": self.messages,
                "summary": self.summary, "summary_source": self.summary_source, "tokens_before": self.tokens_before,
                "context_tokens_used": self.context_tokens_used, "context_limit": self.context_limit,
                "references": self.references, "explain_only": self.explain_only, "tokenizer": self.tokenizer,
                "trace": self.trace}


def compact_conversation(request: CompactionRequest, offloader: Offloader, summarise: Summariser,
                         budget_counter: TokenCounter) -> Compaction:
    """Run one compaction flow (see the module docstring).

    Raises:
        InvalidRequest: an unknown ``mode``, a ``keep_rounds`` or ``summary_tokens`` out of range,
            malformed messages, or ``unknown_model`` (see :func:`retrieval.assembly.pressure.window`).
    """
    _check(request)
    counter, _ = conversation_counter(request.model, budget_counter)
    conversation = parse_conversation(request.messages, counter)
    limit, limit_source = window(request.model, request.context_limit)
    conversation_id = request.conversation_id or conversation_key(request.messages)
    draft, trace = Draft(conversation, conversation_id, [], counter), Trace()
    before = count_message_tokens(request.messages, counter)
    trace.record("plan", "count", applied=True, tokens_before=before, context_limit=limit, limit_source=limit_source,
                 tokenizer=counter.name,
                 reason=f"{counted(len(conversation.messages), 'message')}, "
                        f"{counted(len(conversation.rounds), 'round')}")
    rounds = conversation.rounds if request.mode == "handoff" else conversation.rounds[:max(
        0, len(conversation.rounds) - request.keep_rounds)]
    indices = [i for r in rounds for i in r if not conversation.messages[i].protected]
    block = None
    if not indices:
        trace.record("optimise", request.mode, applied=False, tokens_before=draft.tokens(),
                     reason=f"only {len(conversation.rounds)} round(s): none is older than the last {request.keep_rounds}")
    else:
        tokens = draft.tokens()
        block = draft.offload(indices, offloader, summarise, request.summary_tokens,
                              kind="handoff" if request.mode == "handoff" else "turns")
        trace.record("optimise", request.mode, applied=True, tokens_before=tokens, tokens_after=draft.tokens(),
                     turns=[indices[0] + 1, indices[-1] + 1], doc_id=block.doc_id,
                     reason=f"summary of at most {request.summary_tokens:,} tokens ({block.summary_source})")
    store_offloads(draft, offloader, request.explain_only, trace)
    messages = draft.render()
    used = count_message_tokens(messages, counter)
    trace.record("feedback", "check", applied=True, tokens_before=used, reason=f"{before:,} → {used:,} tokens")
    return Compaction(conversation_id, request.mode, messages, block.summary if block else "",
                      block.summary_source if block else "", before, used, limit,
                      [block.to_dict(counter)] if block else [], request.explain_only, counter.name, trace.entries)


def check_mode(mode: Any) -> str:
    """Raises: InvalidRequest ``invalid_argument`` unless ``mode`` is one of :data:`MODES`."""
    if not isinstance(mode, str) or mode not in MODES:
        raise InvalidRequest(f"'mode' must be 'continue' or 'handoff'; got {mode!r}.", field="mode")
    return mode


def _check(request: CompactionRequest) -> None:
    check_mode(request.mode)
    for name, value, low, high in (("keep_rounds", request.keep_rounds, 0, 1_000),
                                   ("summary_tokens", request.summary_tokens, *SETTING_RANGES["summary_tokens"])):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise InvalidRequest(f"'{name}' must be a whole number from {low} to {high:,}; got {value!r}.", field=name)
