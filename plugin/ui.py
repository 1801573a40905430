"""The pages: the document library (also the standalone LobeChat plugin's page), the one-file
upload page, and the standalone manifest that shows the library in the chat.

Routes (all under ``/ui``):

- ``GET /ui/``: the document library page (``plugin/static/library.html``, ``library.js``): a
  paged, sortable, filterable list of the namespace's documents, a document's anchor, outline
  and any heading read, delete and replace with a confirmation, and uploads of several files at
  once with a progress row each. Opened directly, the API key and namespace are typed in; framed
  by LobeChat (``ui.url`` of ``/ui/manifest.json``) it takes them and its theme from the plugin's
  settings and inserts a document's anchor into the chat.
- ``GET /ui/upload``: the one-file upload page (``plugin/static/upload.html``), for a frame or a
  link that wants only the upload box.
- Both pages speak LobeChat's iframe protocol (``@lobehub/chat-plugin-sdk``'s ``PluginChannel``,
  ``plugin/static/lobechat.js``): they post ``lobe-chat:plugin-ready-for-render`` to
  ``window.top``, read the API key, namespace and ``theme`` from the ``settings`` of
  ``lobe-chat:init-standalone-plugin`` (and of ``lobe-chat:render-plugin-settings``), upload to
  ``POST /v1/documents`` of this same server, poll ``GET /v1/jobs/<id>``, and on "Insert into
  chat" post ``lobe-chat:fill-plugin-content`` with ``triggerAiMessage: true``. Only the LobeChat
  origins of ``DOCANCHOR_LOBECHAT_ORIGINS`` may frame them (``frame-ancestors``), and they take
  messages only from those. LobeChat sends no theme or locale message (SDK 1.32's channel has
  none), so the plugin has a ``theme`` setting (auto, light, dark); auto follows the system.
- ``GET /ui/static/<name>``: the pages' scripts and style sheets.
- ``GET|OPTIONS /ui/manifest.json``: a second LobeChat manifest, ``type: "standalone"``.
- ``POST /ui/upload``: the ``api[].url`` of that manifest; answers one plain sentence.

Why two manifests: LobeChat takes the plugin type from the whole manifest (its
``ToolNameResolver`` appends ``manifest.type`` to every tool name) and never calls the server of a
``standalone`` plugin; it only shows ``ui.url`` and sends ``init-standalone-plugin``. A
``default`` plugin shows ``ui.url`` only under tool answers that are JSON, which DocAnchor's text
answers never are. So ``/manifest.json`` stays ``default`` (the five model-callable APIs), and
``/ui/manifest.json`` is the standalone plugin whose one tool opens the library page in the chat.
"""


from __future__ import annotations

import copy
from html import escape
from pathlib import Path
from typing import Any

from flask import Blueprint, Response, abort, current_app, send_from_directory

from docanchor import formats
from docanchor.settings import Settings
from plugin.lobechat import answer_call, manifest_response, served_manifest

STATIC_DIR = Path(__file__).resolve().parent / "static"
PAGE_PATH = "/ui/"
"""The standalone plugin's page (``ui.url``): the library."""
CALL_PATH = "/ui/upload"
"""The standalone plugin's ``api[].url`` (LobeChat never calls it)."""
ASSETS = frozenset({"lobechat.js", "words.js", "upload.js", "upload.css", "library.js", "library.css"})
"""The files ``/ui/static/<name>`` serves; anything else is a 404."""
UI_HEIGHT_PX = 560
"""Height LobeChat gives the iframe, in CSS pixels: the upload box, a page of the list's first rows
and the pager at 600 px wide; the rest scrolls inside the frame."""
THEME_SETTING = {
    "type": "string",
    "enum": ["auto", "light", "dark"],
    "default": "auto",
    "title": "Theme",
    "description": "Light or dark for the document library in the chat; auto follows the system "
                   "(LobeChat does not tell plugins its own theme).",
}
"""The standalone plugin's ``theme`` setting, read by ``plugin/static/lobechat.js``."""
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
    (``__ACCEPT__``, ``__FORMATS__``, the type filter's ``__TYPE_OPTIONS__``) filled in, under
    :func:`page_csp`."""
    settings: Settings = current_app.config["DOCANCHOR_SETTINGS"]
    html = (STATIC_DIR / name).read_text(encoding="utf-8")
    html = html.replace("__MAX_UPLOAD_BYTES__", str(settings.max_upload_bytes))
    html = html.replace("__ACCEPT__", escape(formats.accept_attribute()))
    html = html.replace("__FORMATS__", escape(formats.phrase()))
    html = html.replace("__TYPE_OPTIONS__", "".join(f'<option value="{escape(n)}">{escape(formats.label_of(n))}</option>'
                                                    for n in formats.names()))
    html = html.replace("__LOBECHAT_ORIGINS__", escape(" ".join(settings.lobechat_origins)))
    resp = Response(html, mimetype="text/html")
    resp.headers["Cache-Control"] = "no-cache"
    resp.headers["Content-Security-Policy"] = page_csp(settings)
    resp.headers["X-Content-Type-Options"] = "nosniff"
    resp.headers["Referrer-Policy"] = "no-referrer"
    return resp


@bp.post("/upload")
def upload_call() -> Response:
    """What a call of the standalone manifest's API gets (LobeChat itself never makes it): a sentence
    about the library, once the call's plugin settings pass the checks every LobeChat call passes
    (:func:`plugin.lobechat.answer_call`: a namespace holding a bidi or control character, or a
    missing API key, is answered with the sentence that says so, as ``/lobechat/<api>`` answers)."""
    return answer_call("upload", lambda _call: LIBRARY_SENTENCE)


LIBRARY_SENTENCE = ("DocAnchor's document library is shown in the chat: the user uploads or picks a document there "
                    "and inserts its anchor (title, outline, doc id) into the chat.")


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
    settings (``apiKey`` required when the server has keys), plus :data:`THEME_SETTING`; one API,
    ``uploadFile`` (optional ``title``), whose URL is ``POST /ui/upload``; ``ui.url`` is the
    library page (:data:`PAGE_PATH`) under ``settings.public_base_url``.

    Raises:
        ConfigError: the main manifest file is missing or not valid JSON.
    """
    main = served_manifest(settings)
    base = settings.public_base_url.rstrip("/")
    schema = copy.deepcopy(main.get("settings") or {"type": "object", "properties": {}})
    schema["properties"] = {k: v for k, v in schema.get("properties", {}).items() if k in ("apiKey", "namespace")}
    required = [k for k in schema.get("required", []) if k in schema["properties"]]
    schema["properties"]["theme"] = dict(THEME_SETTING)
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
            "title": "DocAnchor library",
            "description": "Upload files from your computer to DocAnchor and browse your documents right in the "
                           "chat; a document's short anchor goes into the conversation instead of the whole document.",
            "tags": list(meta.get("tags", [])) + ["upload"],
        },
        "systemRole": (
            "When the user wants to give you a document from their computer (no link), or to see, open or delete "
            "their documents, call uploadFile: it shows DocAnchor's document library in the chat, where the user "
            "uploads files and inserts a document's anchor with its doc_id. Then answer with the DocAnchor "
            "plugin's searchDocuments and that doc_id."
        ),
        "api": [{
            "name": UPLOAD_API,
            "url": base + CALL_PATH,
            "description": (
                f"Show DocAnchor's document library in the chat so the user can upload files from their computer "
                f"({formats.phrase()}) and pick a document. Use this when the user wants you to read a document "
                "they have on disk and has no public link (for a link, use addDocument of the DocAnchor plugin), "
                "or wants to see their documents. The user then inserts a document's anchor (title, outline, "
                "doc id) into the chat."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "title": {"type": "string", "description": "Optional. A display title for the uploaded document."},
                },
            },
        }],
        "ui": {"url": base + PAGE_PATH, "height": UI_HEIGHT_PX},
        "settings": schema,
    }
    return manifest


@bp.route("/manifest.json", methods=["GET", "OPTIONS"], provide_automatic_options=False)
def manifest() -> Response:
    """The standalone library manifest (see :func:`upload_manifest`)."""
    return manifest_response(upload_manifest)
