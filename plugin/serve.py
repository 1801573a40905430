"""``docanchor serve``: the app under waitress, a production WSGI server — one process, a pool of
threads, so embedded Chroma is opened by exactly one process (held by :mod:`plugin.lock`)."""

from __future__ import annotations

import logging

from docanchor.settings import Settings
from plugin.api import DocAnchor
from plugin.app import create_app
from plugin.lock import DataDirLock

log = logging.getLogger("docanchor.serve")


def make_server(settings: Settings, docanchor: DocAnchor, *, host: str, port: int, threads: int):
    """A waitress server for the app, bound but not yet running (``port=0`` picks a free port).

    Returns:
        The waitress server: ``.run()`` serves until ``.close()``; ``.effective_port`` is the port.
    """
    from waitress import create_server

    # waitress's own body limit stays above Flask's, so an oversized upload gets the JSON 413.
    return create_server(
        create_app(settings, docanchor), host=host, port=port, threads=threads, ident="docanchor",
        max_request_body_size=2 * settings.max_upload_bytes + 1024 * 1024,
    )


def serve(settings: Settings, docanchor: DocAnchor | None = None, *, host: str, port: int, threads: int,
          warm_up: bool = True) -> None:
    """Hold the data-dir lock, load the model, resume unfinished ingest jobs, and serve forever.

    Raises:
        Conflict: ``store_locked`` when another process uses the data dir.
        DocAnchorError: the model or the store cannot be opened.
    """
    with DataDirLock(settings, "server"):
        da = docanchor or DocAnchor(settings)
        if warm_up:  # the first plugin call must not wait for the model (hosts cut calls at 25-60 s)
            log.info("loading the embedding model and opening the store")
            da.ctx.embedder.embed_query("warm up")
            da.list_documents()
            resumed = da.resume_jobs()
            if resumed:
                log.info("resumed %d unfinished ingest job(s)", len(resumed))
        server = make_server(settings, da, host=host, port=port, threads=threads)
        base = f"http://{host}:{getattr(server, 'effective_port', port)}"
        log.info("DocAnchor serving on %s with %d threads (Ctrl+C stops); LobeChat manifest: %s/manifest.json",
                 base, threads, settings.public_base_url)
        try:
            server.run()
        except KeyboardInterrupt:
            log.info("stopped")
        finally:
            server.close()
