"""The document library page (GET /ui/, plugin/static/library.*) in a real headless Chromium
against a real DocAnchor (waitress on a loopback port, real Chroma on disk, the fake embedder):
120 documents paged through, sorted, filtered by a tag, one opened and a heading read, one
deleted, three files uploaded at once with one of them broken, and the page at a phone's width;
then the page as LobeChat's standalone plugin in tests/pages/host.html: the theme from the
plugin's settings messages or the system, a hidden-text flag, anchors inserted into the chat.
Screenshots are kept in tests/artifacts/library_*.png. The browser and server fixtures are the
upload page's (tests/test_upload_page.py): a 660 px wide window, no script errors."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest

from docanchor import formats
from docanchor.errors import NotFound
from docanchor.settings import Settings
from plugin.api import DocAnchor
from tests.fakes import HashEmbedder
from tests.test_upload_page import (  # noqa: F401
    ARTIFACTS, BOOK, LOCKED_PDF, SMALL_TXT, HeldEmbedder, _serving, browser, cancel_held_job, host, page,
)

KEY = "library-page-test-key"
NS = "shelf"
N_DOCS = 120
HANDBOOK = "# Handbook\n\n## Safety\n\nWear gloves when you lift crates.\n\n## Returns\n\nReturn crates on Fridays."


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """DocAnchor with a key and 120 documents in NS: ``Report 001`` to ``Report 119`` (every tenth
    tagged ``finance``) and ``Handbook`` with two headings. Yields (base URL, DocAnchor)."""
    settings = Settings(data_dir=tmp_path_factory.mktemp("library-page") / "data", api_keys=(f"{KEY}={NS}",))
    da = DocAnchor(settings, embedder=HashEmbedder())
    for i in range(1, N_DOCS):
        da.ingest_text(f"Report number {i} says the quarter went fine.", title=f"Report {i:03d}.txt", namespace=NS,
                       tags=["finance"] if i % 10 == 0 else ["memo"])
    da.ingest_text(HANDBOOK, title="Handbook.md", namespace=NS, tags=["policy"])
    with _serving(settings, da) as base:
        yield base, da
    da.close()


def _connect(page, base: str) -> None:
    """Open the page, which asks for the key (the server has keys), and give it."""
    page.goto(f"{base}/ui/")
    page.locator("#status").filter(has_text="unauthorized").wait_for()
    assert page.locator("#connection").evaluate("d => d.open") is True  # the key field is opened
    page.get_by_label("API key").fill(KEY)
    page.locator("#connect button").click()
    page.locator("#summary").filter(has_text=f" in {NS}").wait_for()


def _titles(page) -> list[str]:
    return page.locator("#docs tbody td:first-child").all_inner_texts()


def test_page_through_sort_and_filter_by_tag(page, library):
    base, da = library
    _connect(page, base)
    assert f"1–25 of {N_DOCS} in {NS}" in page.locator("#summary").inner_text()
    seen: list[str] = []
    while True:
        page.locator("#docs tbody tr").first.wait_for()
        seen += _titles(page)
        if page.locator("#next").is_disabled():
            break
        shown = page.locator("#page").inner_text()
        page.locator("#next").click()
        page.locator("#page").filter(has_not_text=shown).wait_for()
    assert seen == [d.title for d in da.list_documents(NS)]  # all 120, in title order, none twice
    assert page.locator("#page").inner_text() == "Page 5 of 5"
    page.locator("#prev").click()
    page.locator("#page").filter(has_text="Page 4 of 5").wait_for()

    page.get_by_role("button", name="Title").click()  # sorted by title, now descending
    page.locator("th[data-sort=title][aria-sort=descending]").wait_for()
    page.locator("#page").filter(has_text="Page 1 of 5").wait_for()
    assert _titles(page)[0] == "Report 119.txt"

    page.get_by_label("Tag").fill("Finance")
    page.get_by_role("button", name="Filter").click()
    page.locator("#summary").filter(has_text="of 11 in").wait_for()
    rows = page.locator("#docs tbody tr")
    assert rows.count() == 11
    assert all("finance" in t for t in rows.locator("td:nth-child(5)").all_inner_texts())
    assert page.locator("#next").is_disabled()
    # the type filter offers every registered format (it listed six by hand)
    from docanchor import formats

    assert page.locator("#type option").evaluate_all("os => os.map(o => o.value)") == ["", *formats.names()]
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "library_list.png"), full_page=True)


def test_a_namespace_beyond_latin1_lists_reads_and_uploads(page, tmp_path):
    """Before: the page sent the namespace as the X-DocAnchor-Namespace header; browsers refuse a
    header value beyond Latin-1 (财务), so every call failed with "The server could not be reached".
    It goes as ?namespace= now (percent-encoded): the list, a document, a read, an upload and its
    job all reach 财务; a bidi override gets the server's invalid_namespace sentence."""
    settings = Settings(data_dir=tmp_path / "data", api_keys=(f"{KEY}=财务",))
    da = DocAnchor(settings, embedder=HashEmbedder())
    da.ingest_text(HANDBOOK, title="Handbook.md", namespace="财务")
    try:
        with _serving(settings, da) as base:
            page.goto(f"{base}/ui/")
            page.locator("#status").filter(has_text="unauthorized").wait_for()
            page.get_by_label("API key").fill(KEY)
            page.get_by_label("Namespace").fill("team\u202eevil")
            page.locator("#connect button").click()
            page.locator("#status").filter(has_text="invalid_namespace").wait_for()
            assert "U+202E" in page.locator("#status").inner_text()

            page.get_by_label("Namespace").fill("财务")
            page.locator("#connect button").click()
            page.locator("#summary").filter(has_text="of 1 in 财务").wait_for()
            page.get_by_role("button", name="Handbook.md").click()
            page.get_by_role("button", name="Read Safety").click()
            page.locator("#reading-text").filter(has_text="gloves").wait_for()
            page.locator("#files").set_input_files(str(SMALL_TXT))
            page.locator("#uploads li.done").wait_for()
            stored = da.list_documents("财务")
            assert len(stored) == 2 and SMALL_TXT.name in {d.source_name for d in stored}
    finally:
        da.close()


def test_a_refused_namespace_clears_the_list_and_its_paging(page, library):
    """Before: after a refused namespace the previous list stayed with Next enabled, and its rows and
    Next sent the refused namespace (400 again). Now the list is cleared and paging is off until a
    namespace is accepted."""
    base, _da = library
    _connect(page, base)
    assert page.locator("#docs tbody tr").count() == 25 and page.locator("#next").is_enabled()
    page.locator("#next").click()
    page.locator("#page").filter(has_text="Page 2 of 5").wait_for()
    page.get_by_label("Namespace").fill("team\u202eevil")
    page.locator("#connect button").click()
    page.locator("#status").filter(has_text="invalid_namespace").wait_for()
    assert page.locator("#docs tbody tr").count() == 0
    assert page.locator("#next").is_disabled() and page.locator("#prev").is_disabled()
    assert NS not in page.locator("#summary").inner_text()
    page.get_by_label("Namespace").fill(NS)
    page.locator("#connect button").click()
    page.locator("#summary").filter(has_text=f"1–25 of {N_DOCS} in {NS}").wait_for()
    assert page.locator("#next").is_enabled()


def test_open_a_document_read_a_heading_then_delete_it(page, library):
    base, da = library
    _connect(page, base)
    page.get_by_label("Title").fill("handbook")
    page.keyboard.press("Enter")  # the filter form submits from the keyboard
    page.locator("#summary").filter(has_text="of 1 in").wait_for()
    page.get_by_role("button", name="Handbook.md").focus()
    page.keyboard.press("Enter")
    page.locator("#doc").wait_for()
    [doc] = [d for d in da.list_documents(NS) if d.title == "Handbook.md"]
    assert page.locator("#doc-title").inner_text() == "Handbook.md"
    assert doc.doc_id in page.locator("#doc-meta").inner_text()
    assert page.locator("#doc-anchor").inner_text().strip() == doc.anchor.strip()
    assert doc.flags.get("encoding") and page.locator("#doc-flags li").count() == 0  # facts are no warnings
    outline = page.locator("#outline li").evaluate_all("items => items.map(li => li.firstChild.textContent)")
    assert outline == doc.outline == ["Handbook", "Safety", "Returns"]

    page.get_by_role("button", name="Read Safety").click()
    page.locator("#reading").wait_for()
    assert page.locator("#reading-title").inner_text() == "Safety"
    assert "Wear gloves when you lift crates." in page.locator("#reading-text").inner_text()
    page.screenshot(path=str(ARTIFACTS / "library_document.png"), full_page=True)

    page.locator("#delete").click()
    assert "Delete “Handbook.md”" in page.locator("#confirm-text").inner_text()
    page.get_by_role("button", name="Cancel").click()  # nothing happens
    assert page.locator("#doc").is_visible()
    assert da.get_document(doc.doc_id, NS).doc_id == doc.doc_id
    page.locator("#delete").click()
    page.locator("#confirm-ok").click()
    page.locator("#status").filter(has_text="Deleted Handbook.md.").wait_for()
    assert page.locator("#doc").is_hidden()
    page.locator("#summary").filter(has_text="No documents match.").wait_for()
    with pytest.raises(NotFound):
        da.get_document(doc.doc_id, NS)


def test_a_long_outline_says_how_many_headings_are_not_listed(page, library):
    """A document of 61 headings lists the stored 50 and says "+11 more headings" with how to read
    any of them; removed again so the other tests see their 120 documents."""
    base, da = library
    text = "# Manual\n\n" + "\n\n".join(f"## Step {i}\n\nDo step {i} with care." for i in range(1, 61))
    doc = da.ingest_text(text, title="Long manual.md", namespace=NS).record
    try:
        _connect(page, base)
        page.get_by_label("Title").fill("long manual")
        page.keyboard.press("Enter")
        page.get_by_role("button", name="Long manual.md").click()
        page.locator("#doc").wait_for()
        assert page.locator("#outline li").count() == 50
        more = page.locator("#outline-more")
        assert more.is_visible()
        assert more.inner_text().startswith("+11 more headings; ")
        assert 'readDocument(from="<heading>")' in more.inner_text()
    finally:
        da.delete_document(doc.doc_id, NS)


def test_upload_three_files_at_once_one_of_them_broken(page, library):
    base, da = library
    _connect(page, base)
    page.locator("#files").set_input_files([str(BOOK), str(LOCKED_PDF), str(SMALL_TXT)])
    rows = page.locator("#uploads li")
    page.locator("#status").filter(has_text="of 3 files stored.").wait_for()
    assert rows.count() == 3
    assert rows.locator(".name").all_inner_texts() == [BOOK.name, LOCKED_PDF.name, SMALL_TXT.name]
    assert rows.locator(".state").all_inner_texts() == ["Stored", "Failed", "Stored"]
    broken = rows.nth(1).locator(".message").inner_text()
    assert broken.startswith("pdf_encrypted: ") and "password" in broken
    stored = {d.source_name: d for d in da.list_documents(NS)}
    assert BOOK.name in stored and SMALL_TXT.name in stored and LOCKED_PDF.name not in stored
    assert stored[BOOK.name].doc_id in rows.nth(0).locator(".message").inner_text()
    page.screenshot(path=str(ARTIFACTS / "library_upload.png"), full_page=True)


def test_a_cancelled_upload_shows_its_error_and_polling_stops(page, tmp_path):
    """Before (fresh-user trial, s16): follow() ended only at ``failed`` or ``done``, so a job
    cancelled meanwhile kept its row at "Embedding the sections" and was polled every 400 ms for
    ever. Now the row ends with the job's error. Before (hlo): that row was labelled "Failed" (in
    the red of a fault) beside "cancelled: This ingest job was cancelled"; now "Cancelled"."""
    settings = Settings(data_dir=tmp_path / "data", api_keys=(f"{KEY}={NS}",), sync_wait_s=0.0)
    da = DocAnchor(settings, embedder=HeldEmbedder())
    da.ingest_text(HANDBOOK, title="Handbook.md", namespace=NS)
    try:
        with _serving(settings, da) as base:
            _connect(page, base)
            da.ctx.embedder.release.clear()
            page.locator("#files").set_input_files([str(BOOK)])
            row = page.locator("#uploads li")
            row.locator(".state").filter(has_text="Embedding the sections").wait_for()  # polled: the job runs
            cancel_held_job(da)
            row.locator(".message").filter(has_text="cancelled: ").wait_for()  # the row has ended
            assert row.locator(".message").inner_text() == (
                "cancelled: This ingest job was cancelled; nothing of it was stored.")
            assert row.locator(".state").inner_text() == "Cancelled" and row.get_attribute("class") == "cancelled"
            assert [d.title for d in da.list_documents(NS)] == ["Handbook.md"]  # nothing of the upload stored
    finally:
        da.ctx.embedder.release.set()
        da.close()

def test_fits_a_phone_and_follows_a_dark_theme(page, library):
    base, _ = library
    page.set_viewport_size({"width": 360, "height": 740})
    page.goto(f"{base}/ui/?theme=dark")
    page.locator("#status").filter(has_text="unauthorized").wait_for()  # no key yet: said, not thrown
    assert page.locator("#connection").evaluate("d => d.open") is True
    assert page.evaluate("document.documentElement.scrollWidth") <= 360  # only the table scrolls, inside its box
    bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert bg == "rgb(22, 24, 28)", bg
    page.screenshot(path=str(ARTIFACTS / "library_phone_dark.png"), full_page=True)


# ---------------------------------------------------------------------------- in LobeChat's frame
FRAME_KEY = "library-frame-key"
FRAME_NS = "framed"
LIGHT_BG, DARK_BG = "rgb(255, 255, 255)", "rgb(22, 24, 28)"


@pytest.fixture(scope="module")
def framed(tmp_path_factory):
    """DocAnchor with a key for FRAME_NS holding one HTML memo whose hidden paragraph was skipped
    (flag ``hidden_text``). Yields (base URL, DocAnchor, the memo's record)."""
    from tests.test_hidden_html import INJECTION, _page as memo_html

    settings = Settings(data_dir=tmp_path_factory.mktemp("library-frame") / "data",
                        api_keys=(f"{FRAME_KEY}={FRAME_NS}",))
    da = DocAnchor(settings, embedder=HashEmbedder())
    memo = da.ingest_bytes(memo_html("", f'<p style="display:none">{INJECTION}</p>'), filename="memo.html",
                           namespace=FRAME_NS).record
    assert memo.flags["hidden_text"]["count"] == 1
    with _serving(settings, da) as base:
        yield base, da, memo
    da.close()


def _open_in_lobechat(page, host: str, base: str, settings: dict, arguments: dict):
    """The library page in tests/pages/host.html, which plays LobeChat (another origin)."""
    query = urlencode({"src": f"{base}/ui/", "settings": json.dumps(settings), "arguments": json.dumps(arguments),
                       "height": "560"})
    page.goto(f"{host}/host.html?{query}")
    frame = page.frame_locator("#plugin")
    frame.locator("#status").filter(has_text="Connected to LobeChat.").wait_for()
    return frame


def _background(frame) -> str:
    return frame.locator("body").evaluate("b => getComputedStyle(b).backgroundColor")


def _post_settings(page, settings: dict) -> None:
    """What LobeChat posts when the plugin's settings are sent again (PluginChannel.renderPluginSettings)."""
    page.evaluate("s => document.getElementById('plugin').contentWindow.postMessage("
                  "{type: 'lobe-chat:render-plugin-settings', value: s}, '*')", settings)


def test_lobechat_theme_setting_then_the_system_theme(page, host, framed):
    """The theme setting of LobeChat's init message, changed by its settings message, and 'auto'
    back to the system's scheme. Before: the page followed the system (or ?theme=) only."""
    base, _, _ = framed
    page.emulate_media(color_scheme="light")
    frame = _open_in_lobechat(page, host, base, {"apiKey": FRAME_KEY, "theme": "dark"}, {})
    assert _background(frame) == DARK_BG  # from init-standalone-plugin's settings
    _post_settings(page, {"apiKey": FRAME_KEY, "theme": "light"})
    frame.locator("html.light").wait_for(state="attached")
    assert _background(frame) == LIGHT_BG
    _post_settings(page, {"apiKey": FRAME_KEY, "theme": "auto"})
    frame.locator("html:not(.light):not(.dark)").wait_for(state="attached")
    assert _background(frame) == LIGHT_BG  # the system says light
    page.emulate_media(color_scheme="dark")
    assert _background(frame) == DARK_BG  # and follows it when it changes
    page.locator("#plugin").screenshot(path=str(ARTIFACTS / "library_in_lobechat_dark.png"))


def test_in_lobechat_shows_hidden_text_and_inserts_anchors(page, host, framed):
    base, da, memo = framed
    received = lambda: [m["data"] for m in page.evaluate("window.received")]  # noqa: E731
    frame = _open_in_lobechat(page, host, base, {"apiKey": FRAME_KEY, "namespace": FRAME_NS},
                              {"title": "Ownership, chapter 4.1"})
    assert received()[0] == {"type": "lobe-chat:plugin-ready-for-render"}
    assert frame.locator("#limits").inner_text().startswith(formats.phrase() + "; several at once")  # the registry's
    row = frame.locator("#docs tbody tr").filter(has_text="Memo")
    assert row.locator(".flag").all_inner_texts() == ["hidden text (1)"]  # the list's flag column

    row.get_by_role("button", name="Memo").click()
    frame.locator("#doc").wait_for()
    assert frame.locator("#doc-flags li").all_inner_texts() == ["hidden text (1)"]
    frame.get_by_role("button", name="Insert into chat").click()
    frame.locator("#status").filter(has_text="Inserted the anchor of Memo").wait_for()
    # postMessage is delivered to the parent asynchronously: the status can show before it arrives (a CI beside
    # other work saw none yet), so wait for the message itself
    page.wait_for_function("window.received.some(m => m.data.type === 'lobe-chat:fill-plugin-content')")
    [fill] = [m for m in received() if m.get("type") == "lobe-chat:fill-plugin-content"]
    assert fill["triggerAiMessage"] is True and da.anchor(memo.doc_id, FRAME_NS).strip() in fill["content"]  # its More line names the namespace

    frame.locator("#files").set_input_files(str(BOOK))  # one file: it takes the tool call's title
    done = frame.locator("#uploads li.done")
    done.wait_for()
    [book] = [d for d in da.list_documents(FRAME_NS) if d.source_name == BOOK.name]
    assert book.title == "Ownership, chapter 4.1"
    done.get_by_role("button", name="Insert Ownership, chapter 4.1 into the chat").click()
    page.wait_for_function("window.received.filter(m => m.data.type === 'lobe-chat:fill-plugin-content').length == 2")
    fills = [m for m in received() if m.get("type") == "lobe-chat:fill-plugin-content"]
    assert book.doc_id in fills[1]["content"].splitlines()[0]
    assert da.anchor(book.doc_id, FRAME_NS).strip() in fills[1]["content"]  # the upload's answer names the namespace too
    assert all(m["origin"] == base for m in page.evaluate("window.received"))
