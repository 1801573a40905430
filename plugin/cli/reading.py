"""``search``, ``read``, ``list``, ``anchor`` and ``delete``: through a running server's API when one
holds the data dir, else on the data dir itself (without loading the model, except ``search``)."""

from __future__ import annotations

import json
import os
import shlex

import click

from docanchor.display import counted
from docanchor.errors import InvalidRequest, budget_too_small
from plugin.cli.app import Runtime, cli_words, json_option, main, pass_rt

class BudgetTokens(click.ParamType):
    """``--budget``: a whole number of tokens, checked by the API's rule (:func:`plugin.api.check_budget`:
    1 to :data:`docanchor.settings.MAX_BUDGET_TOKENS`; ``500.0`` is 500, ``1.5`` is refused, not
    rounded). A refusal is a usage error (exit status 2) reported as the API's ``invalid_argument``
    in the command line's words (:func:`cli_words`), with ``details.field`` ``budget_tokens`` as
    every usage error names its parameter (:func:`plugin.cli.app.usage_error`)."""

    name = "integer"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> int:
        from plugin.api import check_budget  # not at import time: the CLI starts without the API's imports

        number = value
        if isinstance(value, str):
            for kind in (int, float):
                try:
                    number = kind(value.strip())
                    break
                except ValueError:
                    continue
        try:
            return check_budget(number)
        except InvalidRequest as err:
            refused = InvalidRequest(cli_words(err.message), code=err.code, field="budget_tokens")
            raise click.BadParameter(refused.message, ctx=ctx, param=param) from refused


BUDGET = BudgetTokens()


class SearchQuery(click.ParamType):
    """``QUERY``: checked by the API's rule (:func:`plugin.api.check_query`); an empty or blank one
    is a usage error (exit status 2) reported as the API's ``invalid_argument``, as ``--budget`` is."""

    name = "text"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from plugin.api import check_query  # not at import time: the CLI starts without the API's imports

        try:
            check_query(value)
        except InvalidRequest as err:
            refused = InvalidRequest(cli_words(err.message), code=err.code, field="query")
            raise click.BadParameter(refused.message, ctx=ctx, param=param) from refused
        return str(value)


def _doc_ids(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    """``--doc``: a blank one is a usage error (exit status 2), reported as ``invalid_argument``."""
    if any(not d.strip() for d in value):
        refused = InvalidRequest("--doc needs a document id (docanchor list shows them); omit --doc to search all "
                                 "documents.", code="invalid_argument", field="doc_ids")
        raise click.BadParameter(refused.message, ctx=ctx, param=param) from refused
    return value


@main.command()
@click.argument("query", type=SearchQuery())
@click.option("--budget", "budget_tokens", type=BUDGET,
              help="Most tokens of the rendered context (default: DOCANCHOR_DEFAULT_BUDGET_TOKENS, else 1000).")
@click.option("--doc", "doc_ids", multiple=True, metavar="DOC_ID", callback=_doc_ids,
              help="Search only this document (repeatable).")
@json_option("Print the full result as JSON.")
@click.option("--explain", is_flag=True, help="Also show what happened to every candidate.")
@pass_rt
def search(rt: Runtime, query: str, budget_tokens: int | None, doc_ids: tuple[str, ...], as_json: bool,
           explain: bool) -> None:
    """Print the sections that answer QUERY, with citations, within a token budget."""
    result = rt.backend().retrieve(query, budget_tokens, list(doc_ids) or None, explain)
    if as_json:
        click.echo(json.dumps(result, ensure_ascii=False, indent=2))
        return
    if result["sections"]:
        click.echo(result["context"])
    message = result.get("message")
    click.echo(f"\n{counted(len(result['sections']), 'section')}, {result['context_tokens_used']} of {result['budget_tokens']} "
               "tokens." + (f" {cli_words(message)}" if message else ""), err=True)
    if explain and result.get("trace") is not None:
        click.echo("\nexplain:\n" + json.dumps(result["trace"], ensure_ascii=False, indent=2))


@main.command()
@click.argument("doc_id")
@click.option("--from", "start", metavar="WHERE",
              help="A heading, page:N, chunk:N, char:N or the cursor of an earlier read.")
@click.option("--budget", "budget_tokens", type=BUDGET, help="Most tokens to print (default: DOCANCHOR_DEFAULT_BUDGET_TOKENS, else 1000).")
@json_option("Print the full result as JSON.")
@pass_rt
def read(rt: Runtime, doc_id: str, start: str | None, budget_tokens: int | None, as_json: bool) -> None:
    """Print a document in order from a position, within a token budget, and where to continue."""
    try:
        window = rt.backend().read(doc_id, start, budget_tokens)
    except InvalidRequest as err:  # the reader names its Python argument `start`; this command calls it --from
        from retrieval.read import start_error

        raise start_error(err, "--from", "--from ") from err
    if not window["context"] and window.get("next_cursor"):
        # the reader's "too small" window: reading on from the same place shows nothing either
        raise budget_too_small(window["message"], window["budget_tokens"])
    if as_json:
        click.echo(json.dumps(window, ensure_ascii=False, indent=2))
        return
    if window.get("note"):  # before the text, on stderr as the other lines about the read
        click.echo(cli_words(window["note"]), err=True)
    if window["context"]:
        click.echo(window["context"])
    if window.get("message"):
        click.echo(cli_words(window["message"]), err=True)
    cursor = window.get("next_cursor")
    click.echo(f"\nnext: {_read_on(rt, doc_id, cursor)}" if cursor else "\n(end of document)", err=True)


def _read_on(rt: Runtime, doc_id: str, cursor: str) -> str:
    """The command that reads on from ``cursor``, naming the namespace when this one named it."""
    named = f"--namespace {shlex.quote(rt.namespace)} " if rt.namespace else ""
    return f"docanchor {named}read {doc_id} --from {shlex.quote(cursor)}"


@main.command("list")
@json_option("Print the documents as JSON (as GET /v1/documents lists them).")
@pass_rt
def list_(rt: Runtime, as_json: bool) -> None:
    """List stored documents: id, type, pages, chunks, tokens, title and where each came from."""
    docs = rt.backend().list_documents()
    if as_json:
        click.echo(json.dumps(docs, ensure_ascii=False, indent=2))
        return
    if not docs:
        click.echo("no documents yet; add some with: docanchor ingest PATH", err=True)
        return
    click.echo(f"{'doc_id':<22} {'type':<5} {'pages':>5} {'chunks':>6} {'tokens':>9}  title  (source)")
    for d in docs:
        click.echo(f"{d['doc_id']:<22} {d['doc_type']:<5} {d['n_pages'] or '':>5} {d['n_chunks']:>6} "
                   f"{d['n_tokens']:>9}  {d['title']}{source_note(d)}")


def source_note(doc: dict) -> str:
    """``"  (where it came from)"`` for a listed document: its first source (a path under the
    working directory shown relative to it) and how many more; "" for documents without one."""
    sources = doc.get("sources") or ([doc["source_name"]] if doc.get("source_name") else [])
    if not sources:
        return ""
    first = sources[0]
    if os.path.isabs(first):
        relative = os.path.relpath(first)
        first = relative if not relative.startswith("..") else first
    more = f", +{len(sources) - 1} more" if len(sources) > 1 else ""
    return f"  ({first}{more})"


@main.command()
@click.argument("doc_id")
@pass_rt
def anchor(rt: Runtime, doc_id: str) -> None:
    """Print a document's anchor (at most 300 tokens)."""
    click.echo(rt.backend().anchor(doc_id))


@main.command()
@click.argument("doc_id")
@pass_rt
def delete(rt: Runtime, doc_id: str) -> None:
    """Delete a document and all of its chunks."""
    removed = rt.backend("delete").delete(doc_id)
    click.echo(f"deleted {doc_id} ({counted(removed, 'chunk')})")
