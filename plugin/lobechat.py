"""The LobeChat plugin: ``/manifest.json`` and one POST route per plugin API.

Protocol (../shared/LOBECHAT.md): LobeChat's server POSTs the model's raw argument string (often
``text/plain``, possibly empty) to each ``api[].url`` with the user's settings as JSON in
``X-Lobe-Plugin-Settings``. A 2xx body goes verbatim to the model; any other status ends the turn
with an error card the model never sees. So every problem the model can fix (unknown id, missing
argument, missing key, nothing found) or tell the user about (a Chroma server that does not answer)
is a 200 with a sentence saying what to do, and only real faults (:func:`is_fault`) are 5xx with the
SDK's error shape ``{"errorType": ..., "body": {...}}``.
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

from flask import Blueprint, Response, current_app, request
from werkzeug.exceptions import RequestEntityTooLarge

from docanchor import formats
from docanchor.access import resolve_namespace
from docanchor.display import as_sent
from docanchor.errors import (ConfigError, DocAnchorError, FetchError, Forbidden, InvalidRequest, Unauthorized,
                              budget_too_small)
from docanchor.fit import shrink_to_fit
from docanchor.library import (Filter, Page, check_doc_type, check_limit, check_tags, check_where, page,
                               sent_number)
from docanchor.settings import Settings
from docanchor.tokens import TokenCounter
from plugin import answers
from plugin.api import EMPTY_QUERY, DocAnchor, check_query
from plugin.bodies import header_text, parse_json
from plugin.schemas.tools import TOOL_ARGS, manifest_parameters, tool_fields
from plugin.http_errors import log_error
from plugin.runner import job_error
from plugin.v1 import bearer_token
from retrieval.read import start_error

log = logging.getLogger("docanchor.lobechat")

def _manifest_path() -> Path:
    """The top-level manifest.json of a source checkout or editable install, else the copy a
    regular install puts in ``<prefix>/share/docanchor`` (pyproject's data-files)."""
    source = Path(__file__).resolve().parents[1] / "manifest.json"
    installed = Path(sys.prefix) / "share" / "docanchor" / "manifest.json"
    return source if source.exists() or not installed.exists() else installed


MANIFEST_PATH = _manifest_path()


SETTINGS_HEADER = "X-Lobe-Plugin-Settings"
MAX_ARGUMENT_BYTES = 64 * 1024
"""Largest argument body, in bytes: a query and a few ids."""
MAX_SETTINGS_HEADER_CHARS = 8 * 1024
MAX_BUDGET_TOKENS = 1500
"""Most budget tokens one plugin answer may carry: at ~4 characters a token the rendered passages
stay under :data:`plugin.answers.MAX_ANSWER_CHARS` (the answer is cut there anyway)."""
MIN_BUDGET_TOKENS = 150
"""Fewest budget tokens a plugin answer may be asked for: the framing of an answer (header,
citation line, "More:" line) takes about 60 tokens and a passage is worth at least 24 more, so
a smaller budget could only ever say that it is too small."""
BUDGET_FRAMING = {
    "searchDocuments": "its citation lines and the line on how to read on alone take about 60",
    "readDocument": "its citation line and the line on how to read on alone take about 60",
    "listDocuments": "its first line, the next page's cursor and the line on what to do next alone take about 80",
}
"""Why a tool that takes ``budget_tokens`` needs :data:`MIN_BUDGET_TOKENS` of them: the lines of
its answer that come before any passage or document (the budget refusal's reason,
:meth:`Call.check_budget`), in budget tokens counted on the tools' answers (a list's first line,
cursor line and "More:" line: 81 tokens with a one-document page)."""
DEFAULT_BUDGET_TOKENS = 800
"""Budget tokens of an answer when neither the call nor the settings give one: the manifest's
``defaultBudgetTokens`` default."""
PLUGIN_WAIT_S = 12.0
"""How long addDocument waits for its ingest job before answering "still indexing", in seconds
(LobeChat's hosting cuts calls at 25-60 s; LOBECHAT.md asks for answers well under 20 s)."""
CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET, OPTIONS",
    "Access-Control-Allow-Headers": "*",
    "Access-Control-Max-Age": "86400",
}

bp = Blueprint("lobechat", __name__)


# ---------------------------------------------------------------------------- manifest
def served_manifest(settings: Settings, path: Path = MANIFEST_PATH) -> dict[str, Any]:
    """The manifest file with ``settings.public_base_url`` as the origin of every URL in it.

    Each ``api[].url`` keeps its path and gets the configured base, and its ``parameters`` come
    from :mod:`plugin.schemas.tools` (the file holds the same, checked by a test); with API keys
    on, the ``apiKey`` setting becomes required so LobeChat asks the user for it.

    Raises:
        ConfigError: the manifest file is missing or not valid JSON.
    """
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"The LobeChat manifest {path.name} is missing or not valid JSON; reinstall DocAnchor.") from exc
    base = settings.public_base_url.rstrip("/")
    for api in manifest.get("api", []):
        api["url"] = base + urlsplit(api["url"]).path
        if api.get("name") in TOOL_ARGS:
            api["parameters"] = manifest_parameters(api["name"])
    if settings.api_keys:
        schema = manifest.setdefault("settings", {"type": "object", "properties": {}})
        schema.setdefault("properties", {})["apiKey"] = {
            "type": "string", "format": "password", "title": "API key",
            "description": "Your DocAnchor API key (ask the operator of this DocAnchor server).",
        }
        schema["required"] = sorted({*schema.get("required", []), "apiKey"})
    return manifest


def manifest_response(build: Callable[[Settings], dict[str, Any]]) -> Response:
    """A manifest for LobeChat's browser: JSON, CORS open, an OPTIONS preflight answered."""
    if request.method == "OPTIONS":
        resp = Response(status=204)
    else:
        body = json.dumps(build(current_app.config["DOCANCHOR_SETTINGS"]), ensure_ascii=False, indent=2)
        resp = Response(body, mimetype="application/json")
        resp.headers["Cache-Control"] = "no-cache"
    resp.headers.update(CORS_HEADERS)
    return resp


@bp.route("/manifest.json", methods=["GET", "OPTIONS"], provide_automatic_options=False)
def manifest() -> Response:
    """The plugin manifest with the configured public base URL."""
    return manifest_response(served_manifest)


# ---------------------------------------------------------------------------- calls
@dataclass
class Call:
    """One plugin call: its arguments, the user's plugin settings and where it acts."""

    da: DocAnchor
    args: dict[str, Any]
    plugin_settings: dict[str, Any]
    namespace: str
    named: str | None = None
    """The namespace the call named (MCP's ``namespace`` argument), so the answer's read-on calls
    name it too; ``None`` when the call acts in its connection's or plugin settings' own."""
    data: dict[str, Any] | None = None
    """What the answer is made of, for MCP's ``structuredContent`` (:mod:`plugin.schemas.tools`);
    set by the handler when it answers with data rather than a sentence about a problem."""
    door_args: tuple[str, ...] = ()
    """Arguments the door itself took before the call (MCP's ``namespace`` of a read-only tool),
    named among what the tool takes when :meth:`ignored` lists the rest."""

    def text(self, name: str) -> str | None:
        """A string argument, trimmed; numbers are accepted as text; ``None`` when absent."""
        value = self.args.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        return value.strip() or None if isinstance(value, str) else None

    def budget(self) -> int:
        """``budget_tokens``, else the ``defaultBudgetTokens`` setting, else :data:`DEFAULT_BUDGET_TOKENS`
        (the manifest's default), kept within :data:`MIN_BUDGET_TOKENS`..:data:`MAX_BUDGET_TOKENS`
        tokens. A ``budget_tokens`` the caller sent is checked first by :meth:`check_budget`; the
        setting is unset when absent, ``null`` or blank (LobeChat's form after the field is cleared).

        Raises:
            InvalidRequest: ``invalid_argument`` with ``details.setting`` when the setting is not a
                number: it is refused, as an unreadable namespace or key is, rather than silently
                replaced by the default (:func:`_sentence_for` asks the user to correct it).
        """
        number = sent_number(self.args.get("budget_tokens"))
        if number is None or number < 1:
            setting = self.plugin_settings.get("defaultBudgetTokens")
            if setting is None or (isinstance(setting, str) and not setting.strip()):
                return DEFAULT_BUDGET_TOKENS
            number = sent_number(setting)
            if number is None:
                raise InvalidRequest(
                    f"The plugin setting defaultBudgetTokens is {as_sent(setting)}, not a number of tokens; it takes a "
                    f"whole number from {MIN_BUDGET_TOKENS} to {MAX_BUDGET_TOKENS} (empty: {DEFAULT_BUDGET_TOKENS}).",
                    code="invalid_argument", setting=True, field="defaultBudgetTokens")
        return max(MIN_BUDGET_TOKENS, min(int(number), MAX_BUDGET_TOKENS))

    def scope(self) -> Filter:
        """The ``tags`` and ``where`` arguments as a search filter.

        Raises:
            InvalidRequest: malformed tags or conditions (answered as a sentence to correct them).
        """
        tags = self.args.get("tags")
        if isinstance(tags, str):  # a model writing one tag as a string means that tag
            tags = [tags]
        return Filter(tags=tuple(check_tags(tags)) if tags is not None else (),
                      where=check_where(self.args.get("where")))

    def ignored(self, api: str) -> str:
        """A first line naming the arguments ``api`` does not take, or ``""``. They are ignored, not
        refused (models add keys of their own), but said, so a misnamed ``budget`` or ``start`` is
        not silently lost."""
        known = tuple(tool_fields(api))
        if not known:
            return ""
        known += self.door_args
        unknown = sorted(str(k)[:40] for k in self.args if k not in known)
        if not unknown:
            return ""
        names = ", ".join(f"`{k}`" for k in unknown[:5]) + (" …" if len(unknown) > 5 else "")
        return f"(Ignored {names}: {api} takes {', '.join(known)}.)\n"

    def check_budget(self, api: str) -> None:
        """Refuse a ``budget_tokens`` the plugin cannot honour: not a whole number, or fewer than
        :data:`MIN_BUDGET_TOKENS` tokens. A budget over :data:`MAX_BUDGET_TOKENS` is not refused:
        the answer is simply capped there. The message says how to call ``api`` again.

        Raises:
            InvalidRequest: ``invalid_argument`` (not a whole number, as HTTP) or ``budget_too_small``
                (:func:`docanchor.errors.budget_too_small`), with ``field="budget_tokens"``.
        """
        raw = self.args.get("budget_tokens")
        number = sent_number(raw)
        whole = number is not None and number.is_integer()
        if raw is None or (whole and number >= MIN_BUDGET_TOKENS):  # type: ignore[operator]
            return
        shown = as_sent(raw)
        message = (f"budget_tokens {shown} cannot be used: {api} needs a whole number of tokens from "
                   f"{MIN_BUDGET_TOKENS} to {MAX_BUDGET_TOKENS} ({BUDGET_FRAMING[api]}). Call {api} again with "
                   f"budget_tokens of at least {MIN_BUDGET_TOKENS}, or leave it out for the default.")
        if not whole:  # the code HTTP gives a number that is not whole (plugin.api.check_budget)
            raise InvalidRequest(message, code="invalid_argument", field="budget_tokens")
        raise budget_too_small(message, int(number), field="budget_tokens")  # type: ignore[arg-type]


class ArgumentRefused(InvalidRequest):
    """A tool call's argument refused by :func:`check_arguments` with a message that already says
    how to call the tool again (answered as it is, :func:`_sentence_for`)."""


def _example(api: str, name: str) -> str:
    """Required argument ``name`` of tool ``api`` as a refusal shows it to send again: its JSON,
    then in brackets what it is, as its description in :data:`plugin.schemas.tools.TOOL_ARGS`
    says (the one place for it), and what the schema does not say: where a model finds a doc id,
    which files a URL may name."""
    described = (tool_fields(api)[name].description or "").rstrip(".")
    first_word = described.split(" ", 1)[0]
    if len(first_word) == 1 or not first_word.isupper():  # "the document…" inside a sentence, but "PDF…"
        described = described[:1].lower() + described[1:]
    more = {"doc_id": "listDocuments shows the ids", "url": formats.supported_sentence()}.get(name)
    hint = "; ".join(part for part in (described, more) if part)
    return f'{{"{name}": "…"}}' + (f" ({hint})" if hint else "")


def required_arguments(api: str) -> list[str]:
    """The arguments tool ``api`` requires, as its model (:data:`plugin.schemas.tools.TOOL_ARGS`) says."""
    return [name for name, f in tool_fields(api).items() if f.is_required()]


def check_arguments(api: str, call: Call) -> None:
    """Refuse a call of tool ``api`` that lacks a required argument (missing, empty, blank -- a
    ``query`` also when nothing is left of it once normalised, :func:`plugin.api.check_query` -- or
    not text), each in one form, in the words of the tool's schema (:func:`_example`); or sends a
    ``budget_tokens`` it cannot honour (:meth:`Call.check_budget`). The one argument check of the
    LobeChat and MCP doors (:func:`run_api`), before the handler runs.

    Raises:
        ArgumentRefused: ``invalid_argument`` with ``field``, the message saying how to call again.
        InvalidRequest: see :meth:`Call.check_budget`.
    """
    for name in required_arguments(api):
        raw, value = call.args.get(name), call.text(name)
        if name == "query" and value:
            try:
                check_query(value)
            except InvalidRequest as err:
                if err.message != EMPTY_QUERY:
                    raise  # too long: its own sentence
                value = None
        if value:
            continue
        state = ("" if raw is None else " (it was empty)" if raw == "" else
                 " (it was blank)" if isinstance(raw, str) else " (it was not text)")
        raise ArgumentRefused(f"{api} needs a `{name}`{state}: call it again with {_example(api, name)}.",
                              code="invalid_argument", field=name)
    if "budget_tokens" in tool_fields(api):
        call.check_budget(api)


def run_api(name: str, call: Call) -> str:
    """The answer of plugin API ``name`` to ``call`` (LobeChat's and MCP's door): its arguments
    checked (:func:`check_arguments`), then its handler (:data:`APIS`).

    Raises:
        DocAnchorError: a refusal (answered as a sentence, :func:`_sentence_for`) or a fault.
    """
    check_arguments(name, call)
    return APIS[name](call)


def search_documents(call: Call) -> str:
    query = call.text("query")
    doc_id = call.text("doc_id")

    requested = call.budget()
    note = call.ignored("searchDocuments")  # inside the answer, so the header's token figure counts it
    scope = call.scope()

    too_small = []  # per try: nothing fitted the passage budget (search_answer's compact form may fit)

    def answer(budget: int, compact: bool = False) -> str:
        result = call.da.retrieve(query, budget, doc_ids=[doc_id] if doc_id else None, namespace=call.namespace,
                                  scope=scope)
        too_small.append(not result.sections and result.least_budget_tokens is not None)
        call.data = {"query": result.query, "budget_tokens": requested, "context_tokens_used": result.context_tokens_used,
                     "no_strong_match": result.no_strong_match, "passages": [
                         {"doc_id": s.doc_id, "title": s.title, "citation": s.citation, "text": s.text,
                          "page_start": s.page_start, "page_end": s.page_end, "heading_path": list(s.heading_path)}
                         for s in result.sections]}
        if not result.sections and not doc_id and not scope and not call.da.list_documents(call.namespace):
            # other words or a larger budget cannot help an empty namespace: say how to add documents
            return f"No passages returned: {answers.empty_answer(call.namespace)}"
        if not result.sections and result.message and budget < requested:  # quote the caller's budget
            result.message = result.message.replace(f"budget of {budget} tokens", f"budget of {requested} tokens")
            # the least passage budget is not the least answer budget: leave the figure out
            result.message = result.message.replace(f" to {result.least_budget_tokens} or more", "")
        return answers.search_answer(result, doc_id=doc_id, max_budget_tokens=MAX_BUDGET_TOKENS,
                                     counter=call.da.ctx.counter, budget_tokens=requested, lead=note,
                                     namespace=call.named, compact=compact)

    text = within_budget(call, answer)
    if not too_small[-1]:
        return text
    # the usual framing (a long heading in the citation line, the "More:" advice) left no room for a
    # passage: the compact answer still carries the best passage's best sentence
    return within_budget(call, lambda budget: answer(budget, compact=True))


def within_budget(call: Call, answer: Callable[[int], str], tries: int = 8, note: str = "") -> str:
    """The answer for a passage budget whose WHOLE answer (header, citation lines,
    passages, "More:" line) fits ``call.budget()`` budget tokens: the passages are asked for with
    the budget less what the framing cost on the previous try (and at least an eighth less, since
    passages shrink by whole sentences; :func:`docanchor.fit.shrink_to_fit`). If no try fits (a long heading or
    title can make the framing outgrow a small budget), a short sentence saying so, which quotes
    the caller's budget. ``note`` (ignored arguments) leads the answer and counts toward the budget.

    A refusal that ``answer`` raises is held to the same budget: while the sentence the model gets
    for it (:func:`_sentence_for`) is over, it is asked again with a smaller budget (a reader's
    refusal names fewer examples at a smaller budget, :func:`retrieval.read.start_refusal`).

    Raises:
        DocAnchorError: what ``answer`` raised on the last try (its sentence within the budget,
            unless even the smallest try was over).
    """
    budget = call.budget()
    counter = call.da.ctx.counter

    def attempt(passages: int) -> tuple[tuple[str, DocAnchorError | None], int]:
        try:
            text, refusal = note + answer(passages), None
        except DocAnchorError as err:
            text, refusal = f"{note} {_sentence_for(err)}", err
        return (text, refusal), counter.count(text) - budget

    # windows and sections shrink a sentence at a time: ask for at least an eighth less each try
    (text, refusal), fits = shrink_to_fit(attempt, budget, lambda n, _, over: n - max(over, n // 8), tries)
    if refusal is not None:  # within the budget, or still over at the smallest try: it says more than "no room"
        raise refusal
    if fits:
        return text
    return (f"No passages returned: {budget} tokens leave no room for a passage with its citation here. "
            f"Call again with a larger budget_tokens (at most {MAX_BUDGET_TOKENS}).")


def read_document(call: Call) -> str:
    doc_id = call.text("doc_id")

    def answer(budget: int) -> str:
        try:
            window = call.da.read(doc_id, start=call.text("from"), budget_tokens=budget, namespace=call.namespace)
        except InvalidRequest as err:  # the reader names its Python argument `start`; the model knows `from`
            worded = start_error(err, "`from`", "from=")
            message = worded.message.replace(
                "a next_cursor returned by an earlier read", "the cursor an earlier readDocument answer gave")
            raise InvalidRequest(message, code=err.code, **worded.details) from err
        call.data = {"doc_id": window.doc_id, "title": window.title, "text": window.text,
                     "next_cursor": window.next_cursor, "context_tokens_used": window.context_tokens_used}
        return answers.read_answer(window, namespace=call.named)

    return within_budget(call, answer, note=call.ignored("readDocument"))


def get_document_anchor(call: Call) -> str:
    doc_id = call.text("doc_id")
    record = call.da.get_document(doc_id, call.namespace)
    call.data = {"doc_id": record.doc_id, "title": record.title, "anchor": record.anchor}
    anchor = answers.anchor_answer(record, counter=call.da.ctx.counter, max_tokens=call.da.settings.anchor_tokens,
                                   namespace=call.named)
    return call.ignored("getDocumentAnchor") + anchor


def add_document(call: Call) -> str:
    url = call.text("url")
    job = call.da.submit_url(url, title=call.text("title"), namespace=call.namespace, wait_s=PLUGIN_WAIT_S,
                             tags=call.args.get("tags"))
    error = job_error(job)
    if error is not None:  # answered like any refusal (a sentence; MCP marks it an error)
        raise error
    result = job.result or {}
    call.data = {"status": job.status, "doc_id": job.doc_id, "job_id": job.job_id, "percent": job.percent,
                 "title": result.get("title"), "duplicate": result.get("duplicate")}
    call.data = {k: v for k, v in call.data.items() if v is not None}
    return call.ignored("addDocument") + answers.job_answer(job, counter=call.da.ctx.counter,
                                                            max_tokens=call.da.settings.anchor_tokens)


LIST_PAGE_SIZE = 50
"""Most documents per listDocuments answer (``limit`` asks for fewer; the budget may keep fewer)."""


def list_documents(call: Call) -> str:
    """A page of documents (``cursor``, ``limit``, ``tag``, ``type``, ``title``) within the call's
    budget (:meth:`Call.budget`, counted with the product's counter on the whole answer): as many
    of the page's lines as fit, the next page's cursor starting after the last one shown."""
    doc_type = check_doc_type(call.text("type")) if call.text("type") else None
    flt = Filter(tags=tuple(check_tags([call.text("tag")])) if call.text("tag") else (),
                 doc_types=(doc_type,) if doc_type else (),
                 title=call.text("title"))
    limit = call.args.get("limit")
    size = LIST_PAGE_SIZE if limit is None else check_limit(limit, LIST_PAGE_SIZE)
    records, cursor = call.da.list_documents(call.namespace), call.text("cursor")
    note = call.ignored("listDocuments")

    def answer(n: int, brief: bool) -> tuple[str, Page]:
        found = page(records, flt, namespace=call.namespace, limit=n, cursor=cursor)
        return note + answers.list_answer(found.documents, call.namespace, total=found.total,
                                          next_cursor=found.next_cursor, filtered=flt.describe() if flt else "",
                                          named=call.named, remaining=found.remaining, brief=brief), found

    text, found = fitting_list(answer, size, call.budget(), call.da.ctx.counter)
    call.data = {"total": found.total, "next_cursor": found.next_cursor, "documents": [
        {"doc_id": r.doc_id, "title": r.title, "doc_type": r.doc_type, "n_pages": r.n_pages, "n_tokens": r.n_tokens,
         "tags": list(r.tags)} for r in found.documents]}
    return text


def fitting_list(answer: Callable[[int, bool], tuple[str, Page]], size: int, budget: int,
                 counter: TokenCounter) -> tuple[str, Page]:
    """``answer(n, brief)`` for the first ``n`` <= ``size`` documents tried whose whole text fits
    ``budget`` budget tokens (counted with ``counter``), and its page; the brief answer (no
    "More:" line) only when not even one line fits the full one. When not even one line fits the
    brief answer (a very long title), a sentence saying so, with an
    empty page. Each try after the first asks for as many lines as the last one's tokens suggest
    fit, and at least one fewer (:func:`docanchor.fit.shrink_to_fit`)."""
    def attempt(n: int, brief: bool) -> tuple[tuple[str, Page], int]:
        text, found = answer(n, brief)
        # an empty page is answered as it is: fewer lines cannot shorten it
        return (text, found), (counter.count(text) - budget if found.documents else 0)

    def fewer(n: int, last: tuple[str, Page], over: int) -> int:  # as many lines as the last try's tokens suggest
        return len(last[1].documents) * budget // (budget + over)

    for brief in (False, True):
        (text, found), fits = shrink_to_fit(partial(attempt, brief=brief), size, fewer)
        if fits:
            return text, found
    return (f"No document fits in an answer of {budget} tokens here: call listDocuments again with a larger "
            f"budget_tokens (at most {MAX_BUDGET_TOKENS}) or a `title` filter, or ask the user to look in "
            "`docanchor list` or the library page."), Page([], found.total, None, found.remaining + 1)


APIS: dict[str, Callable[[Call], str]] = {
    "addDocument": add_document,
    "searchDocuments": search_documents,
    "readDocument": read_document,
    "getDocumentAnchor": get_document_anchor,
    "listDocuments": list_documents,
}
"""Plugin API name (as in manifest.json) -> handler; each is served at ``/lobechat/<name>``."""


def _arguments() -> tuple[dict[str, Any], str]:
    """The raw body as an argument object, and a sentence when it could not be used.

    Raises:
        InvalidRequest: an argument holds a lone UTF-16 surrogate (see
            :func:`plugin.bodies.refuse_surrogates`); answered as a sentence naming it.
    """
    request.max_content_length = MAX_ARGUMENT_BYTES
    try:
        raw = request.get_data(cache=False)
    except RequestEntityTooLarge:
        return {}, f"The arguments were longer than {MAX_ARGUMENT_BYTES:,} bytes and were ignored."
    try:
        args = parse_json(raw, empty={})
    except DocAnchorError as err:
        if "field" in err.details:  # valid JSON, but not text: say which argument
            raise
        return {}, "The arguments were not valid JSON and were ignored."
    if not isinstance(args, dict):
        return {}, "The arguments must be a JSON object (e.g. {\"query\": \"...\"}); they were ignored."
    return args, ""


def _plugin_settings() -> dict[str, Any]:
    """The ``X-Lobe-Plugin-Settings`` header as an object; ``{}`` when absent, blank or a JSON value
    that is not an object (../shared/LOBECHAT.md: "parse defensively; non-object → {}").

    Raises:
        InvalidRequest: ``invalid_argument`` (``details.setting``) when the header is not JSON or
            longer than :data:`MAX_SETTINGS_HEADER_CHARS` characters (:func:`_unreadable_settings`),
            or a setting holds a lone UTF-16 surrogate: the namespace or key the user set cannot be
            read, and the defaults must not silently stand in for them.
    """
    raw = request.headers.get(SETTINGS_HEADER, "")
    if not raw:
        return {}
    if len(raw) > MAX_SETTINGS_HEADER_CHARS:
        raise _unreadable_settings(f"is longer than {MAX_SETTINGS_HEADER_CHARS:,} characters")
    try:
        value = parse_json(header_text(raw), empty={})
    except DocAnchorError as err:
        if err.details.get("field"):
            raise InvalidRequest(f"The plugin setting {err.message}", code="invalid_argument", setting=True,
                                 **err.details) from None
        raise _unreadable_settings("is not valid JSON") from None
    return value if isinstance(value, dict) else {}


def _unreadable_settings(problem: str) -> InvalidRequest:
    """The settings header could not be read (``problem``: what is wrong with it). Its text is not
    quoted: it may hold the user's API key."""
    return InvalidRequest(
        f"DocAnchor could not read the plugin settings sent with this call (the {SETTINGS_HEADER} header {problem}), "
        "so it did nothing rather than ignore the namespace and API key set there.",
        code="invalid_argument", setting=True)


def _key(plugin_settings: dict[str, Any]) -> str | None:
    key = plugin_settings.get("apiKey")
    if isinstance(key, str) and key.strip():
        return key.strip()
    return bearer_token(request.headers.get("Authorization"))


def _sentence_for(err: DocAnchorError) -> str:
    """What the model should do about a recoverable error."""
    if err.code == "document_indexing":  # raised by DocAnchor.get_document while the ingest job runs
        d = err.details
        return answers.indexing_answer(str(d.get("doc_id", "")), int(d.get("percent", 0)), str(d.get("stage", "")))
    if isinstance(err, Unauthorized):
        if err.code == "invalid_api_key":
            return ("The API key in the DocAnchor plugin settings is not valid. Ask the user to correct it in "
                    "the plugin's settings, then try again.")
        return ("DocAnchor needs an API key. Ask the user to enter their DocAnchor API key in the plugin's "
                "settings, then try again.")
    if err.details.get("setting"):
        return f"{err.message} Ask the user to correct it in the plugin's settings, then try again."
    if isinstance(err, ArgumentRefused) or err.details.get("field") == "budget_tokens":  # says how to call again
        return err.message
    if isinstance(err, Forbidden) or err.code == "invalid_namespace":
        return f"{err.message} Ask the user to clear or correct the namespace in the plugin's settings."
    if err.code == "document_not_found":
        return (f"No document has the id {err.details.get('doc_id', '')!r}. Call listDocuments to see the doc ids "
                "that exist, then try again.")
    if err.code == "store_unavailable":  # the operator's to fix: the model tells the user every door's sentence
        return f"{err.message} Tell the user; whoever runs DocAnchor can fix this, and the call works again after."
    if isinstance(err, FetchError) or err.code.startswith("url_") or err.code == "too_large":
        return f"{err.message} Tell the user; they can upload the file through DocAnchor's upload page instead."
    if err.http_status == 422 or err.code == "unsupported_type":
        return f"DocAnchor could not read that document ({err.code}): {err.message} Tell the user."
    return f"{err.message} Correct the arguments and call again."


def is_fault(err: DocAnchorError) -> bool:
    """True when ``err`` is a real fault, answered as one (LobeChat: a 5xx in the SDK's error shape,
    :func:`_fault`; MCP: a fixed sentence) rather than with :func:`_sentence_for`'s sentence for the
    model: a 5xx, except a URL that could not be fetched (the user can give another) and a vector
    store that does not answer (``store_unavailable``: the user can have it started, and the model
    can only tell them if it gets the sentence -- LobeChat shows a 5xx as an error card the model
    never sees)."""
    return err.http_status >= 500 and not isinstance(err, FetchError) and err.code != "store_unavailable"


def _answer(name: str) -> Response:
    return answer_call(name, partial(run_api, name))


def answer_call(name: str, handler: Callable[[Call], str]) -> Response:
    """The answer of a LobeChat call of API ``name`` (a plain-text sentence for the model, or a
    fault's JSON): its arguments and ``X-Lobe-Plugin-Settings`` read, its API key and namespace
    checked (:func:`docanchor.access.resolve_namespace`: the one rule every door applies), then
    ``handler``'s text. Every route LobeChat may call answers through here (the ``/lobechat/<api>``
    routes and the standalone manifest's ``POST /ui/upload``)."""
    da: DocAnchor = current_app.extensions["docanchor"]
    note = ""
    try:
        args, note = _arguments()
        plugin_settings = _plugin_settings()
        ns_setting = plugin_settings.get("namespace")
        namespace = resolve_namespace(
            current_app.config["DOCANCHOR_SETTINGS"], _key(plugin_settings),
            ns_setting.strip() if isinstance(ns_setting, str) and ns_setting.strip() else None,
        )
        text = handler(Call(da, args, plugin_settings, namespace))
    except DocAnchorError as err:
        log_error(log, f"plugin call {name}", err)
        if is_fault(err):
            return _fault(err)
        text = _sentence_for(err)
    except Exception:  # a crash must not echo internals; the traceback goes to the log
        log.exception("plugin call %s crashed", name)
        return _fault(DocAnchorError())
    text = f"{note} {text.strip()}".strip()
    return Response(text or "DocAnchor had nothing to return; try again with other arguments.",
                    mimetype="text/plain")


def _fault(err: DocAnchorError) -> Response:
    """A real fault in the SDK's error shape (the model never sees it; the user gets a card)."""
    body = {"errorType": "PluginServerError", "body": {"code": err.code, "message": err.message}}
    return Response(json.dumps(body), status=err.http_status, mimetype="application/json")


for _name in APIS:
    bp.add_url_rule(f"/lobechat/{_name}", endpoint=_name, view_func=lambda _n=_name: _answer(_n), methods=["POST"])
