"""The Flask app factory: the /v1 JSON API, the LobeChat plugin routes, /mcp, /healthz, /openapi.json,
/metrics and the pages under /ui; every answer carries an X-Request-Id (plugin/observe.py).

    from plugin.app import create_app
    app = create_app()            # settings from DOCANCHOR_* variables

Nothing is built at import time; the factory wires settings, one shared :class:`DocAnchor`,
the error handlers and the blueprints (Flask's application-factory pattern).
"""

from __future__ import annotations

import os

from flask import Flask, Response, jsonify, request

from docanchor.errors import StoreUnavailable
from docanchor.settings import Settings
from plugin.api import DocAnchor
from plugin.bodies import Request
from plugin.http_errors import register_error_handlers, upload_body_limit
from plugin.metrics import Metrics
from plugin.metrics import register as register_metrics
from plugin.observe import Observed, note_route
from plugin.openapi import openapi_document

FAVICON_CACHE_S = 86400
"""How long (seconds) a browser keeps the answer to ``/favicon.ico`` (no icon) before asking again."""


def create_app(settings: Settings | None = None, docanchor: DocAnchor | None = None,
               worker: int | None = None) -> Flask:
    """Build the WSGI app.

    Args:
        settings: what the HTTP layer obeys (API keys, public base URL, upload limit);
            defaults to ``docanchor.settings`` when an instance is given,
            else ``Settings.from_env()``.
        docanchor: the instance to serve (tests pass one with a fake embedder); built from
            ``settings`` when absent. Building it loads no model and opens no database.
        worker: this process's index among the workers of ``docanchor serve --workers``
            (:mod:`plugin.workers`), which ``/healthz`` then names with the process id.

    Returns:
        The Flask app; ``app.extensions["docanchor"]`` is the served instance and
        ``app.config["DOCANCHOR_SETTINGS"]`` the HTTP settings.
    """
    if docanchor is None:
        docanchor = DocAnchor(settings)
    settings = settings or docanchor.settings

    app = Flask("docanchor")
    app.request_class = Request  # a multipart body cut short is said, not parsed as an empty form
    app.config.update(
        # The largest route (a multipart upload) sets its own limit per request; this is the cap.
        MAX_CONTENT_LENGTH=upload_body_limit(settings),
    )
    app.json.sort_keys = False
    app.json.ensure_ascii = False
    app.config["DOCANCHOR_SETTINGS"] = settings
    app.extensions["docanchor"] = docanchor

    register_error_handlers(app)
    metrics = Metrics(docanchor)
    app.extensions["docanchor.metrics"] = metrics
    register_metrics(app, settings, metrics)

    @app.before_request
    def _route() -> None:  # for the access line and the metrics: the pattern, not the path
        note_route(request.environ, request.url_rule.rule if request.url_rule else None)

    from plugin.lobechat import bp as lobechat_bp
    from plugin.ui import bp as ui_bp
    from plugin.v1 import bp as v1_bp

    app.register_blueprint(v1_bp)
    app.register_blueprint(lobechat_bp)
    app.register_blueprint(ui_bp)

    from plugin.mcp_http import McpMount

    # /mcp: MCP over Streamable HTTP (stateless JSON), same keys; see plugin/mcp_http.py.
    app.wsgi_app = McpMount(app.wsgi_app, settings, docanchor)  # type: ignore[method-assign]
    # outermost: every answer (/mcp and errors included) gets its X-Request-Id, access line and metrics
    app.wsgi_app = Observed(app.wsgi_app, metrics.observe)  # type: ignore[method-assign]

    @app.get("/healthz")
    def healthz() -> tuple[Response, int]:
        """``{"status": "ok"}``, or ``"degraded"`` with ``problems`` (``store_unavailable``: the Chroma
        server does not answer its heartbeat; ``disk_full``: reads and searches work, ingests are
        refused). 503 with the same body while the store does not answer (this process can answer
        no search or read, so a load balancer takes it out); else 200, a full disk included."""
        health = docanchor.health()
        if worker is not None:  # which process of several answered (an operator's question, and the tests')
            health.update(worker=worker, pid=os.getpid())
        down = any(p.get("code") == StoreUnavailable.code for p in health.get("problems", ()))
        return jsonify(health), 503 if down else 200

    @app.get("/favicon.ico")
    def favicon() -> Response:
        """No icon: 204, cached for a day (a browser asks for it with every page it opens; a 404 is
        an error line in the log and the metrics each time)."""
        return Response(status=204, headers={"Cache-Control": f"public, max-age={FAVICON_CACHE_S}"})

    @app.get("/openapi.json")
    def openapi() -> Response:
        return jsonify(openapi_document(settings))

    return app
