"""``docanchor context assemble FILE.json`` and ``docanchor context compact FILE.json``.

FILE.json (``-`` for standard input) is the body ``POST /v1/context/assemble`` or ``POST
/v1/context/compact`` takes (:mod:`plugin.schemas.requests`: ``model``, ``messages`` ...);
the answer is the route's JSON on standard output, and one line on standard error says what
happened. ``--context-limit TOKENS`` sets the request's ``context_limit`` (over FILE.json's). Evidence (``query``) comes from the global ``--namespace``; offloads go to the
conversation's namespace. Like every command, it goes through a running server's API when one
holds the data dir; else it works on the data dir, holding it while it stores (``--explain-only``
stores nothing and holds nothing). Through a server, the context settings set in this process's
environment that a request may carry (:data:`plugin.conversation.REQUEST_SETTINGS`) are sent with
it (FILE.json's own fields win); one it cannot carry (the summary endpoint) is named in a warning.
"""

from __future__ import annotations

import json
import os
from typing import IO, Any

import click

from docanchor.display import counted
from plugin.cli.app import Runtime, main, pass_rt

_EXPLAIN_ONLY = click.option("--explain-only", is_flag=True, help="Plan and trace only; nothing is stored.")
_CONTEXT_LIMIT = click.option("--context-limit", type=int, metavar="TOKENS",
                              help="The model's context window in tokens (overrides FILE.json's context_limit); "
                                   "needed for a model DocAnchor does not know, and narrows a known one's.")


@main.group()
def context() -> None:
    """Fit a long conversation into its model's window: assemble a prompt, or compact the conversation."""


def _body(file: IO[bytes], schema: str, command: str, explain_only: bool, context_limit: int | None) -> dict[str, Any]:
    from plugin.bodies import parse_json, refuse_unknown_fields  # when it runs: the package stays light
    from plugin.schemas.common import sent_fields
    from plugin.schemas.requests import REQUESTS
    from retrieval.assembly.pressure import check_context_limit

    source = "standard input" if file.name == "<stdin>" else file.name
    # bytes: parse_json checks the encoding (UTF-8, a BOM allowed) and names the file when it is not
    body = parse_json(file.read(), source=source)
    if not isinstance(body, dict):
        raise click.UsageError(f"{file.name} must hold a JSON object with 'model' and 'messages'.")
    refuse_unknown_fields(body, tuple(sent_fields(REQUESTS[schema])), command)
    if context_limit is not None:
        body["context_limit"] = context_limit
    else:  # checked here, where the field is known to be the file's (the server's message names the option)
        check_context_limit(body.get("context_limit"), name=f"{source}'s context_limit")
    return {**body, "explain_only": True} if explain_only else body


def _answer(rt: Runtime, route: str, body: dict[str, Any]) -> dict[str, Any]:
    """The route's answer, from a running server or this process (holding the data dir to store)."""
    from plugin.cli.remote import Server

    stores = body.get("explain_only") is not True
    backend = rt.backend("context" if stores else None, creates=stores, missing_ok=not stores)
    if isinstance(backend, Server):
        body = _with_settings(rt, route, body, backend.where)
    return backend.context(route, body)


def _with_settings(rt: Runtime, route: str, body: dict[str, Any], where: str) -> dict[str, Any]:
    """``body`` with the context settings set in this environment that the request may carry;
    a warning on standard error for each set one that only the server's own apply."""
    from docanchor.settings import env_name
    from plugin.conversation import REQUEST_SETTINGS, SERVER_SETTINGS

    given = {name for name in {*REQUEST_SETTINGS[route], *SERVER_SETTINGS[route]} if os.environ.get(env_name(name))}
    sent = {name: getattr(rt.settings, name) for name in REQUEST_SETTINGS[route] if name in given and name not in body}
    for name in SERVER_SETTINGS[route]:
        if name in given:
            click.echo(f"warning: {env_name(name)} is set here but does not apply: {where} uses its own "
                       f"{name} (set it in the server's environment).", err=True)
    return {**body, **sent}


@context.command("assemble")
@click.argument("file", type=click.File("rb"))
@_EXPLAIN_ONLY
@_CONTEXT_LIMIT
@pass_rt
def assemble(rt: Runtime, file: IO[bytes], explain_only: bool, context_limit: int | None) -> None:
    """Print the assembled prompt for FILE.json ({model, messages, tools?, reserve_tokens?, conversation_id?,
    query?, budget_share?, explain_only?}) with its references and EXPLAIN trace."""
    body = _body(file, "ContextAssembleRequest", "docanchor context assemble", explain_only, context_limit)
    body.pop("namespace", None)  # evidence comes from --namespace, as for every command
    result = _answer(rt, "assemble", body)
    click.echo(json.dumps(result, ensure_ascii=False, indent=2))
    click.echo(f"{counted(len(result['messages']), 'message')}, {result['context_tokens_used']:,} of {result['budget_tokens']:,} "
               f"tokens; tier {result['tier']}, pressure {result['pressure']['before']} -> "
               f"{result['pressure']['after']}; {counted(len(result['references']), 'reference')} in conversation "
               f"{result['conversation_id']}", err=True)


@context.command("compact")
@click.argument("file", type=click.File("rb"))
@click.option("--mode", type=click.Choice(["continue", "handoff"]),
              help="continue: a summary and the recent rounds; handoff: a new conversation from the summary "
                   "(default: the file's mode, else continue).")
@_EXPLAIN_ONLY
@_CONTEXT_LIMIT
@pass_rt
def compact(rt: Runtime, file: IO[bytes], mode: str | None, explain_only: bool, context_limit: int | None) -> None:
    """Print FILE.json's conversation ({model, messages, mode?, conversation_id?, keep_rounds?, summary_tokens?})
    compacted, with the summary and the EXPLAIN trace."""
    body = _body(file, "ContextCompactRequest", "docanchor context compact", explain_only, context_limit)
    if mode:
        body["mode"] = mode
    result = _answer(rt, "compact", body)
    click.echo(json.dumps(result, ensure_ascii=False, indent=2))
    click.echo(f"{result['mode']}: {result['tokens_before']:,} -> {result['context_tokens_used']:,} tokens, "
               f"{counted(len(result['messages']), 'message')}; summary by {result['summary_source'] or 'nobody'} in conversation "
               f"{result['conversation_id']}", err=True)
