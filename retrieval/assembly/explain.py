"""The EXPLAIN trace of an assembly: every transformation considered, applied or skipped, with the
reason and the prompt's tokens before and after it, in the order the phases ran.

An entry is ``{"phase", "action", "applied", "reason", "tokens_before", "tokens_after", ...}``
plus facts of the action (``turns``, ``doc_id``, ``tool``...). Phases: ``plan`` (count, reserve,
pressure, tier), ``bind`` (what each offload would store and its doc_id), ``optimise`` (spill,
trim, compact, offload, emergency steps), ``execute`` (storing, evidence) and ``feedback`` (the
final count checked against the budget). Tokens are the model tokenizer's. No time or other
run-dependent value is recorded, so the same input and store give the same trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Trace:
    """The entries so far, oldest first."""

    entries: list[dict[str, Any]] = field(default_factory=list)

    def record(self, phase: str, action: str, *, applied: bool, reason: str, tokens_before: int,
               tokens_after: int | None = None, **facts: Any) -> None:
        """Add one entry; ``tokens_after`` defaults to ``tokens_before`` (nothing changed)."""
        self.entries.append({"phase": phase, "action": action, "applied": applied, "reason": reason,
                             "tokens_before": tokens_before,
                             "tokens_after": tokens_before if tokens_after is None else tokens_after, **facts})
