"""Prometheus metrics. With several worker processes, PROMETHEUS_MULTIPROC_DIR (set by `registry serve`)
makes /metrics add up every worker's numbers, whichever worker answers the scrape."""

from __future__ import annotations

import bisect
import os
from typing import Any

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
# The serve ledger (registry.usage): bounded, no per-prompt labels here (the ledger holds those).
USAGE_FLUSHED = Counter(
    "registry_usage_counters_written_total", "Serve-ledger counters written by the flushes"
)
USAGE_DROPPED = Counter(
    "registry_usage_answers_dropped_total",
    "Answers not counted in the serve ledger: a worker held twice REGISTRY_USAGE_MAX_KEYS counters",
)
# Operating signals (what an operator watches during a failover, a restore or an upgrade).
# Each worker samples its own; the multiprocess modes say how the workers' values combine.
PRIMARY = Gauge(
    "registry_primary",
    "1 for the PostgreSQL server (address:port) the workers write to, 0 for one they left",
    ["server"],
    multiprocess_mode="livemax",
)
LISTENERS_CONNECTED = Gauge(
    "registry_listeners_connected",
    "Workers whose LISTEN connection is up (fewer than the workers: changes are not heard)",
    multiprocess_mode="livesum",
)
REPLICA_LAG = Gauge(
    "registry_replica_lag_seconds",
    "How far a read replica's replay is behind the primary (the worst worker's view)",
    ["replica"],
    multiprocess_mode="livemax",
)
REPLICA_USABLE = Gauge(
    "registry_replica_usable",
    "1 while every worker reads from the replica, 0 while any skips it",
    ["replica"],
    multiprocess_mode="livemin",
)
POOL_IN_USE = Gauge(
    "registry_pool_connections_in_use",
    "Connections in use, per pool (orm: writes and admin reads; reads: the MCP hot path)",
    ["pool"],
    multiprocess_mode="livesum",
)
POOL_CAPACITY = Gauge(
    "registry_pool_connections_max",
    "The most connections each pool may open, all workers together",
    ["pool"],
    multiprocess_mode="livesum",
)
POOL_WAIT = Histogram(
    "registry_pool_wait_seconds",
    "Time a transaction waited for a connection from the worker's ORM pool",
    buckets=(0.0001, 0.001, 0.005, 0.025, 0.1, 0.5, 2.5, 10),
)
WEBHOOK_ATTEMPTS = Counter(
    "registry_webhook_attempts_total",
    "Webhook delivery attempts, by outcome (delivered, retrying, failed: given up after retries)",
    ["outcome"],
)
GC_PAUSE = Histogram(
    "registry_gc_pause_seconds",
    "Cycle-collector pauses of the serving workers, by generation (2: a full collection)",
    ["generation"],
    buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2),
)
LOOP_LAG = Histogram(
    "registry_event_loop_lag_seconds",
    "How late each worker's event loop ran a timer set every 50 ms: how long a request that came"
    " meanwhile could wait to be read (the loop busy, or the process waiting for a core)",
    buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2),
)
LATENCY = Histogram(
    "registry_request_seconds",
    "Time to answer, per MCP method or REST route",
    ["kind", "name"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)


class Tally:
    """A counter, counted in process memory and written to the shared metric by ``flush()``.

    In multiprocess mode every increment of a prometheus metric is a locked mmap write plus a getpid()
    system call: more than a cached MCP answer costs. Hot paths count here instead; the app flushes
    every second and before each scrape.
    """

    def __init__(self, child: Any) -> None:
        self.child = child
        self.pending = 0.0

    def inc(self, amount: float = 1.0) -> None:
        if not self.pending:
            _dirty.append(self)
        self.pending += amount

    def flush(self) -> None:
        amount, self.pending = self.pending, 0.0
        if amount:
            self.child.inc(amount)


class Timings:
    """A histogram, bucketed in process memory and written to the shared metric by ``flush()``."""

    def __init__(self, child: Any) -> None:
        self.child = child
        self.bounds: list[float] = list(getattr(child, "_upper_bounds", ()))
        self.counts = [0] * len(self.bounds)
        self.total = 0.0
        self.observed: list[float] = []  # only when the child's buckets cannot be reached
        self.marked = False

    def observe(self, seconds: float) -> None:
        if not self.marked:
            self.marked = True
            _dirty.append(self)
        if not self.bounds:
            self.observed.append(seconds)
            return
        self.counts[bisect.bisect_left(self.bounds, seconds)] += 1
        self.total += seconds

    def flush(self) -> None:
        self.marked = False
        buckets = getattr(self.child, "_buckets", None)
        if self.bounds and buckets is not None and len(buckets) == len(self.counts):
            for index, count in enumerate(self.counts):
                if count:
                    buckets[index].inc(count)
                    self.counts[index] = 0
            total, self.total = self.total, 0.0
            if total:
                self.child._sum.inc(total)
        for seconds in self.observed:
            self.child.observe(seconds)
        self.observed.clear()


_dirty: list[Tally | Timings] = []
_tallies: dict[tuple[Any, tuple[str, ...]], Tally] = {}
_timings: dict[tuple[str, ...], Timings] = {}


def tally(metric: Counter, *labels: str) -> Tally:
    """The in-memory counter for ``metric`` with these label values (one per combination)."""
    found = _tallies.get((metric, labels))
    if found is None:
        found = _tallies[(metric, labels)] = Tally(metric.labels(*labels) if labels else metric)
    return found


def timings(*labels: str) -> Timings:
    """The in-memory request-latency histogram for these label values."""
    found = _timings.get(labels)
    if found is None:
        found = _timings[labels] = Timings(LATENCY.labels(*labels))
    return found


POOL_WAITS = Timings(POOL_WAIT)  # counted in memory like the request latencies
LOOP_LAGS = Timings(LOOP_LAG)


def flush() -> None:
    """Write what the hot paths counted into the shared metrics."""
    while _dirty:
        _dirty.pop().flush()


def forget_dead_workers(directory: str) -> list[int]:
    """Live gauges (open streams) of worker processes that are gone: a worker killed outright never
    said so, and its streams are closed. Returns the pids forgotten."""
    gone = []
    for entry in os.listdir(directory):
        if not entry.startswith("gauge_live") or not entry.endswith(".db"):
            continue
        pid_text = entry.rsplit("_", 1)[-1].removesuffix(".db")
        if not pid_text.isdigit():
            continue
        pid = int(pid_text)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            _multiprocess.mark_process_dead(pid, directory)  # type: ignore[no-untyped-call]
            gone.append(pid)
        except PermissionError:
            pass  # alive, someone else's
    return gone


def exposition() -> tuple[bytes, str]:
    flush()  # this worker's own counts are exact; the others' lag by at most their flush period
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        forget_dead_workers(directory)
        registry = CollectorRegistry()
        _multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(), CONTENT_TYPE_LATEST


def worker_exited(pid: int) -> None:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        _multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]
