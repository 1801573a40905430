"""A retrieval budget derived from the caller's model and conversation, and a snapshot of how full
that conversation's context window is.

All quantities are in tokens. Context limits come from ``context_limits.tsv`` next to this module
(one row per model, with the provider page each figure comes from).

Two tokenizers are involved, and only one of them depends on the caller's model:

- The *conversation* (``messages``) is counted in the model's own encoding when the model is an
  OpenAI model whose encoding DocAnchor ships (``o200k_base`` for GPT-4o, GPT-4.1, GPT-5, o1/o3/o4
  …; ``cl100k_base`` for GPT-4 and GPT-3.5; see :data:`MODEL_ENCODING_PREFIXES`). For every other
  model (Anthropic, Google, Meta, Mistral, Qwen, DeepSeek …) it is counted with DocAnchor's
  configured budget tokenizer as a stand-in, so the count is only an estimate — which is why a
  provider-reported count, when the caller has one, wins over it.
- The *retrieval budget* — how many tokens of document text DocAnchor may return — is always
  measured with the configured budget tokenizer (``DOCANCHOR_BUDGET_ENCODING``,
  :class:`docanchor.tokens.TokenCounter`), whatever the model; this module only derives its size.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from docanchor.errors import ConfigError, InvalidRequest
from docanchor.tokens import TokenCounter, get_counter

FALLBACK_CONTEXT_TOKENS = 128_000
"""The limit assumed for a model the table does not know, in tokens (the most common window)."""

# Default room kept for the answer: 10 % of the window, at least 1,024 and at most 16,384 tokens.
# 16,384 is the largest answer most chat models emit by default (e.g. GPT-4o's max output), and
# 1,024 keeps a short answer possible in small 4K-8K windows.
DEFAULT_RESERVE_FRACTION = 0.10
DEFAULT_RESERVE_MIN_TOKENS = 1_024
DEFAULT_RESERVE_MAX_TOKENS = 16_384

# Per-message overhead of OpenAI's chat format, from the OpenAI Cookbook notebook "How to count
# tokens with tiktoken" (num_tokens_from_messages, for gpt-3.5-turbo-0613 / gpt-4 and later).
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
TOKENS_REPLY_PRIMER = 3

# Severity bands of a context snapshot: the lowest usage percentage at which each one starts.
SEVERITY_BANDS: tuple[tuple[int, str], ...] = (
    (97, "critical"),
    (92, "danger"),
    (85, "warning"),
    (70, "info"),
    (0, "normal"),
)
RECOMMENDED_ACTIONS: dict[str, str] = {
    "normal": "There is plenty of room in the context window; no action is needed.",
    "info": "Consider offloading long documents to DocAnchor and keeping only their anchors in the conversation.",
    "warning": (
        "Offload long documents and pasted text to DocAnchor and keep the anchors, "
        "and summarise older turns of the conversation."
    ),
    "danger": (
        "The context window is nearly full: summarise older turns now and retrieve only the "
        "sections you need with a small budget."
    ),
    "critical": (
        "Start a new conversation, carrying over a short summary and the document anchors; "
        "the next request may be truncated or rejected."
    ),
}

_TABLE_RESOURCE = "context_limits.tsv"
_TABLE_COLUMNS = ("model", "context_tokens", "provider", "source")
# Prefix matches must end where a name part ends, so "gpt-4" never claims "gpt-4o-…" and
# "llama3" never claims "llama3.1" ('.' separates versions, which are different models).
_NAME_BOUNDARIES = "-:@_ "
# Amazon Bedrock ids: optional cross-region prefix, then the vendor ("us.anthropic.claude-…").
_BEDROCK_PREFIX = re.compile(
    r"^(?:(?:us|eu|apac|us-gov|global)\.)?"
    r"(?:anthropic|meta|amazon|mistral|cohere|ai21|deepseek|qwen|openai|xai|google)\."
)
_CLAUDE_DOTTED_VERSION = re.compile(r"(?<=\d)\.(?=\d)")

MODEL_ENCODING_PREFIXES: tuple[tuple[str, str], ...] = (
    # o200k_base: GPT-4o and later chat models and the o-series reasoning models.
    ("gpt-4o", "o200k_base"),  # gpt-4o, gpt-4o-mini, gpt-4o-2024-08-06, gpt-4o-audio-preview ...
    ("chatgpt-4o", "o200k_base"),  # chatgpt-4o-latest
    ("gpt-4.1", "o200k_base"),  # gpt-4.1, gpt-4.1-mini, gpt-4.1-nano
    ("gpt-4.5", "o200k_base"),  # gpt-4.5-preview
    ("gpt-5", "o200k_base"),  # gpt-5, gpt-5-mini, gpt-5.1, gpt-5-codex ...
    ("o1", "o200k_base"),  # o1, o1-mini, o1-pro ...
    ("o3", "o200k_base"),  # o3, o3-mini, o3-pro ...
    ("o4", "o200k_base"),  # o4-mini ...
    # tiktoken names gpt-oss's encoding o200k_harmony: o200k_base's ranks and pattern plus the
    # harmony chat-format special tokens, so ordinary text counts the same in both (harmony's
    # per-message overhead may differ from the Cookbook's 3 tokens counted here).
    ("gpt-oss", "o200k_base"),  # gpt-oss-20b, gpt-oss-120b, gpt-oss:20b (Ollama)
    # cl100k_base: GPT-4 (incl. -turbo and -32k), GPT-3.5 and the OpenAI embedding models.
    ("gpt-4", "cl100k_base"),
    ("gpt-3.5", "cl100k_base"),
    ("gpt-35", "cl100k_base"),  # Azure deployment names (gpt-35-turbo)
    ("text-embedding-ada-002", "cl100k_base"),
    ("text-embedding-3", "cl100k_base"),
    ("davinci-002", "cl100k_base"),
    ("babbage-002", "cl100k_base"),
)
"""OpenAI model-name prefixes and the encoding each model's tokenizer uses.

Written for DocAnchor from tiktoken's ``tiktoken/model.py`` (``MODEL_TO_ENCODING`` and
``MODEL_PREFIX_TO_ENCODING``, tiktoken 0.14). Only ``o200k_base`` and ``cl100k_base`` appear
because those are the encodings DocAnchor ships offline (:mod:`docanchor.tokens`); OpenAI's
retired ``p50k``/``r50k`` models are left out and fall back to the budget tokenizer. Matched by
:func:`model_encoding`.
"""
# A prefix in MODEL_ENCODING_PREFIXES claims a name only where a name part ends. Unlike the
# context-limit table, '.' is a boundary here: gpt-5.1 shares gpt-5's tokenizer (longer entries
# such as gpt-4.1 still win over gpt-4).
_ENCODING_BOUNDARIES = _NAME_BOUNDARIES + "."
_ENCODING_OF_PREFIX = dict(MODEL_ENCODING_PREFIXES)
_FINE_TUNED_PREFIX = "ft:"  # OpenAI fine-tunes: "ft:gpt-4o-mini-2024-07-18:org:name:id"


@dataclass(frozen=True)
class ModelLimit:
    """One row of the context-limit table.

    Attributes:
        model: the model's API name as the provider spells it.
        context_tokens: the model's input context window, in tokens.
        provider: who serves or publishes the model (``openai``, ``anthropic`` ...).
        source: where the figure comes from (provider page; "approximate" where uncertain).
    """

    model: str
    context_tokens: int
    provider: str
    source: str


@dataclass(frozen=True)
class BudgetDerivation:
    """How a retrieval budget was derived from a model and a conversation.

    Attributes:
        model: the model name as the caller gave it.
        budget_tokens: tokens DocAnchor may return: ``context_limit − used − reserve``, floored at
            0 and capped at ``max_budget_tokens`` when one is set.
        context_limit: the model's context window, in tokens.
        limit_source: ``"exact"``, ``"prefix:<table entry>"`` or ``"fallback"``.
        used_tokens: tokens the conversation already uses.
        used_source: ``"given"`` (the caller's ``used_tokens``) or ``"estimated"`` (counted from
            ``messages``; see ``tokenizer``).
        reserve_tokens: tokens kept free for the model's answer.
        reserve_source: ``"given"`` or ``"default"`` (see :func:`default_reserve_tokens`).
        max_budget_tokens: the caller's cap, or ``None``.
        message: a sentence for the caller when the budget is 0 or capped, or the model is not
            in the table (``limit_source == "fallback"``), else ``None``.
        tokenizer: the encoding ``messages`` were counted with (``None`` when ``used_tokens`` was
            given). The budget itself is always in the configured budget tokenizer's tokens.
        tokenizer_source: ``"model"`` (the model's own encoding, see :func:`model_encoding`) or
            ``"budget"`` (the configured budget tokenizer standing in for an unknown or
            non-OpenAI model's, so ``used_tokens`` is an estimate); ``None`` with ``used_tokens``.
    """

    model: str
    budget_tokens: int
    context_limit: int
    limit_source: str
    used_tokens: int
    used_source: str
    reserve_tokens: int
    reserve_source: str
    max_budget_tokens: int | None = None
    message: str | None = None
    tokenizer: str | None = None
    tokenizer_source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict with every field (for responses and EXPLAIN traces)."""
        return asdict(self)


# --------------------------------------------------------------------------- context limits


def normalise_model_name(model: str) -> str:
    """The key a model name is looked up by.

    Lower-cased and stripped; a routing prefix up to the last ``/`` is dropped
    (``openai/gpt-4o``, ``meta-llama/Llama-3.1-8B-Instruct``, ``models/gemini-2.5-pro``), as is an
    Amazon Bedrock vendor prefix (``us.anthropic.``, ``amazon.``). Claude names written with dotted
    versions (OpenRouter's ``claude-3.5-sonnet``) are spelt with dashes, as Anthropic does.
    """
    key = model.strip().lower().rsplit("/", 1)[-1]
    key = _BEDROCK_PREFIX.sub("", key)
    if key.startswith("claude-"):
        key = _CLAUDE_DOTTED_VERSION.sub("-", key)
    return key


def context_limit_table() -> tuple[ModelLimit, ...]:
    """Every row of ``context_limits.tsv``, in file order (loaded once, then cached).

    Raises:
        ConfigError: the table file is missing or a row is malformed.
    """
    return _load_table()[0]


def context_limit(model: str) -> tuple[int, str]:
    """The context window of ``model``, in tokens, and how it was found.

    Lookup, on :func:`normalise_model_name` keys: the exact name; else the longest table entry
    that is a prefix of the name and ends at a name-part boundary (``-``, ``:``, ``@``, ``_``),
    e.g. ``gpt-4o-2099-01-01`` → ``gpt-4o``; else :data:`FALLBACK_CONTEXT_TOKENS` (128,000).

    Args:
        model: the model name as a client sends it (``gpt-4o``, ``anthropic/claude-sonnet-4-5``).

    Returns:
        ``(tokens, how)`` where ``how`` is ``"exact"``, ``"prefix:<table entry>"`` or ``"fallback"``.

    Raises:
        InvalidRequest: ``model`` is not a non-empty string.
        ConfigError: the table file is missing or malformed.
    """
    _check_model(model)
    _, by_key = _load_table()
    key = normalise_model_name(model)
    if key in by_key:
        return by_key[key].context_tokens, "exact"
    entry = _longest_prefix(key, by_key, _NAME_BOUNDARIES)
    if entry is not None:
        return by_key[entry].context_tokens, f"prefix:{by_key[entry].model}"
    return FALLBACK_CONTEXT_TOKENS, "fallback"


def _check_model(model: object) -> None:
    """Raise :class:`InvalidRequest` unless ``model`` is a non-empty string."""
    if not isinstance(model, str) or not model.strip():
        raise InvalidRequest(
            f"'model' must be a non-empty model name such as 'gpt-4o'; got {model!r}.",
            field="model",
        )


def _longest_prefix(key: str, prefixes: Iterable[str], boundaries: str) -> str | None:
    """The longest of ``prefixes`` that equals ``key`` or is followed in it by a character of
    ``boundaries`` (the first one listed on a tie), else ``None``."""
    best: str | None = None
    for prefix in prefixes:
        if (best is None or len(prefix) > len(best)) and key.startswith(prefix) and (
            len(key) == len(prefix) or key[len(prefix)] in boundaries
        ):
            best = prefix
    return best


@lru_cache(maxsize=1)
def _load_table() -> tuple[tuple[ModelLimit, ...], dict[str, ModelLimit]]:
    try:
        text = resources.files("retrieval").joinpath(_TABLE_RESOURCE).read_text(encoding="utf-8")
    except (FileNotFoundError, ModuleNotFoundError) as exc:
        raise ConfigError(
            f"The model context-limit table {_TABLE_RESOURCE} is missing; reinstall DocAnchor."
        ) from exc
    rows: list[ModelLimit] = []
    by_key: dict[str, ModelLimit] = {}
    header_seen = False
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        if not header_seen:
            if tuple(cells) != _TABLE_COLUMNS:
                raise ConfigError(
                    f"{_TABLE_RESOURCE} line {line_no}: the header must be the tab-separated columns "
                    f"{', '.join(_TABLE_COLUMNS)}."
                )
            header_seen = True
            continue
        if len(cells) != len(_TABLE_COLUMNS) or not all(c.strip() for c in cells):
            raise ConfigError(f"{_TABLE_RESOURCE} line {line_no}: expected 4 non-empty tab-separated cells.")
        model, tokens, provider, source = (c.strip() for c in cells)
        if not tokens.isdecimal() or int(tokens) <= 0:
            raise ConfigError(f"{_TABLE_RESOURCE} line {line_no}: context_tokens must be a positive integer.")
        row = ModelLimit(model, int(tokens), provider, source)
        key = normalise_model_name(model)
        if key in by_key:
            raise ConfigError(f"{_TABLE_RESOURCE} line {line_no}: {model!r} is listed twice.")
        rows.append(row)
        by_key[key] = row
    return tuple(rows), by_key


# --------------------------------------------------------------------------- model tokenizers


def model_encoding(model: str) -> str | None:
    """The tokenizer encoding of an OpenAI ``model``, or ``None`` when it is not known.

    Lookup, on :func:`normalise_model_name` keys with a fine-tune's ``ft:`` dropped: the longest
    :data:`MODEL_ENCODING_PREFIXES` entry that equals the name or is followed in it by ``-``,
    ``:``, ``@``, ``_``, space or ``.`` — so ``openai/gpt-4o-mini-2024-07-18`` and ``gpt-5.1`` are
    ``o200k_base``, ``gpt-4-0613`` is ``cl100k_base``, and ``claude-sonnet-4-5``,
    ``gemini-2.5-pro`` or ``llama3.1:70b`` are ``None``.

    Raises:
        InvalidRequest: ``model`` is not a non-empty string.
    """
    _check_model(model)
    key = normalise_model_name(model).removeprefix(_FINE_TUNED_PREFIX)
    prefix = _longest_prefix(key, _ENCODING_OF_PREFIX, _ENCODING_BOUNDARIES)
    return None if prefix is None else _ENCODING_OF_PREFIX[prefix]


def conversation_counter(model: str, budget_counter: TokenCounter) -> tuple[TokenCounter, str]:
    """The counter a conversation with ``model`` is measured with, and where it came from.

    Args:
        model: the model name as the caller gave it.
        budget_counter: DocAnchor's configured budget tokenizer, the stand-in for models whose
            encoding :func:`model_encoding` does not know.

    Returns:
        ``(counter, source)``: the model's own encoding and ``"model"``, or ``budget_counter`` and
        ``"budget"`` (the count is then an estimate of the model's real tokens).

    Raises:
        InvalidRequest: ``model`` is not a non-empty string.
        ConfigError: the model's encoding is not installed (see :mod:`docanchor.tokens`).
    """
    encoding = model_encoding(model)
    if encoding is None:
        return budget_counter, "budget"
    if encoding == budget_counter.name:
        return budget_counter, "model"
    return get_counter(encoding), "model"


# --------------------------------------------------------------------------- counting messages


def count_message_tokens(messages: Sequence[Mapping[str, Any]], counter: TokenCounter) -> int:
    """Estimated input tokens of an OpenAI-style chat ``messages`` list.

    Each message is ``{"role": str, "content": str | list[part] | None, "name"?: str}``; a part is
    ``{"type": "text", "text": str}`` or a non-text part (``image_url``, ``input_audio``, ``file`` …).
    Text of any script — Chinese, English or both in one message — is counted with ``counter``
    (callers pass :func:`conversation_counter`'s choice for the model). The chat format's overhead follows the OpenAI Cookbook notebook
    "How to count tokens with tiktoken" (``num_tokens_from_messages``): 3 tokens per message plus
    the tokens of its role and content, 1 more plus the name's tokens when a ``name`` is given, and
    3 to prime the assistant's reply. An empty list therefore counts 3.

    An assistant message's ``tool_calls`` count the tokens of each function's name and arguments
    (a JSON string; another value is counted as its JSON), and a tool message's ``tool_call_id``
    its tokens; the provider's own framing of tool calls is not documented and not counted.

    Not counted (so the estimate is low for such messages): non-text parts such as images, audio
    and files, whose cost depends on the provider; other extra keys.

    Args:
        messages: the conversation, oldest first.
        counter: the tokenizer to count with.

    Returns:
        The estimate, in tokens.

    Raises:
        InvalidRequest: ``messages`` is not a list of such messages; the message says which item
            and field is wrong.
    """
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidRequest(
            "'messages' must be a list of {role, content} objects; got "
            f"{type(messages).__name__}.",
            field="messages",
        )
    total = TOKENS_REPLY_PRIMER
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping):
            raise InvalidRequest(
                f"{where} must be an object with 'role' and 'content'; got {type(message).__name__}.",
                field="messages",
            )
        role = message.get("role")
        if not isinstance(role, str) or not role:
            raise InvalidRequest(f"{where}.role must be a non-empty string such as 'user'; got {role!r}.", field="messages")
        total += TOKENS_PER_MESSAGE + counter.count(role)
        total += sum(counter.count(text) for text in _content_texts(message.get("content"), where))
        total += sum(counter.count(text) for text in _tool_call_texts(message))
        name = message.get("name")
        if name is not None:
            if not isinstance(name, str):
                raise InvalidRequest(f"{where}.name must be a string; got {type(name).__name__}.", field="messages")
            total += TOKENS_PER_NAME + counter.count(name)
    return total


def _tool_call_texts(message: Mapping[str, Any]) -> list[str]:
    """The countable texts of a message's ``tool_calls`` (name, arguments) and ``tool_call_id``;
    parts of another shape are skipped (their shape is checked where it matters, by assembly)."""
    texts = [message["tool_call_id"]] if isinstance(message.get("tool_call_id"), str) else []
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            continue
        name, arguments = function.get("name"), function.get("arguments")
        texts += [name] if isinstance(name, str) else []
        if arguments is not None:
            texts.append(arguments if isinstance(arguments, str) else json.dumps(arguments, sort_keys=True))
    return texts


def _content_texts(content: Any, where: str) -> list[str]:
    if content is None:
        return []
    if isinstance(content, str):
        return [content]
    if isinstance(content, (list, tuple)):
        texts = []
        for j, part in enumerate(content):
            if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
                raise InvalidRequest(
                    f"{where}.content[{j}] must be an object with a 'type', such as "
                    "{'type': 'text', 'text': '...'}.",
                    field="messages",
                )
            if part["type"] == "text":
                text = part.get("text")
                if not isinstance(text, str):
                    raise InvalidRequest(f"{where}.content[{j}].text must be a string.", field="messages")
                texts.append(text)
        return texts
    raise InvalidRequest(
        f"{where}.content must be a string, a list of parts or null; got {type(content).__name__}.",
        field="messages",
    )


# --------------------------------------------------------------------------- budget


def default_reserve_tokens(limit_tokens: int) -> int:
    """Tokens kept free for the answer when the caller names none: 10 % of the window, at least
    1,024 and at most 16,384 (e.g. 12,800 for a 128,000-token window, 16,384 for 200,000)."""
    share = int(limit_tokens * DEFAULT_RESERVE_FRACTION)
    return max(DEFAULT_RESERVE_MIN_TOKENS, min(DEFAULT_RESERVE_MAX_TOKENS, share))


def derive_budget(
    *,
    model: str,
    used_tokens: int | None = None,
    messages: Sequence[Mapping[str, Any]] | None = None,
    reserve_tokens: int | None = None,
    counter: TokenCounter,
    max_budget_tokens: int | None = None,
) -> BudgetDerivation:
    """The retrieval budget left in ``model``'s context window.

    ``budget_tokens = context_limit(model) − used − reserve``, floored at 0 and capped at
    ``max_budget_tokens``. A budget of 0 comes with a ``message`` saying there is no room; the
    caller then returns an empty result that says so.

    ``messages`` are counted in the model's own encoding when :func:`model_encoding` knows it,
    else with ``counter`` as an estimate (see :func:`conversation_counter`). The resulting budget
    is then spent in ``counter``'s tokens: DocAnchor's returned context is always measured with
    the configured budget tokenizer.

    Args:
        model: the caller's model name (see :func:`context_limit` for the lookup).
        used_tokens: tokens the conversation already uses (e.g. the provider's last
            ``prompt_tokens``). Give this or ``messages``, not both.
        messages: the conversation, counted with :func:`count_message_tokens`.
        reserve_tokens: tokens kept for the answer; default :func:`default_reserve_tokens`.
        counter: the configured budget tokenizer.
        max_budget_tokens: an upper bound on the result, in tokens (``None``: no cap).

    Raises:
        InvalidRequest: both or neither of ``used_tokens`` and ``messages``; a number that is not
            a non-negative integer; a malformed ``model`` or ``messages``.
        ConfigError: the model's encoding is not installed.
    """
    if (used_tokens is None) == (messages is None):
        raise InvalidRequest(
            "Give either 'used_tokens' (tokens the conversation already uses) or 'messages' "
            "(the conversation to count), not both and not neither.",
            field="used_tokens",
        )
    limit, limit_source = context_limit(model)
    tokenizer = tokenizer_source = None
    if messages is not None:
        message_counter, tokenizer_source = conversation_counter(model, counter)
        tokenizer = message_counter.name
        used, used_source = count_message_tokens(messages, message_counter), "estimated"
    else:
        used, used_source = _non_negative_int(used_tokens, "used_tokens"), "given"
    if reserve_tokens is None:
        reserve, reserve_source = default_reserve_tokens(limit), "default"
    else:
        reserve, reserve_source = _non_negative_int(reserve_tokens, "reserve_tokens"), "given"
    cap = None if max_budget_tokens is None else _non_negative_int(max_budget_tokens, "max_budget_tokens")

    room = limit - used - reserve
    budget = max(0, room)
    message = None
    if budget == 0:
        message = (
            f"There is no room for retrieved text: the conversation uses {used:,} of the {limit:,} "
            f"context tokens of {model!r} and {reserve:,} are kept for the answer. Summarise or "
            "shorten the conversation, or lower reserve_tokens."
        )
    elif cap is not None and budget > cap:
        message = f"The derived budget of {budget:,} tokens was capped at max_budget_tokens={cap}."
        budget = cap
    if limit_source == "fallback":  # say so: a wrong or misspelt model name would otherwise go unnoticed
        unknown = (f"The model {model!r} is not in DocAnchor's context-limit table; a window of "
                   f"{FALLBACK_CONTEXT_TOKENS:,} tokens was assumed.")
        message = unknown if message is None else f"{unknown} {message}"
    return BudgetDerivation(
        model=model,
        budget_tokens=budget,
        context_limit=limit,
        limit_source=limit_source,
        used_tokens=used,
        used_source=used_source,
        reserve_tokens=reserve,
        reserve_source=reserve_source,
        max_budget_tokens=cap,
        message=message,
        tokenizer=tokenizer,
        tokenizer_source=tokenizer_source,
    )


def _non_negative_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest(
            f"'{name}' must be a whole number of tokens; got {value!r} ({type(value).__name__}).",
            field=name,
        )
    if value < 0:
        raise InvalidRequest(f"'{name}' must be 0 or more tokens; got {value}.", field=name)
    return value


# --------------------------------------------------------------------------- snapshot


def severity(input_tokens: int, limit_tokens: int) -> str:
    """The severity band of using ``input_tokens`` of a ``limit_tokens`` window.

    normal below 70 %, info 70–84.x %, warning 85–91.x %, danger 92–96.x %, critical at 97 % and
    above (including over the limit). Compared in exact integer arithmetic, so 84.99 % is info.
    """
    for percent, name in SEVERITY_BANDS:
        if input_tokens * 100 >= percent * limit_tokens:
            return name
    return "normal"  # pragma: no cover - the 0 % band always matches


def context_snapshot(
    *,
    messages: Sequence[Mapping[str, Any]],
    model: str,
    provider_tokens: int | None = None,
    counter: TokenCounter,
) -> dict[str, Any]:
    """How full ``model``'s context window is with this conversation, and what to do about it.

    The conversation is counted in the model's own encoding when :func:`model_encoding` knows it
    (``o200k_base`` for ``gpt-4o``), else with ``counter`` as a stand-in; ``tokenizer`` names the
    encoding used and ``tokenizer_source`` says which case applied.

    Args:
        messages: the conversation, OpenAI style (see :func:`count_message_tokens`).
        model: the model name (see :func:`context_limit`).
        provider_tokens: the provider's own input-token count for this conversation; when given it
            wins over DocAnchor's estimate (which, for non-OpenAI models, uses an OpenAI encoding).
        counter: the configured budget tokenizer.

    Returns:
        ``{"model", "estimated_tokens", "provider_tokens", "input_tokens", "tokens_source"
        ("provider" | "estimated"), "tokenizer" (the encoding ``estimated_tokens`` was counted
        with), "tokenizer_source" ("model": the model's own encoding | "budget": the configured
        budget tokenizer standing in, an estimate for other providers' models), "context_limit",
        "limit_source", "usage_ratio" (input / limit, 4 decimals, may exceed 1), "severity",
        "recommended_action"}``; tokens in tokens.

    Raises:
        InvalidRequest: malformed ``messages`` or ``model``, or ``provider_tokens`` that is not a
            non-negative integer.
        ConfigError: the model's encoding is not installed.
    """
    limit, limit_source = context_limit(model)
    message_counter, tokenizer_source = conversation_counter(model, counter)
    estimated = count_message_tokens(messages, message_counter)
    provider = None if provider_tokens is None else _non_negative_int(provider_tokens, "provider_tokens")
    used = estimated if provider is None else provider
    band = severity(used, limit)
    return {
        "model": model,
        "estimated_tokens": estimated,
        "provider_tokens": provider,
        "input_tokens": used,
        "tokens_source": "estimated" if provider is None else "provider",
        "tokenizer": message_counter.name,
        "tokenizer_source": tokenizer_source,
        "context_limit": limit,
        "limit_source": limit_source,
        "usage_ratio": round(used / limit, 4),
        "severity": band,
        "recommended_action": RECOMMENDED_ACTIONS[band],
    }
