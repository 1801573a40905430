"""The steps that make a prompt fit: spill, trim, compact history, offload rounds, and the
emergency steps that enforce the hard budget whatever the tier.

Each step walks its candidates oldest first and records every one in the trace, applied or
skipped with the reason. Compaction and offloading decide by position, never by a search for the
least change that fits: a tool result is compacted once its round is older than the last
:data:`~retrieval.assembly.pressure.KEEP_ROUNDS` (tier compact and above), a block of rounds
(:func:`retrieval.assembly.pressure.round_blocks`) is offloaded once :data:`OFFLOAD_AGE_SHARE` of
the window follows it (tier aggressive). Sizes are those after spilling, which only grow as the
conversation does, so what was replaced at one turn is replaced the same way at the next and the
prompt's prefix stays byte-stable between turns; only :func:`enforce_budget` fits by search, when
the hard budget demands it.
"""

from __future__ import annotations

from dataclasses import dataclass

from docanchor.errors import InvalidRequest
from retrieval.assembly.draft import Draft
from retrieval.assembly.explain import Trace
from retrieval.assembly.ports import Offloader, Summariser
from retrieval.assembly.references import ANCHOR_LINES_TOKENS
from retrieval.assembly.pressure import BLOCK_SHARE, KEEP_ROUNDS, TIERS, pressure, round_blocks

MIN_COMPACT_TOKENS = 1_000
"""A tool result smaller than this (tokens) is not worth replacing by a reference while compacting."""
MESSAGE_HEADER_TOKENS = 100
"""A generous bound on a reference's first line, in tokens (it names the turn, the message and the document)."""
OFFLOAD_AGE_SHARE = 0.40
"""In the aggressive tier a block of old rounds is offloaded once the conversation after it holds
this share of the window in tokens: the verbatim part stays about that long, under the target."""
BLOCK_SUMMARY_TOKENS = 150
"""Tokens of extractive summary a reference to an offloaded block of rounds carries."""


@dataclass(frozen=True)
class Policy:
    """The settings assembly follows (see :class:`docanchor.settings.Settings`)."""

    spill_threshold_tokens: int = 10_000
    compaction_threshold: float = 0.85


@dataclass
class Step:
    """What every step needs: the draft, the window, the stores and the trace."""

    draft: Draft
    limit: int
    reserve: int
    offloader: Offloader
    summarise: Summariser
    trace: Trace

    def pressure(self) -> float:
        return pressure(self.draft.tokens(), self.reserve, self.limit)

    def blocks(self) -> list[Block]:
        """Blocks of old rounds that may go (all of their rounds before the last :data:`KEEP_ROUNDS`),
        oldest first; grouped, and aged, on the sizes after spilling only (so they never change as
        the conversation grows, except by aging)."""
        conv, draft = self.draft.conversation, self.draft
        sizes = [sum(draft.cost.get(i, conv.messages[i].tokens) for i in r) for r in conv.rounds]
        eligible = len(conv.rounds) - KEEP_ROUNDS
        blocks = []
        for rounds in round_blocks(sizes, int(BLOCK_SHARE * self.limit)):
            if rounds[-1] < eligible:
                indices = tuple(i for r in rounds for i in conv.rounds[r])
                blocks.append(Block(indices, sum(sizes[rounds[-1] + 1:])))
        return blocks


@dataclass(frozen=True)
class Block:
    """A block of old rounds: its message indices and the tokens that follow it (after spilling)."""

    indices: tuple[int, ...]
    tokens_after: int


def spill(step: Step, threshold: int) -> None:
    """Replace every message over ``threshold`` tokens by a reference (system messages never)."""
    draft, found = step.draft, False
    for m in draft.conversation.messages:
        if m.tokens <= threshold:
            continue
        found = True
        before = draft.tokens()
        if m.protected:
            step.trace.record("bind", "spill", applied=False, reason=f"{m.role} messages are never spilled",
                              tokens_before=before, turns=[m.turn])
            continue
        item = draft.replace(m, "spill", step.offloader)
        step.trace.record("bind", "spill", applied=True, tokens_before=before, tokens_after=draft.tokens(),
                          reason=f"{m.tokens:,} tokens > spill threshold {threshold:,}", turns=[m.turn],
                          replaced=item.what, doc_id=item.doc_id)
    if not found:
        step.trace.record("bind", "spill", applied=False, tokens_before=draft.tokens(),
                          reason=f"no message is over the spill threshold of {threshold:,} tokens")


def trim(step: Step, tier: str) -> None:
    """Drop the tool schemas marked droppable when the tier is trim or above."""
    draft = step.draft
    droppable = [t for t in draft.tools if t.droppable]
    if not droppable:
        step.trace.record("optimise", "trim_tools", applied=False, tokens_before=draft.tokens(),
                          reason="no tool schema is marked droppable")
    for tool in droppable:
        before = draft.tokens()
        if TIERS.index(tier) < TIERS.index("trim"):
            step.trace.record("optimise", "trim_tools", applied=False, tokens_before=before, tool=tool.name,
                              reason=f"tier {tier}: pressure below the trim threshold")
            continue
        draft.dropped.add(tool.index)
        step.trace.record("optimise", "trim_tools", applied=True, tokens_before=before, tokens_after=draft.tokens(),
                          tool=tool.name, reason=f"tier {tier}: the schema is marked droppable")


def compact(step: Step, tier: str, blocks: list[Block]) -> None:
    """Replace the tool results of every old block (before the last :data:`KEEP_ROUNDS` rounds) by
    references when the tier is compact or above."""
    if TIERS.index(tier) < TIERS.index("compact"):
        step.trace.record("optimise", "compact_tool_results", applied=False, tokens_before=step.draft.tokens(),
                          reason=f"tier {tier}: pressure below the compaction threshold")
        return
    messages = step.draft.conversation.messages
    for block in blocks:
        for i in block.indices:
            m = messages[i]
            if m.role != "tool" or i in step.draft.items:
                continue
            before = step.draft.tokens()
            if m.tokens < MIN_COMPACT_TOKENS:
                step.trace.record("optimise", "compact_tool_results", applied=False, tokens_before=before,
                                  turns=[m.turn], reason=f"{m.tokens:,} tokens: below {MIN_COMPACT_TOKENS:,}, "
                                                         "a reference would save little")
                continue
            item = step.draft.replace(m, "tool_result", step.offloader)
            step.trace.record("optimise", "compact_tool_results", applied=True, tokens_before=before,
                              tokens_after=step.draft.tokens(), turns=[m.turn], replaced=item.what, doc_id=item.doc_id,
                              reason=f"tier {tier}: older than the last {KEEP_ROUNDS} rounds")


def offload_rounds(step: Step, tier: str, blocks: list[Block]) -> None:
    """Offload every old block followed by at least :data:`OFFLOAD_AGE_SHARE` of the window in
    tokens, when the tier is aggressive: a block goes once, when it is that old, and stays gone."""
    if tier != "aggressive":
        step.trace.record("optimise", "offload_rounds", applied=False, tokens_before=step.draft.tokens(),
                          reason=f"tier {tier}: pressure below the aggressive threshold")
        return
    messages, age = step.draft.conversation.messages, int(OFFLOAD_AGE_SHARE * step.limit)
    for block in blocks:
        indices = [i for i in block.indices if not messages[i].protected]
        turns = [messages[indices[0]].turn, messages[indices[-1]].turn] if indices else []
        before = step.draft.tokens()
        if block.tokens_after < age or not indices:
            step.trace.record("optimise", "offload_rounds", applied=False, tokens_before=before, turns=turns,
                              reason=f"{block.tokens_after:,} tokens follow it, fewer than {age:,} "
                                     f"({OFFLOAD_AGE_SHARE:.0%} of the window)")
            continue
        offload = step.draft.offload(indices, step.offloader, step.summarise, BLOCK_SUMMARY_TOKENS)
        step.trace.record("optimise", "offload_rounds", applied=True, tokens_before=before,
                          tokens_after=step.draft.tokens(), turns=turns, doc_id=offload.doc_id,
                          reason=f"tier aggressive: {block.tokens_after:,} tokens follow it "
                                 f"({OFFLOAD_AGE_SHARE:.0%} of the window or more); the last {KEEP_ROUNDS} rounds stay")


def enforce_budget(step: Step, budget: int) -> None:
    """Make the prompt fit ``budget`` tokens whatever the tier: references for the kept rounds'
    messages (tool results first, oldest first), then one block for everything offloaded.

    Raises:
        InvalidRequest: ``context_too_small`` when even that does not fit (the protected
            messages and the last references alone are over the budget).
    """
    draft = step.draft
    if draft.tokens() <= budget:
        step.trace.record("optimise", "enforce_budget", applied=False, tokens_before=draft.tokens(),
                          reason=f"the prompt fits the budget of {budget:,} tokens")
        return
    offloaded = draft.offloaded()
    kept = [m for m in draft.conversation.messages
            if not m.protected and m.index not in offloaded and m.index not in draft.items]
    for m in sorted(kept, key=lambda m: (m.role != "tool", m.index)):
        if draft.tokens() <= budget:
            break
        if m.tokens <= ANCHOR_LINES_TOKENS + MESSAGE_HEADER_TOKENS:  # its reference would cost as much
            continue
        before = draft.tokens()
        item = draft.replace(m, "tool_result" if m.role == "tool" else "spill", step.offloader)
        step.trace.record("optimise", "enforce_budget", applied=True, tokens_before=before,
                          tokens_after=draft.tokens(), turns=[m.turn], replaced=item.what, doc_id=item.doc_id,
                          reason=f"over the budget of {budget:,} tokens")
    if draft.tokens() > budget and len(draft.blocks) > 1:
        _merge_blocks(step)
    if draft.tokens() > budget:
        raise InvalidRequest(
            f"The conversation cannot fit {budget:,} tokens (the model's window less the reserve): its system messages "
            f"and the references DocAnchor can make still use {draft.tokens():,}. Shorten the system messages or "
            "lower reserve_tokens.", code="context_too_small", budget_tokens=budget, tokens=draft.tokens())


def _merge_blocks(step: Step) -> None:
    draft = step.draft
    before = draft.tokens()
    indices = sorted(i for block in draft.blocks for i in block.indices)
    for block in draft.blocks:
        draft.cost.pop(block.indices[0], None)
    draft.blocks.clear()
    merged = draft.offload(indices, step.offloader, step.summarise, BLOCK_SUMMARY_TOKENS)
    step.trace.record("optimise", "enforce_budget", applied=True, tokens_before=before, tokens_after=draft.tokens(),
                      turns=[indices[0] + 1, indices[-1] + 1], doc_id=merged.doc_id,
                      reason="the references to offloaded blocks were over the budget: merged into one")
