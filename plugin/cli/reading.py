"""``search``, ``read``, ``list``, ``anchor`` and ``delete``."""

from __future__ import annotations

import json

import click

from docanchor.errors import InvalidRequest
from plugin.cli.app import Runtime, cli_words, main, pass_rt


@main.command()
@click.argument("query")
@click.option("--budget", "budget_tokens", type=click.IntRange(min=1),
              help="Most tokens of the rendered context (default: DOCANCHOR_DEFAULT_BUDGET_TOKENS, else 1000).")
@click.option("--doc", "doc_ids", multiple=True, metavar="DOC_ID", help="Search only this document (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the full result as JSON.")
@click.option("--explain", is_flag=True, help="Also show what happened to every candidate.")
@pass_rt
def search(rt: Runtime, query: str, budget_tokens: int | None, doc_ids: tuple[str, ...], as_json: bool,
           explain: bool) -> None:
    """Print the sections that answer QUERY, with citations, within a token budget."""
    if any(not d.strip() for d in doc_ids):
        raise InvalidRequest("--doc needs a document id (docanchor list shows them); omit --doc to search all "
                             "documents.", code="invalid_argument")
    result = rt.da.retrieve(query, budget_tokens, doc_ids=list(doc_ids) or None, namespace=rt.namespace,
                            explain=explain)
    if as_json:
        click.echo(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
        return
    if result.sections:
        click.echo(result.context)
    click.echo(f"\n{len(result.sections)} section(s), {result.context_tokens_used} of {result.budget_tokens} tokens."
               + (f" {cli_words(result.message)}" if result.message else ""), err=True)
    if explain and result.trace is not None:
        click.echo("\nexplain:\n" + json.dumps(result.trace, ensure_ascii=False, indent=2))


@main.command()
@click.argument("doc_id")
@click.option("--from", "start", metavar="WHERE", help="A heading, page:N, chunk:N or the cursor of an earlier read.")
@click.option("--budget", "budget_tokens", type=click.IntRange(min=1), help="Most tokens to print (default: DOCANCHOR_DEFAULT_BUDGET_TOKENS, else 1000).")
@click.option("--json", "as_json", is_flag=True, help="Print the full result as JSON.")
@pass_rt
def read(rt: Runtime, doc_id: str, start: str | None, budget_tokens: int | None, as_json: bool) -> None:
    """Print a document in order from a position, within a token budget, and where to continue."""
    from retrieval.read import reword_start

    try:
        window = rt.da.read(doc_id, start=start, budget_tokens=budget_tokens, namespace=rt.namespace)
    except InvalidRequest as err:  # the reader names its Python argument `start`; this command calls it --from
        raise InvalidRequest(reword_start(err.message, "--from", "--from "), code=err.code, **err.details) from err
    if as_json:
        click.echo(json.dumps(window.to_dict(), ensure_ascii=False, indent=2))
        return
    if window.context:
        click.echo(window.context)
    if window.message:
        click.echo(cli_words(window.message), err=True)
    click.echo(f"\nnext: docanchor read {doc_id} --from {window.next_cursor}" if window.next_cursor
               else "\n(end of document)", err=True)


@main.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the records as JSON.")
@pass_rt
def list_(rt: Runtime, as_json: bool) -> None:
    """List stored documents: id, type, pages, chunks, tokens, title."""
    docs = rt.da.list_documents(rt.namespace)
    if as_json:
        click.echo(json.dumps([d.to_dict() for d in docs], ensure_ascii=False, indent=2))
        return
    if not docs:
        click.echo("no documents yet; add some with: docanchor ingest PATH", err=True)
        return
    click.echo(f"{'doc_id':<22} {'type':<5} {'pages':>5} {'chunks':>6} {'tokens':>9}  title")
    for d in docs:
        click.echo(f"{d.doc_id:<22} {d.doc_type:<5} {d.n_pages or '':>5} {d.n_chunks:>6} {d.n_tokens:>9}  {d.title}")


@main.command()
@click.argument("doc_id")
@pass_rt
def anchor(rt: Runtime, doc_id: str) -> None:
    """Print a document's anchor (at most 300 tokens)."""
    click.echo(rt.da.anchor(doc_id, rt.namespace))


@main.command()
@click.argument("doc_id")
@pass_rt
def delete(rt: Runtime, doc_id: str) -> None:
    """Delete a document and all of its chunks."""
    with rt.lock("delete"):
        removed = rt.da.delete_document(doc_id, rt.namespace)
    click.echo(f"deleted {doc_id} ({removed} chunks)")
