"""``serve``, ``mcp`` and ``reindex``: the commands that run or rebuild an index."""

from __future__ import annotations

import logging
import os
import sys

import click

from docanchor.display import counted
from plugin.cli.app import Runtime, configure_logging, main, pass_rt


@main.command()
@click.option("--host", help="Address to bind (default: DOCANCHOR_HOST, else 127.0.0.1).")
@click.option("--port", type=click.IntRange(0, 65535), help="Port (default: DOCANCHOR_PORT, else 8765).")
@click.option("--threads", type=click.IntRange(1, 256), help="Worker threads (default: DOCANCHOR_SERVER_THREADS, else 8).")
@click.option("--workers", type=click.IntRange(1, 64), help="Serving processes sharing the port, each with --threads "
              "threads; more than 1 needs a Chroma server (default: DOCANCHOR_SERVER_WORKERS, else 1).")
@pass_rt
def serve(rt: Runtime, host: str | None, port: int | None, threads: int | None, workers: int | None) -> None:
    """Serve the HTTP API and the LobeChat plugin (threads in one process; --workers: several processes)."""
    from plugin.serve import local_address, serve as run

    settings = rt.settings
    host = host or settings.host
    port = settings.port if port is None else port
    if not os.environ.get("DOCANCHOR_PUBLIC_BASE_URL"):
        settings = settings.with_(public_base_url=local_address(host, port))
        if host in ("0.0.0.0", "::", ""):
            click.echo("note: set DOCANCHOR_PUBLIC_BASE_URL to the address LobeChat's server reaches; the manifest "
                       f"now says {settings.public_base_url}.", err=True)
    workers = workers or settings.server_workers
    configure_logging(rt.log_level(logging.INFO), as_json=True)  # access and error lines as JSON
    if workers > 1:
        from plugin.workers import serve_workers

        serve_workers(settings, host=host, port=port, threads=threads or settings.server_threads, workers=workers)
        return
    run(settings, rt.injected, host=host, port=port, threads=threads or settings.server_threads)


@main.command()
@pass_rt
def mcp(rt: Runtime) -> None:
    """Serve the tools and anchors over MCP on stdin/stdout (Claude Desktop, Cursor, LobeHub)."""
    # Only protocol messages reach stdout (logs go to stderr). A running server's data dir cannot be
    # shared: MCP clients then use that server's /mcp endpoint (plugin/mcp_http.py).
    from docanchor.errors import Conflict
    from plugin.lock import hold
    from plugin.mcp_server import run_stdio

    try:
        held = hold(rt.settings, "mcp")
    except Conflict as err:
        raise Conflict(f"{err.message} An MCP client can use the running server at its /mcp endpoint "
                       "(Streamable HTTP) instead.", code=err.code) from None
    try:
        run_stdio(rt.da, rt.namespace)
    finally:
        held.release()


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
    rt.check_local_index("reindex")
    rt.da.hold_data_dir("reindex")
    with tqdm(unit="chunk", file=sys.stderr, disable=None, dynamic_ncols=True) as bar:
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
            click.echo(f"reindexed {r.namespace!r}: {counted(r.n_chunks, 'chunk')}, {r.old_model} -> {r.new_model}")
