"""Context assembly in five phases under a hard budget: plan → bind → optimise → execute → feedback.

1. **plan**: read the conversation, count it in the model's tokenizer, find the window, predict
   the answer's reserve (:func:`~retrieval.assembly.pressure.predict_reserve`) and the pressure.
2. **bind**: bind the request to its conversation (namespace) and every oversized message to the
   document it spills to; the tier follows from the pressure after spilling.
3. **optimise**: trim droppable tool schemas, compact old tool results, offload old rounds (as
   the tier allows), then enforce the budget whatever the tier.
4. **execute**: store the offloads (fail-open), write the references, add evidence.
5. **feedback**: count the result exactly and check it against the budget; over it (a reference
   tokenised longer than planned), drop the evidence, then enforce again with real sizes.

The result never exceeds ``context_limit − reserve_tokens`` in the model's tokenizer, keeps the
protected prefix first and byte-identical, keeps tool results with their calls, and is the same
bytes, trace included, for the same request and store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from docanchor.errors import InvalidRequest
from docanchor.tokens import TokenCounter
from retrieval.assembly import optimise as opt
from retrieval.assembly.draft import Draft, parse_tools
from retrieval.assembly.execute import add_evidence, store_offloads
from retrieval.assembly.explain import Trace
from retrieval.assembly.ports import ConversationRequest, Evidence, Offloader, Summariser
from retrieval.assembly.pressure import pressure, predict_reserve, tier_for, window
from retrieval.assembly.turns import Conversation, conversation_key, parse_conversation, unpaired
from retrieval.budget import conversation_counter, count_message_tokens, severity

DEFAULT_BUDGET_SHARE = 0.5
"""Share of the room left after assembly that evidence may take when the caller names none."""
FEEDBACK_ROUNDS = 3


@dataclass(frozen=True)
class AssemblyRequest(ConversationRequest):
    """What the caller asks for (see ``POST /v1/context/assemble`` in README.md): the shared fields
    and the tool schemas, the answer's reserve, an evidence query and its share of the room left."""

    tools: Any = None
    reserve_tokens: int | None = None
    query: str | None = None
    budget_share: float = DEFAULT_BUDGET_SHARE


@dataclass
class Assembly:
    """The assembled prompt and how it was made; tokens are the model tokenizer's."""

    conversation_id: str
    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    context_tokens_used: int
    context_limit: int
    reserve_tokens: int
    reserve_source: str
    pressure_before: float
    pressure_after: float
    tier: str
    severity: str
    references: list[dict[str, Any]]
    evidence: dict[str, Any] | None
    explain_only: bool
    tokenizer: str
    trace: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id, "model": self.model, "messages": self.messages,
            **({"tools": self.tools} if self.tools is not None else {}),
            "context_tokens_used": self.context_tokens_used, "context_limit": self.context_limit,
            "reserve_tokens": self.reserve_tokens, "reserve_source": self.reserve_source,
            "budget_tokens": self.context_limit - self.reserve_tokens,
            "pressure": {"before": self.pressure_before, "after": self.pressure_after},
            "tier": self.tier, "severity": self.severity, "references": self.references, "evidence": self.evidence,
            "explain_only": self.explain_only, "tokenizer": self.tokenizer, "trace": self.trace,
        }


@dataclass
class _Plan:
    conversation: Conversation
    counter: TokenCounter
    limit: int
    reserve: int
    reserve_source: str
    tokens_before: int


def assemble(request: AssemblyRequest, policy: opt.Policy, offloader: Offloader, summarise: Summariser,
             evidence: Evidence | None, budget_counter: TokenCounter) -> Assembly:
    """Assemble ``request``'s prompt (see the module docstring).

    Args:
        policy: the spill and compaction thresholds.
        offloader: where offloads are stored (the conversation's namespace).
        summarise: the summary of offloaded rounds (the extractive one: references must be the
            same bytes at every turn).
        evidence: the caller's documents, for ``request.query``; ``None``: none.
        budget_counter: DocAnchor's budget tokenizer (the stand-in for models it has no tokenizer of).

    Raises:
        InvalidRequest: malformed messages, tools or numbers; ``unknown_model`` (see
            :func:`retrieval.assembly.pressure.window`); ``context_too_small`` when even the
            protected messages and references do not fit the budget.
    """
    trace = Trace()
    plan = _plan(request, budget_counter, trace)
    conversation_id = request.conversation_id or conversation_key(request.messages)
    draft = Draft(plan.conversation, conversation_id, parse_tools(request.tools, plan.counter), plan.counter)
    budget = plan.limit - plan.reserve
    step = opt.Step(draft, plan.limit, plan.reserve, offloader, summarise, trace)
    trace.record("bind", "conversation", applied=True, tokens_before=draft.tokens(),
                 reason="conversation_id as given" if request.conversation_id else "derived from how the conversation starts",
                 conversation_id=conversation_id)
    opt.spill(step, policy.spill_threshold_tokens)
    tier = tier_for(step.pressure(), policy.compaction_threshold)
    trace.record("bind", "tier", applied=True, tokens_before=draft.tokens(), tier=tier,
                 reason=f"pressure after spilling {step.pressure()}; thresholds trim 0.7, compact "
                        f"{policy.compaction_threshold}, aggressive 0.9")
    blocks = step.blocks()
    opt.trim(step, tier)
    opt.compact(step, tier, blocks)
    opt.offload_rounds(step, tier, blocks)
    opt.enforce_budget(step, budget)
    messages, found = _execute_and_check(step, request, evidence, budget)
    used = _count(messages, draft)
    references = [o.to_dict(plan.counter) for o in sorted([*draft.items.values(), *draft.blocks],
                                                          key=lambda o: o.indices[0])]
    return Assembly(conversation_id, request.model, messages, draft.kept_tools() if request.tools is not None else None,
                    used, plan.limit, plan.reserve, plan.reserve_source,
                    pressure(plan.tokens_before, plan.reserve, plan.limit), pressure(used, plan.reserve, plan.limit),
                    tier, severity(used, plan.limit), references, found, request.explain_only, plan.counter.name,
                    trace.entries)


def _plan(request: AssemblyRequest, budget_counter: TokenCounter, trace: Trace) -> _Plan:
    counter, counter_source = conversation_counter(request.model, budget_counter)
    conversation = parse_conversation(request.messages, counter)
    limit, limit_source = window(request.model, request.context_limit)
    tokens = count_message_tokens(request.messages, counter) + sum(t.tokens for t in parse_tools(request.tools, counter))
    trace.record("plan", "count", applied=True, tokens_before=tokens, context_limit=limit, limit_source=limit_source,
                 tokenizer=counter.name, reason=f"{len(conversation.messages)} messages and the tool schemas counted "
                 f"with {counter.name} ({'the model' + chr(39) + 's own' if counter_source == 'model' else 'a stand-in'})")
    if request.reserve_tokens is None:
        answers = [m.tokens for m in conversation.messages if m.role == "assistant"]
        reserve, source = predict_reserve(answers, limit)
    else:
        reserve, source = _reserve(request.reserve_tokens, limit), "given"
    trace.record("plan", "reserve", applied=True, tokens_before=tokens, reserve_tokens=reserve, reserve_source=source,
                 reason={"given": "reserve_tokens as given", "default": "no answer yet: 10 % of the window",
                         "predicted": "1.5 × the largest of the last 8 answers"}[source])
    return _Plan(conversation, counter, limit, reserve, source, tokens)


def _reserve(value: Any, limit: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < limit:
        raise InvalidRequest(f"'reserve_tokens' must be a whole number of tokens from 0 to {limit - 1:,} (the "
                             f"model's window less one); got {value!r}.", field="reserve_tokens")
    return value


def _execute_and_check(step: opt.Step, request: AssemblyRequest, evidence: Evidence | None,
                       budget: int) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Execute, then feed back: the exact count must fit the budget and pairing must hold."""
    draft, trace = step.draft, step.trace
    for _ in range(FEEDBACK_ROUNDS):
        store_offloads(draft, step.offloader, request.explain_only, trace)
        messages = draft.render()
        found = add_evidence(messages, budget - draft.tokens(), request.query, request.budget_share, evidence, draft,
                             trace)
        used = _count(messages, draft)
        if used > budget and found:
            messages.pop()
            found, used = None, _count(messages, draft)
            trace.record("feedback", "evidence", applied=True, tokens_before=used, reason="dropped: over the budget")
        if used <= budget:
            problems = unpaired(messages)
            trace.record("feedback", "check", applied=not problems, tokens_before=used,
                         reason="; ".join(problems) or f"{used:,} of {budget:,} tokens; every tool result with its call")
            return messages, found
        trace.record("feedback", "check", applied=False, tokens_before=used,
                     reason=f"{used:,} tokens are over the budget of {budget:,}: enforcing it with the real sizes")
        draft.measure()
        opt.enforce_budget(step, budget)
    raise InvalidRequest(f"The conversation could not be made to fit {budget:,} tokens.", code="context_too_small")


def _count(messages: list[dict[str, Any]], draft: Draft) -> int:
    """Exact tokens of the prompt: its messages and its kept tool schemas."""
    return count_message_tokens(messages, draft.counter) + sum(t.tokens for t in draft.tools if t.index not in draft.dropped)
