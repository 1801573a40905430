"""Context pressure, the tier it selects, the predicted answer reserve, and the blocks old rounds
are offloaded in.

Pressure is ``(prompt tokens + reserve) / context window``: how much of the window the next call
needs. The tier follows from it by fixed thresholds (the compaction threshold is a setting):

============ ===================================== =============================================
tier         pressure                              what assembly may do
============ ===================================== =============================================
normal       below 0.70                            nothing (spilling oversized messages aside)
trim         0.70 and above                        drop tool schemas the caller marks droppable
compact      compaction threshold (0.85) and above also replace old tool results by references
aggressive   0.90 and above                        also offload the oldest rounds, keeping the
                                                   last :data:`KEEP_ROUNDS`
============ ===================================== =============================================

The thresholds of trim and aggressive are fixed by the design this feature comes from (see issue
12); 0.70 and 0.85 are also where the snapshot's ``info`` and ``warning`` severities start.
"""

from __future__ import annotations

import json
import math
from typing import Any, Sequence

from docanchor.errors import InvalidRequest, unknown_model
from retrieval.budget import DEFAULT_RESERVE_MIN_TOKENS, context_limit, default_reserve_tokens

TIERS = ("normal", "trim", "compact", "aggressive")
TRIM_PRESSURE = 0.70
AGGRESSIVE_PRESSURE = 0.90
KEEP_ROUNDS = 4
"""Rounds never offloaded or compacted by the tiers: the conversation's last four."""
BLOCK_SHARE = 0.20
"""Old rounds are compacted and offloaded in blocks of about this share of the window (see
:func:`round_blocks`)."""
RESERVE_HISTORY = 8
"""The last this many assistant messages predict the next answer's size."""
RESERVE_FACTOR = 1.5
"""The predicted answer is this many times the largest of them."""


CONTEXT_LIMIT_RANGE = (2 * DEFAULT_RESERVE_MIN_TOKENS, 10_000_000)
"""The bounds (tokens, inclusive) of a caller's ``context_limit``: room for the smallest default
answer reserve and as much again for the prompt, up to the largest window in
``retrieval/context_limits.tsv``."""


def check_context_limit(value: Any, name: str = "'context_limit'") -> int | None:
    """A caller's ``context_limit`` (``None``: not given).

    Args:
        name: how the message names the value (the command line names a request file's field as
            ``"<file>'s context_limit"``: its ``'context_limit'`` reads ``--context-limit``).

    Raises:
        InvalidRequest: ``invalid_argument`` naming ``context_limit`` and its bounds, for anything
            but a whole number of tokens in :data:`CONTEXT_LIMIT_RANGE`.
    """
    low, high = CONTEXT_LIMIT_RANGE
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high):
        raise InvalidRequest(f"{name} must be a whole number of tokens from {low:,} to {high:,}; "
                             f"got {json.dumps(value, default=str)[:40]}.", field="context_limit")
    return value


def window(model: str, given: Any) -> tuple[int, str]:
    """The context window (tokens) a context request works in and where it comes from: the
    caller's ``context_limit`` (``"given"``) when there is one, else the model's in DocAnchor's
    table (``"exact"`` or ``"prefix:<entry>"``, see :func:`retrieval.budget.context_limit`).

    Raises:
        InvalidRequest: a bad ``context_limit`` (:func:`check_context_limit`), or ``unknown_model``
            when the model is not in the table and no ``context_limit`` is given: assuming a window
            could overflow a smaller one.
    """
    if check_context_limit(given) is not None:
        return given, "given"
    limit, source = context_limit(model)
    if source == "fallback":
        raise unknown_model(model)
    return limit, source


def pressure(prompt_tokens: int, reserve_tokens: int, limit_tokens: int) -> float:
    """``(prompt_tokens + reserve_tokens) / limit_tokens``, rounded to 4 decimals."""
    return round((prompt_tokens + reserve_tokens) / limit_tokens, 4)


def tier_for(value: float, compaction_threshold: float) -> str:
    """The tier of a pressure (see the module docstring); ``compaction_threshold`` is a share (0.85)."""
    if value >= AGGRESSIVE_PRESSURE:
        return "aggressive"
    if value >= compaction_threshold:
        return "compact"
    if value >= TRIM_PRESSURE:
        return "trim"
    return "normal"


def predict_reserve(answer_tokens: Sequence[int], limit_tokens: int) -> tuple[int, str]:
    """Tokens to keep free for the next answer, and how they were found.

    With assistant messages in the conversation: :data:`RESERVE_FACTOR` times the largest of the
    last :data:`RESERVE_HISTORY`, at least 1,024 tokens and at most the default reserve
    (:func:`retrieval.budget.default_reserve_tokens`: 10 % of the window, at most 16,384);
    ``"predicted"``. Without any: the default reserve; ``"default"``.
    """
    ceiling = default_reserve_tokens(limit_tokens)
    recent = list(answer_tokens)[-RESERVE_HISTORY:]
    if not recent:
        return ceiling, "default"
    predicted = math.ceil(max(recent) * RESERVE_FACTOR)
    return min(ceiling, max(DEFAULT_RESERVE_MIN_TOKENS, predicted)), "predicted"


def round_blocks(round_tokens: Sequence[int], block_tokens: int) -> list[tuple[int, ...]]:
    """Consecutive rounds grouped into blocks of at most ``block_tokens`` tokens (a larger round is
    a block alone), oldest first, as indices into ``round_tokens``.

    A block is filled in order and closed by the first round that does not fit it, so every block
    but the last depends only on the rounds in it: later turns never regroup older rounds, and what
    was offloaded as one document stays that document.
    """
    blocks: list[list[int]] = []
    size = 0
    for i, tokens in enumerate(round_tokens):
        if not blocks or size + tokens > block_tokens:
            blocks.append([])
            size = 0
        blocks[-1].append(i)
        size += tokens
    return [tuple(b) for b in blocks]
