"""Fetching documents from URLs without letting a URL reach inside the network (SSRF).

Rules: only ``http`` and ``https``; the host is resolved and every address must be public
(not loopback, private, link-local, site-local, multicast, reserved, unspecified, shared address
space, a cloud metadata address, nor an IPv6 form carrying such an IPv4 address: see
:func:`is_public_address`); the connection goes to the address that was checked (no second
DNS lookup an attacker could rebind); each redirect is checked the same way, at most
:data:`MAX_REDIRECTS`; the body is streamed with a size cap and the whole fetch has a deadline.
The type is sniffed from the bytes later (``ingest.detect``), never trusted from headers.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Callable
from urllib.parse import unquote, urljoin, urlsplit

from docanchor.errors import FetchError, InvalidRequest, TooLarge

MAX_REDIRECTS = 5
# Cloud metadata endpoints that are not covered by the private/link-local ranges.
METADATA_ADDRESSES = {
    ipaddress.ip_address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack (also link-local)
    ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
    ipaddress.ip_address("fd00:ec2::254"),  # AWS IMDS over IPv6
}

AddressPolicy = Callable[[ipaddress.IPv4Address | ipaddress.IPv6Address, int], bool]


def is_public_address(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int) -> bool:
    """True when ``ip`` is a global unicast address and no metadata endpoint.

    IPv6 forms that carry an IPv4 address are judged by that address too: IPv4-mapped
    (``::ffff:a.b.c.d``) and NAT64 (``64:ff9b::/96``, RFC 6052) by the IPv4 address alone,
    6to4 (``2002::/16``, RFC 3056) and Teredo (``2001::/32``, RFC 4380) by both. Site-local
    ``fec0::/10`` (deprecated by RFC 3879, still routed inside some sites) is refused.
    """
    if isinstance(ip, ipaddress.IPv6Address):
        carried = embedded_ipv4(ip)
        if ip.ipv4_mapped is not None or ip in NAT64_PREFIX:
            return carried is not None and is_public_address(carried, port)
        if ip.is_site_local or (carried is not None and not is_public_address(carried, port)):
            return False
    if ip in METADATA_ADDRESSES:
        return False
    return ip.is_global and not (ip.is_multicast or ip.is_reserved or ip.is_loopback or ip.is_link_local)


NAT64_PREFIX = ipaddress.ip_network("64:ff9b::/96")
"""The well-known NAT64 prefix (RFC 6052): its last 32 bits are an IPv4 address."""


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (IPv4-mapped, NAT64, 6to4, or a Teredo client), else ``None``."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in NAT64_PREFIX:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour is not None:
        return ip.sixtofour
    return ip.teredo[1] if ip.teredo is not None else None


@dataclass
class Fetched:
    """A fetched body. ``filename`` is the last path segment of the final URL (a hint only)."""

    data: bytes
    url: str
    filename: str
    content_type: str


def fetch_url(
    url: str, *, max_bytes: int, timeout_s: float = 20.0, policy: AddressPolicy = is_public_address,
) -> Fetched:
    """Fetch ``url`` under the rules above.

    Args:
        max_bytes: the most bytes accepted (bytes).
        timeout_s: the deadline for the whole fetch -- name resolution, connecting, TLS, headers
            and body of every hop, redirects included (seconds). A server that sends one byte at a
            time cannot stretch it: a watchdog shuts the connection down when it passes.
        policy: which resolved addresses may be contacted; tests relax it for a loopback server.

    Raises:
        InvalidRequest: ``url_invalid``, ``url_scheme_not_allowed``, ``url_address_refused``,
            ``url_too_many_redirects``.
        TooLarge: the body is over ``max_bytes``.
        FetchError: ``url_fetch_failed`` (DNS, connection, TLS), ``url_http_error`` (status >= 400),
            ``url_timeout`` (504).
    """
    watchdog = _Watchdog(time.monotonic() + timeout_s)
    try:
        return _fetch(url, max_bytes, policy, watchdog)
    except (socket.timeout, TimeoutError) as exc:
        raise _timeout(url, timeout_s) from exc
    except (OSError, http.client.HTTPException, ssl.SSLError) as exc:
        if watchdog.expired:  # the watchdog cut the connection: whatever broke, time ran out
            raise _timeout(url, timeout_s) from exc
        raise FetchError(f"Could not fetch {url} ({type(exc).__name__}); check that it opens in a browser, then try again.", code="url_fetch_failed") from exc
    finally:
        watchdog.stop()


def _timeout(url: str, timeout_s: float) -> FetchError:
    return FetchError(f"Fetching {url} took longer than {timeout_s:g} s (DOCANCHOR_URL_FETCH_TIMEOUT_S); the server "
                      "answered too slowly. Try again later, or upload the file instead.", code="url_timeout").with_status(504)


def _fetch(url: str, max_bytes: int, policy: AddressPolicy, watchdog: "_Watchdog") -> Fetched:
    current = url
    for _ in range(MAX_REDIRECTS + 1):
        parts = check_url(current)
        host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
        ip = _resolve(host, port, policy, watchdog)
        conn = _connection(parts.scheme, host, ip, port, watchdog)
        try:
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            conn.request("GET", path, headers={"Host": parts.netloc.rsplit("@", 1)[-1], "User-Agent": "DocAnchor/0.1",
                                               "Accept": "*/*", "Accept-Encoding": "identity"})
            resp = conn.getresponse()
            watchdog.check()
            if resp.status in (301, 302, 303, 307, 308):
                location = resp.getheader("Location")
                if not location:
                    raise FetchError("The server redirected without a Location header; give the address the page ends at instead.", code="url_fetch_failed")
                current = urljoin(current, location)
                continue
            if resp.status >= 400:
                raise FetchError(f"The server answered HTTP {resp.status} for {url}; check that the URL opens in a browser, or download the file and upload it.", code="url_http_error",
                                 http_status=resp.status)
            data = _read_capped(resp, max_bytes, watchdog)
            name = unquote(parts.path.rstrip("/").rsplit("/", 1)[-1]) or parts.hostname or "download"
            return Fetched(data, current, name[:200], resp.getheader("Content-Type") or "")
        finally:
            conn.close()
    raise InvalidRequest(f"{url} redirected more than {MAX_REDIRECTS} times; give the address the page ends at instead.", code="url_too_many_redirects")


class _Watchdog:
    """The deadline of one fetch: a timer that shuts down the current connection's socket when it
    passes, so a read blocked on a dripping server returns at once (socket timeouts bound each
    read, not their sum). After it fired, every partial result is refused (:meth:`check`)."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.expired = False
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def remaining(self) -> float:
        """Seconds left (at least a sliver, so a socket timeout is never 0 = non-blocking)."""
        self.check()
        return max(0.01, self.deadline - time.monotonic())

    def check(self) -> None:
        """Raises: TimeoutError once the deadline has passed."""
        if self.expired or time.monotonic() >= self.deadline:
            raise TimeoutError("fetch deadline passed")

    def watch(self, sock: socket.socket) -> None:
        """Cut ``sock`` when the deadline passes (at once if it has)."""
        with self._lock:
            self._sock = sock
            if self.expired:
                _shut(sock)

    def stop(self) -> None:
        self._timer.cancel()

    def _fire(self) -> None:
        with self._lock:
            self.expired = True
            if self._sock is not None:
                _shut(self._sock)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def check_url(url: str):
    """``url`` split into its parts (``urllib.parse.SplitResult``), when it is an http(s) URL with a host.

    Raises:
        InvalidRequest: ``url_invalid``, ``url_scheme_not_allowed``.
    """
    if not isinstance(url, str) or len(url) > 4096:
        raise InvalidRequest("'url' must be an http or https URL of at most 4096 characters.", code="url_invalid")
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        raise InvalidRequest(f"{url!r} is not a valid URL.", code="url_invalid") from exc
    if parts.scheme not in ("http", "https"):
        raise InvalidRequest(f"Only http and https URLs can be fetched; got {parts.scheme or 'no'} scheme.",
                             code="url_scheme_not_allowed")
    if not parts.hostname:
        raise InvalidRequest(f"{url!r} has no host name.", code="url_invalid")
    return parts


def _resolve(host: str, port: int, policy: AddressPolicy, watchdog: _Watchdog):
    infos = _getaddrinfo(host, port, watchdog)
    addresses = sorted({ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos}, key=str)
    refused = [a for a in addresses if not policy(a, port)]
    if not addresses or refused:
        raise InvalidRequest(
            f"DocAnchor does not fetch from {host} ({refused[0] if refused else 'no address'}): only public internet "
            "addresses are allowed, not loopback, private, link-local or cloud-metadata ones.",
            code="url_address_refused",
        )
    return addresses[0]


def _getaddrinfo(host: str, port: int, watchdog: _Watchdog) -> list:
    """``socket.getaddrinfo`` within the deadline: the lookup runs in a daemon thread (it cannot be
    interrupted; the resolver's own timeouts end it), and a lookup past the deadline is a timeout."""
    outcome: dict = {}

    def lookup() -> None:
        try:
            outcome["infos"] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except Exception as exc:  # noqa: BLE001 - handed to the caller below
            outcome["error"] = exc

    thread = threading.Thread(target=lookup, name="docanchor-resolve", daemon=True)
    thread.start()
    thread.join(watchdog.remaining())
    if thread.is_alive():
        raise TimeoutError(f"resolving {host} took past the deadline")
    error = outcome.get("error")
    if isinstance(error, (socket.gaierror, UnicodeError)):
        raise FetchError(f"The host {host!r} could not be resolved; check the URL's spelling.", code="url_fetch_failed") from error
    if error is not None:
        raise error
    return outcome["infos"]


def _connection(scheme: str, host: str, ip, port: int, watchdog: _Watchdog) -> http.client.HTTPConnection:
    """A connection to the checked address ``ip`` (never a second DNS lookup), connected now and
    watched by ``watchdog`` from the moment its socket exists (TLS handshake included)."""
    target = str(ip)
    timeout_s = watchdog.remaining()
    if scheme == "https":
        ctx = ssl.create_default_context()
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(target, port, timeout=timeout_s, context=ctx)
    else:
        conn = http.client.HTTPConnection(target, port, timeout=timeout_s)
    sock = socket.create_connection((target, port), timeout_s)
    watchdog.watch(sock)
    if scheme == "https":
        # Verify the certificate against the host name while connecting to the checked address.
        sock = ctx.wrap_socket(sock, server_hostname=host)
        watchdog.watch(sock)
    conn.sock = sock
    return conn


def _read_capped(resp: http.client.HTTPResponse, max_bytes: int, watchdog: _Watchdog) -> bytes:
    declared = resp.getheader("Content-Length")
    if declared and declared.isdecimal() and int(declared) > max_bytes:
        raise TooLarge(f"The document at that URL is {int(declared):,} bytes; the limit is {max_bytes:,}: download it and upload a smaller part.")
    chunks, size = [], 0
    while True:
        watchdog.check()
        block = resp.read1(64 * 1024)
        watchdog.check()  # a read the watchdog cut short returns early: never take it for the end
        if not block:
            if resp.length:  # read1 answers b"" when the connection closes before Content-Length bytes
                raise http.client.IncompleteRead(b"", resp.length)
            return b"".join(chunks)
        size += len(block)
        if size > max_bytes:
            raise TooLarge(f"The document at that URL is larger than the limit of {max_bytes:,} bytes; download it and upload a smaller part.")
        chunks.append(block)
