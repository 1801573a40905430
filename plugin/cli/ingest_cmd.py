"""``docanchor ingest``: files and folders into the index, kept in sync with their sources.

The plan (:mod:`plugin.cli.sync`) is made before anything is written; the work goes to the data
dir in this process or, when a server runs on it, to the server's API (:mod:`plugin.cli.remote`);
:mod:`plugin.cli.report` prints the outcomes, one line per file in the order the files were given
(:class:`InOrder`), whichever finishes first.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import click

from docanchor.display import counted
from docanchor.errors import DocAnchorError, unreadable_file
from plugin.cli.app import Runtime, json_option, main, pass_rt

if TYPE_CHECKING:  # imported by the command itself: other commands start without them
    from plugin.cli.report import Report
    from plugin.cli.sync import FileWork, Removal


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--sync", is_flag=True,
              help="Also remove documents whose file is gone from the folders given (asks first).")
@click.option("-y", "--yes", is_flag=True, help="With --sync, remove without asking.")
@click.option("--dry-run", is_flag=True, help="Say what would be added, replaced and removed; change nothing.")
@json_option("Print one JSON object per file instead of a line.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar and no lines for files that went well.")
@click.option("--show-anchor", is_flag=True, help="Print each document's anchor under its line.")
@pass_rt
def ingest(rt: Runtime, paths: tuple[Path, ...], sync: bool, yes: bool, dry_run: bool, as_json: bool, quiet: bool,
           show_anchor: bool) -> None:
    """Ingest files and folders (recursive, document types only); edited files replace their old version."""
    from tqdm import tqdm

    from plugin.cli.files import collect_files, is_folder, skipped_line
    from plugin.cli.report import Report
    from plugin.cli.sync import plan_files, plan_removals

    files, skipped, missing = collect_files(paths)
    folders = [p for p in paths if is_folder(p)]
    if sync and not folders:
        raise click.UsageError("--sync keeps a folder in step: name at least one folder.")
    backend = rt.backend(missing_ok=True) if dry_run else rt.backend("ingest", creates=True)
    docs = backend.list_documents()
    works = plan_files(files, docs, rt.settings.max_upload_bytes, precheck=dry_run)
    removals = plan_removals(folders, docs, works) if sync else []
    if not (yes or dry_run):
        removals = _confirmed(removals)
    with tqdm(total=len(works), unit="file", file=sys.stderr, disable=True if quiet or dry_run else None,
              dynamic_ncols=True, leave=False) as bar:
        report = Report(as_json=as_json, quiet=quiet, show_anchor=show_anchor, dry_run=dry_run,
                        write=lambda line: tqdm.write(line, file=sys.stdout))
        if skipped:
            report.not_a_document(skipped, skipped_line(skipped))
        for p in missing:
            report.missing(p)
        failed: set[str | None] = set()
        if dry_run:
            for work in works:
                report.planned(work)
        else:
            try:
                failed = _run(backend, works, report, bar, rt.settings.max_upload_bytes)
            except KeyboardInterrupt:
                from plugin.cli.remote import Server

                bar.close()
                report.interrupted(len(files) + len(missing), remote=isinstance(backend, Server))
                click.get_current_context().exit(130)
        for removal in removals:
            if removal.doc["doc_id"] not in failed:  # a renamed file whose ingest failed keeps its old path
                report.removal(removal, None if dry_run else backend.forget_source(removal.doc["doc_id"], removal.source))
    report.summary(len(files) + len(missing))
    if report.counts["failed"]:
        click.get_current_context().exit(1)


class InOrder:
    """Report lines in the order the files were given, whatever order they finish in.

    A server runs a small file's job beside a large one's (:mod:`plugin.runner`'s two lanes), so the
    third file given may finish first; its line waits until the lines of the files before it are
    out. Only the lines wait: the work and the progress bar do not (what a finished file holds is
    nothing but its line), so the order costs no throughput.
    """

    def __init__(self, works: list[FileWork]) -> None:
        self._place = {id(work): n for n, work in enumerate(works)}
        self._held: dict[int, Callable[[], None]] = {}
        self._next = 0

    def put(self, work: FileWork, line: Callable[[], None]) -> None:
        """Say ``line()`` for ``work`` now if every file before it has been reported, else later."""
        self._held[self._place[id(work)]] = line
        while self._next in self._held:
            self._held.pop(self._next)()
            self._next += 1

    def flush(self) -> None:
        """Say the lines held back, in order (the work stopped: no earlier line is coming)."""
        for n in sorted(self._held):
            self._held.pop(n)()


def _run(backend, works: list[FileWork], report: Report, bar, max_bytes: int) -> set[str | None]:
    """Send the files that need it to ``backend``; report each outcome (in the order of ``works``,
    :class:`InOrder`) and move ``bar`` as each finishes. Returns the doc_ids of the files that failed."""
    from plugin.cli.sync import read_limited

    todo, failed, lines = [], set(), InOrder(works)
    for work in works:
        if work.action == "error":
            lines.put(work, partial(report.failed, work, work.error))
        elif work.action == "unchanged":
            lines.put(work, partial(report.unchanged, work))
        else:
            todo.append(work)
            continue
        bar.update(1)

    def read(work: FileWork) -> tuple[bytes, str, str]:
        try:
            return read_limited(work.path, max_bytes), work.path.name, work.source
        except OSError as exc:
            raise unreadable_file(exc) from None

    def progress(work: FileWork, stage: str, done: int, total: int) -> None:
        bar.set_description(work.path.name[:30])
        bar.set_postfix_str(f"{stage} {done}/{total} chunks" if stage in ("embedding", "storing") and total
                            else stage, refresh=True)

    def finished(work: FileWork, result: dict | None, err: DocAnchorError | None) -> None:
        if err is not None or result is None:
            lines.put(work, partial(report.failed, work, err or DocAnchorError()))
            failed.add(work.doc_id)
        else:
            dropped = [backend.forget_source(d["doc_id"], work.source) for d in work.previous
                       if d["doc_id"] != result["doc_id"]]
            lines.put(work, partial(report.stored, work, result, dropped))
        bar.update(1)

    try:
        backend.ingest(todo, read, progress, finished)
    finally:  # Ctrl+C: the files that finished are said before what was left
        lines.flush()
    return failed


def _confirmed(removals: list[Removal]) -> list[Removal]:
    """``removals`` without the document deletions the user did not confirm (asked on stderr;
    no answer, as in a pipe without ``--yes``, keeps them)."""
    deleting = [r for r in removals if r.deletes]
    if not deleting:
        return removals
    have = "has" if len(deleting) == 1 else "have"
    click.echo(f"{counted(len(deleting), 'document')} {have} no file left in the synced folders:", err=True)
    for r in deleting:
        click.echo(f"  {r.doc['doc_id']} {r.doc['title']} [{r.source}]", err=True)
    try:
        if click.confirm("Remove them from the index?", default=False, err=True):
            return removals
    except click.Abort:
        pass
    click.echo(f"kept {counted(len(deleting), 'document')} whose files are gone; run again with --yes to remove them.", err=True)
    return [r for r in removals if not r.deletes]
