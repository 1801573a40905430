"""The explain trace: byte-identical for the same index and request, every candidate's fate from
the allowed set, text/citation token accounting, and a budget that leaves no room.

Real Chroma on disk, the fake embedder, and a real Markdown file from the shared corpus ingested
through the real pipeline (so chunk ids, offsets and the lexical index are the production ones).
"""

from __future__ import annotations

import json
import re

import pytest

from docanchor.context import Context
from plugin.api import DocAnchor
from retrieval.search import retrieve
from tests.conftest import CORPUS

NS = "explain"
FATES = re.compile(
    r"(kept in section \d+|merged into section \d+|trimmed into section \d+|dropped for budget"
    r"|dropped as duplicate|below relevance cut-off|below evidence floor|beyond a section break|not visible \(no stored document\)"
    r"|left out as a word's tail)"
)
QUERY = "What happens to memory when a variable goes out of scope?"


@pytest.fixture
def da(settings, fake_embedder) -> DocAnchor:
    inst = DocAnchor(settings.with_(namespace=NS), embedder=fake_embedder)
    inst.ingest_file(CORPUS / "md" / "ch04-01-what-is-ownership.md")
    inst.ingest_text("# Budgets\n\nEvery retrieval takes a budget in tokens; memory is freed at scope end.",
                     title="budgets.md")
    return inst


def _bytes(result) -> bytes:
    return json.dumps(result.to_dict(), ensure_ascii=False, sort_keys=True).encode("utf-8")


def test_same_index_and_request_give_byte_identical_responses(da: DocAnchor, settings, fake_embedder):
    first = _bytes(da.retrieve(QUERY, 700, explain=True))
    assert first == _bytes(da.retrieve(QUERY, 700, explain=True))
    # a fresh instance on the same data dir (a restarted server) answers the same bytes
    again = DocAnchor(settings.with_(namespace=NS), embedder=fake_embedder)
    assert first == _bytes(again.retrieve(QUERY, 700, explain=True))


def test_every_candidate_has_an_allowed_fate_and_its_scores(da: DocAnchor):
    r = da.retrieve(QUERY, 400, explain=True)
    cands = r.trace["candidates"]
    assert cands and r.sections
    for c in cands:
        assert FATES.fullmatch(c["fate"]), c["fate"]
        assert {"chunk_id", "doc_id", "dense_rank", "dense_score", "bm25_rank", "bm25_score", "fused_score",
                "context_score", "same_text_as", "score", "tokens"} <= set(c)
        direct = c["dense_rank"] is not None or c["bm25_rank"] is not None
        # a candidate is a match, a match's neighbour, or a chunk a run-on sentence goes on into
        assert direct or c["context_score"] > 0 or c["neighbour_of"]
        assert direct or c["fused_score"] == 0  # only a match has a fused score of its own
        params = r.trace["parameters"]
        own = c["fused_score"] + params["context_weight"] * c["context_score"]
        scale = _novelty_factor(c, params)  # retrieval/stages/novelty.py
        if c["same_text_as"] is not None:  # a first copy takes its best copy's score
            copy = next(p for p in cands if p["chunk_id"] == c["same_text_as"])
            assert c["score"] == pytest.approx(copy["score"] / _novelty_factor(copy, params) * scale, abs=1e-7)
            assert c["fused_score"] == copy["fused_score"]
        elif c["neighbour_of"] is None:
            assert c["score"] == pytest.approx(own * scale, abs=1e-7)
        else:  # lifted by the match right next to it, or carried on by a run-on sentence
            parent = next(p for p in cands if p["chunk_id"] == c["neighbour_of"])
            assert abs(int(parent["chunk_id"][-6:]) - int(c["chunk_id"][-6:])) == 1
            parent_own = parent["fused_score"] + params["context_weight"] * parent["context_score"]
            assert (c["score"] == pytest.approx(params["neighbour_weight"] * parent_own * scale, abs=1e-7)
                    or c["score"] == pytest.approx(params["run_on_decay"] * parent["score"], abs=1e-7))
            assert c["score"] > own * scale
    scores = [c["score"] for c in cands]
    assert scores == sorted(scores, reverse=True)  # listed best first
    # the sections named by the fates are exactly the returned ones, each led by one candidate
    named = {int(m) for c in cands for m in re.findall(r"section (\d+)", c["fate"])}
    assert named == set(range(1, len(r.sections) + 1))
    for n, s in enumerate(r.sections, 1):
        leads = [c for c in cands if c["fate"] in (f"kept in section {n}", f"trimmed into section {n}")]
        assert len(leads) == 1 and leads[0]["chunk_id"] in s.chunk_ids
    params = r.trace["parameters"]
    before = {c["chunk_id"]: c["score"] / _novelty_factor(c, params) for c in cands}  # the cut-off runs first
    cut = params["relevance_cutoff"] * max(before.values())
    assert all(before[c["chunk_id"]] < cut + 1e-7 for c in cands if c["fate"] == "below relevance cut-off")
    assert all(before[c["chunk_id"]] >= cut - 1e-7 for c in cands if c["fate"] != "below relevance cut-off")


def _novelty_factor(c: dict, params: dict) -> float:
    """What the novelty stage multiplied a candidate's score by (1 when it did not rank it)."""
    if c["novelty"] is None:
        return 1.0
    return 1 - params["novelty_weight"] + params["novelty_weight"] * c["novelty"]


def test_tokens_by_text_and_citation_lines_add_up(da: DocAnchor):
    r = da.retrieve(QUERY, 1500, explain=True)
    t = r.trace["tokens"]
    count = da.ctx.counter.count
    assert t["total"] == r.context_tokens_used == count(r.context) <= 1500
    assert t["text"] == sum(count(s.text) for s in r.sections)
    assert t["citations"] == sum(count(s.citation) for s in r.sections)
    assert t["text"] + t["citations"] + t["separators"] == t["total"]
    # separators are the newline after each citation and the blank line between sections
    assert abs(t["separators"]) <= 2 * len(r.sections)
    assert r.context == "\n\n".join(f"{s.citation}\n{s.head}{s.text}{s.tail}" for s in r.sections)  # "…" or ""


def test_a_budget_that_leaves_no_room(da: DocAnchor):
    r = da.retrieve(QUERY, 8, explain=True)
    assert r.sections == [] and r.context == "" and r.context_tokens_used == 0
    assert "too small" in r.message and "budget_tokens" in r.message
    t = r.trace
    assert t["budget_tokens"] == 8 and t["tokens"] == {"text": 0, "citations": 0, "separators": 0, "total": 0}
    fates = {c["fate"] for c in t["candidates"]}
    assert fates and fates <= {"dropped for budget", "below relevance cut-off", "dropped as duplicate",
                               "beyond a section break"}
    assert "dropped for budget" in fates


def test_trace_is_absent_unless_asked(da: DocAnchor):
    assert da.retrieve(QUERY, 300).trace is None


def test_duplicate_text_fate_is_named(ctx: Context):
    from tests.test_retrieval import add_document

    text = "# Same\n\nThe identical paragraph about garbage collection and memory.\n\nAnother line here."
    add_document(ctx, "doc_a", "Copy A", text, paras_per_chunk=1)
    add_document(ctx, "doc_b", "Copy B", text, paras_per_chunk=1)
    r = retrieve(ctx, "test", "garbage collection memory", 1000, explain=True)
    fates = [c["fate"] for c in r.trace["candidates"]]
    assert "dropped as duplicate" in fates
    assert all(FATES.fullmatch(f) for f in fates)


def test_a_neighbour_without_a_match_of_its_own_brings_only_the_boundary_sentence(da: DocAnchor):
    """A chunk that is in the context only because the match next to it runs into it gives the
    sentence that completes the match (up to its first sentence end after the match, or from its
    last one before it), not its whole text. A colon does not end a sentence, nor does a line
    break inside one (a hard wrap, "might\ndo": docanchor.text.ends_sentence judges line ends)."""
    from docanchor.text import ends_sentence

    stop = re.compile(r"(?<=[A-Za-z])[.!?][\"')\]]*(?=\s)|\n")  # the chapter is English prose

    r = da.retrieve(QUERY, 1500, explain=True)
    edges = [c for c in r.trace["candidates"]
             if c["neighbour_of"] and c["fused_score"] == 0 and c["fate"].startswith("merged")]
    assert edges  # the ownership chapter gives several for this query
    chunks = da.ctx.lexical.get_chunks(NS, [c["chunk_id"] for c in edges])
    checked = 0
    for c in edges:
        chunk = chunks[c["chunk_id"]]
        section = next(s for s in r.sections if c["chunk_id"] in s.chunk_ids)
        ends = [m for m in stop.finditer(chunk.text) if m.end() < len(chunk.text.rstrip())
                and (m.group() != "\n" or ends_sentence(chunk.text, m.start()))]
        if not ends:
            continue
        after = int(c["neighbour_of"][-6:]) < chunk.ordinal
        if after and section.chunk_ids[-1] == c["chunk_id"]:  # it ends the section
            first = chunk.text[:ends[0].end()].rstrip()
            if not re.search(r"\w", first):  # a lone code fence or "|" is never all it brings
                first = chunk.text.rstrip()
            assert section.end_char == chunk.start_char + len(first)
            checked += 1
        elif not after and section.chunk_ids[0] == c["chunk_id"]:  # it starts the section
            last = len(chunk.text) - len(chunk.text[ends[-1].end():].lstrip())
            if not re.search(r"\w", chunk.text[last:]):
                last = 0
            assert section.start_char == chunk.start_char + last
            checked += 1
    assert checked


def test_the_readme_trace_is_what_the_real_model_gives(settings):
    """README.md's "One retrieval, explained" shows a real trace; it must stay true: every field
    of every candidate it shows (ranks, scores, coverage, tokens, fate ...), its token totals and
    its summary line, for docs/guide.md and the real model in float32 (as the README says:
    bfloat16, the default where the CPU has it, moves scores in the fourth decimal). The prose
    under it quotes these figures: re-read it when they change."""
    from pathlib import Path

    from docanchor.embedder import get_embedder

    real_embedder = get_embedder(precision="fp32")

    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text(encoding="utf-8")
    block = readme[readme.index("## One retrieval, explained"):]
    block = block[:block.index("\n```\n", block.index("explain:"))]  # up to the end of the trace
    shown = re.findall(r'"chunk_id": "([^"]+)".*?"score": ([0-9.]+).*?"fate": "([^"]+)"', block, re.S)
    assert len(shown) >= 5
    total = int(re.search(r'"total": (\d+)', block).group(1))

    inst = DocAnchor(settings, embedder=real_embedder)
    doc = inst.ingest_file(root / "docs" / "guide.md").record
    r = inst.retrieve("How does DocAnchor keep answers under the token budget?", 300, explain=True)
    got = {c["chunk_id"]: c for c in r.trace["candidates"]}
    assert all(cid.startswith(doc.doc_id) for cid, _, _ in shown)
    for cid, score, fate in shown:
        assert got[cid]["fate"] == fate
        assert got[cid]["score"] == pytest.approx(float(score), abs=1e-6)  # float sums differ in the 8th place by batch
    assert r.trace["tokens"]["total"] == r.context_tokens_used == total
    for shown_candidate in re.findall(r'\{"chunk_id".*?\}(?=,?\n)', block, re.S):
        fields = re.findall(r'"(\w+)": ("(?:[^"\\]|\\.)*"|-?[0-9.]+|null|true|false)', shown_candidate)
        live = got[json.loads(fields[0][1])]
        for key, value in fields:
            assert live[key] == (pytest.approx(json.loads(value), abs=1e-6) if "." in value and value[0] != '"'
                                 else json.loads(value)), (live["chunk_id"], key)
    assert json.loads(re.search(r'"tokens": (\{.*?\})', block).group(1)) == r.trace["tokens"]
    assert f'"no_strong_match": {json.dumps(r.trace["no_strong_match"])}' in block
    summary = re.search(r"--explain\n(.*?)\n\n(\d+) sections?, (\d+) of 300 tokens\.\n", block, re.S)
    assert summary.group(1) == r.context  # the CLI prints the context as returned, then its summary line
    assert (int(summary.group(2)), int(summary.group(3))) == (len(r.sections), total)
