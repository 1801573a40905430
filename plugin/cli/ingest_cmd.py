"""``docanchor ingest``: files and folders into the index, one line per file."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import click

from docanchor.errors import DocAnchorError, TooLarge
from plugin.cli.app import Runtime, main, pass_rt
from plugin.cli.files import collect_files, skipped_line

log = logging.getLogger("docanchor.cli")


def ingest_one(da, path: Path, namespace: str | None, progress=None) -> tuple[str, str, int, str]:
    """Ingest one file. Returns ``(status, line, n_chunks, anchor)``; status is ok, skipped or error."""
    try:
        size = path.stat().st_size
        if size > da.settings.max_upload_bytes:
            raise TooLarge(f"The file is {size:,} bytes; DocAnchor accepts at most {da.settings.max_upload_bytes:,} "
                           "bytes (DOCANCHOR_MAX_UPLOAD_BYTES).")
        data = path.read_bytes()
    except OSError as exc:
        return "error", f"error unreadable_file: The file cannot be read ({exc.strerror}). [{path}]", 0, ""
    except DocAnchorError as err:
        return "error", f"error {err.code}: {err.message} [{path}]", 0, ""
    try:
        result = da.ingest_bytes(data, filename=path.name, namespace=namespace, progress=progress)
    except DocAnchorError as err:
        return "error", f"error {err.code}: {err.message} [{path}]", 0, ""
    except Exception:  # one bad file never stops the rest
        log.exception("ingest of %s crashed", path)
        return "error", f"error internal: {DocAnchorError.default_message} [{path}]", 0, ""
    r = result.record
    if result.duplicate:
        return "skipped", f"skipped (unchanged) {r.doc_id} {r.title} [{path}]", 0, r.anchor
    return "ok", f"ok {r.doc_id} {r.title} ({r.n_chunks} chunks) [{path}]", r.n_chunks, r.anchor


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--show-anchor", is_flag=True, help="Print each document's anchor under its line.")
@pass_rt
def ingest(rt: Runtime, paths: tuple[Path, ...], show_anchor: bool) -> None:
    """Ingest files and folders (recursive, document types only); unchanged files are skipped, bad ones reported."""
    from tqdm import tqdm

    files, skipped, missing = collect_files(paths)
    counts = {"ok": 0, "skipped": 0, "error": 0}
    if skipped:
        click.echo(skipped_line(skipped))
    for p in missing:
        click.echo(f"error not_found: No file or folder at this path. [{p}]")
        counts["error"] += 1
    chunks, started = 0, time.monotonic()
    with rt.lock("ingest"):
        da = rt.da
        with tqdm(total=len(files), unit="file", file=sys.stderr, disable=None, dynamic_ncols=True) as bar:
            def progress(stage: str, done: int, total: int) -> None:
                bar.set_postfix_str(f"{stage} {done}/{total}" if total > 1 else stage, refresh=True)

            for path in files:
                bar.set_description(path.name[:32])
                status, line, n, anchor = ingest_one(da, path, rt.namespace, progress)
                counts[status] += 1
                chunks += n
                tqdm.write(line, file=sys.stdout)
                if show_anchor and anchor:
                    tqdm.write("\n" + anchor.strip() + "\n", file=sys.stdout)
                bar.update(1)
    total = len(files) + len(missing)
    click.echo(f"{total} file(s): {counts['ok']} ok, {counts['skipped']} skipped (unchanged), "
               f"{counts['error']} failed; {chunks} chunks in {time.monotonic() - started:.1f} s")
    if counts["error"]:
        click.get_current_context().exit(1)
