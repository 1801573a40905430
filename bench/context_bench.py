"""Long agent conversations replayed turn by turn: DocAnchor's context assembly against "flat".

Data, built deterministically (no randomness) from ../shared/bench/chunking_eval (Chroma's chunking
evaluation: corpora and questions with reference excerpts, see its SOURCE.md) and ../shared/corpus:
one conversation per corpus (state_of_the_union, wikitexts, finance), each of :data:`ROUNDS`
rounds. A round is a user question from ``questions_df.csv`` (in file order), an assistant
``read_file`` call, its tool result -- a window of the corpus around the question's reference
(:data:`WINDOW_CHARS`, cycling), or, every :data:`WHOLE_EVERY`-th round, a whole document of
../shared/corpus or the corpus itself -- and an assistant answer that states the reference excerpt
(the fact). The conversation starts with a system prompt and a user message stating the task.

Replay: before every assistant message (the points where an agent calls its model) the prompt is
assembled from everything before it, for a 32k-token model (``gpt-4-32k``, 32,768) and a 128k one
(``gpt-4o``, 128,000), each replay in its own conversation namespace, through
:meth:`plugin.api.DocAnchor.assemble_context` with the real embedding model (document vectors
cached under bench/out/, as bench/budget_recall.py does). "Flat" sends the same messages, dropping
the oldest (a call with its results together, never a system message) while they exceed the
window less the same reserve; it overflows when even the last message alone does not fit.

Printed per call: turn, messages, tokens sent (DocAnchor / flat), tier, references, whether flat
overflowed or lost the first user message, and prefix stability: the share of the previous
prompt's bytes (its JSON, message by message) that the new prompt starts with -- what a
provider's prompt cache can reuse. A call is a compaction event when it replaced content of the
previous prompt (a tool result compacted or rounds offloaded that the previous call had verbatim).
At the end of each replay, for every fact whose answer turn or source tool result was offloaded,
the question is asked with ``retrieve`` in the conversation's namespace at 1,000 tokens; the fact
counts as retrievable when 90 % of its words are in the returned context. One that is not, but
whose answer turn (the message stating it) is still verbatim in the final prompt -- only its
source tool result was compacted -- is not lost: ``facts`` prints ``retrieved+still in the
prompt/offloaded``, ``retr.`` the share retrieved alone, ``kept`` the share retained either way
(the target's figure).

Targets (issue 12): tokens sent ≥ 30 % below flat in total per replay; no prompt over the limit;
100 % tool-call pairing; ≥ 95 % of offloaded facts retained (retrievable within 1,000 tokens, or
still stated in the prompt); median prefix stability ≥ 90 % on calls without a compaction event.

Run: ``python bench/context_bench.py [--rounds 64] [--conversations sotu,wiki,finance]
[--models gpt-4-32k,gpt-4o] [--quiet] [--show-misses] [--fake-embedder]``; one conversation x
one model (``--conversations wiki --models gpt-4o --show-misses``) is the quick loop for fact
retention: each missed fact's question and what ``retrieve`` returned for it.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DATA = (REPO / ".." / "shared" / "bench" / "chunking_eval").resolve()
CORPUS = (REPO / ".." / "shared" / "corpus").resolve()
OUT = REPO / "bench" / "out"

from bench.budget_recall import CachedEmbedder  # noqa: E402  (after the sys.path insert)
from docanchor.settings import Settings  # noqa: E402
from plugin.api import DocAnchor  # noqa: E402
from retrieval.assembly.turns import message_tokens, unpaired  # noqa: E402
from retrieval.budget import TOKENS_REPLY_PRIMER, context_limit, conversation_counter  # noqa: E402

ROUNDS = 64
CONVERSATIONS = {"sotu": "state_of_the_union", "wiki": "wikitexts", "finance": "finance"}
MODELS = ("gpt-4-32k", "gpt-4o")
WINDOW_CHARS = (6_000, 14_000, 3_000, 24_000, 9_000, 48_000, 4_000, 18_000)
"""Tool-result windows around a question's reference, in characters (about 1,000 to 11,000 tokens)."""
WHOLE_EVERY = 6
WHOLE_DOCUMENTS = ("txt/norwich-city.txt", "md/ch04-01-what-is-ownership.md", "CORPUS")
"""Whole documents a ``read_file`` returns every :data:`WHOLE_EVERY`-th round (``CORPUS``: the
conversation's own corpus, its first 120,000 characters)."""
RETRIEVAL_TOKENS = 1_000
FACT_WORDS_SHARE = 0.9
SYSTEM = ("You are a research agent. Use read_file to read sources, answer each question from what you read, "
          "and say which turn each fact came from.")
_WORD = re.compile(r"\w+")


@dataclass
class Fact:
    question: str
    text: str
    answer_turn: int
    source_turn: int
    answer: dict[str, Any]


@dataclass
class Replay:
    name: str
    model: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    facts_offloaded: int = 0
    facts_found: int = 0
    facts_in_prompt: int = 0
    misses: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------- the conversations
def questions(corpus: str) -> list[tuple[str, str, int]]:
    """``(question, first reference excerpt, its start)`` of ``corpus``, in file order."""
    with open(DATA / "questions_df.csv", encoding="utf-8", newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["corpus_id"] == corpus]
    out = []
    for r in rows:
        ref = json.loads(r["references"])[0]
        out.append((r["question"], ref["content"], int(ref["start_index"])))
    return out


def tool_result(r: int, text: str, start: int) -> str:
    if r % WHOLE_EVERY == WHOLE_EVERY - 1:
        name = WHOLE_DOCUMENTS[(r // WHOLE_EVERY) % len(WHOLE_DOCUMENTS)]
        return text[:120_000] if name == "CORPUS" else (CORPUS / name).read_text(encoding="utf-8")
    width = WINDOW_CHARS[r % len(WINDOW_CHARS)]
    begin = max(0, min(start - width // 3, len(text) - width))
    return text[begin:begin + width]


def build(corpus: str, rounds: int) -> tuple[list[dict[str, Any]], list[Fact]]:
    """The conversation and its facts (see the module docstring)."""
    text = (DATA / "corpora" / f"{corpus}.md").read_text(encoding="utf-8")
    asked = questions(corpus)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"I am studying the {corpus.replace('_', ' ')} material. Read the sources with "
                                    "read_file and answer my questions one by one, citing turns."},
        {"role": "assistant", "content": "Understood. Ask your first question."},
    ]
    facts = []
    for r in range(rounds):
        question, excerpt, start = asked[r % len(asked)]
        call = f"call_{r:03d}"
        messages += [
            {"role": "user", "content": question},
            {"role": "assistant", "content": None, "tool_calls": [{"id": call, "type": "function", "function": {
                "name": "read_file", "arguments": json.dumps({"path": f"{corpus}.md", "near": start})}}]},
            {"role": "tool", "tool_call_id": call, "content": tool_result(r, text, start)},
            {"role": "assistant", "content": f"From the read_file result of turn {len(messages) + 3}: {excerpt}"},
        ]
        facts.append(Fact(question, excerpt, len(messages), len(messages) - 1, messages[-1]))
    return messages, facts


# ---------------------------------------------------------------------------- flat
def flat(messages: list[dict[str, Any]], sizes: list[int], budget: int) -> tuple[list[dict[str, Any]], int, bool]:
    """Everything, oldest messages dropped (a call with its results, never a system message) while
    over ``budget``: the prompt, its tokens, and ``True`` when even that does not fit. ``sizes``
    are the messages' tokens alone (:func:`retrieval.assembly.turns.message_tokens`), so the
    total is :func:`count_message_tokens` of the prompt."""
    kept = [i for i, m in enumerate(messages) if m["role"] == "system"]
    rest = [i for i, m in enumerate(messages) if m["role"] != "system"]
    total = TOKENS_REPLY_PRIMER + sum(sizes[i] for i in range(len(messages)))
    start = 0
    while start < len(rest) and total > budget:
        drop = start + 1
        while drop < len(rest) and messages[rest[drop]]["role"] == "tool":
            drop += 1
        if drop >= len(rest):
            break
        total -= sum(sizes[i] for i in rest[start:drop])
        start = drop
    return [messages[i] for i in kept + rest[start:]], total, total > budget


def prefix_share(previous: list[str], current: list[str]) -> float:
    """Bytes of ``previous`` (its messages' JSON, concatenated) that ``current`` starts with, as a share."""
    same = 0
    for a, b in zip(previous, current):
        if a != b:
            same += len(_common(a, b))
            break
        same += len(a)
    total = sum(len(p) for p in previous)
    return same / total if total else 1.0


def _common(a: str, b: str) -> str:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return a[:n]


# ---------------------------------------------------------------------------- replay
def replay(da: DocAnchor, name: str, model: str, messages: list[dict[str, Any]], facts: list[Fact],
           quiet: bool) -> Replay:
    out = Replay(name, model)
    counter, _ = conversation_counter(model, da.ctx.counter)
    limit, _ = context_limit(model)
    namespace = f"{name}-{model}"
    first_user = json.dumps(messages[1], ensure_ascii=False)
    sizes = [message_tokens(m, counter) for m in messages]
    previous: list[str] | None = None
    previous_replaced: set[str] = set()
    for end, message in enumerate(messages):
        if message["role"] != "assistant" or end < 3:
            continue
        result = da.assemble_context(model, messages[:end], conversation_id=namespace).to_dict()
        budget = result["budget_tokens"]
        prompt = [json.dumps(m, ensure_ascii=False) for m in result["messages"]]
        replaced = {r["doc_id"] for r in result["references"] if r["kind"] != "spill"}
        flat_prompt, flat_tokens, overflow = flat(messages[:end], sizes[:end], budget)
        row = {
            "turn": end + 1, "messages": end, "sent": result["context_tokens_used"],
            "flat": flat_tokens, "limit": limit, "budget": budget,
            "over": result["context_tokens_used"] > budget, "paired": not unpaired(result["messages"]),
            "tier": result["tier"], "references": len(result["references"]), "flat_overflow": overflow,
            "flat_lost_first": first_user not in {json.dumps(m, ensure_ascii=False) for m in flat_prompt},
            "event": bool(replaced - previous_replaced) and previous is not None,
            "stability": prefix_share(previous, prompt) if previous is not None else None,
        }
        out.rows.append(row)
        if not quiet:
            shown = "-" if row["stability"] is None else f"{row['stability']:.3f}"
            print(f"{name:8} {model:10} turn {row['turn']:4} sent {row['sent']:7,} flat {row['flat']:7,} "
                  f"tier {row['tier']:10} refs {row['references']:3} {'event' if row['event'] else '     '} "
                  f"prefix {shown}{' flat-overflow' if overflow else ''}"
                  f"{' flat-lost-first' if row['flat_lost_first'] else ''}", flush=True)
        previous, previous_replaced = prompt, replaced
    final = da.assemble_context(model, messages, conversation_id=namespace).to_dict()
    _facts(da, namespace, final, facts, out)
    return out


def _facts(da: DocAnchor, namespace: str, final: dict[str, Any], facts: list[Fact], out: Replay) -> None:
    """Facts whose answer turn or source tool result left the final prompt, asked for again."""
    offloaded: set[int] = set()
    prompt = {json.dumps(m, sort_keys=True) for m in final["messages"]}
    for ref in final["references"]:
        turns = ref["turns"]
        offloaded |= set(range(turns[0], turns[-1] + 1)) if ref["kind"] == "turns" else set(turns)
    for fact in facts:
        if fact.answer_turn not in offloaded and fact.source_turn not in offloaded:
            continue
        out.facts_offloaded += 1
        result = da.retrieve(fact.question, RETRIEVAL_TOKENS, namespace=namespace)
        words = _WORD.findall(fact.text.lower())
        have = set(_WORD.findall(result.context.lower()))
        if words and sum(w in have for w in words) >= FACT_WORDS_SHARE * len(words):
            out.facts_found += 1
            continue
        kept = json.dumps(fact.answer, sort_keys=True) in prompt
        out.facts_in_prompt += kept
        out.misses.append(_miss(fact, result) + ("\n     (not lost: its answer turn is still in the prompt)" if kept else ""))


def _miss(fact: Fact, result: Any) -> str:
    """A missed fact as ``--show-misses`` prints it: the question, the fact's start, its turns, and
    each returned section's document title, heading and first 100 characters."""
    lines = [f"MISS Q: {fact.question}", f"     fact (turns {fact.source_turn}/{fact.answer_turn}): {fact.text[:100]!r}"]
    for s in result.sections:
        lines.append(f"     got {s.title!r} / {' > '.join(s.heading_path) or '-'} ({s.n_tokens} tokens): "
                     f"{s.text[:100]!r}")
    if not result.sections:
        lines.append("     got nothing")
    return "\n".join(lines)


def summarise(r: Replay) -> dict[str, Any]:
    sent, flat_sent = sum(x["sent"] for x in r.rows), sum(x["flat"] for x in r.rows)
    steady = [x["stability"] for x in r.rows if x["stability"] is not None and not x["event"]]
    return {
        "conversation": r.name, "model": r.model, "calls": len(r.rows), "sent": sent, "flat": flat_sent,
        "saving": 1 - sent / flat_sent if flat_sent else 0.0, "over_limit": sum(x["over"] for x in r.rows),
        "paired": sum(x["paired"] for x in r.rows) / len(r.rows),
        "flat_overflow": sum(x["flat_overflow"] for x in r.rows),
        "flat_lost_first": sum(x["flat_lost_first"] for x in r.rows),
        "events": sum(x["event"] for x in r.rows),
        "stability": statistics.median(steady) if steady else 1.0,
        "facts": f"{r.facts_found}+{r.facts_in_prompt}/{r.facts_offloaded}",
        "retrieved": r.facts_found / r.facts_offloaded if r.facts_offloaded else 1.0,
        "retained": (r.facts_found + r.facts_in_prompt) / r.facts_offloaded if r.facts_offloaded else 1.0,
    }


def verdicts(s: dict[str, Any]) -> list[str]:
    failed = []
    if s["saving"] < 0.30:
        failed.append(f"saving {s['saving']:.1%} < 30 %")
    if s["over_limit"]:
        failed.append(f"{s['over_limit']} prompts over the limit")
    if s["paired"] < 1:
        failed.append(f"pairing {s['paired']:.1%}")
    if s["retained"] < 0.95:
        failed.append(f"facts kept {s['retained']:.1%} < 95 %")
    if s["stability"] < 0.90:
        failed.append(f"prefix stability {s['stability']:.1%} < 90 %")
    return failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--conversations", default=",".join(CONVERSATIONS))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--quiet", action="store_true", help="Only the summary, not a line per call.")
    parser.add_argument("--show-misses", action="store_true",
                        help="Print each missed fact's question and what retrieve returned for it.")
    parser.add_argument("--fake-embedder", action="store_true", help="The tests' hash embedder (fast, not the real model).")
    args = parser.parse_args()
    if args.fake_embedder:
        from tests.fakes import HashEmbedder

        embedder = HashEmbedder()
    else:
        from docanchor.embedder import get_embedder

        embedder = CachedEmbedder(get_embedder(), OUT / "context_embeddings.sqlite")
    summaries, started = [], time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, DocAnchor(Settings(data_dir=Path(tmp) / "data"), embedder=embedder) as da:
        for short in args.conversations.split(","):
            messages, facts = build(CONVERSATIONS[short], args.rounds)
            for model in args.models.split(","):
                done = replay(da, short, model, messages, facts, args.quiet)
                summaries.append(summarise(done))
                if args.show_misses:
                    print(f"\n{short} {model}: {len(done.misses)} missed fact(s)\n" + "\n".join(done.misses), flush=True)
    print(f"\n{args.rounds} rounds per conversation, {'fake' if args.fake_embedder else 'real'} embedder, "
          f"{time.perf_counter() - started:.0f} s")
    print(f"{'conversation':12} {'model':10} {'calls':>5} {'sent':>11} {'flat':>11} {'saving':>7} {'over':>4} "
          f"{'paired':>6} {'flat ovf':>8} {'flat -1st':>9} {'events':>6} {'prefix':>6} {'facts':>9} {'retr.':>6} {'kept':>6}  verdict")
    for s in summaries:
        failed = verdicts(s)
        print(f"{s['conversation']:12} {s['model']:10} {s['calls']:5} {s['sent']:11,} {s['flat']:11,} "
              f"{s['saving']:7.1%} {s['over_limit']:4} {s['paired']:6.0%} {s['flat_overflow']:8} "
              f"{s['flat_lost_first']:9} {s['events']:6} {s['stability']:6.1%} {s['facts']:>9} {s['retrieved']:6.1%} {s['retained']:6.1%}  "
              f"{'; '.join(failed) or 'meets every target'}")
    if any(verdicts(s) for s in summaries):
        sys.exit(1)


if __name__ == "__main__":
    main()
