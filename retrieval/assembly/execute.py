"""The execute phase: store what the plan offloads (fail-open), write the references, and add
evidence from the caller's documents into the room left."""

from __future__ import annotations

import logging
import math
from typing import Any

from docanchor.errors import DocAnchorError
from retrieval.assembly.draft import Draft, joined
from retrieval.assembly.explain import Trace
from retrieval.assembly.ports import Evidence, Offloader
from retrieval.assembly.references import Offload
from retrieval.assembly.turns import message_tokens

log = logging.getLogger("docanchor.assembly")
MIN_EVIDENCE_TOKENS = 50
"""Less room than this (tokens) and no evidence is retrieved: a citation line and a sentence."""
EVIDENCE_TRIES = 3
"""Retrievals tried when the evidence, counted with the model's tokenizer, overflows its room."""


def store_offloads(draft: Draft, offloader: Offloader, explain_only: bool, trace: Trace) -> None:
    """Store every planned offload in message order and write its reference.

    A failing store never raises: the offload becomes a placeholder (``status`` ``failed``, its
    ``error`` the code) and the trace says so; nothing stored before is touched. With
    ``explain_only`` nothing is stored (``status`` ``not_stored``).
    """
    offloads = sorted([*draft.items.values(), *draft.blocks], key=lambda o: o.indices[0])
    for offload in offloads:
        if offload.status == "planned":
            _store(offload, offloader, draft.conversation_id, explain_only, trace, draft.tokens())
        draft.finish_reference(offload)


def _store(offload: Offload, offloader: Offloader, namespace: str, explain_only: bool, trace: Trace,
           tokens: int) -> None:
    facts = {"turns": sorted({offload.indices[0] + 1, offload.indices[-1] + 1}), "doc_id": offload.doc_id}
    if explain_only:
        offload.status = "not_stored"
        trace.record("execute", "store", applied=False, reason="explain_only: nothing is stored", tokens_before=tokens,
                     **facts)
        return
    try:
        stored = offloader.store(namespace, offload.title, offload.text, markdown=offload.markdown)
    except Exception as exc:  # fail-open: the turn still assembles
        offload.status = "failed"
        offload.error = exc.code if isinstance(exc, DocAnchorError) else "internal"
        log.warning("storing %s of %s failed (%s)", offload.what, offload.doc_id, offload.error,
                    exc_info=not isinstance(exc, DocAnchorError))
        trace.record("execute", "store", applied=False, tokens_before=tokens,
                     reason=f"storing failed ({offload.error}): a placeholder stands in its place", **facts)
        return
    offload.status, offload.doc_id, offload.anchor = "stored", stored.doc_id, stored.anchor
    trace.record("execute", "store", applied=True, reason=f"stored {offload.what} as a document", tokens_before=tokens,
                 **facts)


def add_evidence(messages: list[dict[str, Any]], room: int, query: str | None, share: float, evidence: Evidence | None,
                 draft: Draft, trace: Trace) -> dict[str, Any] | None:
    """Add the caller's evidence for ``query``, at most ``floor(room × share)`` tokens (model
    tokenizer): behind the last message's content when that is the user's (so user and assistant
    turns alternate), else as a last user message. Its cost is counted as a message of its own (an
    upper bound: joining saves the message overhead). Returns what was added, or ``None``."""
    tokens = draft.tokens()
    if not query:
        trace.record("execute", "evidence", applied=False, reason="no query was given", tokens_before=tokens)
        return None
    head = f"[DocAnchor evidence for the query {query!r} from your documents]"
    allowed = math.floor(room * share)
    budget = allowed - message_tokens({"role": "user", "content": head + "\n"}, draft.counter)
    for _ in range(EVIDENCE_TRIES):
        if budget < MIN_EVIDENCE_TOKENS or evidence is None:
            break
        try:
            context = evidence(query, budget)
        except Exception as exc:  # fail-open
            code = exc.code if isinstance(exc, DocAnchorError) else "internal"
            trace.record("execute", "evidence", applied=False, reason=f"retrieval failed ({code})", tokens_before=tokens)
            return None
        if not context:
            trace.record("execute", "evidence", applied=False, reason="no passage matched the query", tokens_before=tokens)
            return None
        message = {"role": "user", "content": f"{head}\n{context}"}
        used = message_tokens(message, draft.counter)
        if used <= allowed:
            if messages and messages[-1].get("role") == "user":
                messages[-1] = joined(message["content"], messages[-1], after=True)
            else:
                messages.append(message)
            trace.record("execute", "evidence", applied=True, tokens_before=tokens, tokens_after=tokens + used,
                         reason=f"{used:,} of the {allowed:,} tokens the budget share leaves")
            return {"query": query, "tokens": used, "budget_tokens": allowed}
        budget = budget * allowed // used - 1  # the model counts more tokens than the budget tokenizer
    trace.record("execute", "evidence", applied=False, tokens_before=tokens,
                 reason=f"only {allowed:,} tokens of room for evidence" if evidence else "no document store to search")
    return None
