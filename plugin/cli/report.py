"""What ``docanchor ingest`` prints: a line per file (or, with ``--json``, one JSON object per file),
its quality notes, and the closing count."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Callable

import click

from docanchor.display import counted
from docanchor.errors import DocAnchorError
from plugin.cli.app import cli_words
from plugin.cli.sync import FileWork, Removal
from summarize.notes import quality_notes


class Report:
    """Prints each outcome as it happens and counts them.

    Args:
        as_json: one JSON object per file on stdout (the closing count goes to stderr).
        quiet: only failures (and JSON objects) are printed.
        show_anchor: print each stored document's anchor under its line.
        dry_run: outcomes are plans ("would add ...").
        write: how a line reaches stdout (``tqdm.write`` while a progress bar is shown).
    """

    def __init__(self, *, as_json: bool, quiet: bool, show_anchor: bool, dry_run: bool,
                 write: Callable[[str], None] = click.echo) -> None:
        self.as_json, self.quiet, self.show_anchor, self.dry_run = as_json, quiet, show_anchor, dry_run
        self.write = write
        self.counts: Counter[str] = Counter()
        self.chunks = 0
        self.started = time.monotonic()

    def emit(self, obj: dict, line: str, counted: str) -> None:
        """Print one outcome (``obj`` with --json, else ``line``) and count it under ``counted``."""
        self.counts[counted] += 1
        if self.as_json:
            self.write(json.dumps({**obj, "dry_run": self.dry_run}, ensure_ascii=False))
        elif not self.quiet or counted == "failed":
            self.write(line)

    def not_a_document(self, paths: list[Path], line: str) -> None:
        """Folder files that are no document type: one line, or one object per file."""
        if self.as_json:
            for p in paths:
                self.write(json.dumps({"path": str(p), "action": "not_a_document", "dry_run": self.dry_run}))
        elif not self.quiet:
            self.write(line)

    def missing(self, path: Path) -> None:
        err = DocAnchorError("No file or folder at this path; check its spelling and the folder the command runs in.",
                             code="not_found")
        self.emit(_failed_obj(str(path), None, err), f"error {err.code}: {err.message} [{path}]", "failed")

    def failed(self, work: FileWork, err: DocAnchorError) -> None:
        self.emit(_failed_obj(str(work.path), work.source, err),
                  f"error {err.code}: {cli_words(err.message)} [{work.path}]", "failed")

    def planned(self, work: FileWork) -> None:
        """A file's plan, as ``--dry-run`` prints it."""
        if work.action == "error":
            err = work.error
            return self.emit(_failed_obj(str(work.path), work.source, err),  # type: ignore[arg-type]
                             f"would fail: {err.code}: {cli_words(err.message)} [{work.path}]", "failed")
        obj = {"path": str(work.path), "source": work.source, "doc_id": work.doc_id,
               "replaced": [d["doc_id"] for d in work.previous]}
        if work.action == "unchanged":
            title = work.stored["title"] if work.stored else ""
            self.emit({**obj, "action": "unchanged"}, f"would skip (unchanged) {work.doc_id} {title} [{work.path}]",
                      "skipped")
        elif work.action == "replace":
            old = ", ".join(obj["replaced"])
            self.emit({**obj, "action": "replaced"}, f"would replace {old} [{work.path}]", "replaced")
        elif work.stored is not None:  # ingest skips it (and adds this path to its sources): say so as ingest does
            others = [s for s in work.stored.get("sources") or [] if s != work.source]
            why = f"same content as {others[0]}" if others else "unchanged"
            self.emit({**obj, "action": "same_content"},
                      f"would skip ({why}) {work.doc_id} {work.stored['title']} [{work.path}]", "skipped")
        else:
            self.emit({**obj, "action": "added"}, f"would add [{work.path}]", "ok")

    def stored(self, work: FileWork, result: dict, dropped: list[dict]) -> None:
        """A file sent to the index: ``result`` is the ingest answer, ``dropped`` what taking its
        path off each earlier version did (``forget_source`` answers)."""
        n = 0 if result.get("duplicate") else int(result.get("n_chunks") or 0)
        self.chunks += n
        notes = quality_notes(result.get("flags") or {})
        obj = {"path": str(work.path), "source": work.source, "doc_id": result["doc_id"], "title": result["title"],
               "n_chunks": result.get("n_chunks"), "flags": result.get("flags") or {}, "quality": notes,
               "replaced": [d["doc_id"] for d in dropped],
               "chunks_removed": sum(d.get("chunks_removed", 0) for d in dropped)}
        head = f"{result['doc_id']} {result['title']}"
        tail = (f" — {'; '.join(notes)}" if notes else "") + f" [{work.path}]"
        if dropped:
            gone = [d["doc_id"] for d in dropped if d.get("deleted")]
            kept = [d["doc_id"] for d in dropped if not d.get("deleted")]
            line = (f"replaced {', '.join(gone or kept)} -> {head} ({counted(n, 'chunk')}"
                    + (f"; {', '.join(kept)} stays: other files have it" if kept else "") + ")" + tail)
            self.emit({**obj, "action": "replaced"}, line, "replaced")
        elif result.get("duplicate"):
            others = [s for s in result.get("sources") or [] if s != work.source]
            why = f"same content as {others[0]}" if others else "unchanged"
            self.emit({**obj, "action": "same_content" if others else "unchanged"},
                      f"skipped ({why}) {head} [{work.path}]", "skipped")
        else:
            self.emit({**obj, "action": "added"}, f"ok {head} ({counted(n, 'chunk')}){tail}", "ok")
        if self.show_anchor and result.get("anchor") and not self.as_json:
            self.write("\n" + str(result["anchor"]).strip() + "\n")

    def unchanged(self, work: FileWork) -> None:
        doc = work.stored or {}
        self.emit({"path": str(work.path), "source": work.source, "doc_id": work.doc_id, "title": doc.get("title"),
                   "action": "unchanged"}, f"skipped (unchanged) {work.doc_id} {doc.get('title', '')} [{work.path}]",
                  "skipped")

    def removal(self, removal: Removal, result: dict | None) -> None:
        """A source gone from a synced folder: ``result`` is the ``forget_source`` answer (``None``
        in a dry run)."""
        d = removal.doc
        deleted = removal.deletes if result is None else bool(result.get("deleted"))
        would = "would " if result is None else ""
        obj = {"path": removal.source, "source": removal.source, "doc_id": d["doc_id"], "title": d["title"],
               "action": "removed" if deleted else "forgotten",
               "chunks_removed": d.get("n_chunks", 0) if result is None else result.get("chunks_removed", 0)}
        if deleted:
            line = (f"{would}remove {d['doc_id']} {d['title']} ({counted(obj['chunks_removed'], 'chunk')}): its file is gone "
                    f"[{removal.source}]")
        else:
            line = f"{would}forget [{removal.source}]: {d['doc_id']} {d['title']} stays (other files have it)"
        self.emit(obj, line, "removed" if deleted else "forgotten")

    def summary(self, n_files: int) -> None:
        c = self.counts
        if self.dry_run:
            text = (f"dry run, nothing changed: {counted(n_files, 'file')}: {c['ok']} to add, {c['replaced']} to replace, "
                    f"{c['skipped']} unchanged, {c['failed']} failed; {counted(c['removed'], 'document')} to remove")
        else:
            text = (f"{counted(n_files, 'file')}: {c['ok']} ok, {c['skipped']} skipped (unchanged), {c['failed']} failed"
                    + (f", {c['replaced']} replaced" if c["replaced"] else "")
                    + (f"; {counted(c['removed'], 'document')} removed" if c["removed"] else "")
                    + f"; {counted(self.chunks, 'chunk')} in {time.monotonic() - self.started:.1f} s")
        if not self.quiet:
            click.echo(text, err=self.as_json)

    def interrupted(self, n_files: int, *, remote: bool) -> None:
        """Say, on stderr, what a Ctrl-C left: files stored, files skipped as unchanged (stored
        before this run, not by it), files not ingested, how to finish."""
        c = self.counts
        stored = c["ok"] + c["replaced"]
        skipped = f", {c['skipped']} skipped (unchanged)" if c["skipped"] else ""
        failed = f", {c['failed']} failed" if c["failed"] else ""
        left = n_files - stored - c["skipped"] - c["failed"]
        said = f"interrupted: {stored} of {counted(n_files, 'file')} stored{skipped}, {left} not ingested{failed}"
        if not left:  # Ctrl-C came after the last file's write: nothing was left to stop
            click.echo(f"{said}; every file was ingested before it stopped.", err=True)
            return
        where = ("the files in progress were not stored (their jobs on the server were cancelled)" if remote
                 else "the file in progress was not stored")
        click.echo(f"{said}; {where}; run the same command again to finish (stored files are skipped as "
                   "unchanged).", err=True)


def _failed_obj(path: str, source: str | None, err: DocAnchorError) -> dict:
    """A failure's JSON object; its message in the command line's words, as the text line says it."""
    return {"path": path, "source": source, "action": "failed",
            "error": {"code": err.code, "message": cli_words(err.message)}}
