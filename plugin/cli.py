"""The ``docanchor`` command line: serve, ingest, search, read, list, anchor, delete, reindex, check.

Every command prints ``error <code>: <message>`` to stderr and exits 1 on a DocAnchor error,
never a traceback (``-v`` logs one). Tests inject a ready :class:`DocAnchor` through click's
``obj`` (``CliRunner().invoke(main, args, obj=da)``); otherwise one is built lazily from
``DOCANCHOR_*`` variables and ``--data-dir``, so ``--help`` loads nothing.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections import Counter
from functools import cached_property
from pathlib import Path
from typing import Any

import click

from docanchor.errors import DocAnchorError, InvalidRequest, TooLarge
from docanchor.settings import Settings
from plugin.api import DocAnchor
from plugin.lock import DataDirLock
from retrieval.read import reword_start

log = logging.getLogger("docanchor.cli")


class Runtime:
    """Settings and the DocAnchor instance of one CLI run, built on first use."""

    def __init__(self, data_dir: Path | None, namespace: str | None, injected: DocAnchor | None) -> None:
        self.data_dir = data_dir
        self.namespace = namespace
        self.injected = injected

    @cached_property
    def settings(self) -> Settings:
        if self.injected is not None:
            return self.injected.settings
        overrides: dict[str, Any] = {"data_dir": self.data_dir} if self.data_dir else {}
        return Settings.from_env(**overrides)

    @cached_property
    def da(self) -> DocAnchor:
        return self.injected or DocAnchor(self.settings)

    def lock(self, holder: str) -> DataDirLock:
        """The data-dir lock a write command holds (see :mod:`plugin.lock`)."""
        return DataDirLock(self.settings, holder)


class DocAnchorGroup(click.Group):
    """Turns DocAnchor errors (and crashes) into one stderr line and exit status 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise
        except DocAnchorError as err:
            if err.__cause__ is not None:
                log.debug("cause", exc_info=err)
            click.echo(f"error {err.code}: {cli_words(err.message)}", err=True)
            ctx.exit(1)
        except Exception:  # no traceback for users; -v logs it
            log.debug("crash", exc_info=True)
            click.echo(f"error internal: {DocAnchorError.default_message} (run with -v for details)", err=True)
            ctx.exit(1)


pass_rt = click.make_pass_decorator(Runtime)

_CLI_WORDS = (("'budget_tokens'", "--budget"), ("budget_tokens", "--budget"),
              ("upload one, then", "add documents with `docanchor ingest PATH`, then"))
"""Library argument names and the options the commands give them (the reader's ``start`` is
reworded by :func:`retrieval.read.reword_start` where ``read`` catches its errors)."""


def cli_words(message: str) -> str:
    """A library message in the command line's words: "raise budget_tokens" reads "raise --budget"."""
    for library, option in _CLI_WORDS:
        message = message.replace(library, option)
    return message


def _version(ctx: click.Context, wanted: bool) -> None:
    if not wanted or ctx.resilient_parsing:
        return
    from importlib.metadata import PackageNotFoundError, version

    try:
        click.echo(f"docanchor {version('docanchor')}")
    except PackageNotFoundError:
        click.echo("docanchor (running from a source tree, not installed)")
    ctx.exit(0)
_LOG_HANDLER_NAME = "docanchor-cli"


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is now (click's test runner swaps it per run)."""

    @property  # type: ignore[override]
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def _configure_logging(level: int) -> None:
    """One stderr handler whose own level filters every logger (some libraries log DEBUG
    regardless of the root level)."""
    root = logging.getLogger()
    handler = next((h for h in root.handlers if h.get_name() == _LOG_HANDLER_NAME), None)
    if handler is None:
        handler = _StderrHandler()
        handler.set_name(_LOG_HANDLER_NAME)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    handler.setLevel(level)
    root.setLevel(level)


@click.group(cls=DocAnchorGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where the index lives (default: DOCANCHOR_DATA_DIR, else ./docanchor-data).")
@click.option("--namespace", help="The namespace to work in (default: DOCANCHOR_NAMESPACE, else 'default').")
@click.option("-v", "--verbose", is_flag=True, help="Log progress and tracebacks to stderr.")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=lambda c, p, v: _version(c, v),
              help="Show the version and exit.")
@click.pass_context
def main(ctx: click.Context, data_dir: Path | None, namespace: str | None, verbose: bool) -> None:
    """DocAnchor: long documents out of the chat — a small anchor in, cited sections out under a token budget."""
    _configure_logging(logging.DEBUG if verbose else logging.WARNING)
    if not verbose:  # the model loader's own progress bars would bury DocAnchor's lines
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    injected = ctx.obj if isinstance(ctx.obj, DocAnchor) else None
    ctx.obj = Runtime(data_dir, namespace, injected)


# ---------------------------------------------------------------------------- serve
@main.command()
@click.option("--host", help="Address to bind (default: DOCANCHOR_HOST, else 127.0.0.1).")
@click.option("--port", type=click.IntRange(0, 65535), help="Port (default: DOCANCHOR_PORT, else 8765).")
@click.option("--threads", type=click.IntRange(1, 256), help="Worker threads (default: DOCANCHOR_SERVER_THREADS, else 8).")
@pass_rt
def serve(rt: Runtime, host: str | None, port: int | None, threads: int | None) -> None:
    """Serve the HTTP API and the LobeChat plugin (waitress: one process, several threads)."""
    from plugin.serve import serve as run

    settings = rt.settings
    host = host or settings.host
    port = settings.port if port is None else port
    if not os.environ.get("DOCANCHOR_PUBLIC_BASE_URL"):
        shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        settings = settings.with_(public_base_url=f"http://{shown}:{port}")
        if shown != host:
            click.echo("note: set DOCANCHOR_PUBLIC_BASE_URL to the address LobeChat's server reaches; the manifest "
                       f"now says {settings.public_base_url}.", err=True)
    _configure_logging(min(logging.getLogger().level, logging.INFO))
    run(settings, rt.injected, host=host, port=port, threads=threads or settings.server_threads)


@main.command()
@pass_rt
def mcp(rt: Runtime) -> None:
    """Serve the tools and anchors over MCP on stdin/stdout (Claude Desktop, Cursor, LobeHub)."""
    # Only protocol messages reach stdout (logs go to stderr). A running server's data dir cannot be
    # shared: MCP clients then use that server's /mcp endpoint (plugin/mcp_http.py).
    from docanchor.errors import Conflict
    from plugin.mcp_server import run_stdio

    try:
        lock = rt.lock("mcp").acquire()
    except Conflict as err:
        raise Conflict(f"{err.message} An MCP client can use the running server at its /mcp endpoint "
                       "(Streamable HTTP) instead.", code=err.code) from None
    try:
        run_stdio(rt.da, rt.namespace)
    finally:
        lock.release()


# ---------------------------------------------------------------------------- ingest
FOLDER_EXTENSIONS = frozenset({
    ".pdf", ".docx", ".txt", ".md", ".markdown", ".mdown", ".mkd", ".htm", ".html", ".xhtml", ".csv", ".tsv",
})
"""File name endings (lower case) taken from a folder: the types DocAnchor parses (PDF, DOCX, text,
Markdown, HTML, CSV), spelled as :func:`ingest.detect.detect_type` reads them. Other files in a
folder (source code, images, archives...) are skipped; a file named on the command line is tried
whatever its name."""


def collect_files(paths: tuple[Path, ...]) -> tuple[list[Path], list[Path], list[Path]]:
    """Files to ingest under ``paths``, files skipped in folders, and paths that do not exist.

    Folders are walked recursively, hidden entries skipped, and give only files whose ending is in
    :data:`FOLDER_EXTENSIONS`; the others are returned as skipped. A file named in ``paths`` is
    always taken.
    """
    files: dict[Path, None] = {}
    skipped: dict[Path, None] = {}
    missing: list[Path] = []
    for p in paths:
        if p.is_dir():
            for f in sorted(p.rglob("*")):
                if f.is_file() and not any(part.startswith(".") for part in f.relative_to(p).parts):
                    if f.suffix.lower() in FOLDER_EXTENSIONS:
                        files.setdefault(f, None)
                    else:
                        skipped.setdefault(f, None)
        elif p.is_file():
            files.setdefault(p, None)
        else:
            missing.append(p)
    return list(files), [f for f in skipped if f not in files], missing


def skipped_line(skipped: list[Path]) -> str:
    """One line saying how many folder files were skipped, by ending, and why."""
    endings = Counter(f.suffix.lower() or "no ending" for f in skipped)
    kinds = ", ".join(f"{n} {ending}" for ending, n in sorted(endings.items(), key=lambda kv: (-kv[1], kv[0])))
    return (f"skipped {len(skipped)} file(s) in folders that are not a document type DocAnchor reads ({kinds}); "
            "folders give only PDF, DOCX, .txt, Markdown, HTML and CSV files: name a file itself to try it anyway.")


def ingest_one(da: DocAnchor, path: Path, namespace: str | None, progress=None) -> tuple[str, str, int, str]:
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


# ---------------------------------------------------------------------------- reading
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


# ---------------------------------------------------------------------------- maintenance
@main.command()
@click.option("--namespace", "only", help="Rebuild this namespace (default: the global --namespace, else "
              "DOCANCHOR_NAMESPACE).")
@click.option("--all", "all_namespaces", is_flag=True, help="Rebuild every namespace that has documents.")
@click.option("--force", is_flag=True, help="Rebuild even where the configured model is already recorded.")
@pass_rt
def reindex(rt: Runtime, only: str | None, all_namespaces: bool, force: bool) -> None:
    """Re-embed stored chunks with the configured model into a fresh collection and swap it in (after a model change)."""
    from tqdm import tqdm

    if only and all_namespaces:
        raise click.UsageError("Give --namespace or --all, not both.")
    with rt.lock("reindex"), tqdm(unit="chunk", file=sys.stderr, disable=None, dynamic_ncols=True) as bar:
        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        results = rt.da.reindex(only or rt.namespace, all_namespaces=all_namespaces, force=force, progress=progress)
    for r in results:
        if r.skipped:
            why = "no chunks" if r.old_model is None else f"already uses {r.new_model}"
            click.echo(f"skipped {r.namespace!r}: {why}")
        else:
            click.echo(f"reindexed {r.namespace!r}: {r.n_chunks} chunks, {r.old_model} -> {r.new_model}")


from plugin.cli_check import check  # noqa: E402  (a command of its own module)

main.add_command(check)


if __name__ == "__main__":
    main()
