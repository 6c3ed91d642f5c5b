"""A short run of the whole benchmark (every workload, a second or so each) on a small dataset, so the
harness cannot rot. It asserts only that each workload ran and answered without a single error: the
timings themselves are reported by bench/run, never judged here."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.seed import seed
from tests.conftest import ROOT, PgServer

pytestmark = pytest.mark.slow  # the registry and its peers, served and loaded by wrk

WORKLOADS = {
    ("prompts/get", "registry"),
    ("prompts/get (peer set)", "registry"),
    ("prompts/get (peer set, new arguments)", "registry"),
    ("prompts/list page 1", "registry"),
    ("prompts/get (peer set) at 50% load", "registry"),
    ("prompts/get (peer set) at 80% load", "registry"),
    ("prompts/get at 50% load", "registry"),
    ("prompts/get at 80% load", "registry"),
    ("prompts/get (Zipf mix)", "registry"),
    ("prompts/get (Zipf mix) at 50% load", "registry"),
    ("prompts/get (Zipf mix) at 80% load", "registry"),
    ("prompts/list deep page", "registry"),
    ("admin: new version", "registry"),
    ("prompts/get (peer set)", "low-level SDK"),
    ("prompts/get (peer set, new arguments)", "low-level SDK"),
    ("prompts/get (peer set)", "high-level SDK"),
    ("prompts/get (peer set, new arguments)", "high-level SDK"),
    ("prompts/get (peer set)", "bare ASGI"),
    *(
        (surface, target)
        for surface in ("tools/call (peer set)", "tools/call (peer set, new arguments)",
                        "resources/read (peer skills)", "tools/list page 1 (peer set)",
                        "resources/list page 1 (peer skills)")
        for target in ("registry", "low-level SDK", "high-level SDK")
    ),
}  # fmt: skip


@pytest.fixture
def wrk() -> str:
    found = shutil.which("wrk")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("wrk is missing: .ci/run installs it (apt-get install wrk)")
        pytest.skip("wrk is not installed (apt-get install wrk)")
    return found


def seeded(
    pg_server: PgServer, db_name: str, tmp_path: Path, **dataset: int
) -> tuple[dict[str, str], Path]:
    """A small dataset in the test database; the environment and output folder of bench/run."""
    asyncio.run(seed(pg_server.url(db_name), **dataset))
    env = {**os.environ, "REGISTRY_DATABASE_URL": pg_server.plain_url(db_name)}
    env.pop("REGISTRY_DATA_DIR", None)
    return env, tmp_path / "results"


def test_every_workload_completes_without_errors(
    wrk: str, pg_server: PgServer, db_name: str, tmp_path: Path
) -> None:
    env, out = seeded(
        pg_server, db_name, tmp_path, tenants=3, prompts=30, big=400, seed=3, peers=300
    )
    ran = subprocess.run(
        [sys.executable, "-m", "bench.run", "--duration", "1", "--warmup", "0", "--connections", "4",
         "--streams", "60", "--fanout-tenants", "3", "--workers", "1", "--peer-prompts", "300",
         "--peer-skills", "20", "--out", str(out)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-4000:]
    [result_file] = out.glob("*.json")
    results = json.loads(result_file.read_text())

    assert {(row["workload"], row["target"]) for row in results["wrk"]} == WORKLOADS
    for row in results["wrk"]:
        assert row["errors"] == 0, row
        assert row["server_cpu_ms"] > 0, row  # the CPU a request cost the server, measured
        # and the time its processes waited for a core (the kernel's run-queue delay)
        assert row["server_wait_ms"] >= 0 and row["postgres_wait_ms"] >= 0, row
        assert row["generator_cpu_ms"] > 0, row  # and what wrk spent on it, on the same cores
        assert row["generator_wait_ms"] >= 0, row
        if row["workload"] == "admin: new version":  # writes reach the database being measured
            assert row["postgres_cpu_ms"] > 0, row
        assert row["rps"] > 0, row
        # the machine's cores during the run: busy with the load at least, and some not stolen
        assert 0 < row["machine_busy"] <= 1 and 0 <= row["machine_steal"] < 1, row
        if "load" in row["workload"]:  # an offered load: latencies from each scheduled moment
            assert row["offered_rps"] > 0 and row["paced_p99_ms"] > 0, row
            assert row["paced_max_ms"] >= row["paced_p99_ms"] >= row["paced_p50_ms"], row
        if row["target"] == "registry":  # its collector pauses, read from /metrics around the run
            assert row["gc_full_collections"] >= 0 and row["gc_paused_s"] >= 0, row
            assert row["gc_longest_pause_ms_at_most"] >= 0, row
            if row["workload"] != "admin: new version":  # MCP: its own time, from its metrics
                served = [row[f"server_{q}_ms_at_most"] for q in ("max", "p99", "p50")]
                assert served == sorted(served, reverse=True) and served[-1] > 0, row
            assert row["loop_lag_max_ms_at_most"] >= 1, row  # the workers' loops' lateness
            if row["workload"].startswith(("prompts/get", "tools/call")):  # read no database
                assert 0 <= row["hit_ratio"] <= 1, row
    assert results["db_ceiling"]["rps"] > 0
    walk = results["walk"]
    assert walk["prompts"] == 400
    # the walk's time is split into waiting for answers and parsing them, each measured
    assert 0 < walk["server_seconds"] < walk["seconds"] and walk["parse_seconds"] > 0
    assert 0 < walk["again_server_seconds"] < walk["again_seconds"]
    [fanout] = results["fanout"]
    assert fanout["streams"] == 60
    assert fanout["missed"] == 0
    assert fanout["p99_ms"] is not None
    # the writes are sent from a process of their own; the server's own time is read from its
    # metrics, within the time the publisher waited for each answer
    assert 0 < fanout["write_in_server_mean_ms"] < fanout["write_mean_ms"]
    opened = sum(
        fanout["while_open"][pid]["connections"] - fanout["before_open"][pid]["connections"]
        for pid in fanout["while_open"]
    )
    assert opened == 60  # every stream was counted on one of the workers
    # warm caches, then the burst: the next prompts/get on every checking connection is the new
    # version (one worker here: it holds them all)
    assert fanout["checked"]["stale"] == 0
    assert sum(fanout["checked"]["per_worker"].values()) == fanout["checked"]["connections"]
    assert len(results["memory_kib"]["idle"]) == 1  # one worker each (the other test runs two)
    assert (out / result_file.name.replace(".json", ".md")).read_text().startswith("| workload")


def test_a_chosen_workload_runs_alone_and_an_unknown_one_is_refused(
    wrk: str, pg_server: PgServer, db_name: str, tmp_path: Path
) -> None:
    env, out = seeded(pg_server, db_name, tmp_path, tenants=2, prompts=10, big=50, seed=4, peers=0)
    command = [sys.executable, "-m", "bench.run", "--duration", "1", "--warmup", "0",
               "--connections", "4", "--workers", "2", "--out", str(out)]  # fmt: skip
    refused = subprocess.run(
        [*command, "--workloads", "writes,reeds"], env=env, cwd=ROOT, capture_output=True,
        text=True, timeout=60, check=False,
    )  # fmt: skip
    assert refused.returncode == 2 and "--workloads" in refused.stderr
    ran = subprocess.run(
        [*command, "--workloads", "writes,misses"], env=env, cwd=ROOT, capture_output=True,
        text=True, timeout=600, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-4000:]
    [result_file] = out.glob("*.json")
    results = json.loads(result_file.read_text())
    assert [row["workload"] for row in results["wrk"]] == [
        "prompts/get", "prompts/get at 50% load", "prompts/get at 80% load", "admin: new version",
    ]  # fmt: skip
    closed, half, most, _ = results["wrk"]
    assert all(row["errors"] == 0 and row["rps"] > 0 for row in results["wrk"])
    assert half["offered_rps"] == pytest.approx(closed["rps"] / 2)  # the misses' own capacity
    assert most["offered_rps"] == pytest.approx(closed["rps"] * 0.8)
    assert results["walk"] == {} and results["fanout"] == [] and results["db_ceiling"] == {}
    assert len(results["memory_kib"]["idle"]) == 2  # both workers were found and read


def test_the_collector_comparison_runs_both_sides(
    pg_server: PgServer, db_name: str, tmp_path: Path
) -> None:
    """bench/collector on a small dataset: both sides warm their caches and time their collections;
    and its turnover mode times every collection while random requests go on."""
    from bench.run import make_targets

    env, _ = seeded(pg_server, db_name, tmp_path, tenants=2, prompts=20, big=0, seed=5, peers=0)
    targets = tmp_path / "targets.tsv"
    assert asyncio.run(make_targets(pg_server.url(db_name), targets, count=40)) > 0
    ran = subprocess.run(
        [sys.executable, "-m", "bench.collector", str(targets), "--prompts", "40", "--rounds", "3",
         "--turns", "1"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-4000:]
    rows = [line for line in ran.stdout.splitlines() if line.startswith(("| plain", "| policy"))]
    assert len(rows) == 2, ran.stdout
    turned = subprocess.run(  # every collection timed while random requests go on
        [sys.executable, "-m", "bench.collector", str(targets), "--turnover", "200", "--among", "40"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert turned.returncode == 0, turned.stderr[-4000:]
    found = json.loads(turned.stdout.strip().splitlines()[-1])
    assert found["requests"] == 200 and found["cpu_us"] > 0
    assert {"gen0", "gen1", "gen2"} <= found.keys()
