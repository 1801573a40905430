"""URL fetching: a real HTTP server on loopback, with the address check relaxed only for it."""

from __future__ import annotations

import ipaddress
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from docanchor.errors import FetchError, InvalidRequest, TooLarge
from ingest.fetch import fetch_url, is_public_address
from tests.conftest import CORPUS
from tests.waiting import BACKSTOP_S

PAYLOAD = (CORPUS / "md/ch04-01-what-is-ownership.md").read_bytes()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep test output quiet
        pass

    def do_GET(self):
        routes = {
            "/doc.md": (200, {}, PAYLOAD),
            "/hop": (302, {"Location": "/doc.md"}, b""),
            "/to-private": (302, {"Location": "http://10.20.30.40/secret"}, b""),
            "/to-metadata": (302, {"Location": "http://169.254.169.254/latest/meta-data/"}, b""),
            "/loop": (302, {"Location": "/loop"}, b""),
            "/missing": (404, {}, b"no"),
            "/big": (200, {}, b"x" * 5000),
        }
        status, headers, body = routes.get(self.path, (404, {}, b""))
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def only_test_server(ip, port):
    """The relaxed policy: this loopback address, and the normal rules for everything else."""
    return ip == ipaddress.ip_address("127.0.0.1") or is_public_address(ip, port)


def test_fetches_and_follows_a_redirect(server):
    got = fetch_url(server + "/hop", max_bytes=1_000_000, policy=only_test_server)
    assert got.data == PAYLOAD
    assert got.filename == "doc.md"
    assert got.url.endswith("/doc.md")


@pytest.mark.parametrize("path", ["/to-private", "/to-metadata"])
def test_redirect_into_the_network_is_refused(server, path):
    with pytest.raises(InvalidRequest) as err:
        fetch_url(server + path, max_bytes=1_000_000, policy=only_test_server)
    assert err.value.code == "url_address_refused"


def test_loopback_refused_by_default(server):
    with pytest.raises(InvalidRequest) as err:
        fetch_url(server + "/doc.md", max_bytes=1_000_000)
    assert err.value.code == "url_address_refused"


@pytest.mark.parametrize("url,code", [
    ("file:///etc/passwd", "url_scheme_not_allowed"),
    ("ftp://example.com/x", "url_scheme_not_allowed"),
    ("http://", "url_invalid"),
    ("http://[::1]:80/", "url_address_refused"),
    ("http://169.254.169.254/latest/meta-data/", "url_address_refused"),
    ("http://192.168.1.1/", "url_address_refused"),
    ("http://0.0.0.0/", "url_address_refused"),
    ("http://[::ffff:127.0.0.1]/", "url_address_refused"),
])
def test_refusals_each_have_their_code(url, code):
    with pytest.raises(InvalidRequest) as err:
        fetch_url(url, max_bytes=1000)
    assert err.value.code == code


def test_redirect_loop_stops(server):
    with pytest.raises(InvalidRequest) as err:
        fetch_url(server + "/loop", max_bytes=1000, policy=only_test_server)
    assert err.value.code == "url_too_many_redirects"


def test_size_cap_and_http_errors(server):
    with pytest.raises(TooLarge):
        fetch_url(server + "/big", max_bytes=1000, policy=only_test_server)
    with pytest.raises(FetchError) as err:
        fetch_url(server + "/missing", max_bytes=1000, policy=only_test_server)
    assert err.value.code == "url_http_error"


@pytest.mark.parametrize("address", [
    "fec0::1",                                  # site-local (deprecated, routed inside sites)
    "feff::1",                                  # site-local, last /10 block
    "2002:7f00:1::1",                           # 6to4 around 127.0.0.1
    "2002:a9fe:a9fe::1",                        # 6to4 around the metadata address 169.254.169.254
    "2002:0a00:0001::1",                        # 6to4 around 10.0.0.1
    "2001:0:4136:e378:8000:63bf:80ff:fffe",     # Teredo whose client is 127.0.0.1
    "64:ff9b::a9fe:a9fe",                       # NAT64 around 169.254.169.254
    "64:ff9b::7f00:1",                          # NAT64 around 127.0.0.1
    "::ffff:169.254.169.254",                   # IPv4-mapped metadata address
])
def test_ipv6_forms_that_reach_inside_are_refused(address):
    """Regression: site-local fec0::/10 and 6to4 2002::/16 addresses were accepted, though they can
    carry a loopback or metadata IPv4 address."""
    assert not is_public_address(ipaddress.ip_address(address), 80)
    with pytest.raises(InvalidRequest) as err:
        fetch_url(f"http://[{address}]/x", max_bytes=1000)
    assert err.value.code == "url_address_refused"


@pytest.mark.parametrize("address", ["2002:0808:0808::1", "64:ff9b::808:808", "::ffff:8.8.8.8"])
def test_ipv6_forms_around_a_public_ipv4_address_are_allowed(address):
    """6to4, NAT64 and IPv4-mapped forms are judged by the IPv4 address they carry."""
    assert is_public_address(ipaddress.ip_address(address), 80)


@pytest.fixture
def drip():
    from tests.drip_server import DripServer

    server = DripServer(interval_s=0.2)
    yield server
    server.stop()


def _fetch_in_thread(url: str, timeout_s: float, backstop_s: float = BACKSTOP_S):
    """``fetch_url`` in a thread, so a fetch that never ends fails the test instead of hanging it."""
    outcome: dict = {}

    def run():
        try:
            outcome["value"] = fetch_url(url, max_bytes=10_000_000, timeout_s=timeout_s, policy=only_test_server)
        except Exception as exc:  # noqa: BLE001 - handed to the test
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(backstop_s)
    assert not thread.is_alive(), f"the fetch of {url} was still running after the {backstop_s} s backstop"
    return outcome


@pytest.mark.parametrize("path", ["/length", "/close", "/chunked", "/headers"])
def test_the_deadline_bounds_the_whole_fetch(drip, path):
    """Regression: a server dripping one byte at a time (with or without Content-Length, chunked,
    or in its headers) kept a fetch busy long past DOCANCHOR_URL_FETCH_TIMEOUT_S, because each read
    had its own timeout. The deadline now covers connect, headers and body together."""
    outcome = _fetch_in_thread(drip.base + path, timeout_s=1.5)
    err = outcome.get("error")
    assert isinstance(err, FetchError) and err.code == "url_timeout", outcome
    assert err.http_status == 504 and "1.5 s" in err.message
    assert "value" not in outcome  # never a truncated body taken for the document


def test_a_body_cut_short_is_a_failed_fetch_not_a_document(drip):
    """A connection closed before Content-Length bytes arrived fails the fetch (never a truncated document)."""
    err = _fetch_in_thread(drip.base + "/short", timeout_s=BACKSTOP_S).get("error")
    assert isinstance(err, FetchError) and err.code == "url_fetch_failed"


def test_the_drip_server_itself_answers(drip):
    assert _fetch_in_thread(drip.base + "/ok.md", timeout_s=BACKSTOP_S)["value"].data.startswith(b"# Dripping")
