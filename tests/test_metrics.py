"""Counts kept in process memory reach the shared metrics exactly as direct increments would; who
may read them."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram

from registry import metrics
from tests.conftest import Api

BUCKETS = (0.001, 0.01, 0.1, 1)


def samples(registry: CollectorRegistry, name: str) -> dict[tuple[str, str], float]:
    return {
        (s.name, s.labels.get("le", "")): s.value
        for m in registry.collect()
        for s in m.samples
        if s.name.startswith(name) and not s.name.endswith("_created")
    }


def test_timings_flush_into_the_same_buckets_as_direct_observations() -> None:
    registry = CollectorRegistry()
    batched = Histogram("batched_seconds", "b", ["kind"], buckets=BUCKETS, registry=registry)
    direct = Histogram("direct_seconds", "d", ["kind"], buckets=BUCKETS, registry=registry)
    timings = metrics.Timings(batched.labels("mcp"))
    values = [0.0005, 0.001, 0.002, 0.05, 0.5, 2.0, 7.5]
    for value in values:
        timings.observe(value)
        direct.labels("mcp").observe(value)
    assert samples(registry, "batched_seconds_count") == {("batched_seconds_count", ""): 0}
    metrics.flush()
    got = {
        (n.replace("batched", "x"), le): v for (n, le), v in samples(registry, "batched").items()
    }
    want = {(n.replace("direct", "x"), le): v for (n, le), v in samples(registry, "direct").items()}
    assert got == want
    assert got[("x_seconds_count", "")] == len(values)
    assert got[("x_seconds_bucket", "0.001")] == 2  # le: the bound itself belongs to its bucket
    metrics.flush()  # nothing pending: nothing counted twice
    assert samples(registry, "batched_seconds_count")[("batched_seconds_count", "")] == len(values)


def test_tally_flushes_its_sum_once() -> None:
    registry = CollectorRegistry()
    counter = Counter("things", "t", ["kind"], registry=registry)
    tally = metrics.Tally(counter.labels("a"))
    for _ in range(5):
        tally.inc()
    tally.inc(2.5)
    assert samples(registry, "things_total") == {("things_total", ""): 0}
    metrics.flush()
    metrics.flush()
    assert samples(registry, "things_total") == {("things_total", ""): 7.5}


def test_a_killed_workers_open_streams_are_forgotten(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])  # a pid that is gone once waited for
    dead.wait()
    alive = os.getpid()
    for pid in (dead.pid, alive):
        (tmp_path / f"gauge_livesum_{pid}.db").write_bytes(b"")
    assert metrics.forget_dead_workers(str(tmp_path)) == [dead.pid]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"gauge_livesum_{alive}.db"]


async def test_metrics_need_the_operator_token_unless_public(api: Api) -> None:
    refused = await api.client.get("/metrics")
    assert refused.status_code == 401
    assert "REGISTRY_METRICS_PUBLIC" in refused.json()["detail"]
    assert (
        await api.client.get("/metrics", headers=api.as_key("not-the-token"))
    ).status_code == 401
    shown = await api.client.get("/metrics", headers=api.operator)
    assert shown.status_code == 200 and "registry_" in shown.text


@pytest.mark.parametrize("settings_overrides", [{"metrics_public": True}])
async def test_public_metrics_answer_anyone(api: Api) -> None:
    assert (await api.client.get("/metrics")).status_code == 200


def test_the_bench_reads_the_longest_pause_between_two_scrapes() -> None:
    from bench.run import collector_pauses, pauses_between

    def scrape(counts: dict[str, int], total: float) -> str:
        lines = [
            f'registry_gc_pause_seconds_bucket{{generation="2",le="{le}"}} {float(n)}'
            for le, n in counts.items()
        ]
        return "\n".join([*lines, f'registry_gc_pause_seconds_sum{{generation="2"}} {total}'])

    before = scrape({"0.01": 1, "0.02": 1, "0.05": 1, "+Inf": 1}, 0.005)
    # Two more full collections, one between 20 and 50 ms: the longest is at most 50 ms.
    after = scrape({"0.01": 2, "0.02": 2, "0.05": 3, "+Inf": 3}, 0.045)
    found = pauses_between(collector_pauses(before), collector_pauses(after))
    assert found["gc_full_collections"] == 2
    assert found["gc_longest_pause_ms_at_most"] == 50.0
    assert abs(found["gc_paused_s"] - 0.04) < 1e-9


def test_the_bench_reads_the_servers_own_p50_and_p99_between_two_scrapes() -> None:
    from bench.run import served_between, served_timings

    def scrape(counts: dict[str, int]) -> str:
        return "\n".join(
            f'registry_request_seconds_bucket{{kind="{kind}",le="{le}",name="{name}"}} {float(n)}'
            for kind, name in (("mcp", "prompts/get"), ("mcp", "prompts/list"), ("rest", "x"))
            for le, n in counts.items()
        )

    before = scrape({"0.001": 10, "0.01": 10, "0.05": 10, "+Inf": 10})
    # 100 more requests of each MCP method: 60 within 1 ms, 39 within 10 ms, one within 50 ms.
    after = scrape({"0.001": 70, "0.01": 109, "0.05": 110, "+Inf": 110})
    found = served_between(served_timings(before), served_timings(after))
    assert found == {
        "server_p50_ms_at_most": 1.0,
        "server_p99_ms_at_most": 10.0,
        "server_max_ms_at_most": 50.0,
    }
    # Two slow requests in each method's hundred: the 99th percentile is in the 50 ms bucket.
    slower = scrape({"0.001": 70, "0.01": 108, "0.05": 110, "+Inf": 110})
    assert served_between(served_timings(before), served_timings(slower)) == {
        "server_p50_ms_at_most": 1.0,
        "server_p99_ms_at_most": 50.0,
        "server_max_ms_at_most": 50.0,
    }
    assert served_between(served_timings(before), served_timings(before)) == {}
    lag = 'registry_event_loop_lag_seconds_bucket{{le="{}"}} {}'
    lagged = "\n".join(
        [lag.format("0.01", 10.0), lag.format("0.2", 12.0), lag.format("+Inf", 12.0)]
    )
    quiet = "\n".join([lag.format("0.01", 5.0), lag.format("0.2", 5.0), lag.format("+Inf", 5.0)])
    found = served_between(served_timings(quiet), served_timings(lagged))
    assert found == {"loop_lag_max_ms_at_most": 200.0}  # 7 timers, 2 of them 10-200 ms late


async def test_a_blocked_event_loop_shows_as_lag(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's loop held for 150 ms runs its lag timer that late: one count in the buckets from
    100 ms up, none before the loop was held."""
    from registry.app import watch_loop_lag

    seen_late = asyncio.Event()

    class Watched(metrics.Timings):  # this test's own histogram, flushed by nothing else
        def observe(self, seconds: float) -> None:
            super().observe(seconds)
            if seconds >= 0.1:
                seen_late.set()

    lags = Watched(metrics.LOOP_LAG)
    monkeypatch.setattr(metrics, "LOOP_LAGS", lags)
    slow = lags.bounds.index(0.1)
    watcher = asyncio.create_task(watch_loop_lag(every_seconds=0.01))
    try:
        await asyncio.sleep(0)  # the watcher sets its timer
        assert sum(lags.counts[slow:]) == 0
        time.sleep(0.15)  # noqa: ASYNC251 - the loop held, as a long synchronous step holds it
        async with asyncio.timeout(10):
            await seen_late.wait()
    finally:
        watcher.cancel()
    assert sum(lags.counts[slow:]) == 1
