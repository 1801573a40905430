"""``GET /metrics``: the Prometheus text format, by the ``prometheus-client`` library.

Series (each app has its own registry, so several apps in one process never share counts):

- ``docanchor_http_requests_total{method,route,status}`` and
  ``docanchor_http_request_duration_seconds{method,route}`` (a histogram): every answered request,
  by route pattern (fed by :class:`plugin.observe.Observed`);
- ``docanchor_ingest_jobs{state}``: jobs on disk by state (queued, running, done, failed,
  cancelled);
  ``docanchor_ingest_queue_depth``: jobs waiting to start;
- ``docanchor_chunks_embedded_total`` and ``docanchor_embedding_seconds_total``: chunks embedded by
  this process's jobs and the seconds spent embedding them (``rate()`` of the first is chunks
  embedded per second; their ratio is the embedding speed);
- ``docanchor_documents{namespace}`` and ``docanchor_chunks{namespace}``: what is stored;
- the process's CPU, memory and open files (the library's process collector).

Who may read it: anyone when the server has neither API keys nor ``DOCANCHOR_METRICS_TOKEN``;
otherwise ``Authorization: Bearer <token>`` with an API key (any namespace) or the metrics token.
"""

from __future__ import annotations

import logging
from typing import Iterator

from flask import Flask, Response, request
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from docanchor.access import grants
from docanchor.errors import Conflict, Unauthorized
from docanchor.settings import Settings
from plugin.api import DocAnchor
from plugin.observe import Served

log = logging.getLogger("docanchor.metrics")

LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
"""Histogram buckets in seconds: the library's defaults (5 ms to 10 s) plus 30 and 60 s, as an
upload waits up to ``wait_s`` (at most 60 s) for its job."""
JOB_STATES = ("queued", "running", "done", "failed", "cancelled")


class Metrics:
    """The registry of one app: request series fed by :meth:`observe`, the rest read at each scrape."""

    def __init__(self, da: DocAnchor) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("docanchor_http_requests", "HTTP requests answered, by route pattern and status.",
                                ("method", "route", "status"), registry=self.registry)
        self.latency = Histogram("docanchor_http_request_duration_seconds",
                                 "Time from a request's arrival to its answer, in seconds.", ("method", "route"),
                                 buckets=LATENCY_BUCKETS_S, registry=self.registry)
        self.registry.register(StoreCollector(da))
        ProcessCollector(registry=self.registry)

    def observe(self, served: Served) -> None:
        """Count one answered request (see :class:`plugin.observe.Observed`)."""
        self.requests.labels(served.method, served.route, str(served.status)).inc()
        self.latency.labels(served.method, served.route).observe(served.duration_s)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class StoreCollector(Collector):
    """Ingest jobs, embedding throughput and stored documents and chunks, read at each scrape.
    A part that cannot be read (Chroma down) is left out and logged; the scrape still answers. The
    chunks of a namespace indexed with another embedding model are not counted (opening them
    answers ``embedding_model_mismatch`` until ``docanchor reindex``); its documents are."""

    def __init__(self, da: DocAnchor) -> None:
        self.da = da

    def collect(self) -> Iterator:
        yield from self._jobs()
        meter = self.da.embedding_meter
        yield CounterMetricFamily("docanchor_chunks_embedded", "Chunks embedded by this process's ingest jobs.",
                                  value=meter.chunks)
        yield CounterMetricFamily("docanchor_embedding_seconds", "Seconds this process's ingest jobs spent embedding.",
                                  value=meter.seconds)
        try:
            yield from self._stored()
        except Exception:
            log.warning("could not count the stored documents for /metrics", exc_info=True)

    def _jobs(self) -> Iterator:
        counts = self.da.jobs.count_by_status()
        states = GaugeMetricFamily("docanchor_ingest_jobs", "Ingest jobs on disk by state.", labels=("state",))
        for state in (*JOB_STATES, *sorted(set(counts) - set(JOB_STATES))):
            states.add_metric((state,), counts.get(state, 0))
        yield states
        yield GaugeMetricFamily("docanchor_ingest_queue_depth", "Ingest jobs waiting to start.",
                                value=counts.get("queued", 0))

    def _stored(self) -> Iterator:
        store = self.da.ctx.store
        docs = GaugeMetricFamily("docanchor_documents", "Documents stored, by namespace.", labels=("namespace",))
        chunks = GaugeMetricFamily("docanchor_chunks", "Chunks stored, by namespace.", labels=("namespace",))
        for ns in store.namespaces():
            docs.add_metric((ns,), store.count_documents(ns))
            try:
                chunks.add_metric((ns,), store.count_chunks(ns))
            except Conflict:  # indexed with another model: left out, the other namespaces still counted
                pass
        yield docs
        yield chunks


def metrics_tokens(settings: Settings) -> set[str]:
    """The bearer tokens that may read ``/metrics``: every API key and the metrics token (empty: open)."""
    tokens = set(grants(settings))
    if settings.metrics_token:
        tokens.add(settings.metrics_token)
    return tokens


def register(app: Flask, settings: Settings, metrics: Metrics) -> None:
    """Serve ``GET /metrics`` on ``app``.

    Raises (answered as JSON errors):
        Unauthorized: tokens are configured and the request sent none of them.
    """
    from plugin.v1 import bearer_token

    tokens = metrics_tokens(settings)

    @app.get("/metrics")
    def metrics_page() -> Response:
        if tokens and bearer_token(request.headers.get("Authorization")) not in tokens:
            raise Unauthorized("/metrics needs 'Authorization: Bearer <token>' with an API key or "
                               "DOCANCHOR_METRICS_TOKEN.")
        return Response(metrics.render(), content_type=CONTENT_TYPE_LATEST, headers={"Cache-Control": "no-store"})
