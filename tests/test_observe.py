"""What an operator sees (plugin/observe.py, plugin/metrics.py): X-Request-Id on every answer,
one JSON access line per request with the request's id on its error lines too, and /metrics in
the Prometheus format. DocAnchor runs for real (waitress on a loopback port, real Chroma on disk)
with the fake embedder; log lines are read through the formatter ``docanchor serve`` uses."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import re
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from docanchor.errors import ConfigError
from docanchor.settings import Settings
from plugin.observe import RequestIdFilter, json_formatter
from tests.live_server import serving_fake as _serving
from tests.waiting import BACKSTOP_S, wait_until

KEY = "observe-test-key"
NS = "ops"
SECRET_TEXT = "The vault combination is 31-41-59."


@contextlib.contextmanager
def _json_log():
    """Every record of the process, as ``docanchor serve`` writes it, into a string buffer."""
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setFormatter(json_formatter())
    handler.addFilter(RequestIdFilter())
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield buf
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


def _call(base: str, method: str, path: str, body: dict | None = None, headers: dict | None = None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method, headers={
        **({"Content-Type": "application/json"} if data else {}), **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=BACKSTOP_S) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers, err.read()


def test_every_answer_has_a_request_id_and_one_json_access_line(tmp_path):
    settings = Settings(data_dir=tmp_path / "data", api_keys=(f"{KEY}={NS}",))
    auth = {"Authorization": f"Bearer {KEY}"}
    with _json_log() as log, _serving(settings) as (base, _):
        status, headers, _ = _call(base, "GET", "/healthz", headers={"X-Request-Id": "trace-7f3a.1"})
        assert status == 200 and headers["X-Request-Id"] == "trace-7f3a.1"  # the caller's id is kept
        status, headers, _ = _call(base, "GET", "/v1/documents")
        assert status == 401 and re.fullmatch(r"[0-9a-f]{32}", headers["X-Request-Id"])  # errors too
        status, headers, _ = _call(base, "GET", "/healthz", headers={"X-Request-Id": 'forged" level="ERROR'})
        forged = headers["X-Request-Id"]
        assert re.fullmatch(r"[0-9a-f]{32}", forged)  # an id that could forge log lines is replaced
        status, headers, raw = _call(base, "POST", "/v1/documents", {"text": SECRET_TEXT, "title": "vault.md",
                                                                      "wait_s": 30}, {**auth, "X-Request-Id": "up-1"})
        assert status == 201, raw
        doc_id = json.loads(raw)["doc_id"]
        status, headers, _ = _call(base, "GET", "/v1/documents/doc_0000000000000000", headers={
            **auth, "X-Request-Id": "missing-1"})
        assert status == 404 and headers["X-Request-Id"] == "missing-1"
        _call(base, "GET", f"/v1/documents/{doc_id}", headers=auth)
        _call(base, "GET", "/no/such/page", headers={"X-Request-Id": "nowhere-1"})
        status, headers, _ = _call(base, "POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                   {**auth, "Accept": "application/json, text/event-stream", "X-Request-Id": "mcp-1"})
        assert status == 200 and headers["X-Request-Id"] == "mcp-1"
        # the access line is written when the answer's body is closed, which may be after the client read it
        # (its id alone is not enough: the MCP server's own lines during that request carry it too)
        wait_until(lambda: '"POST /mcp 200"' in log.getvalue(), "the last request's access line")
    text = log.getvalue()
    lines = [json.loads(line) for line in text.splitlines()]  # every line is one JSON object
    access = {line["request_id"]: line for line in lines if line["logger"] == "docanchor.access"}
    assert access["trace-7f3a.1"] | {"duration_ms": 0} == {
        "time": access["trace-7f3a.1"]["time"], "level": "INFO", "logger": "docanchor.access",
        "message": "GET /healthz 200", "request_id": "trace-7f3a.1", "method": "GET", "route": "/healthz",
        "status": 200, "duration_ms": 0, "namespace": None}
    assert isinstance(access["up-1"]["duration_ms"], float) and access["up-1"]["duration_ms"] > 0
    assert (access["up-1"]["route"], access["up-1"]["status"], access["up-1"]["namespace"]) == (
        "/v1/documents", 201, NS)
    assert (access["missing-1"]["route"], access["missing-1"]["status"]) == ("/v1/documents/<doc_id>", 404)
    assert access["nowhere-1"]["route"] == "(unmatched)" and access["nowhere-1"]["status"] == 404
    assert access["mcp-1"]["route"] == "/mcp" and forged in access
    # the error line of a request carries its id
    [refused] = [line for line in lines if line["logger"] == "docanchor.http" and line["request_id"] == "missing-1"]
    assert "document_not_found" in refused["message"]
    assert KEY not in text and SECRET_TEXT not in text and "31-41-59" not in text
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+0000", access["up-1"]["time"])


def _metrics(base: str, headers: dict | None = None) -> dict[tuple[str, tuple], float]:
    status, resp_headers, raw = _call(base, "GET", "/metrics", headers=headers)
    assert status == 200, raw
    assert resp_headers["Content-Type"].startswith("text/plain; version=")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(raw.decode()) for s in family.samples}


def _metrics_once_counted(base: str, request: tuple[str, str, str]) -> dict | None:
    """The metrics once ``(method, route, status)`` is counted, else None (read with the scraper token)."""
    m = _metrics(base, {"Authorization": "Bearer scraper-token"})
    method, route, status = request
    return m if ("docanchor_http_requests_total", (("method", method), ("route", route), ("status", status))) in m else None


def test_metrics_count_requests_jobs_and_what_is_stored(tmp_path):
    settings = Settings(data_dir=tmp_path / "data", api_keys=(f"{KEY}={NS}",), metrics_token="scraper-token")
    auth = {"Authorization": f"Bearer {KEY}"}
    with _serving(settings) as (base, _):
        status, headers, raw = _call(base, "GET", "/metrics")
        assert status == 401 and json.loads(raw)["error"]["code"] == "unauthorized"
        assert _call(base, "GET", "/metrics", headers={"Authorization": "Bearer wrong"})[0] == 401
        for _ in range(2):
            _call(base, "GET", "/healthz")
        status, _, raw = _call(base, "POST", "/v1/documents", {"text": "# Tea\n\n" + "Tea is brewed. " * 200,
                                                                "title": "tea.md", "wait_s": 30}, auth)
        assert status == 201, raw
        _call(base, "GET", "/v1/documents/doc_0000000000000000", headers=auth)
        # a request is counted when its answer's body is closed, which may be after the client read it
        m = wait_until(lambda: _metrics_once_counted(base, ("GET", "/v1/documents/<doc_id>", "404")),
                       "the 404 to be counted")
        assert _metrics(base, auth)  # an API key may read it too

    def one(name: str, **labels) -> float:
        return m[(name, tuple(sorted(labels.items())))]

    assert one("docanchor_http_requests_total", method="GET", route="/healthz", status="200") == 2
    assert one("docanchor_http_requests_total", method="POST", route="/v1/documents", status="201") == 1
    assert one("docanchor_http_requests_total", method="GET", route="/v1/documents/<doc_id>", status="404") == 1
    assert one("docanchor_http_requests_total", method="GET", route="/metrics", status="401") == 2
    assert one("docanchor_http_request_duration_seconds_count", method="GET", route="/healthz") == 2
    assert one("docanchor_http_request_duration_seconds_bucket", method="GET", route="/healthz", le="+Inf") == 2
    assert one("docanchor_ingest_jobs", state="done") == 1 and one("docanchor_ingest_jobs", state="failed") == 0
    assert one("docanchor_ingest_queue_depth") == 0
    assert one("docanchor_documents", namespace=NS) == 1
    chunks = one("docanchor_chunks", namespace=NS)
    assert chunks > 1 and one("docanchor_chunks_embedded_total") == chunks
    assert one("docanchor_embedding_seconds_total") > 0
    assert one("process_resident_memory_bytes") > 0


def test_metrics_are_open_without_keys_or_token(tmp_path):
    with _serving(Settings(data_dir=tmp_path / "data")) as (base, _):
        m = _metrics(base)
    assert ("docanchor_ingest_queue_depth", ()) in m


def test_log_level_setting_is_checked():
    assert Settings(log_level="debug").log_level == "debug"
    with pytest.raises(ConfigError, match="DOCANCHOR_LOG_LEVEL must be one of DEBUG, INFO, WARNING, ERROR"):
        Settings.from_env({"DOCANCHOR_LOG_LEVEL": "loud"})


def test_metrics_count_what_they_can_beside_a_namespace_of_another_model(tmp_path):
    """A namespace indexed with another embedding model (as other processes leave on a shared
    Chroma server) costs only its own chunk count: every other figure is still scraped."""
    from plugin.api import DocAnchor
    from plugin.metrics import StoreCollector
    from tests.fakes import HashEmbedder

    class OtherModel(HashEmbedder):
        name, dimension = "hash-64-test-embedder", 64

    settings = Settings(data_dir=tmp_path / "data")
    old = DocAnchor(settings, embedder=HashEmbedder())
    old.ingest_text(SECRET_TEXT * 20, title="vault.md", namespace="older model")
    old.close()
    da = DocAnchor(settings, embedder=OtherModel())
    try:
        da.ingest_text("# Tea\n\n" + "Tea is brewed. " * 200, title="tea.md", namespace=NS)
        got = {(m.name, tuple(s.labels.values())): s.value
               for m in StoreCollector(da).collect() for s in m.samples}
    finally:
        da.close()
    assert got[("docanchor_documents", ("older model",))] == 1
    assert got[("docanchor_documents", (NS,))] == 1 and got[("docanchor_chunks", (NS,))] > 1
    assert ("docanchor_chunks", ("older model",)) not in got
