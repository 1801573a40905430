"""Budget from the conversation: the context-limit table and its lookup, the model-to-encoding
table, message counting with the real tokenizers (Chinese and English), budget derivation, and
the context snapshot."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from docanchor.errors import InvalidRequest
from docanchor.tokens import get_counter
from retrieval import budget as B
from retrieval.budget import (
    FALLBACK_CONTEXT_TOKENS,
    context_limit,
    context_limit_table,
    context_snapshot,
    conversation_counter,
    count_message_tokens,
    default_reserve_tokens,
    derive_budget,
    model_encoding,
    severity,
)
from tests.conftest import CORPUS

TABLE = Path(B.__file__).with_name("context_limits.tsv")
NOVEL = CORPUS / "txt" / "sanguo_yanyi_gbk.txt"


@pytest.fixture(scope="module")
def counter():
    return get_counter()


@pytest.fixture(scope="module")
def o200k():
    return get_counter("o200k_base")


@pytest.fixture(scope="module")
def novel() -> str:
    return NOVEL.read_bytes().decode("gbk")


# --------------------------------------------------------------------------- the table


def _file_rows() -> list[dict[str, str]]:
    lines = [ln for ln in TABLE.read_text(encoding="utf-8").splitlines() if ln and not ln.startswith("#")]
    return list(csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE))


def test_table_has_100_models_each_with_a_positive_integer_and_a_source():
    rows = _file_rows()
    assert len(rows) >= 100
    for row in rows:
        assert set(row) == {"model", "context_tokens", "provider", "source"}, row
        assert row["context_tokens"].isdigit() and int(row["context_tokens"]) > 0, row
        assert row["source"].strip() and row["provider"].strip(), row
    assert len(context_limit_table()) == len(rows)


def test_table_covers_the_major_providers():
    providers = {row.provider for row in context_limit_table()}
    for wanted in ("openai", "anthropic", "google", "meta", "mistral", "qwen", "deepseek", "xai",
                   "cohere", "microsoft", "amazon"):
        assert wanted in providers


def test_every_table_entry_finds_itself_exactly():
    for row in context_limit_table():
        assert context_limit(row.model) == (row.context_tokens, "exact"), row.model


# --------------------------------------------------------------------------- lookup


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4o", (128_000, "exact")),
        ("GPT-4o ", (128_000, "exact")),
        ("openai/gpt-4.1", (1_047_576, "exact")),
        ("anthropic/claude-3-5-haiku-20241022", (200_000, "exact")),
        ("anthropic/claude-3.5-sonnet", (200_000, "exact")),  # OpenRouter spelling
        ("models/gemini-1.5-pro", (2_097_152, "exact")),
        ("meta-llama/Llama-3.1-8B-Instruct", (131_072, "exact")),
        ("amazon.nova-micro-v1:0", (128_000, "exact")),
        ("gpt-4", (8_192, "exact")),
    ],
)
def test_exact_lookup(model, expected):
    assert context_limit(model) == expected


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4o-2099-12-31", (128_000, "prefix:gpt-4o")),
        ("gpt-4o-mini-2024-07-18", (128_000, "prefix:gpt-4o-mini")),
        ("gpt-4-0613", (8_192, "prefix:gpt-4")),
        ("claude-sonnet-4-5@20250929", (200_000, "prefix:claude-sonnet-4-5")),
        ("us.anthropic.claude-3-5-sonnet-20240620-v1:0", (200_000, "prefix:claude-3-5-sonnet-20240620")),
        ("llama3.1:70b", (131_072, "prefix:llama3.1")),
        ("gemini-2.5-pro-preview-06-05", (1_048_576, "prefix:gemini-2.5-pro")),
        ("qwen/Qwen3-32B-AWQ", (32_768, "prefix:Qwen3-32B")),
    ],
)
def test_longest_prefix_lookup(model, expected):
    assert context_limit(model) == expected


def test_prefix_only_matches_at_a_name_boundary():
    # "gpt-4" (8K) must not claim a different model whose name merely starts with it.
    assert context_limit("gpt-4z-experimental") == (FALLBACK_CONTEXT_TOKENS, "fallback")
    assert context_limit("llama3.9") == (FALLBACK_CONTEXT_TOKENS, "fallback")


def test_unknown_model_falls_back_to_128k():
    assert context_limit("acme-brainstorm-7") == (128_000, "fallback")
    assert context_limit("someone/completely-unknown") == (128_000, "fallback")


@pytest.mark.parametrize("bad", ["", "   ", None, 42])
def test_model_must_be_a_non_empty_string(bad):
    with pytest.raises(InvalidRequest, match="'model' must be a non-empty model name"):
        context_limit(bad)


# --------------------------------------------------------------------------- model encodings


@pytest.mark.parametrize(
    "model",
    ["gpt-4o", "GPT-4o-2024-08-06", "openai/gpt-4o-mini", "gpt-4o-mini-2024-07-18", "chatgpt-4o-latest",
     "gpt-4.1", "gpt-4.1-nano-2025-04-14", "gpt-4.5-preview", "gpt-5", "gpt-5-mini", "gpt-5.1",
     "o1", "o1-mini", "o3-mini-2025-01-31", "o4-mini", "gpt-oss-120b", "gpt-oss:20b",
     "openai.gpt-oss-20b-1:0", "ft:gpt-4o-mini-2024-07-18:acme::abc123", "azure/gpt-4o"],
)
def test_openai_models_on_o200k(model):
    assert model_encoding(model) == "o200k_base"


@pytest.mark.parametrize(
    "model",
    ["gpt-4", "gpt-4-0613", "gpt-4-32k", "gpt-4-turbo-2024-04-09", "gpt-3.5-turbo", "gpt-35-turbo",
     "ft:gpt-3.5-turbo-0125:acme::x1", "text-embedding-3-small"],
)
def test_older_openai_models_on_cl100k(model):
    assert model_encoding(model) == "cl100k_base"


@pytest.mark.parametrize(
    "model",
    ["claude-sonnet-4-5", "anthropic/claude-3.5-sonnet", "gemini-2.5-pro", "llama3.1:70b",
     "mistral-large-latest", "qwen/Qwen3-32B", "deepseek-chat", "acme-brainstorm-7",
     "gpt-4z-experimental", "o1x", "text-davinci-003"],
)
def test_other_models_have_no_known_encoding(model):
    assert model_encoding(model) is None


def _named(pair):
    return pair[0].name, pair[1]


def test_conversation_counter_prefers_the_models_encoding(counter, o200k):
    assert _named(conversation_counter("gpt-4o", counter)) == ("o200k_base", "model")
    assert _named(conversation_counter("gpt-4", o200k)) == ("cl100k_base", "model")
    assert conversation_counter("gpt-4o", o200k) == (o200k, "model")  # the configured one, reused
    assert conversation_counter("claude-sonnet-4-5", o200k) == (o200k, "budget")
    with pytest.raises(InvalidRequest, match="'model'"):
        conversation_counter("  ", counter)


# --------------------------------------------------------------------------- counting


MIXED = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "请用中文总结 the quarterly report 的主要结论。"},
]


def test_mixed_chinese_english_messages_counted_with_the_real_tokenizer(counter):
    # cl100k: "system"=1, "You are a helpful assistant."=6, "user"=1, the mixed sentence=15;
    # 3 per message and 3 to prime the reply (OpenAI Cookbook).
    assert [counter.count(t) for t in ("system", MIXED[0]["content"], "user", MIXED[1]["content"])] == [1, 6, 1, 15]
    assert count_message_tokens(MIXED, counter) == 3 + (3 + 1 + 6) + (3 + 1 + 15)


def test_text_parts_count_and_non_text_parts_are_ignored(counter):
    as_string = [{"role": "user", "content": "请总结这份报告 and list the risks."}]
    as_parts = [{"role": "user", "content": [
        {"type": "text", "text": "请总结这份报告 and list the risks."},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]}]
    assert count_message_tokens(as_parts, counter) == count_message_tokens(as_string, counter)


def test_name_adds_one_token_plus_its_text(counter):
    plain = [{"role": "user", "content": "hi"}]
    named = [{"role": "user", "content": "hi", "name": "alice"}]
    assert count_message_tokens(named, counter) - count_message_tokens(plain, counter) == 1 + counter.count("alice")


def test_a_pasted_chinese_chapter_is_counted_in_full(counter, novel):
    chapter = novel[:5000]
    messages = [{"role": "user", "content": "Summarise this chapter in English:\n" + chapter}]
    n = count_message_tokens(messages, counter)
    assert n == 3 + 3 + 1 + counter.count("Summarise this chapter in English:\n" + chapter)
    assert n > 5000  # cl100k spends more than one token per classical Chinese character here


def test_null_content_and_empty_conversation(counter):
    assert count_message_tokens([], counter) == 3
    assert count_message_tokens([{"role": "assistant", "content": None}], counter) == 3 + 3 + counter.count("assistant")


@pytest.mark.parametrize(
    ("messages", "fragment"),
    [
        ("hello", "'messages' must be a list"),
        ({"role": "user"}, "'messages' must be a list"),
        (["hello"], r"messages\[0\] must be an object"),
        ([{"content": "x"}], r"messages\[0\]\.role must be a non-empty string"),
        ([{"role": "user", "content": 5}], r"messages\[0\]\.content must be a string, a list of parts or null"),
        ([{"role": "user", "content": ["x"]}], r"messages\[0\]\.content\[0\] must be an object with a 'type'"),
        ([{"role": "user", "content": [{"type": "text", "text": 3}]}], r"content\[0\]\.text must be a string"),
        ([{"role": "user", "content": "x", "name": 7}], r"messages\[0\]\.name must be a string"),
    ],
)
def test_malformed_messages_are_rejected_with_a_clear_sentence(counter, messages, fragment):
    with pytest.raises(InvalidRequest, match=fragment) as info:
        count_message_tokens(messages, counter)
    assert info.value.http_status == 400


# --------------------------------------------------------------------------- derive_budget


def test_default_reserve_rule():
    assert default_reserve_tokens(8_192) == 1_024
    assert default_reserve_tokens(128_000) == 12_800
    assert default_reserve_tokens(200_000) == 16_384
    assert default_reserve_tokens(1_048_576) == 16_384


def test_budget_from_used_tokens(counter):
    d = derive_budget(model="gpt-4o", used_tokens=50_000, counter=counter)
    assert d.budget_tokens == 128_000 - 50_000 - 12_800
    assert (d.context_limit, d.limit_source, d.used_source, d.reserve_source) == (128_000, "exact", "given", "default")
    assert d.message is None
    body = d.to_dict()
    assert body["budget_tokens"] == d.budget_tokens and body["reserve_tokens"] == 12_800


def test_budget_from_messages_uses_the_estimate(counter):
    d = derive_budget(model="claude-sonnet-4-5", messages=MIXED, reserve_tokens=4_000, counter=counter)
    assert d.used_tokens == count_message_tokens(MIXED, counter) and d.used_source == "estimated"
    assert (d.tokenizer, d.tokenizer_source) == ("cl100k_base", "budget")
    assert d.budget_tokens == 200_000 - d.used_tokens - 4_000
    assert d.reserve_source == "given"


def test_budget_for_gpt4o_counts_messages_with_o200k(counter, o200k):
    d = derive_budget(model="gpt-4o", messages=MIXED, reserve_tokens=0, counter=counter)
    # o200k: the mixed sentence is 12 tokens (15 in cl100k); the other texts are the same.
    assert d.used_tokens == count_message_tokens(MIXED, o200k) == 3 + (3 + 1 + 6) + (3 + 1 + 12)
    assert (d.tokenizer, d.tokenizer_source) == ("o200k_base", "model")
    assert d.budget_tokens == 128_000 - d.used_tokens
    given = derive_budget(model="gpt-4o", used_tokens=10, counter=counter)
    assert given.tokenizer is None and given.tokenizer_source is None


def test_budget_for_an_unknown_model_uses_the_fallback(counter):
    d = derive_budget(model="acme-brainstorm-7", used_tokens=0, reserve_tokens=0, counter=counter)
    assert (d.budget_tokens, d.limit_source) == (128_000, "fallback")


def test_a_conversation_that_fills_the_window_leaves_no_room(counter, novel):
    # The whole novel pasted into a GPT-4o chat: far beyond 128K tokens.
    messages = [{"role": "user", "content": novel}, {"role": "user", "content": "第一回讲了什么？ Answer in English."}]
    d = derive_budget(model="gpt-4o", messages=messages, counter=counter)
    assert d.used_tokens > 128_000
    assert d.budget_tokens == 0
    assert "no room" in d.message and "''" not in d.message  # not "'gpt-4o''s"
    assert (f"uses {d.used_tokens:,} of the 128,000 context tokens of 'gpt-4o' and {d.reserve_tokens:,} are kept"
            in d.message)


def test_exactly_full_window_is_no_room(counter):
    d = derive_budget(model="gpt-4", used_tokens=8_192 - 1_024, counter=counter)
    assert d.budget_tokens == 0 and d.message
    d = derive_budget(model="gpt-4", used_tokens=8_192 - 1_025, counter=counter)
    assert d.budget_tokens == 1 and d.message is None


def test_max_budget_caps_the_result(counter):
    d = derive_budget(model="gemini-2.5-pro", used_tokens=1_000, max_budget_tokens=2_000, counter=counter)
    assert d.budget_tokens == 2_000 and "capped" in d.message and d.max_budget_tokens == 2_000
    assert f"derived budget of {d.context_limit - 1_000 - d.reserve_tokens:,} tokens" in d.message


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({}, "Give either 'used_tokens'"),
        ({"used_tokens": 5, "messages": MIXED}, "Give either 'used_tokens'"),
        ({"used_tokens": -1}, "'used_tokens' must be 0 or more tokens; got -1"),
        ({"used_tokens": 1.5}, "'used_tokens' must be a whole number of tokens"),
        ({"used_tokens": "100"}, "'used_tokens' must be a whole number of tokens"),
        ({"used_tokens": True}, "'used_tokens' must be a whole number of tokens"),
        ({"used_tokens": 1, "reserve_tokens": -5}, "'reserve_tokens' must be 0 or more"),
        ({"used_tokens": 1, "max_budget_tokens": -5}, "'max_budget_tokens' must be 0 or more"),
        ({"messages": "hello"}, "'messages' must be a list"),
    ],
)
def test_derive_budget_validation(counter, kwargs, fragment):
    with pytest.raises(InvalidRequest, match=fragment):
        derive_budget(model="gpt-4o", counter=counter, **kwargs)


def test_derive_budget_rejects_a_bad_model(counter):
    with pytest.raises(InvalidRequest, match="'model'"):
        derive_budget(model="", used_tokens=1, counter=counter)


# --------------------------------------------------------------------------- snapshot


@pytest.mark.parametrize(
    ("percent", "band"),
    [
        (0, "normal"), (69.9, "normal"), (70, "info"), (84.9, "info"), (85, "warning"), (91.9, "warning"),
        (92, "danger"), (96.9, "danger"), (97, "critical"), (100, "critical"), (140, "critical"),
    ],
)
def test_severity_band_edges(counter, percent, band):
    # An unknown model has the 128,000-token fallback window; 0.1 % of it is 128 whole tokens.
    tokens = round(percent * 1_280)
    assert severity(tokens, 128_000) == band
    snap = context_snapshot(messages=MIXED, model="acme-unknown", provider_tokens=tokens, counter=counter)
    assert snap["severity"] == band
    assert snap["recommended_action"] == B.RECOMMENDED_ACTIONS[band]
    assert snap["usage_ratio"] == round(tokens / 128_000, 4)


def test_just_below_a_band_edge_stays_in_the_lower_band():
    assert severity(84_999, 100_000) == "info"
    assert severity(85_000, 100_000) == "warning"


def test_provider_count_wins_over_the_estimate(counter, o200k):
    snap = context_snapshot(messages=MIXED, model="gpt-4o", provider_tokens=120_000, counter=counter)
    assert snap["estimated_tokens"] == count_message_tokens(MIXED, o200k)
    assert snap["input_tokens"] == 120_000 and snap["tokens_source"] == "provider"
    assert snap["usage_ratio"] == 0.9375 and snap["severity"] == "danger"
    on_claude = context_snapshot(messages=MIXED, model="claude-sonnet-4-5", provider_tokens=190_000, counter=counter)
    assert on_claude["input_tokens"] == 190_000 and on_claude["tokens_source"] == "provider"
    assert on_claude["estimated_tokens"] == count_message_tokens(MIXED, counter)


def test_without_a_provider_count_the_estimate_is_used(counter):
    snap = context_snapshot(messages=MIXED, model="openai/gpt-4o-mini", counter=counter)
    assert snap["provider_tokens"] is None and snap["tokens_source"] == "estimated"
    assert snap["input_tokens"] == snap["estimated_tokens"] == 29
    assert (snap["context_limit"], snap["limit_source"], snap["tokenizer"]) == (128_000, "exact", "o200k_base")
    assert snap["severity"] == "normal"


def test_gpt4o_snapshot_counts_with_o200k(counter, o200k):
    # The mixed Chinese-English sentence is 15 tokens in cl100k_base and 12 in o200k_base.
    text = MIXED[1]["content"]
    assert (counter.count(text), o200k.count(text)) == (15, 12)
    messages = [{"role": "user", "content": text}]
    snap = context_snapshot(messages=messages, model="gpt-4o", counter=counter)
    assert snap["estimated_tokens"] == 12 + 3 + 1 + 3  # text + per message + "user" + reply primer
    assert (snap["tokenizer"], snap["tokenizer_source"]) == ("o200k_base", "model")


def test_gpt4_snapshot_counts_with_cl100k_even_when_budgets_use_o200k(o200k):
    snap = context_snapshot(messages=MIXED, model="gpt-4-0613", counter=o200k)
    assert snap["estimated_tokens"] == 3 + (3 + 1 + 6) + (3 + 1 + 15)
    assert (snap["tokenizer"], snap["tokenizer_source"]) == ("cl100k_base", "model")


@pytest.mark.parametrize("configured", ["cl100k_base", "o200k_base"])
def test_claude_snapshot_keeps_the_configured_counter(configured):
    budget_counter = get_counter(configured)
    snap = context_snapshot(messages=MIXED, model="anthropic/claude-sonnet-4-5", counter=budget_counter)
    assert snap["estimated_tokens"] == count_message_tokens(MIXED, budget_counter)
    assert snap["estimated_tokens"] == (32 if configured == "cl100k_base" else 29)
    assert (snap["tokenizer"], snap["tokenizer_source"]) == (configured, "budget")
    assert snap["tokens_source"] == "estimated"


def test_unknown_model_snapshot_falls_back_to_the_configured_counter(counter):
    snap = context_snapshot(messages=MIXED, model="acme-brainstorm-7", counter=counter)
    assert snap["estimated_tokens"] == 32
    assert (snap["tokenizer"], snap["tokenizer_source"]) == ("cl100k_base", "budget")
    assert (snap["context_limit"], snap["limit_source"]) == (128_000, "fallback")


def test_snapshot_of_a_pasted_novel_recommends_a_new_conversation(counter, novel):
    messages = [{"role": "user", "content": novel[:150_000]}, {"role": "user", "content": "Who swore the oath in the peach garden?"}]
    snap = context_snapshot(messages=messages, model="gpt-4o", counter=counter)
    assert snap["estimated_tokens"] > 0.97 * 128_000
    assert snap["severity"] == "critical"
    assert "new conversation" in snap["recommended_action"]
    on_gemini = context_snapshot(messages=messages, model="gemini-2.5-pro", counter=counter)
    assert on_gemini["severity"] == "normal"


def test_actions_point_to_docanchor_and_summaries():
    assert "DocAnchor" in B.RECOMMENDED_ACTIONS["info"]
    assert "DocAnchor" in B.RECOMMENDED_ACTIONS["warning"] and "summarise" in B.RECOMMENDED_ACTIONS["warning"]
    assert set(B.RECOMMENDED_ACTIONS) == {band for _, band in B.SEVERITY_BANDS}


@pytest.mark.parametrize("bad", [-1, 2.5, "10", True])
def test_snapshot_rejects_a_bad_provider_count(counter, bad):
    with pytest.raises(InvalidRequest, match="'provider_tokens'"):
        context_snapshot(messages=MIXED, model="gpt-4o", provider_tokens=bad, counter=counter)


def test_a_derived_budget_for_an_unknown_model_says_the_window_was_assumed(counter):
    """An unknown model name must not pass silently as a 128,000-token window."""
    d = derive_budget(model="acme-brainstorm-7", used_tokens=1_000, counter=counter)
    assert d.limit_source == "fallback" and d.context_limit == FALLBACK_CONTEXT_TOKENS
    assert d.message and "'acme-brainstorm-7' is not in DocAnchor's context-limit table" in d.message
    assert "128,000" in d.message
    known = derive_budget(model="gpt-4o-mini", used_tokens=1_000, counter=counter)
    assert known.limit_source != "fallback" and known.message is None


def test_tool_calls_and_their_ids_are_counted(counter):
    """An agent's tool call with 5,000 words of arguments used to count as an empty message."""
    arguments = '{"path": "notes.txt", "text": "' + "word " * 5_000 + '"}'
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "write_file", "arguments": arguments}}]}
    result = {"role": "tool", "tool_call_id": "call_1", "content": "ok"}
    bare = count_message_tokens([{"role": "assistant", "content": None}, {"role": "tool", "content": "ok"}], counter)
    counted = count_message_tokens([call, result], counter)
    expected = counter.count("write_file") + counter.count(arguments) + counter.count("call_1")
    assert counted == bare + expected and counted > 5_000
