"""The upload page (plugin/ui.py, plugin/static/) in a real headless Chromium, inside a host page
that plays LobeChat's part, plus the routes and the standalone manifest without a browser.

The browser is Debian's ``chromium`` (scripts/test-deps/browser.sh installs it) driven by
Playwright with ``executable_path``; nothing is downloaded. DocAnchor runs for real (waitress on
a loopback port, real Chroma on disk) with the fake embedder, so uploads take seconds. The host
page (tests/pages/host.html) is served from a second loopback port, i.e. another origin, as
LobeChat is. A screenshot is kept in tests/artifacts/upload_page.png.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlencode

import pytest

from docanchor.settings import Settings
from plugin.api import DocAnchor
from plugin.app import create_app
from plugin.lobechat import MANIFEST_PATH
from tests.conftest import CORPUS
from tests.fakes import HashEmbedder
from tests.waiting import BACKSTOP_MS, BACKSTOP_S, wait_until

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
PAGES = Path(__file__).resolve().parent / "pages"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
KEY = "upload-page-test-key"
OWN_NS, TEAM_NS, FIN_NS = "own-space", "team-space", "财务"
"""The key owns OWN_NS and may also use TEAM_NS and FIN_NS: a document lands in TEAM_NS only when
the page sends the namespace from LobeChat's settings (FIN_NS: a name no header may carry)."""
BOOK = CORPUS / "md" / "ch04-01-what-is-ownership.md"
LOCKED_PDF = CORPUS / "pdf" / "libreoffice-writer-password.pdf"
SMALL_TXT = CORPUS / "txt" / "sample-french-1.txt"


# ---------------------------------------------------------------------------- without a browser
@pytest.fixture
def keyed_app(tmp_path: Path):
    settings = Settings(data_dir=tmp_path / "data", api_keys=(f"{KEY}={OWN_NS}|{TEAM_NS}",),
                        public_base_url="https://docs.example.org/anchor", max_upload_bytes=1_000_000)
    return create_app(settings, DocAnchor(settings, embedder=HashEmbedder()))


def test_page_and_assets_are_served_without_a_key(keyed_app):
    client = keyed_app.test_client()
    page = client.get("/ui/upload")
    assert page.status_code == 200 and page.mimetype == "text/html"
    html = page.get_data(as_text=True)
    assert 'data-max-upload-bytes="1000000"' in html and "__MAX_UPLOAD_BYTES__" not in html
    assert 'src="static/upload.js"' in html and 'href="static/upload.css"' in html  # relative: proxy prefixes work
    # only the configured LobeChat origins (by default: this machine, any port) may frame it
    csp = page.headers["Content-Security-Policy"]
    assert csp.endswith("; frame-ancestors 'self' http://localhost:* http://127.0.0.1:*"), csp
    assert 'data-lobechat-origins="http://localhost:* http://127.0.0.1:*"' in html
    assert "X-Frame-Options" not in page.headers
    js = client.get("/ui/static/upload.js")
    assert js.status_code == 200 and "javascript" in js.mimetype
    assert 'src="static/lobechat.js"' in html  # LobeChat's protocol, shared with the library page
    assert "lobe-chat:fill-plugin-content" in client.get("/ui/static/lobechat.js").get_data(as_text=True)
    assert client.get("/ui/static/upload.css").mimetype == "text/css"
    for name in ("upload.html", "..%2fui.py", "nope.js"):
        assert client.get(f"/ui/static/{name}").status_code == 404
    call = client.post("/ui/upload", data="{}", content_type="text/plain",
                       headers={"X-Lobe-Plugin-Settings": json.dumps({"apiKey": KEY})})
    assert call.status_code == 200 and call.mimetype == "text/plain" and "document library is shown" in call.get_data(as_text=True)


def test_the_standalone_call_refuses_the_settings_every_lobechat_call_refuses(tmp_path):
    """Before: ``POST /ui/upload`` (the standalone manifest's API) answered its success sentence
    whatever ``X-Lobe-Plugin-Settings`` held -- a namespace with a bidi override or a control
    character, no API key, a namespace the key may not use -- where ``/lobechat/<api>`` refuses
    them (new-user trial). Now it checks them as every LobeChat call does
    (:func:`plugin.lobechat.answer_call`), on a real server on a loopback port."""
    import urllib.request

    from tests.live_server import serving_fake

    def call(base: str, path: str, plugin_settings: dict) -> str:
        request = urllib.request.Request(f"{base}{path}", data=b"{}", method="POST", headers={
            "Content-Type": "application/json", "X-Lobe-Plugin-Settings": json.dumps(plugin_settings)})
        with urllib.request.urlopen(request, timeout=BACKSTOP_S) as resp:
            assert resp.status == 200  # LobeChat's protocol: a refusal is a sentence for the model
            return resp.read().decode()

    settings = Settings(data_dir=tmp_path / "data", api_keys=(f"{KEY}={OWN_NS}|{TEAM_NS}",))
    with serving_fake(settings) as (base, _da):
        assert "document library is shown" in call(base, "/ui/upload", {"apiKey": KEY, "namespace": TEAM_NS})
        for plugin_settings, told in (({"apiKey": KEY, "namespace": "team\u202espace"}, "holds U+202E at position 5"),
                                      ({"apiKey": KEY, "namespace": "a\x07b"}, "holds U+0007 at position 2"),
                                      ({"apiKey": KEY, "namespace": "elsewhere"}, "may not use the namespace"),
                                      ({"namespace": OWN_NS}, "needs an API key")):
            refused, plugin_door = call(base, "/ui/upload", plugin_settings), call(base, "/lobechat/listDocuments",
                                                                                   plugin_settings)
            assert told in refused and "document library" not in refused, (plugin_settings, refused)
            assert refused == plugin_door, (refused, plugin_door)  # the same sentence as the plugin's tools


def test_upload_manifest_is_standalone_opens_the_library_and_main_stays_default(keyed_app):
    client = keyed_app.test_client()
    resp = client.get("/ui/manifest.json")
    assert resp.status_code == 200 and resp.mimetype == "application/json"
    assert resp.headers["Access-Control-Allow-Origin"] == "*"
    assert client.options("/ui/manifest.json").status_code == 204
    m = resp.get_json()
    assert m["identifier"] == "docanchor-upload" and m["type"] == "standalone" and m["version"] == "1"
    # the library page (with its uploads), not the one-file upload page; before: ui.url was /ui/upload
    assert m["ui"] == {"url": "https://docs.example.org/anchor/ui/", "height": 560}
    assert client.get("/ui/").headers["Content-Security-Policy"].endswith(
        "; frame-ancestors 'self' http://localhost:* http://127.0.0.1:*")  # framed only by LobeChat
    [api] = m["api"]
    assert api["name"] == "uploadFile" and api["url"] == "https://docs.example.org/anchor/ui/upload"
    assert len(m["identifier"]) + 4 + len(api["name"]) + 4 + len("standalone") < 64  # LobeChat's tool name
    assert api["parameters"]["type"] == "object" and "required" not in api["parameters"]
    assert 0 < len(api["description"]) <= 1024 and "gateway" not in m and "openapi" not in m
    assert set(m["settings"]["properties"]) == {"apiKey", "namespace", "theme"}
    assert m["settings"]["properties"]["theme"]["enum"] == ["auto", "light", "dark"]  # LobeChat sends no theme
    assert m["settings"]["required"] == ["apiKey"]  # keys are on
    assert m["settings"]["properties"]["apiKey"]["format"] == "password"

    main = client.get("/manifest.json").get_json()
    assert main["type"] == "default"  # its five APIs stay model-callable through the gateway
    # no ui: LobeChat renders a default plugin's ui.url as an iframe under every tool result
    # (PluginDefaultType), so the upload page would show beneath each search answer
    assert "ui" not in main
    on_disk = json.loads(MANIFEST_PATH.read_text(encoding="utf-8"))
    assert "ui" not in on_disk and on_disk["type"] == "default"


# ---------------------------------------------------------------------------- servers and browser
def _need(reason: str) -> None:
    """Skip on a developer machine without the browser; fail in CI, where browser.sh ran."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


class HeldEmbedder(HashEmbedder):
    """The fake embedder, held while ``release`` is clear: a test holds an ingest job at its first
    batch until the page has shown its progress (with the real model, jobs last that long)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.release.set()

    def embed(self, texts):
        assert self.release.wait(BACKSTOP_S), "the test never released the embedder"
        return super().embed(texts)


def cancel_held_job(da: DocAnchor) -> None:
    """Cancel the one running job, held at its first batch by ``HeldEmbedder``: the cancel is asked
    (from another thread, as it waits for the job to stop), then the embedder released, so the job
    stops at its next step and ends ``cancelled``."""
    job = wait_until(lambda: next(iter(da.jobs.unfinished()), None), "a running job")
    asking = threading.Thread(target=da.cancel_job, args=(job.job_id,), daemon=True)
    asking.start()
    wait_until(lambda: da.jobs.get(job.job_id).cancel_requested, "the cancel to be asked")
    da.ctx.embedder.release.set()
    asking.join(BACKSTOP_S)
    assert da.jobs.get(job.job_id).status == "cancelled"


@contextlib.contextmanager
def _serving(settings: Settings, da: DocAnchor):
    """``da`` served by waitress on 127.0.0.1:<free port>; yields the base URL."""
    from tests.live_server import in_process

    with in_process(settings, da) as server:
        yield f"http://127.0.0.1:{server.effective_port}"


@pytest.fixture(scope="module")
def docanchor(tmp_path_factory):
    """DocAnchor on 127.0.0.1:<free port> with API keys on; yields (base URL, DocAnchor)."""
    settings = Settings(data_dir=tmp_path_factory.mktemp("upload-page") / "data",
                        api_keys=(f"{KEY}={OWN_NS}|{TEAM_NS}|{FIN_NS}",))
    da = DocAnchor(settings, embedder=HeldEmbedder())
    with _serving(settings, da) as base:
        yield base, da


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def host():
    """tests/pages on another loopback port (another origin, as LobeChat is)."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(PAGES)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        _need("Debian's chromium is not installed: run scripts/test-deps/browser.sh")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _need("playwright is not installed: pip install -e '.[test]'")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS, headless=True, timeout=BACKSTOP_MS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 660, "height": 640})
    context.set_default_timeout(BACKSTOP_MS)  # every wait, click and navigation: a backstop only
    context.set_default_navigation_timeout(BACKSTOP_MS)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    try:
        yield pg
    finally:
        context.close()
    # 401/422 answers are logged by Chromium as failed resources; script errors are not expected.
    assert not [e for e in errors if "status of" not in e], errors


def _open_in_host(page, host: str, base: str, settings: dict, arguments: dict | None = None):
    query = urlencode({"src": f"{base}/ui/upload", "settings": json.dumps(settings),
                       "arguments": json.dumps(arguments or {})})
    page.goto(f"{host}/host.html?{query}")
    frame = page.frame_locator("#plugin")
    frame.locator("#mode").filter(has_text="Connected to LobeChat").wait_for()
    return frame


def _received(page) -> list[dict]:
    return page.evaluate("window.received")


def _stages_until(frame, selector: str) -> list[str]:
    """Progress texts seen every 50 ms until ``selector`` is visible in the frame."""
    seen: list[str] = []

    def shown() -> bool:
        if frame.locator(selector).is_visible():
            return True
        if frame.locator("#progress").is_visible():
            text = f"{frame.locator('#stage').inner_text()} {frame.locator('#percent').inner_text()}".strip()
            if not seen or seen[-1] != text:
                seen.append(text)
        return False

    try:
        wait_until(shown, f"{selector} to show", interval_s=0.05)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; progress seen: {seen}") from None
    return seen


# ---------------------------------------------------------------------------- in the browser
def test_upload_in_lobechat_frame_inserts_the_anchor(page, host, docanchor):
    base, da = docanchor
    frame = _open_in_host(page, host, base, {"apiKey": KEY, "namespace": TEAM_NS},
                          arguments={"title": "Ownership (Rust book, ch. 4.1)"})
    embedder = da.ctx.embedder
    embedder.release.clear()  # the job waits at its first batch until the page shows its progress
    try:
        frame.locator("#file").set_input_files(str(BOOK))
        # The page uploads with wait_s=0 and polls the job: a stage with a percentage is shown.
        frame.locator("#percent").filter(has_text="%").wait_for()
    finally:
        embedder.release.set()
    _stages_until(frame, "#result")

    docs = da.list_documents(TEAM_NS)
    assert [d.title for d in docs] == ["Ownership (Rust book, ch. 4.1)"]  # title from LobeChat's payload
    assert da.list_documents(OWN_NS) == []  # the namespace header from the settings was sent
    doc = docs[0]
    anchor = frame.locator("#anchor").inner_text()
    assert anchor.strip() == da.anchor(doc.doc_id, TEAM_NS).strip()  # its More line names the namespace
    assert doc.doc_id in frame.locator("#doc-meta").inner_text()
    assert frame.locator("#doc-title").inner_text() == "Ownership (Rust book, ch. 4.1)"

    frame.locator("#insert").click()
    page.wait_for_function(
        "window.received.some(m => m.data && m.data.type === 'lobe-chat:fill-plugin-content')")
    frame.locator("#notice").filter(has_text="Inserted").wait_for()
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#plugin").screenshot(path=str(ARTIFACTS / "upload_page.png"))

    received = _received(page)
    assert received[0]["data"] == {"type": "lobe-chat:plugin-ready-for-render"}
    assert all(m["origin"] == base for m in received)  # from DocAnchor's page, across origins
    [fill] = [m["data"] for m in received if m["data"].get("type") == "lobe-chat:fill-plugin-content"]
    assert fill["triggerAiMessage"] is True
    assert isinstance(fill["content"], str) and da.anchor(doc.doc_id, TEAM_NS).strip() in fill["content"]
    assert doc.doc_id in fill["content"].splitlines()[0]
    assert frame.locator("#insert").is_disabled()  # inserted once


def test_encrypted_pdf_shows_the_error_code(page, host, docanchor):
    base, da = docanchor
    frame = _open_in_host(page, host, base, {"apiKey": KEY})
    frame.locator("#file").set_input_files(str(LOCKED_PDF))
    _stages_until(frame, "#error")
    assert frame.locator("#error-code").inner_text() == "pdf_encrypted"
    assert "password" in frame.locator("#error-message").inner_text()
    assert frame.locator("#result").is_hidden() and frame.locator("#progress").is_hidden()
    page.locator("#plugin").screenshot(path=str((ARTIFACTS / "upload_page_error.png")))
    assert not [m for m in _received(page) if m["data"].get("type") == "lobe-chat:fill-plugin-content"]


def test_a_cancelled_job_shows_its_error_and_polling_stops(page, host, docanchor):
    """Before (fresh-user trial, s16): the page handled only ``failed`` and ``done``, so a job
    cancelled meanwhile (DELETE /v1/jobs/<id>, the CLI, another page) kept showing its last stage
    and was polled every 400 ms for ever. Now it shows the job's error like a failure."""
    base, da = docanchor
    frame = _open_in_host(page, host, base, {"apiKey": KEY})
    da.ctx.embedder.release.clear()
    try:
        frame.locator("#file").set_input_files(str(BOOK))
        frame.locator("#percent").filter(has_text="%").wait_for()
        cancel_held_job(da)
    finally:
        da.ctx.embedder.release.set()
    _stages_until(frame, "#error")
    assert frame.locator("#error-code").inner_text() == "cancelled"
    assert frame.locator("#error-message").inner_text() == "This ingest job was cancelled; nothing of it was stored."
    assert frame.locator("#progress").is_hidden() and frame.locator("#result").is_hidden()


def test_a_namespace_beyond_latin1_is_sent_and_a_refused_one_shows_the_servers_sentence(page, host, docanchor):
    """Before: the page sent the namespace as the X-DocAnchor-Namespace header, and browsers refuse
    a header value beyond Latin-1 (财务) before sending anything, so the page said "Could not reach
    DocAnchor"; a bidi override got the same. The namespace goes as ?namespace= now, percent-encoded."""
    base, da = docanchor
    frame = _open_in_host(page, host, base, {"apiKey": KEY, "namespace": FIN_NS})
    frame.locator("#file").set_input_files(str(SMALL_TXT))
    _stages_until(frame, "#result")
    assert [d.source_name for d in da.list_documents(FIN_NS)] == [SMALL_TXT.name]
    assert frame.locator("#error").is_hidden()

    frame = _open_in_host(page, host, base, {"apiKey": KEY, "namespace": "team\u202eevil"})
    frame.locator("#file").set_input_files(str(SMALL_TXT))
    _stages_until(frame, "#error")
    assert frame.locator("#error-code").inner_text() == "invalid_namespace"
    assert "U+202E" in frame.locator("#error-message").inner_text()  # the server's sentence, as it words it
    assert frame.locator("#connection").evaluate("d => d.open") is True  # where the namespace is corrected


def test_opened_directly_asks_for_the_key_then_uploads(page, docanchor):
    base, da = docanchor
    page.goto(f"{base}/ui/upload")
    assert "Opened directly" in page.locator("#mode").inner_text()
    page.locator("#file").set_input_files(str(SMALL_TXT))
    page.locator("#error").wait_for()
    assert page.locator("#error-code").inner_text() == "unauthorized"
    assert page.locator("#connection").evaluate("d => d.open") is True  # the key field is opened for the user

    page.locator("#api-key").fill(KEY)
    page.locator("#file").set_input_files(str(SMALL_TXT))
    page.locator("#result").wait_for()
    [doc] = [d for d in da.list_documents(OWN_NS) if d.source_name == SMALL_TXT.name]
    assert doc.doc_id in page.locator("#anchor").inner_text()
    assert page.locator("#error").is_hidden()
    assert page.locator("#insert").is_hidden()  # no chat to insert into
    assert page.locator("#copy").is_visible()


# ---------------------------------------------------------------------------- who may frame the page
@pytest.fixture(scope="module")
def strict(tmp_path_factory, host):
    """DocAnchor allowing only ``http://localhost:<host port>`` as LobeChat (DOCANCHOR_LOBECHAT_ORIGINS);
    the same host page reached as ``http://127.0.0.1:<host port>`` is another origin. Yields its base URL."""
    host_port = host.rsplit(":", 1)[1]
    settings = Settings(data_dir=tmp_path_factory.mktemp("strict") / "data",
                        lobechat_origins=(f"http://localhost:{host_port}",))
    with _serving(settings, DocAnchor(settings, embedder=HashEmbedder())) as base:
        yield base


def _host_url(host: str, base: str, hostname: str, settings: dict) -> str:
    query = urlencode({"src": f"{base}/ui/upload", "settings": json.dumps(settings), "arguments": "{}"})
    return f"{host.replace('127.0.0.1', hostname)}/host.html?{query}"


def test_only_the_configured_lobechat_origin_may_frame_the_page(page, host, strict):
    """Before: the page had no frame-ancestors, so any site could frame it and feed it a key."""
    page.goto(_host_url(host, strict, "localhost", {"apiKey": "k", "namespace": "ns"}))
    frame = page.frame_locator("#plugin")
    frame.locator("#mode").filter(has_text="Connected to LobeChat").wait_for()
    assert frame.locator("#api-key").input_value() == "k"

    blocked = page.context.new_page()
    blocked.goto(_host_url(host, strict, "127.0.0.1", {"apiKey": "k"}))

    def refused() -> bool:  # Chromium replaces a refused frame with its error page
        child = blocked.frames[1] if len(blocked.frames) > 1 else None
        return child is not None and child.url.startswith("chrome-error:")

    try:
        wait_until(refused, "the frame to be refused")
    except AssertionError:
        raise AssertionError(f"the frame was not refused: {[f.url for f in blocked.frames]}") from None
    received = blocked.evaluate("window.received")
    assert not received, received  # the page never ran: not even its ready message arrived
    blocked.close()


def test_messages_from_another_origin_are_ignored_even_without_the_csp(page, host, strict):
    """The page's own check, for a browser or proxy that drops the header: with the CSP removed
    on the way, a host page at an origin not configured frames it, and its settings are ignored.
    Before: apiKey and namespace were taken from any parent's message."""

    def without_csp(route):
        response = route.fetch()
        headers = {k: v for k, v in response.headers.items() if k.lower() != "content-security-policy"}
        route.fulfill(response=response, headers=headers)

    page.route(f"{strict}/ui/upload", without_csp)
    page.goto(_host_url(host, strict, "127.0.0.1", {"apiKey": "stolen-key", "namespace": "theirs"}))
    frame = page.frame_locator("#plugin")
    frame.locator("#mode").filter(has_text="Ignored a message from " + host).wait_for()
    assert frame.locator("#api-key").input_value() == "" and frame.locator("#namespace").input_value() == ""
