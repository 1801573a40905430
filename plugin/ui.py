"""The pages: the document library, the upload page LobeChat shows in an iframe, and the
standalone manifest that makes the upload page appear.

Routes (all under ``/ui``):

- ``GET /ui/``: the document library page (``plugin/static/library.html``, ``library.js``): a
  paged, sortable, filterable list of the namespace's documents, a document's anchor, outline
  and any heading read, delete and replace with a confirmation, and uploads of several files at
  once with a progress row each. Opened directly (API key and namespace typed in).

- ``GET /ui/upload``: the page (``plugin/static/upload.html``). Only the LobeChat origins of
  ``DOCANCHOR_LOBECHAT_ORIGINS`` may frame it (``frame-ancestors``), and it takes messages only
  from them. It speaks LobeChat's iframe
  protocol (``@lobehub/chat-plugin-sdk``'s ``PluginChannel``): it posts
  ``lobe-chat:plugin-ready-for-render`` to ``window.top``, reads the API key and namespace from
  the ``settings`` of ``lobe-chat:init-standalone-plugin``, uploads the picked file to
  ``POST /v1/documents`` of this same server, polls ``GET /v1/jobs/<id>`` until the document is
  indexed, shows its anchor, and on "Insert into chat" posts ``lobe-chat:fill-plugin-content``
  with ``triggerAiMessage: true``. Opened directly it works too (key and namespace typed in).
- ``GET /ui/static/<name>``: the pages' scripts and style sheets.
- ``GET|OPTIONS /ui/manifest.json``: a second LobeChat manifest, ``type: "standalone"``.
- ``POST /ui/upload``: the ``api[].url`` of that manifest; answers one plain sentence.

Why two manifests: LobeChat takes the plugin type from the whole manifest (its
``ToolNameResolver`` appends ``manifest.type`` to every tool name) and never calls the server of a
``standalone`` plugin; it only shows ``ui.url`` and sends ``init-standalone-plugin``. A
``default`` plugin shows ``ui.url`` only under tool answers that are JSON, which DocAnchor's text
answers never are. So ``/manifest.json`` stays ``default`` (the five model-callable APIs) and
carries ``ui`` for reference, and ``/ui/manifest.json`` is the standalone "upload a file" plugin
whose one tool opens this page in the chat.
"""

from __future__ import annotations

import copy
from html import escape
from pathlib import Path
from typing import Any

from flask import Blueprint, Response, abort, current_app, send_from_directory

from docanchor import formats
from docanchor.settings import Settings
from plugin.lobechat import manifest_response, served_manifest

STATIC_DIR = Path(__file__).resolve().parent / "static"
PAGE_PATH = "/ui/upload"
ASSETS = frozenset({"upload.js", "upload.css", "library.js", "library.css"})
"""The files ``/ui/static/<name>`` serves; anything else is a 404."""
UI_HEIGHT_PX = 440
"""Height LobeChat gives the iframe, in CSS pixels (the page fits in it at 600 px wide)."""
UPLOAD_IDENTIFIER = "docanchor-upload"
UPLOAD_API = "uploadFile"
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "base-uri 'none'; form-action 'none'"
)
"""Content-Security-Policy of the page: only its own script, style and API calls; who may frame
it is added per server by :func:`page_csp`."""


def page_csp(settings: Settings) -> str:
    """:data:`PAGE_CSP` plus ``frame-ancestors 'self'`` and ``settings.lobechat_origins``: the
    page holds the user's API key, so only the configured LobeChat deployments may frame it (a
    page elsewhere could otherwise frame it and feed it a key or namespace)."""
    ancestors = "*" if "*" in settings.lobechat_origins else " ".join(("'self'", *settings.lobechat_origins))
    return f"{PAGE_CSP}; frame-ancestors {ancestors}"

bp = Blueprint("ui", __name__, url_prefix="/ui")


@bp.get("/")
def library_page() -> Response:
    """The document library page (``plugin/static/library.html``): list, filters, a document's
    anchor, outline and reading, delete and replace, uploads of several files; a client of /v1."""
    return _page("library.html")


@bp.get("/upload")
def upload_page() -> Response:
    """The upload page, with the server's upload limit (bytes) in ``data-max-upload-bytes``, the
    LobeChat origins it takes messages from in ``data-lobechat-origins`` (space-separated), and the
    file input's ``accept`` list and the formats line from the registry (:mod:`docanchor.formats`)."""
    return _page("upload.html")


def _page(name: str) -> Response:
    """A page of :data:`STATIC_DIR` with the server's limits and the registry's formats
    (``__ACCEPT__``, ``__FORMATS__``) filled in, under :func:`page_csp`."""
    settings: Settings = current_app.config["DOCANCHOR_SETTINGS"]
    html = (STATIC_DIR / name).read_text(encoding="utf-8")
    html = html.replace("__MAX_UPLOAD_BYTES__", str(settings.max_upload_bytes))
    html = html.replace("__ACCEPT__", escape(formats.accept_attribute()))
    html = html.replace("__FORMATS__", escape(formats.phrase()))
    html = html.replace("__LOBECHAT_ORIGINS__", escape(" ".join(settings.lobechat_origins)))
    resp = Response(html, mimetype="text/html")
    resp.headers["Cache-Control"] = "no-cache"
    resp.headers["Content-Security-Policy"] = page_csp(settings)
    resp.headers["X-Content-Type-Options"] = "nosniff"
    resp.headers["Referrer-Policy"] = "no-referrer"
    return resp


@bp.post("/upload")
def upload_call() -> Response:
    """What a call of the standalone manifest's API gets (LobeChat itself never makes it)."""
    return Response(
        "DocAnchor's upload box is shown in the chat: the user picks a file there, and its anchor "
        "(title, outline, doc id) is inserted into the chat when it is indexed.",
        mimetype="text/plain",
    )


@bp.get("/static/<name>")
def asset(name: str) -> Response:
    """The page's script or style sheet (only the names in :data:`ASSETS`)."""
    if name not in ASSETS:
        abort(404)
    resp = send_from_directory(STATIC_DIR, name, max_age=300)
    resp.headers["X-Content-Type-Options"] = "nosniff"
    return resp


def upload_manifest(settings: Settings) -> dict[str, Any]:
    """The standalone LobeChat manifest of the upload page, built from the served main manifest.

    Shares the main manifest's author, version, avatar, tags and the ``apiKey``/``namespace``
    settings (``apiKey`` required when the server has keys); one API, ``uploadFile`` (optional
    ``title``), whose URL is ``POST /ui/upload``; ``ui.url`` is the page under
    ``settings.public_base_url``.

    Raises:
        ConfigError: the main manifest file is missing or not valid JSON.
    """
    main = served_manifest(settings)
    base = settings.public_base_url.rstrip("/")
    schema = copy.deepcopy(main.get("settings") or {"type": "object", "properties": {}})
    schema["properties"] = {k: v for k, v in schema.get("properties", {}).items() if k in ("apiKey", "namespace")}
    required = [k for k in schema.get("required", []) if k in schema["properties"]]
    schema.pop("required", None)
    if required:
        schema["required"] = required
    meta = main.get("meta", {})
    manifest: dict[str, Any] = {
        "identifier": UPLOAD_IDENTIFIER,
        "version": main.get("version", "1"),
        "type": "standalone",
        "author": main.get("author", "DocAnchor"),
        "meta": {
            "avatar": meta.get("avatar", "⚓"),
            "title": "DocAnchor upload",
            "description": "Upload a file from your computer to DocAnchor right in the chat; its short anchor "
                           "goes into the conversation instead of the whole document.",
            "tags": list(meta.get("tags", [])) + ["upload"],
        },
        "systemRole": (
            "When the user wants to give you a document from their computer (no link), call uploadFile: it shows "
            "an upload box in the chat and, once the file is indexed, inserts the document's anchor with its "
            "doc_id. Then answer with the DocAnchor plugin's searchDocuments and that doc_id."
        ),
        "api": [{
            "name": UPLOAD_API,
            "url": base + PAGE_PATH,
            "description": (
                f"Show an upload box in the chat so the user can upload a file from their computer ({formats.phrase()}) "
                "to DocAnchor. Use this when the user wants you to read a document "
                "they have on disk and has no public link (for a link, use addDocument of the DocAnchor plugin). "
                "After the upload the document's anchor (title, outline, doc id) is added to the chat."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "title": {"type": "string", "description": "Optional. A display title for the document."},
                },
            },
        }],
        "ui": {"url": base + PAGE_PATH, "height": UI_HEIGHT_PX},
        "settings": schema,
    }
    return manifest


@bp.route("/manifest.json", methods=["GET", "OPTIONS"], provide_automatic_options=False)
def manifest() -> Response:
    """The standalone upload manifest (see :func:`upload_manifest`)."""
    return manifest_response(upload_manifest)
