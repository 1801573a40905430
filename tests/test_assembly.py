"""Context assembly's pure parts (retrieval.assembly, summarize.conversation): tiers, the predicted
reserve, blocks, the extractive summary, references, and the assembly's invariants with an
in-memory store (the doors -- Python, HTTP, CLI, MCP -- are in tests/test_context_doors.py)."""

from __future__ import annotations

import hashlib
import json

import pytest

from docanchor.errors import InvalidRequest
from docanchor.tokens import get_counter
from docanchor.types import TurnText
from retrieval.assembly.assemble import AssemblyRequest, assemble
from retrieval.assembly.compact import CompactionRequest, compact_conversation
from retrieval.assembly.optimise import Policy
from retrieval.assembly.ports import StoredDocument
from retrieval.assembly.pressure import KEEP_ROUNDS, predict_reserve, round_blocks, tier_for
from retrieval.assembly.references import anchor_lines
from retrieval.assembly.turns import conversation_key, parse_conversation, unpaired
from summarize.conversation import extractive_summary
from tests.conftest import CORPUS, SHARED

COUNTER = get_counter()
NORWICH = (CORPUS / "txt" / "norwich-city.txt").read_text(encoding="utf-8")
SOTU = (SHARED / "bench" / "chunking_eval" / "corpora" / "state_of_the_union.md").read_text(encoding="utf-8")
SYSTEM = {"role": "system", "content": "You are a research agent. Cite the turn you got each fact from."}


class MemoryStore:
    """An Offloader keeping documents in a dict (the doors use DocAnchor's store)."""

    def __init__(self, fail: bool = False) -> None:
        self.docs: dict[str, tuple[str, str, str]] = {}
        self.fail = fail

    def doc_id(self, text: str) -> str:
        return "doc_" + hashlib.sha256(text.encode()).hexdigest()[:16]

    def store(self, namespace: str, title: str, text: str, markdown: bool = True) -> StoredDocument:
        if self.fail:
            raise OSError("disk full")
        doc_id = self.doc_id(text)
        self.docs[doc_id] = (namespace, title, text)
        return StoredDocument(doc_id, f"Document: {title}\nOutline:\n- part one\ndoc_id: {doc_id}\n"
                                      f'More: searchDocuments(query, doc_id="{doc_id}")')


def summarise(turns, max_tokens):
    return extractive_summary(turns, max_tokens, COUNTER), "extractive"


def conversation(rounds: int, tool_chars: int = 6_000, big_every: int = 0) -> list[dict]:
    """A research conversation: each round a question, a read_file call, its result (real text),
    and an answer stating a fact; every ``big_every``-th result is a whole 48 KB book."""
    messages = [SYSTEM]
    for r in range(rounds):
        start = (r * 1_700) % (len(SOTU) - tool_chars)
        text = NORWICH if big_every and r % big_every == big_every - 1 else SOTU[start:start + tool_chars]
        messages += [
            {"role": "user", "content": f"Question {r}: what does section {r} of the address say?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_{r}", "type": "function", "function": {"name": "read_file",
                                                                     "arguments": json.dumps({"section": r})}}]},
            {"role": "tool", "tool_call_id": f"call_{r}", "content": text},
            {"role": "assistant", "content": f"Section {r} says: {SOTU[start:start + 160].strip()}"},
        ]
    return messages


def run(messages, model="gpt-4-32k", store=None, **kwargs):
    request = AssemblyRequest(model=model, messages=messages, **kwargs)
    return assemble(request, Policy(), store or MemoryStore(), summarise, None, COUNTER)


# ---------------------------------------------------------------------------- pressure and tiers
@pytest.mark.parametrize(("value", "tier"), [(0.0, "normal"), (0.6999, "normal"), (0.70, "trim"), (0.8499, "trim"),
                                             (0.85, "compact"), (0.8999, "compact"), (0.90, "aggressive"),
                                             (3.0, "aggressive")])
def test_tier_thresholds(value, tier):
    assert tier_for(value, 0.85) == tier


def test_reserve_is_predicted_from_recent_answers():
    assert predict_reserve([], 128_000) == (12_800, "default")
    assert predict_reserve([100, 200], 128_000) == (1_024, "predicted")  # never below 1,024
    assert predict_reserve([100, 4_000, 10], 128_000) == (6_000, "predicted")
    assert predict_reserve([50_000], 128_000) == (12_800, "predicted")  # never above the default
    assert predict_reserve([9_000] + [10] * 8, 128_000) == (1_024, "predicted")  # only the last 8 count


def test_blocks_of_old_rounds_never_regroup_as_the_conversation_grows():
    sizes = [400, 300, 900, 200, 700, 100, 1_200, 50]
    blocks = round_blocks(sizes, 1_000)
    assert blocks == [(0, 1), (2,), (3, 4, 5), (6,), (7,)]
    for n in range(1, len(sizes)):
        grown = round_blocks(sizes[:n] + [5_000, 10], 1_000)
        assert grown[:len(round_blocks(sizes[:n], 1_000)) - 1] == round_blocks(sizes[:n], 1_000)[:-1]


# ---------------------------------------------------------------------------- summary and references
def test_extractive_summary_fits_is_deterministic_and_keeps_the_task():
    turns = [TurnText(m.turn, m.turn_text().speaker, m.text)
             for m in parse_conversation(conversation(12), COUNTER).messages[1:]]
    summary = extractive_summary(turns, 200, COUNTER)
    assert COUNTER.count(summary) <= 200 and summary == extractive_summary(turns, 200, COUNTER)
    assert summary.startswith("Turns 2–49 (extractive summary):")
    assert "- turn 2 user: Question 0" in summary and "- turn 46 user: Question 11" in summary  # first and last ask
    assert extractive_summary(turns, 3, COUNTER) == "" and extractive_summary([], 100, COUNTER) == ""


def test_anchor_lines_keep_title_doc_id_and_how_to():
    anchor = "Document: X\nType: Markdown\nOutline:\n" + "\n".join(f"- heading {i}" for i in range(50)) + \
             "\ndoc_id: doc_1\nMore: searchDocuments(query, doc_id=\"doc_1\")"
    lines = anchor_lines(anchor, 60, COUNTER)
    assert COUNTER.count(lines) <= 60
    assert lines.startswith("Document: X\nType: Markdown") and lines.endswith('doc_id: doc_1\nMore: searchDocuments(query, doc_id="doc_1")')


def test_anchor_lines_keep_no_part_heading_without_its_first_entry():
    """Before: a reference's anchor lines could end a part at its heading ("Central passages:" and
    no passage) when the passage did not fit; seen in README's example once the More line named the
    namespace."""
    anchor = ("Document: X\nOutline:\n- one\nCentral passages:\n- " + "word " * 80 + "\ndoc_id: doc_1\n"
              'More: searchDocuments(query, doc_id="doc_1")')
    lines = anchor_lines(anchor, 60, COUNTER)
    assert lines == 'Document: X\nOutline:\n- one\ndoc_id: doc_1\nMore: searchDocuments(query, doc_id="doc_1")'


def test_conversation_key_is_stable_across_turns():
    messages = conversation(3)
    assert conversation_key(messages) == conversation_key(messages[:2]) == conversation_key(messages + messages[1:3])
    assert conversation_key(messages) != conversation_key([SYSTEM, {"role": "user", "content": "Another task."}])


# ---------------------------------------------------------------------------- the invariants
@pytest.mark.parametrize("model", ["gpt-4-32k", "gpt-4o"])
@pytest.mark.parametrize("rounds", [2, 12, 40])
def test_never_over_the_budget_paired_and_system_first(model, rounds):
    messages = conversation(rounds, big_every=5)
    result = run(messages, model=model)
    used = result.context_tokens_used
    assert used <= result.context_limit - result.reserve_tokens
    counter = get_counter(result.tokenizer)
    from retrieval.budget import count_message_tokens
    assert used == count_message_tokens(result.messages, counter)
    assert result.messages[0] == SYSTEM and json.dumps(result.messages[0]) == json.dumps(SYSTEM)
    assert unpaired(result.messages) == []
    offloaded_turns = {t for ref in result.references if ref["kind"] == "turns"
                       for t in range(ref["turns"][0], ref["turns"][-1] + 1)}
    answered = {m["tool_call_id"] for m in result.messages if m["role"] == "tool"}
    for turn, message in enumerate(messages, 1):
        if message["role"] == "tool":  # its result kept with its call, or both offloaded together
            assert message["tool_call_id"] in answered or {turn - 1, turn} <= offloaded_turns


def test_same_input_and_store_give_the_same_bytes_and_trace():
    messages = conversation(40, big_every=5)
    store = MemoryStore()
    first = json.dumps(run(messages, store=store).to_dict(), ensure_ascii=False)
    again = json.dumps(run(messages, store=store).to_dict(), ensure_ascii=False)
    fresh = json.dumps(run(messages, store=MemoryStore()).to_dict(), ensure_ascii=False)
    assert first == again == fresh


def test_explain_only_stores_nothing_and_plans_the_same_offloads():
    messages = conversation(40, big_every=5)
    store = MemoryStore()
    planned = run(messages, store=store, explain_only=True)
    assert store.docs == {}
    assert {e["action"] for e in planned.trace if e["phase"] == "execute" and e["applied"]} <= {"evidence"}
    stored = run(messages, store=store)
    assert [r["doc_id"] for r in planned.references] == [r["doc_id"] for r in stored.references]
    assert not any(r["stored"] for r in planned.references) and all(r["stored"] for r in stored.references)
    assert set(store.docs) == {r["doc_id"] for r in stored.references}


def test_a_failing_store_gives_placeholders_not_an_exception():
    result = run(conversation(40, big_every=5), store=MemoryStore(fail=True))
    assert result.references and all(r["status"] == "failed" and r["error"] == "internal" for r in result.references)
    assert result.context_tokens_used <= result.context_limit - result.reserve_tokens
    placeholders = [m for m in result.messages if "[DocAnchor placeholder]" in (m.get("content") or "")]
    assert placeholders and any("storing failed" in e["reason"] for e in result.trace)


def test_every_transformation_is_in_the_trace_with_tokens():
    result = run(conversation(40, big_every=5))
    actions = {(e["phase"], e["action"]) for e in result.trace}
    assert {("plan", "count"), ("plan", "reserve"), ("bind", "spill"), ("bind", "tier"), ("optimise", "trim_tools"),
            ("optimise", "compact_tool_results"), ("optimise", "offload_rounds"), ("optimise", "enforce_budget"),
            ("execute", "store"), ("execute", "evidence"), ("feedback", "check")} <= actions
    for entry in result.trace:
        assert {"applied", "reason", "tokens_before", "tokens_after"} <= set(entry) and entry["reason"]
        assert entry["applied"] or entry["tokens_after"] == entry["tokens_before"]
    spills = [e for e in result.trace if e["action"] == "spill" and e["applied"]]
    assert spills and all(e["tokens_after"] < e["tokens_before"] for e in spills)


def test_a_small_conversation_is_left_as_it_is():
    messages = conversation(2)
    result = run(messages, model="gpt-4o")
    assert result.messages == messages and result.tier == "normal" and result.references == []
    assert not any(e["applied"] for e in result.trace if e["phase"] == "optimise")


def test_the_last_rounds_stay_and_the_prefix_holds_between_turns():
    """Turn after turn: a turn that offloads nothing new sends the previous prompt's bytes as its
    prefix; one that does changes it only after the references made before; the last four rounds
    are never offloaded.

    The block references are joined in front of the first kept question (no two user messages in
    a row), so a new block changes that message: its bytes up to the end of the old references
    stay (a provider's cache works on that prefix), then the new reference and question follow."""
    messages = conversation(60)
    previous, steady = None, 0
    for end in range(20, len(messages) + 1, 4):
        result = run(messages[:end])
        prompt = [json.dumps(m, ensure_ascii=False) for m in result.messages]
        kept = [m for m in result.messages if m["role"] == "user" and m["content"].split("\n\n")[-1].startswith("Question")]
        assert len(kept) >= KEEP_ROUNDS
        refs = [r["doc_id"] for r in result.references]
        if previous is not None:
            old_prompt, old_refs, old_messages = previous
            if refs == old_refs:
                steady += 1
                assert prompt[:len(old_prompt)] == old_prompt
            else:
                first_new = next(i for i, m in enumerate(prompt) if i >= len(old_prompt) or m != old_prompt[i])
                assert all(r in refs for r in old_refs)  # nothing offloaded comes back
                blocks = [i for i, m in enumerate(old_messages) if m["role"] == "user" and m["content"].startswith("[DocAnchor")]
                if blocks:
                    assert first_new >= blocks[-1]
                    if first_new == blocks[-1]:
                        old_references = old_messages[first_new]["content"].rsplit("\n\n", 1)[0]
                        assert result.messages[first_new]["content"].startswith(old_references + "\n\n")
        previous = (prompt, refs, result.messages)
    assert steady >= 10


def test_droppable_tools_go_first_under_pressure():
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}},
             {"type": "function", "function": {"name": "draw_chart", "description": "x " * 300}, "droppable": True}]
    calm = run(conversation(2), model="gpt-4o", tools=tools)
    assert calm.tools == [{k: v for k, v in t.items() if k != "droppable"} for t in tools]
    pressed = run(conversation(18), tools=tools)
    assert pressed.tier != "normal" and [t["function"]["name"] for t in pressed.tools] == ["read_file"]
    assert any(e["action"] == "trim_tools" and e["applied"] and e["tool"] == "draw_chart" for e in pressed.trace)


def test_bad_conversations_are_refused_with_the_message_named():
    with pytest.raises(InvalidRequest, match=r"messages\[1\] is a tool result for call 'x'"):
        run([SYSTEM, {"role": "tool", "tool_call_id": "x", "content": "orphan"}])
    with pytest.raises(InvalidRequest, match=r"messages\[0\].role is 'robot'"):
        run([{"role": "robot", "content": "hi"}])
    with pytest.raises(InvalidRequest, match="reserve_tokens"):
        run(conversation(1), reserve_tokens=40_000)
    with pytest.raises(InvalidRequest) as err:
        run([{"role": "system", "content": "word " * 40_000}, {"role": "user", "content": "hi"}])
    assert err.value.code == "context_too_small"


# ---------------------------------------------------------------------------- compaction
def test_compact_continue_keeps_recent_rounds_after_the_summary():
    messages = conversation(10)
    store = MemoryStore()
    result = compact_conversation(CompactionRequest("gpt-4o", messages, summary_tokens=300), store, summarise, COUNTER)
    # the reference is joined in front of the first kept question (no two user messages in a row)
    assert result.messages[0] == SYSTEM and result.messages[2:] == messages[-4 * KEEP_ROUNDS + 1:]
    head = result.messages[1]["content"]
    assert head.endswith("\n\n" + messages[-4 * KEEP_ROUNDS]["content"])
    assert head.startswith("[DocAnchor: turns 2–25 offloaded]") and result.summary in head
    assert COUNTER.count(result.summary) <= 300 and result.summary_source == "extractive"
    assert list(store.docs) == [result.references[0]["doc_id"]] and "## Turns 2–5\n\n**Turn 2 · user:**\nQuestion 0" in store.docs[result.references[0]["doc_id"]][2]
    assert result.context_tokens_used < result.tokens_before


def test_compact_handoff_starts_a_new_conversation_from_the_summary():
    messages = conversation(10)
    result = compact_conversation(CompactionRequest("gpt-4o", messages, mode="handoff", summary_tokens=300),
                                  MemoryStore(), summarise, COUNTER)
    assert len(result.messages) == 2 and result.messages[0] == SYSTEM
    assert result.messages[1]["role"] == "user" and result.messages[1]["content"].startswith("[DocAnchor handoff]")
    assert result.conversation_id == conversation_key(messages)
    with pytest.raises(InvalidRequest, match="'mode'"):
        compact_conversation(CompactionRequest("gpt-4o", messages, mode="restart"), MemoryStore(), summarise, COUNTER)


def test_anchor_lines_keep_an_outline_count_only_with_every_entry_before_it():
    """The anchor's "(+N more headings not shown)" would under-count once a reference drops
    entries before it: then it goes too."""
    anchor = ("Document: X\nOutline:\n- one\n- " + "long heading " * 30 + "\n- three\n(+40 more headings not shown)\n"
              'doc_id: doc_1\nMore: searchDocuments(query, doc_id="doc_1")')
    assert "(+40 more" not in anchor_lines(anchor, 60, COUNTER)
    assert anchor_lines(anchor, 400, COUNTER) == anchor
