"""Prometheus metrics. With several worker processes, PROMETHEUS_MULTIPROC_DIR (set by `registry serve`)
makes /metrics add up every worker's numbers, whichever worker answers the scrape."""

from __future__ import annotations

import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client import multiprocess as _multiprocess

OPEN_STREAMS = Gauge(
    "registry_open_streams", "Open SSE streams (MCP GET streams)", multiprocess_mode="livesum"
)
NOTIFICATIONS_SENT = Counter(
    "registry_notifications_sent_total", "notifications/prompts/list_changed written to streams"
)
LISTENER_RECONNECTS = Counter(
    "registry_listener_reconnects_total", "Times the LISTEN connection was re-established"
)
CACHE_HITS = Counter("registry_cache_hits_total", "Cache hits", ["cache"])
CACHE_MISSES = Counter("registry_cache_misses_total", "Cache misses", ["cache"])
REQUESTS = Counter("registry_requests_total", "Requests handled", ["kind", "name", "outcome"])
LATENCY = Histogram(
    "registry_request_seconds",
    "Time to answer, per MCP method or REST route",
    ["kind", "name"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)


def exposition() -> tuple[bytes, str]:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        _multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(), CONTENT_TYPE_LATEST


def worker_exited(pid: int) -> None:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        _multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
