"""Context assembly and compaction bound to one DocAnchor: offloads are stored with the ingest
pipeline in the conversation's namespace, evidence comes from retrieval in the caller's, and
summaries from :mod:`summarize` (the doors -- Python API, HTTP, CLI, MCP -- all come through here).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, Any, Sequence

from docanchor.access import MAX_NAMESPACE_CHARS
from docanchor.errors import FetchError, InvalidRequest
from docanchor.settings import SETTING_RANGES, Settings
from docanchor.tokens import TokenCounter
from docanchor.types import TurnText, make_doc_id
from retrieval.assembly.assemble import DEFAULT_BUDGET_SHARE, Assembly, AssemblyRequest, assemble
from retrieval.assembly.compact import Compaction, CompactionRequest, compact_conversation
from retrieval.assembly.optimise import Policy
from retrieval.assembly.pressure import KEEP_ROUNDS, check_context_limit
from retrieval.assembly.ports import StoredDocument, Summariser
from retrieval.assembly.turns import conversation_key
from retrieval.budget import conversation_counter
from summarize.abstractive import abstractive_summary
from summarize.conversation import extractive_summary

if TYPE_CHECKING:
    from plugin.api import DocAnchor

log = logging.getLogger("docanchor.conversation")


class NamespaceOffloader:
    """Stores offloads as ordinary documents, Markdown or plain text, through
    :meth:`plugin.api.DocAnchor.ingest_bytes` (the same text is the same ``doc_id``: storing it
    again writes nothing)."""

    def __init__(self, da: "DocAnchor") -> None:
        self.da = da

    def doc_id(self, text: str) -> str:
        return make_doc_id(text.encode("utf-8"))

    def store(self, namespace: str, title: str, text: str, markdown: bool = True) -> StoredDocument:
        filename = "text.md" if markdown else "text.txt"  # ingest.detect goes by the name
        record = self.da.ingest_bytes(text.encode("utf-8"), filename=filename, title=title, namespace=namespace).record
        return StoredDocument(record.doc_id, record.anchor)


def extractive(counter: TokenCounter) -> Summariser:
    """The deterministic summariser (:func:`summarize.conversation.extractive_summary`)."""
    return lambda turns, max_tokens: (extractive_summary(turns, max_tokens, counter), "extractive")


def configured_summariser(settings: Settings, counter: TokenCounter) -> Summariser:
    """The endpoint of ``summary_llm_url`` when set, falling back to the extractive summary when it
    fails; the extractive summary alone when not set (the default)."""
    if not settings.summary_llm_url:
        return extractive(counter)
    call = partial(abstractive_summary, counter=counter, url=settings.summary_llm_url, model=settings.summary_llm_model,
                   api_key=settings.summary_llm_api_key, timeout_s=settings.summary_llm_timeout_s)

    def summarise(turns: Sequence[TurnText], max_tokens: int) -> tuple[str, str]:
        try:
            return call(turns, max_tokens), "abstractive"
        except FetchError as err:
            log.warning("%s", err.message)
            return extractive_summary(turns, max_tokens, counter), f"extractive ({err.code})"

    return summarise


def check_conversation_id(value: Any) -> str | None:
    """``conversation_id`` as given (``None``: derive one), a namespace name of 1 to 200 characters.

    Raises:
        InvalidRequest: ``invalid_argument`` for anything else.
    """
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value.strip()) > MAX_NAMESPACE_CHARS:
        raise InvalidRequest(f"'conversation_id' must be a namespace name of 1 to {MAX_NAMESPACE_CHARS} characters; "
                             "leave it out to have one derived from the conversation.", field="conversation_id")
    return value.strip()


REQUEST_SETTINGS = {"assemble": ("spill_threshold_tokens", "compaction_threshold_percent"),
                    "compact": ("summary_tokens",)}
"""The context settings a request of each route may carry, as a field of the setting's name; the
request's value wins over the serving process's setting (the CLI sends the ones set in its
environment to a running server)."""
SERVER_SETTINGS = {"assemble": (), "compact": ("summary_llm_url", "summary_llm_model", "summary_llm_api_key",
                                               "summary_llm_timeout_s")}
"""The context settings only the serving process's own apply: a request that named a URL would
have the server call it, with a key it chose."""


def check_setting(name: str, value: Any) -> int | None:
    """A request's value of a setting of :data:`docanchor.settings.SETTING_RANGES` (``None``: the
    serving process's setting).

    Raises:
        InvalidRequest: ``invalid_argument`` naming the field and its bounds, for anything but a
            whole number within them.
    """
    if value is None:
        return None
    low, high = SETTING_RANGES[name]
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidRequest(f"'{name}' must be a whole number from {low} to {high}; got {value!r}. Leave it out "
                             "to use the server's setting.", field=name)
    return value


def policy(settings: Settings, spill_threshold_tokens: Any = None, compaction_threshold_percent: Any = None) -> Policy:
    """The thresholds assembly follows: the request's (checked, see :func:`check_setting`), else the settings'."""
    spill = check_setting("spill_threshold_tokens", spill_threshold_tokens) or settings.spill_threshold_tokens
    percent = (check_setting("compaction_threshold_percent", compaction_threshold_percent)
               or settings.compaction_threshold_percent)
    return Policy(spill_threshold_tokens=spill, compaction_threshold=percent / 100)


def conversation_namespace(conversation_id: Any, messages: Any) -> str:
    """Where a conversation's offloads go: ``conversation_id`` when given, else the id derived from
    how the conversation starts (:func:`retrieval.assembly.turns.conversation_key`)."""
    return check_conversation_id(conversation_id) or conversation_key(messages if isinstance(messages, list) else [])


def assembly_request(model: Any, messages: Any, *, tools: Any = None, reserve_tokens: Any = None,
                     conversation_id: Any = None, query: Any = None, budget_share: Any = None,
                     explain_only: Any = False, context_limit: Any = None) -> AssemblyRequest:
    """The checked request of ``POST /v1/context/assemble`` (every door builds it here); ``query``
    comes checked (:meth:`plugin.api.DocAnchor.assemble_context` checks it as a retrieval's).

    Raises:
        InvalidRequest: ``invalid_argument`` naming the field: ``model`` not a non-empty string,
            ``messages`` not a list, ``budget_share`` not a number above 0 and at most 1, ``explain_only`` not a boolean,
            a bad ``conversation_id`` (see :func:`check_conversation_id`).
    """
    share = DEFAULT_BUDGET_SHARE if budget_share is None else check_budget_share(budget_share)
    return AssemblyRequest(check_model(model), check_messages(messages), tools=tools, reserve_tokens=reserve_tokens,
                           conversation_id=check_conversation_id(conversation_id), query=query,
                           budget_share=float(share), explain_only=check_flag(explain_only),
                           context_limit=check_context_limit(context_limit))


def compaction_request(model: Any, messages: Any, *, mode: Any = "continue", conversation_id: Any = None,
                       keep_rounds: Any = None, summary_tokens: Any = None, explain_only: Any = False,
                       context_limit: Any = None, settings: Settings) -> CompactionRequest:
    """The checked request of ``POST /v1/context/compact``; ``summary_tokens`` defaults to
    ``settings.summary_tokens``. Raises as :func:`assembly_request` (and see
    :class:`retrieval.assembly.compact.CompactionRequest` for ``mode`` and the numbers)."""
    return CompactionRequest(check_model(model), check_messages(messages), mode=mode,
                             conversation_id=check_conversation_id(conversation_id),
                             keep_rounds=KEEP_ROUNDS if keep_rounds is None else keep_rounds,
                             summary_tokens=settings.summary_tokens if summary_tokens is None else summary_tokens,
                             explain_only=check_flag(explain_only), context_limit=check_context_limit(context_limit))


# The checkers of the fields every door shares (plugin.schemas.requests runs them as validators).
def check_model(model: Any) -> str:
    """Raises: InvalidRequest ``invalid_argument`` unless ``model`` is a non-empty string."""
    if not isinstance(model, str) or not model.strip():
        raise InvalidRequest("'model' is required: a model name such as 'gpt-4o'.", field="model")
    return model.strip()


def check_messages(messages: Any) -> list[Any]:
    """Raises: InvalidRequest ``invalid_argument`` unless ``messages`` is a list (its messages are
    checked by :func:`retrieval.assembly.turns.parse_conversation`)."""
    if not isinstance(messages, list):
        raise InvalidRequest("'messages' is required: a list of {role, content} messages.", field="messages")
    return messages


def check_flag(value: Any) -> bool:
    """Raises: InvalidRequest ``invalid_argument`` unless ``explain_only`` is a boolean."""
    if not isinstance(value, bool):
        raise InvalidRequest("'explain_only' must be true or false.", field="explain_only")
    return value


def check_budget_share(share: Any) -> float:
    """Raises: InvalidRequest ``invalid_argument`` unless ``budget_share`` is a number above 0 and at most 1."""
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
        raise InvalidRequest(f"'budget_share' must be a number above 0 and at most 1; got {share!r}.",
                             field="budget_share")
    return share


def run_assembly(da: "DocAnchor", request: AssemblyRequest, namespace: str, rules: Policy) -> Assembly:
    """Assemble ``request`` under ``rules`` (:func:`policy`); offloads go to its conversation's
    namespace, evidence comes from ``namespace`` (the caller's documents). See
    :func:`retrieval.assembly.assemble.assemble`."""
    counter, _ = conversation_counter(request.model, da.ctx.counter)

    def evidence(query: str, budget_tokens: int) -> str:
        return da.retrieve(query, budget_tokens, namespace=namespace).context

    return assemble(request, rules, NamespaceOffloader(da), extractive(counter), evidence,
                    da.ctx.counter)


def run_compaction(da: "DocAnchor", request: CompactionRequest) -> Compaction:
    """Compact ``request``'s conversation into its namespace (see :mod:`retrieval.assembly.compact`)."""
    counter, _ = conversation_counter(request.model, da.ctx.counter)
    return compact_conversation(request, NamespaceOffloader(da), configured_summariser(da.settings, counter),
                                da.ctx.counter)
