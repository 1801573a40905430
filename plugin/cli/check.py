"""``docanchor check``: the audit of :mod:`docanchor.integrity` on the command line.

It reads the data dir in this process (also while a server runs on it); ``--repair`` writes, so
it holds the data dir.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from docanchor.display import counted
from docanchor.errors import Conflict
from plugin.cli.app import main

if TYPE_CHECKING:
    from docanchor.integrity import Audit, CleanUp


@main.command()
@click.option("--all", "all_namespaces", is_flag=True, help="Check every namespace, not only the current one; one indexed with another embedding "
                   "model is named as not checked (exit 1; 'docanchor reindex' rebuilds it).")
@click.option("--repair", is_flag=True,
              help="Remove chunks without a document record and mend the lexical index (stop every other "
                   "DocAnchor process using a Chroma server first).")
@click.pass_obj
def check(rt, all_namespaces: bool, repair: bool) -> None:
    """Check that every document's chunks agree in the records, Chroma and the lexical index."""
    from docanchor.integrity import audit, clean_up

    rt.check_local_index("check" if repair else None)
    da = rt.da
    spaces = da.ctx.store.namespaces() if all_namespaces else [rt.namespace or da.settings.namespace]
    if repair:
        da.hold_data_dir("check")
        _say_repaired(clean_up(da.ctx, scan=True))
    reports, unchecked = [], []
    for ns in spaces:
        try:
            reports.append(audit(da.ctx, ns))
        except Conflict as err:  # indexed with another model: say so and check the others
            if not all_namespaces:
                raise
            unchecked.append(ns)
            click.echo(f"{ns!r}: not checked: {err.message}")
    for report in reports:
        click.echo(_summary(report))
        for d in report.problems:
            record = "no record" if d.record is None else f"record {d.record}"
            click.echo(f"  {d.doc_id}: {record}, Chroma {d.chroma}, lexical {d.lexical}")
    if not reports and not unchecked:
        click.echo("no namespaces yet", err=True)
    if any(r.orphans for r in reports):
        click.echo("orphan chunks belong to no document: an ingest stopped before its record was written (a process "
                   "killed midway, or a server's ingest that failed because the store stopped answering: that "
                   "server removes them once the store answers again), or one still under way in another process; "
                   "with no ingest running, 'docanchor check --repair' removes them", err=True)
    if any(len(r.problems) > len(r.orphans) for r in reports):
        click.echo("run 'docanchor check --repair' to remove chunks without a record and mend the lexical index",
                   err=True)
    if unchecked or any(not r.ok for r in reports):
        raise click.exceptions.Exit(1)


def _say_repaired(done: CleanUp) -> None:
    """One line per namespace the repair removed chunks from (the audit lines after it say what is left)."""
    for ns in sorted(set(done.discarded) | set(done.stray_chunks)):
        n = done.discarded.get(ns, 0) + done.stray_chunks.get(ns, 0)
        click.echo(f"{ns!r}: repaired: removed {counted(n, 'chunk')} without a document record")


def _summary(report: Audit) -> str:
    """``'NS': N documents, M chunks: ok``, or the problems: orphan chunks (with their count) and
    documents whose counts disagree."""
    recorded = [d for d in report.documents if d.record is not None]
    chunks = sum(d.record or 0 for d in recorded)
    problems = []
    if report.orphans:
        problems.append(f"{counted(report.orphan_chunks, 'orphan chunk')} (of "
                        f"{counted(len(report.orphans), 'document')} without a record)")
    if len(report.problems) > len(report.orphans):
        problems.append(f"{counted(len(report.problems) - len(report.orphans), 'document')} disagree")
    state = "; ".join(problems) or "ok"
    return f"{report.namespace!r}: {counted(len(recorded), 'document')}, {counted(chunks, 'chunk')}: {state}"
