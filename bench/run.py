"""Run the benchmark: the registry, the peers and the ceilings, side by side, one run.

    python -m bench.run [--duration 10] [--warmup 20] [--connections 16,64] [--streams 1000,5000]
                        [--workers 2] [--out bench/results]

The registry and every peer run with the same number of uvicorn workers (--workers, 2 by default).

Needs wrk (Debian: apt-get install wrk) and a seeded database (bench/seed) in REGISTRY_DATA_DIR (the
embedded server) or REGISTRY_DATABASE_URL. Writes a JSON result and a Markdown table. Workloads:
  a  prompts/get with arguments: a random prompt of a random tenant (registry), and a random prompt of
     the 10,000 every server serves (registry, SDK low-level and high-level servers, bare ASGI)
  b  prompts/list: the first page, and a deep page (the one starting 90% into bench-big)
  c  a full walk of bench-big through nextCursor (one client, sequential)
  d  list_changed fan-out to 1,000 and 5,000 open streams over 50 tenants (bench/fanout.py)
  e  admin writes: new versions through the REST API, concurrent writers
  f  resident memory of each worker: idle, after the reads, with the streams open
  g  the newer surfaces, against the same peers: tools/call of the peer prompts' tools (the same
     arguments, then new ones each time) and resources/read of 1,000 skills' SKILL.md
  ceilings: a bare ASGI JSON endpoint under the same uvicorn settings; asyncpg primary-key selects
--workloads picks some (reads, misses, writes, fanout, surfaces); misses is the random prompts/get
of a alone, closed and at 50 % and 80 % of that rate. Every row also says how busy the machine's
cores were during it (machine_busy) and the share the hypervisor stole (machine_steal).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import resource
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import psutil

from bench import fanout
from bench.peers import PEER_PROMPTS, PEER_SKILLS, PEER_TENANT, peer_skill, peer_skill_name
from bench.seed import BIG_TENANT
from registry.db.connect import asyncpg_arguments

ROOT = Path(__file__).resolve().parent.parent
LUA = ROOT / "bench" / "wrk" / "prompts.lua"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"}
# The peers' prompts, the same arguments every time, then a new topic in every request (an answer
# the registry rendered before cannot be sent again: what rendering costs it).
PEER_WORKLOADS = (
    ("prompts/get (peer set)", "peer"),
    ("prompts/get (peer set, new arguments)", "peer-new"),
)
# The newer surfaces (workload group "surfaces"), on the same peer set: the prompts as tools, the
# same arguments every time and then a new topic in every request, the skills' SKILL.md files, and
# the first page of the tools and of the resources (the registry and the low-level SDK page by 100;
# the high-level SDK answers every tool and resource in one page).
SURFACE_WORKLOADS = (
    ("tools/call (peer set)", "tool"),
    ("tools/call (peer set, new arguments)", "tool-new"),
    ("resources/read (peer skills)", "skill"),
    ("tools/list page 1 (peer set)", "tools-list"),
    ("resources/list page 1 (peer skills)", "resources-list"),
)


def peer_count(names: str, peer_prompts: int, peer_skills: int) -> int:
    """How many peer items a workload of the Lua script's mode ``get`` picks among."""
    return peer_skills if names == "skill" else peer_prompts


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Running:
    url: str
    pid: int


@contextmanager
def server(
    command: list[str], env: dict[str, str], ready_path: str, timeout: float = 120
) -> Iterator[Running]:
    port = free_port()
    process = subprocess.Popen(  # noqa: S603
        [*command, "--port", str(port)],
        env={**os.environ, **env},
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{command} exited with {process.returncode}")
            try:
                if _ready(url, ready_path):
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{command} did not start")
            time.sleep(0.2)
        yield Running(url, process.pid)
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()


def _ready(url: str, path: str) -> bool:
    """/readyz for the registry; for the others, a real prompts/get answered with a result (a GET on
    an MCP endpoint may open an SSE stream that never ends, so it is never used as a probe)."""
    if path == "/readyz":
        return httpx.get(url + path, timeout=2).status_code == 200
    headers = {**HEADERS, "Mcp-Method": "prompts/get", "Mcp-Name": "peer-00000"}
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "prompts/get",
        "params": {"_meta": META, "name": "peer-00000", "arguments": {"topic": "x"}},
    }
    return "result" in httpx.post(url + path, json=body, headers=headers, timeout=5).json()


def uvicorn(factory: str, workers: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "uvicorn",
        factory,
        "--factory",
        "--workers",
        str(workers),
        "--log-level",
        "warning",
        "--no-access-log",  # as `registry serve` runs uvicorn: no per-request access line built
        "--host",
        "127.0.0.1",
    ]


def figures_of(out: str) -> dict[str, Any]:
    """The JSON line the Lua script's done() prints."""
    for line in reversed(out.splitlines()):
        if line.startswith('{"bench":'):
            figures: dict[str, Any] = json.loads(line)
            return figures
    raise RuntimeError(f"wrk printed no figures:\n{out[-2000:]}")


def cpu_seconds(pids: list[int]) -> float:
    """User and system CPU time of these processes so far (those gone meanwhile count 0)."""
    total = 0.0
    for pid in pids:
        with suppress(psutil.Error):
            times = psutil.Process(pid).cpu_times()
            total += times.user + times.system
    return total


def waiting_seconds(pids: list[int]) -> dict[int, float]:
    """By process, the time its threads spent so far runnable but not running, waiting for a core
    (the kernel's run-queue delay, /proc/PID/task/TID/schedstat); processes gone are left out."""
    found = {}
    for pid in pids:
        total = 0
        with suppress(OSError):
            for task in os.listdir(f"/proc/{pid}/task"):
                with (
                    suppress(OSError, ValueError, IndexError),
                    open(f"/proc/{pid}/task/{task}/schedstat") as stat,
                ):
                    total += int(stat.read().split()[1])
            found[pid] = total / 1e9
    return found


def waited_between(before: dict[int, float], after: dict[int, float]) -> float:
    """The seconds waited for a core between two readings, by the processes in both (a PostgreSQL
    backend that comes or goes in between is left out)."""
    return sum(after[pid] - before[pid] for pid in after.keys() & before.keys())


def _generate(command: list[str], env: dict[str, str] | None) -> tuple[str, float]:
    """Run wrk; its output, and the seconds its threads waited for a core (read every 0.1 s while
    it runs: at most the last tenth of a second is missed)."""
    process = subprocess.Popen(  # noqa: S603 - wrk, built by the caller
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    waited = 0.0
    while True:
        try:
            out, err = process.communicate(timeout=0.1)
            break
        except subprocess.TimeoutExpired:  # the largest reading: threads that end take theirs
            waited = max(waited, waiting_seconds([process.pid]).get(process.pid, 0.0))
    if process.returncode:
        raise subprocess.CalledProcessError(process.returncode, command, out, err)
    return out, waited


def database_pids(postmaster: int | None) -> list[int]:
    """The PostgreSQL server's processes now: the postmaster and its children."""
    if postmaster is None:
        return []
    with suppress(psutil.Error):
        return [postmaster, *(child.pid for child in psutil.Process(postmaster).children())]
    return []


async def postmaster_of(url: str) -> int | None:
    """The process id of the PostgreSQL server at ``url`` when it runs on this machine (the
    parent of the backend that answers, read while that backend is there), else None."""
    connection = await asyncpg.connect(**asyncpg_arguments(url))
    try:
        backend = int(await connection.fetchval("SELECT pg_backend_pid()"))
        with suppress(psutil.Error):
            return int(psutil.Process(backend).ppid())
        return None
    finally:
        await connection.close()


def database_cpu_seconds(postmaster: int | None) -> float:
    """User and system CPU time of that server so far: its processes now, and those that have
    exited (their time is added to the postmaster's children's once it reaps them). Backends come
    and go during a run; read so, one that exits in between still counts what it spent."""
    if postmaster is None:
        return 0.0
    with suppress(psutil.Error):
        server = psutil.Process(postmaster)
        times = server.cpu_times()
        gone = float(times.children_user + times.children_system)
        return gone + cpu_seconds(database_pids(postmaster))
    return 0.0


def machine_shares(before: Any, after: Any) -> dict[str, float]:
    """Between two readings of the machine's CPU times (``psutil.cpu_times()``, every core, from
    /proc/stat): the share of the cores' time that was busy (neither idle
    nor waiting on I/O) and the share the hypervisor gave to other machines (steal), whatever ran:
    a tail that comes with busy near 1 had no core to run on."""
    spent = {field: getattr(after, field) - getattr(before, field) for field in after._fields}
    total = sum(spent.values()) or 1.0
    idle = spent.get("idle", 0.0) + spent.get("iowait", 0.0)
    return {"machine_busy": 1 - idle / total, "machine_steal": spent.get("steal", 0.0) / total}


SAMPLE = re.compile(r"^(\w+)(?:\{([^}]*)\})? (\S+)$", re.M)
LABEL = re.compile(r'(\w+)="([^"]*)"')


def histogram(
    metrics_text: str, metric: str, group: Callable[[dict[str, str]], str | None]
) -> dict[str, float]:
    """One histogram from a /metrics scrape, every worker together: cumulative counts by group and
    bucket bound (``<group>/<le>``) and the sum by group (``<group>/sum``), where ``group`` names
    a series' group from its labels (None: left out) and the series of a group are added up.
    Labels are read in any order (the multiprocess mode sorts them)."""
    found: dict[str, float] = {}
    for name, labels, value in SAMPLE.findall(metrics_text):
        if name not in (f"{metric}_bucket", f"{metric}_sum"):
            continue
        named = dict(LABEL.findall(labels))
        part = named.pop("le", "sum")
        where = group(named)
        if where is not None:
            found[f"{where}/{part}"] = found.get(f"{where}/{part}", 0.0) + float(value)
    return found


def collector_pauses(metrics_text: str) -> dict[str, float]:
    """The registry's collector-pause histogram: by generation and bucket bound, and the seconds
    paused by generation."""
    return histogram(metrics_text, "registry_gc_pause_seconds", lambda labels: labels["generation"])


CACHE_COUNT = re.compile(
    r'^registry_cache_(hits|misses)_total\{cache="([a-z_]+)"\} ([0-9.e+]+)$', re.MULTILINE
)


def cache_counts(metrics_text: str) -> dict[str, float]:
    """The registry's cache hits and misses from a /metrics scrape, every worker together."""
    return {f"{kind}/{cache}": float(n) for kind, cache, n in CACHE_COUNT.findall(metrics_text)}


def hit_ratio(before: dict[str, float], after: dict[str, float], requests: int) -> float:
    """The share of ``requests`` prompts/get answered without reading the database: a request
    reads it when the label's resolution or the compiled version is not in the worker's memory."""
    reads = sum(
        after.get(f"misses/{cache}", 0.0) - before.get(f"misses/{cache}", 0.0)
        for cache in ("resolved", "versions")
    )
    return max(0.0, 1 - reads / requests) if requests else float("nan")


def served_timings(metrics_text: str) -> dict[str, float]:
    """The registry's own request-time histogram for MCP requests, every method together
    (``mcp/<le>``: each request timed from its message's arrival in a worker to its answer), and
    its workers' event-loop lag (``lag/<le>``)."""
    return histogram(
        metrics_text,
        "registry_request_seconds",
        lambda labels: "mcp" if labels.get("kind") == "mcp" else None,
    ) | histogram(metrics_text, "registry_event_loop_lag_seconds", lambda labels: "lag")


def bucket_bound(delta: dict[str, float], prefix: str, share: float) -> float | None:
    """From cumulative bucket counts gained between two scrapes (``<prefix>/<le>``): the upper bound
    of the bucket that holds the ``share`` quantile (1: the largest), inf past the last bound; None
    when nothing was counted."""
    total = delta.get(f"{prefix}/+Inf", 0.0)
    if total <= 0:
        return None
    bounds = sorted(
        (float(le), key)
        for key in delta
        if key.startswith(f"{prefix}/") and (le := key.split("/")[1]) not in ("sum", "+Inf")
    )
    return next((b for b, key in bounds if delta[key] >= share * total), float("inf"))


def served_between(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """The registry's own p50, p99 and longest MCP request between two scrapes, and the workers'
    longest event-loop lag (registry_event_loop_lag_seconds), at bucket resolution
    (each the bucket's upper bound): set beside the generator's latencies, they tell a tail spent
    inside a worker's handling from one spent before a worker read the request (a socket or run
    queue, the generator)."""
    delta = {key: after.get(key, 0.0) - before.get(key, 0.0) for key in after}
    found = {}
    for share, name in (
        (0.5, "server_p50_ms_at_most"),
        (0.99, "server_p99_ms_at_most"),
        (1.0, "server_max_ms_at_most"),
    ):
        bound = bucket_bound(delta, "mcp", share)
        if bound is not None:
            found[name] = 1000 * bound
    lag = bucket_bound(delta, "lag", 1.0)
    if lag is not None:
        found["loop_lag_max_ms_at_most"] = 1000 * lag
    return found


def pauses_between(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """What the collectors did between two scrapes: full collections, the seconds paused in all,
    and the longest pause's bucket (its upper bound: the longest pause was at most this)."""
    delta = {key: after.get(key, 0.0) - before.get(key, 0.0) for key in after}
    longest = max((bucket_bound(delta, gen, 1.0) or 0.0 for gen in "012"), default=0.0)
    return {
        "gc_full_collections": int(delta.get("2/+Inf", 0.0)),
        "gc_paused_s": sum(delta.get(f"{gen}/sum", 0.0) for gen in "012"),
        "gc_longest_pause_ms_at_most": 1000 * longest,
    }


def scrape(url: str, token: str) -> str:
    answer = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    answer.raise_for_status()
    return answer.text


def wrk(
    url: str,
    connections: int,
    seconds: int,
    warmup: int,
    *args: str,
    server_pids: list[int] | None = None,
    postmaster: int | None = None,
    metrics: Callable[[], str] | None = None,
    rate: float | None = None,
    gets: bool = False,
) -> dict[str, Any]:
    """One wrk run (after a warm-up run of ``warmup`` seconds, none at 0); requests/s and
    latencies in ms.

    With ``server_pids``: the CPU time the server's processes and the PostgreSQL server's
    (``postmaster`` and its children) spent per request during the measured run, in ms: what a
    request costs, beside how fast requests went (on a shared two-core machine both move between
    runs; the cost tells where the time goes). With ``metrics``: the collector's pauses, and for
    prompts/get (``gets``) the share answered from memory (``hit_ratio``)."""
    # A request slower than 10 s counts as an error (a socket timeout); wrk's own default is 2 s.
    # With ``rate``: requests/s offered on a schedule, each of the two wrk threads keeping its share
    # over its half of the connections (prompts.lua).
    threads = 2
    base = ["wrk", f"-t{threads}", f"-c{connections}", "--timeout", "10s", "-s", str(LUA), url]
    base += ["--", *args]
    env = {**os.environ, "BENCH_RATE_PER_THREAD": str(rate / threads)} if rate else None
    if warmup > 0:  # 0: no warm-up run (the test suite's smoke run)
        warm_up = [*base[:3], f"-d{warmup}s", *base[3:]]
        subprocess.run(warm_up, capture_output=True, check=True, env=env)  # noqa: S603 - wrk
    measured = [*base[:3], f"-d{seconds}s", *base[3:]]
    database = postmaster if server_pids is not None else None
    scraped = metrics() if metrics else ""
    paused, cached = collector_pauses(scraped), cache_counts(scraped)
    served = served_timings(scraped)
    started = (cpu_seconds(server_pids or []), database_cpu_seconds(database))
    waited = (waiting_seconds(server_pids or []), waiting_seconds(database_pids(database)))
    machine, generator = psutil.cpu_times(), resource.getrusage(resource.RUSAGE_CHILDREN)
    out, generator_waited = _generate(measured, env)
    shares = machine_shares(machine, psutil.cpu_times())
    generated = resource.getrusage(resource.RUSAGE_CHILDREN)  # wrk's, once it has exited
    generator_cpu = (generated.ru_utime + generated.ru_stime) - (
        generator.ru_utime + generator.ru_stime
    )
    if metrics:
        scraped = metrics()
        paused = pauses_between(paused, collector_pauses(scraped))
        paused |= served_between(served, served_timings(scraped))
        if gets:
            paused["hit_ratio"] = hit_ratio(
                cached, cache_counts(scraped), figures_of(out)["requests"]
            )
    spent = (
        cpu_seconds(server_pids or []) - started[0],
        database_cpu_seconds(database) - started[1],
    )
    waits = (
        waited_between(waited[0], waiting_seconds(server_pids or [])),
        waited_between(waited[1], waiting_seconds(database_pids(database))),
    )
    figures = figures_of(out)
    result = {
        "rps": figures["requests"] / (figures["duration_us"] / 1e6),
        "p50_ms": figures["p50_us"] / 1000,
        "p99_ms": figures["p99_us"] / 1000,
        "max_ms": figures["max_us"] / 1000,
        "errors": figures["jsonrpc_errors"] + figures["non_2xx"] + figures["socket_errors"],
        **shares,
    }
    if figures["requests"]:  # the load generator's own CPU (wrk's, on the same cores)
        result["generator_cpu_ms"] = 1000 * generator_cpu / figures["requests"]
        result["generator_wait_ms"] = 1000 * generator_waited / figures["requests"]
    if not figures["requests"]:  # every connection still waiting when the run ended
        result["unanswered"] = True
    if rate:  # latencies from each request's scheduled moment
        result |= {
            "offered_rps": rate,
            **{
                f"paced_{p}_ms": figures[f"paced_{p}_us"] / 1000
                for p in ("p50", "p99", "p999", "max")
            },
        }
    if server_pids is not None and figures["requests"]:
        result["server_cpu_ms"] = 1000 * spent[0] / figures["requests"]
        result["postgres_cpu_ms"] = 1000 * spent[1] / figures["requests"]
        result["server_wait_ms"] = 1000 * waits[0] / figures["requests"]
        result["postgres_wait_ms"] = 1000 * waits[1] / figures["requests"]
    return result | paused


async def db_ceiling(url: str, seconds: float, concurrency: int) -> dict[str, Any]:
    """asyncpg primary-key selects, as fast as `concurrency` connections go."""
    pool = await asyncpg.create_pool(
        **asyncpg_arguments(url), min_size=concurrency, max_size=concurrency
    )
    assert pool is not None
    keys = await pool.fetch("SELECT tenant_id, id FROM prompts TABLESAMPLE SYSTEM (1) LIMIT 5000")
    if len(keys) < 1000:  # a small table: a page sample may be empty
        keys = await pool.fetch("SELECT tenant_id, id FROM prompts ORDER BY random() LIMIT 5000")
    done = 0
    stop = time.monotonic() + seconds

    async def loop() -> None:
        nonlocal done
        async with pool.acquire() as conn:
            statement = await conn.prepare(
                "SELECT name, latest_version FROM prompts WHERE tenant_id = $1 AND id = $2"
            )
            while time.monotonic() < stop:
                key = random.choice(keys)  # noqa: S311
                await statement.fetchrow(key["tenant_id"], key["id"])
                done += 1

    started = time.monotonic()
    await asyncio.gather(*(loop() for _ in range(concurrency)))
    elapsed = time.monotonic() - started
    await pool.close()
    return {"rps": done / elapsed, "concurrency": concurrency}


def list_request(cursor: str | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """The body and headers of a prompts/list request for the page at ``cursor``."""
    params: dict[str, Any] = {"_meta": META, **({"cursor": cursor} if cursor else {})}
    body = {"jsonrpc": "2.0", "id": 1, "method": "prompts/list", "params": params}
    return body, {**HEADERS, "Mcp-Method": "prompts/list"}


def walk(url: str, tenant: str, stop_at: int | None = None) -> dict[str, Any]:
    """Walk every page; returns the time taken, the pages, and the cursor at ``stop_at`` prompts.

    ``seconds`` is the whole walk as this client sees it; ``server_seconds`` the part spent waiting
    for answers (from sending a request to its last byte), ``parse_seconds`` the client's parsing of
    them (the standard library's json; on a page of 2,000 prompts mostly making objects, and the
    cycle collections that so many new objects set off, whichever parser makes them)."""
    deep_cursor = None
    waited = parsed = 0.0
    with httpx.Client(base_url=url, timeout=60) as client:
        started, seen, pages, cursor = time.perf_counter(), 0, 0, None
        while True:
            body, headers = list_request(cursor)
            sent = time.perf_counter()
            content = client.post(f"/mcp/{tenant}", json=body, headers=headers).content
            received = time.perf_counter()
            answer = json.loads(content)
            waited, parsed = waited + received - sent, parsed + time.perf_counter() - received
            if "result" not in answer:
                raise RuntimeError(f"prompts/list failed: {answer}")
            result = answer["result"]
            pages += 1
            seen += len(result["prompts"])
            cursor = result.get("nextCursor")
            if stop_at is not None and deep_cursor is None and seen >= stop_at and cursor:
                deep_cursor = cursor
            if cursor is None:
                break
        return {
            "seconds": time.perf_counter() - started,
            "server_seconds": waited,
            "parse_seconds": parsed,
            "pages": pages,
            "prompts": seen,
            "deep_cursor": deep_cursor,
        }


AUTOGROUP_FILE = Path("/proc/sys/kernel/sched_autogroup_enabled")
AUTOGROUP_WARNING = (
    "note: the kernel schedules by session (sched_autogroup_enabled=1): the embedded PostgreSQL "
    "runs in a session of its own, and with wrk and the workers saturating the cores a worker's "
    "round trip to it can take seconds, which shows as a p99 of seconds while caches fill "
    "(measured in the fourth pass of the performance issue; see bench/history.md). "
    "For tails, run with "
    "`sysctl kernel.sched_autogroup_enabled=0`."
)


def autogroup() -> bool | None:
    """Whether the kernel groups CPU time by session (None: not a Linux that says)."""
    try:
        return AUTOGROUP_FILE.read_text().strip() == "1"
    except OSError:
        return None


def table(results: dict[str, Any]) -> str:
    lines = [
        "| workload | target | connections | requests/s | p50 ms | p99 ms | max ms | errors "
        "| server CPU ms/request | PostgreSQL CPU ms/request | full collections "
        "| longest pause ms (at most) | p99 / max ms in the server (at most) "
        "| longest loop lag ms (at most) "
        "| waiting for a core ms/request (server + PostgreSQL) | from memory | machine busy | steal "
        "| wrk CPU / waiting for a core ms/request |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in results["wrk"]:
        pauses = (
            f"{row['gc_full_collections']} | {row['gc_longest_pause_ms_at_most']:g}"
            if "gc_full_collections" in row
            else " | "
        )
        p50, p99, most = (  # under an offered load: from each request's scheduled moment
            (row["paced_p50_ms"], row["paced_p99_ms"], row["paced_max_ms"])
            if "paced_p99_ms" in row
            else (row["p50_ms"], row["p99_ms"], row["max_ms"])
        )
        served = _pair(row, "server_p99_ms_at_most", "server_max_ms_at_most", " / ", "g")
        waits = _pair(row, "server_wait_ms", "postgres_wait_ms", " + ", ".3f")
        generator = _pair(row, "generator_cpu_ms", "generator_wait_ms", " / ", ".3f")
        lines.append(
            f"| {row['workload']} | {row['target']} | {row['connections']} | {row['rps']:,.0f} | "
            f"{p50:.2f} | {p99:.2f} | {most:.1f} | {row['errors']} | "
            f"{_ms(row.get('server_cpu_ms'))} | {_ms(row.get('postgres_cpu_ms'))} | {pauses} | "
            f"{served} | {_bound(row.get('loop_lag_max_ms_at_most'))} | {waits} | "
            f"{_share(row.get('hit_ratio'))} | {_share(row.get('machine_busy'))} | "
            f"{_share(row.get('machine_steal'))} | {generator} |"
        )
    db = results["db_ceiling"]
    if db:
        lines.append(
            f"| asyncpg primary-key select | PostgreSQL | {db['concurrency']} | {db['rps']:,.0f} "
            "| | | | 0 | | | | | | | | | | | |"
        )
    if results["machine"].get("sched_autogroup"):
        lines += ["", AUTOGROUP_WARNING.replace("note: ", "Note: ", 1)]
    walk_result = results["walk"]
    if walk_result:  # with the reads
        lines += [
            "",
            f"Full walk of {BIG_TENANT}: {walk_result['prompts']:,} prompts in "
            f"{walk_result['pages']} pages, {walk_result['seconds']:.2f} s "
            f"({walk_result['server_seconds']:.2f} s waiting for answers, "
            f"{walk_result['parse_seconds']:.2f} s parsing them); again, answered from memory, "
            f"{walk_result['again_seconds']:.2f} s ({walk_result['again_server_seconds']:.2f} s "
            "waiting).",
        ]
    if results["fanout"]:
        lines += [
            "",
            "| fan-out: open streams (per worker) | tenants | rounds | p50 ms | p99 ms | max ms "
            "| missed | p99 ms from the write's request | write p50 ms | write mean ms "
            "(in the server) | KiB per open stream "
            "| stale answers after (checking connections per worker) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
    for f in results["fanout"]:
        spread = " + ".join(str(n) for n in streams_per_worker(f).values())
        lines.append(
            f"| {f['streams']:,} ({spread}) | {f['tenants']} | {f['rounds']} | {f['p50_ms']:.1f} | "
            f"{f['p99_ms']:.1f} | {f['max_ms']:.1f} | {f['missed']} | {f['from_send']['p99_ms']:.1f} | "
            f"{f['write_p50_ms']:.1f} | {f['write_mean_ms']:.1f} "
            f"({_ms(f['write_in_server_mean_ms'])}) | {per_stream_kib(f):.1f} | {checked(f)} |"
        )
    count = len(results["memory_kib"]["idle"])
    lines += [
        "",
        "| memory (RSS, MiB) | " + " | ".join(f"worker {i + 1}" for i in range(count)) + " |",
    ]
    lines.append("|---" * (count + 1) + "|")
    for moment, workers in results["memory_kib"].items():
        values = " | ".join(f"{kib / 1024:.1f}" for kib in workers.values())
        lines.append(f"| {moment} | {values} |")
    for f in results["fanout"]:
        values = " | ".join(f"{w['rss_kib'] / 1024:.1f}" for w in f["while_open"].values())
        lines.append(f"| {f['streams']:,} streams open | {values} |")
    lines += ["", "| ratio | value |", "|---|---|"]
    for name, value in results["ratios"].items():
        if value == value:  # NaN: a workload of the ratio was not run
            lines.append(f"| {name} | {value:.2f} |")
    return "\n".join(lines) + "\n"


def _pair(row: dict[str, Any], first: str, second: str, joined: str, form: str) -> str:
    """Two figures of a row in one cell (empty where the row has none)."""
    if first not in row:
        return ""
    return f"{row[first]:{form}}{joined}{row[second]:{form}}"


def _bound(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def _share(value: float | None) -> str:
    return "" if value is None or value != value else f"{100 * value:.2f} %"


def streams_per_worker(fanout_result: dict[str, Any]) -> dict[str, int]:
    before, during = fanout_result["before_open"], fanout_result["while_open"]
    return {pid: during[pid]["connections"] - before[pid]["connections"] for pid in during}


def checked(fanout_result: dict[str, Any]) -> str:
    found = fanout_result["checked"]
    spread = " + ".join(str(n) for n in (found["per_worker"] or {}).values())
    return f"{found['stale']} ({spread or found['connections']})"


def per_stream_kib(fanout_result: dict[str, Any]) -> float:
    """Resident memory the open streams added, per stream, over all the workers."""
    before, during = fanout_result["before_open"], fanout_result["while_open"]
    grown = sum(during[pid]["rss_kib"] - before[pid]["rss_kib"] for pid in during)
    streams = sum(streams_per_worker(fanout_result).values())
    return grown / streams if streams else float("nan")


def ratios(
    rows: list[dict[str, Any]], db: dict[str, Any], fanouts: list[dict[str, Any]]
) -> dict[str, float]:
    def find(workload: str, target: str, connections: int) -> dict[str, Any] | None:
        for row in rows:
            if (row["workload"], row["target"], row["connections"]) == (
                workload,
                target,
                connections,
            ):
                return row
        return None

    def rps(workload: str, target: str, connections: int) -> float:
        """Requests/s; NaN when not measured, or when no request was answered within the run
        (no ratio to it)."""
        row = find(workload, target, connections)
        return float(row["rps"]) if row and row["rps"] else float("nan")

    found: dict[str, float] = {}
    for c in sorted({row["connections"] for row in rows}):
        same = rps("prompts/get (peer set)", "registry", c)
        for peer in ("low-level SDK", "high-level SDK", "bare ASGI"):
            found[f"registry / {peer}, prompts/get of the same 10,000 prompts, c{c}"] = same / rps(
                "prompts/get (peer set)", peer, c
            )
        new = PEER_WORKLOADS[1][0]
        for peer in ("low-level SDK", "high-level SDK"):
            found[f"registry / {peer}, the same with new arguments each time, c{c}"] = rps(
                new, "registry", c
            ) / rps(new, peer, c)
            for surface, _ in SURFACE_WORKLOADS:
                found[f"registry / {peer}, {surface}, c{c}"] = rps(surface, "registry", c) / rps(
                    surface, peer, c
                )
        found[f"registry prompts/get (random tenant) / bare ASGI, c{c}"] = rps(
            RANDOM_WORKLOAD, "registry", c
        ) / rps("prompts/get (peer set)", "bare ASGI", c)
        found[f"registry prompts/get (random tenant) / asyncpg selects, c{c}"] = rps(
            RANDOM_WORKLOAD, "registry", c
        ) / (db["rps"] if db else float("nan"))
        first = find("prompts/list page 1", "registry", c)
        deep = find("prompts/list deep page", "registry", c)
        if first and deep:
            found[f"deep page p99 / first page p99, c{c}"] = deep["p99_ms"] / first["p99_ms"]
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench/run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=10, help="seconds per measured wrk run")
    parser.add_argument(
        "--warmup", type=int, default=20, help="seconds of load before each measured run"
    )
    parser.add_argument("--connections", default="16,64")
    parser.add_argument("--streams", default="1000,5000", help="open streams for the fan-out")
    parser.add_argument("--fanout-tenants", type=int, default=50)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--peers", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--workers", type=int, default=2, help="uvicorn workers of the registry and of every peer"
    )
    parser.add_argument(
        "--peer-prompts",
        type=int,
        default=PEER_PROMPTS,
        help="how many of the 10,000 peer prompts the peer workloads ask for (and the peers "
        "register: their start-up grows with it)",
    )
    parser.add_argument(
        "--peer-skills",
        type=int,
        default=PEER_SKILLS,
        help="how many skills the surfaces' workload reads (written to the registry once, and "
        "served by the peers)",
    )
    parser.add_argument(
        "--workloads",
        default=",".join(WORKLOADS),
        help="which parts to run, of: reads (the registry's, the walk, the peers and the bare ASGI "
        "ceiling), misses (of the reads, the random targets alone, closed and at each fixed load), "
        "writes, fanout, surfaces (tools and skills, the registry's and the peers')",
    )
    args = parser.parse_args(argv)
    workloads = {w for w in args.workloads.split(",") if w}
    if not workloads or workloads - set(WORKLOADS):
        parser.error(f"--workloads: a comma-separated list of {', '.join(WORKLOADS)}")
    if not 1 <= args.peer_prompts <= PEER_PROMPTS:
        parser.error(f"--peer-prompts: 1 to {PEER_PROMPTS}")
    if args.peer_skills < 1:
        parser.error("--peer-skills: at least 1")
    os.environ["BENCH_PEER_PROMPTS"] = str(args.peer_prompts)  # the peers the run starts
    os.environ["BENCH_PEER_SKILLS"] = str(args.peer_skills)
    if shutil.which("wrk") is None:
        sys.exit("bench/run needs wrk: apt-get install wrk")
    if autogroup():
        print(AUTOGROUP_WARNING, file=sys.stderr)
    results = run(
        duration=args.duration,
        warmup=args.warmup,
        connections=[int(c) for c in args.connections.split(",")],
        streams=[int(n) for n in args.streams.split(",") if n],
        fanout_tenants=args.fanout_tenants,
        peers=args.peers,
        out=args.out,
        workers=args.workers,
        workloads=workloads,
        peer_prompts=args.peer_prompts,
        peer_skills=args.peer_skills,
    )
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    (args.out / f"{stamp}.json").write_text(json.dumps(results, indent=2))
    markdown = table(results)
    (args.out / f"{stamp}.md").write_text(markdown)
    print(markdown)


def run(
    *,
    duration: int,
    warmup: int,
    connections: list[int],
    streams: list[int],
    fanout_tenants: int,
    peers: bool,
    out: Path,
    workers: int = 2,
    workloads: set[str] | None = None,
    peer_prompts: int = PEER_PROMPTS,
    peer_skills: int = PEER_SKILLS,
) -> dict[str, Any]:
    """Every workload (or those of ``workloads``), one after the other on the same machine; the
    results as one JSON value."""
    workloads = set(WORKLOADS) if workloads is None else workloads
    from registry.config import load_settings
    from registry.db.attach import attached_database

    settings = load_settings()

    targets = out / "prompts-get-targets.tsv"
    out.mkdir(parents=True, exist_ok=True)
    with attached_database() as url:  # the embedded server is stopped again afterwards
        tenants = asyncio.run(_count_tenants(url))
        found = asyncio.run(make_targets(url, targets))
        if not found:
            sys.exit("no production-labelled prompts in the bench tenants: run bench/seed first")
        print(f"{found:,} prompts/get targets", file=sys.stderr)
    rows: list[dict[str, Any]] = []
    token = secrets.token_urlsafe(32)  # this run's operator token: for the admin writes only
    registry_cmd = [sys.executable, "-m", "registry", "serve", "--workers", str(workers)]
    # The fan-out opens thousands of streams from one address: lift the per-caller bounds.
    lifted = {
        "REGISTRY_OPERATOR_TOKEN": token,
        "REGISTRY_STREAMS_PER_CALLER": "100000",
        "REGISTRY_STREAMS_PER_TENANT": "100000",
    }
    with server(registry_cmd, lifted, "/readyz") as registry:
        pids = worker_pids(registry.pid)
        memory: dict[str, Any] = {"idle": {str(pid): rss_kib(pid) for pid in pids}}
        env_url = os.environ.get("REGISTRY_DATABASE_URL")
        postmaster = asyncio.run(postmaster_of(env_url or _embedded_url(settings)))
        db: dict[str, Any] = {}  # the reads' ceiling: measured with them only
        if "reads" in workloads:
            db = asyncio.run(db_ceiling(env_url or _embedded_url(settings), duration, 16))
            print(f"asyncpg ceiling: {db['rps']:,.0f}/s", file=sys.stderr)
        walk_result: dict[str, Any] = {}
        if "reads" in workloads:
            walk_result = walk(
                registry.url, BIG_TENANT, stop_at=int(0.9 * _prompt_count(tenants, BIG_TENANT))
            )
            # The same walk again, answered from the worker's memory (one connection, so one
            # worker): what the client's parsing and HTTP cost without the database, in the same run.
            again = walk(registry.url, BIG_TENANT)
            walk_result["again_seconds"] = again["seconds"]
            walk_result["again_server_seconds"] = again["server_seconds"]
            print(f"walk: {walk_result}", file=sys.stderr)
        for c in connections if "reads" in workloads else []:
            measure = _measure(
                rows, registry.url, c, duration, warmup, "registry", pids, postmaster, token
            )
            measure(RANDOM_WORKLOAD, "", "targets", str(targets))
            for workload, names in PEER_WORKLOADS:
                measure(workload, f"/mcp/{PEER_TENANT}", "get", "1", str(peer_prompts), names)
            measure("prompts/list page 1", f"/mcp/{BIG_TENANT}", "list", "")
            measure(
                "prompts/list deep page",
                f"/mcp/{BIG_TENANT}",
                "list",
                walk_result["deep_cursor"] or "",
            )
        if "reads" in workloads and connections:
            paced(rows, registry.url, duration, warmup, pids, postmaster, token, connections[0],
                  targets, peer_prompts)  # fmt: skip
        if "misses" in workloads and "reads" not in workloads and connections:
            paced(rows, registry.url, duration, warmup, pids, postmaster, token, connections[0],
                  targets, None)  # fmt: skip
        if "surfaces" in workloads:
            asyncio.run(prepare_skills(registry.url, token, peer_skills))
            for c in connections:
                measure = _measure(
                    rows, registry.url, c, duration, warmup, "registry", pids, postmaster, token
                )
                for workload, names in SURFACE_WORKLOADS:
                    among = str(peer_count(names, peer_prompts, peer_skills))
                    measure(workload, f"/mcp/{PEER_TENANT}", "get", "1", among, names)
        memory["after reads"] = {str(pid): rss_kib(pid) for pid in pids}
        if "writes" in workloads:
            asyncio.run(prepare_writes(registry.url, token))
        for c in connections if "writes" in workloads else []:
            measure = _measure(
                rows, registry.url, c, duration, warmup, "registry", pids, postmaster, token
            )
            measure("admin: new version", "", "write", WRITE_TENANT, str(WRITE_PROMPTS), token)
        fanout_tenant_slugs = [f"fanout-{i:03d}" for i in range(fanout_tenants)]
        fanouts = []
        for count in streams if "fanout" in workloads else []:
            port = int(registry.url.rsplit(":", 1)[1])

            def snapshot(port: int = port) -> dict[str, Any]:
                return {
                    str(pid): {"rss_kib": rss_kib(pid), "connections": connections_of(pid, port)}
                    for pid in pids
                }

            result = asyncio.run(
                fanout.run(
                    registry.url,
                    token,
                    env_url or _embedded_url(settings),
                    count,
                    fanout_tenant_slugs,
                    snapshot=snapshot,
                    metrics=lambda: scrape(registry.url, token),
                )
            )
            fanouts.append(result)
            print(f"fan-out: {result}", file=sys.stderr)
        memory["after streams closed"] = {str(pid): rss_kib(pid) for pid in pids}
    counts = (peer_prompts, peer_skills)
    _peers(rows, workloads, peers, connections, duration, warmup, workers, counts)
    return {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "sched_autogroup": autogroup(),
        },
        "workers": workers,
        "peer_prompts": peer_prompts,
        "dataset": tenants,
        "duration_s": duration,
        "warmup_s": warmup,
        "wrk": rows,
        "db_ceiling": db,
        "walk": {k: v for k, v in walk_result.items() if k != "deep_cursor"},
        "fanout": fanouts,
        "memory_kib": memory,
        "ratios": ratios(rows, db, fanouts),
    }


def _peers(
    rows: list[dict[str, Any]],
    workloads: set[str],
    peers: bool,
    connections: list[int],
    duration: int,
    warmup: int,
    workers: int,
    counts: tuple[int, int],
) -> None:
    """The peers' runs of the workloads they share with the registry (those of the reads and of
    the surfaces among ``workloads``, over ``counts``: the peer prompts and skills asked for); the
    bare ASGI ceiling's, of the first only."""
    peer_targets = [("bare ASGI", "bench.peers:bare_app", "/mcp")]
    if peers:
        peer_targets = [
            ("low-level SDK", "bench.peers:lowlevel_app", "/mcp"),
            ("high-level SDK", "bench.peers:highlevel_app", "/mcp"),
            *peer_targets,
        ]
    compared = [*(PEER_WORKLOADS if "reads" in workloads else ())]
    compared += SURFACE_WORKLOADS if "surfaces" in workloads else ()
    for name, factory, path in peer_targets if compared else []:
        with server(uvicorn(factory, workers), {}, path, timeout=300) as peer:
            peer_pids = worker_pids(peer.pid)
            for c in connections:
                measure = _measure(rows, peer.url, c, duration, warmup, name, peer_pids, None)
                # The bare endpoint answers every request alike: one workload is its ceiling.
                for workload, names in compared[:1] if name == "bare ASGI" else compared:
                    count = str(peer_count(names, *counts))
                    measure(workload, "/mcp", "get", "1", count, names)


def _measure(
    rows: list[dict[str, Any]],
    url: str,
    connections: int,
    duration: int,
    warmup: int,
    target: str,
    pids: list[int],
    postmaster: int | None,
    token: str | None = None,
) -> Any:
    """``token``: the registry's operator token, to read its collector pauses from /metrics."""

    def measure(workload: str, path: str, *script_args: str, rate: float | None = None) -> None:
        result = wrk(
            url + path,
            connections,
            duration,
            warmup,
            *script_args,
            server_pids=pids,
            postmaster=postmaster,
            metrics=(lambda: scrape(url, token)) if token else None,
            rate=rate,
            gets=workload.startswith(("prompts/get", "tools/call")),
        )
        rows.append({"workload": workload, "target": target, "connections": connections, **result})
        print(rows[-1], file=sys.stderr)

    return measure


PACED_CONNECTIONS = 32  # requests in flight at most, under an offered load
RANDOM_WORKLOAD = "prompts/get"  # random targets (" at N% load" under an offered load)
ZIPF_WORKLOAD = "prompts/get (Zipf mix)"
ZIPF_EXPONENT = 1.0  # tenants, and prompts within a tenant: rank k asked for in proportion to 1/k
LOADS = (0.5, 0.8)  # of the closed-loop rate measured in the same run


def paced(
    rows: list[dict[str, Any]],
    url: str,
    duration: int,
    warmup: int,
    pids: list[int],
    postmaster: int | None,
    token: str,
    capacity_at: int,
    targets: Path,
    peer_prompts: int | None,
) -> None:
    """Latency at a fixed offered load: each of LOADS of the rate the closed loop reached in this
    run (at ``capacity_at`` connections), sent on a schedule; cached answers (the peer set), random
    targets (misses where the dataset is larger than a worker's caches), and the targets in a Zipf
    mix (a few tenants and prompts asked for most, as callers do), whose closed-loop rate is
    measured here first. ``peer_prompts`` None (``--workloads misses``): the random targets
    alone, their closed loop measured here first."""
    Workload = tuple[str, str, tuple[str, ...]]  # name, path, the wrk script's arguments
    random_targets: Workload = (RANDOM_WORKLOAD, "", ("targets", str(targets)))
    zipf: Workload = (ZIPF_WORKLOAD, "", ("zipf", str(targets), str(ZIPF_EXPONENT)))
    if peer_prompts is None:
        first, workloads = random_targets, [random_targets]
    else:
        peer = ("get", "1", str(peer_prompts), "peer")
        first = zipf
        workloads = [("prompts/get (peer set)", f"/mcp/{PEER_TENANT}", peer), random_targets, zipf]
    workload, path, script = first
    _measure(rows, url, capacity_at, duration, warmup, "registry", pids, postmaster, token)(
        workload, path, *script
    )
    measure = _measure(
        rows, url, PACED_CONNECTIONS, duration, warmup, "registry", pids, postmaster, token
    )
    for workload, path, script in workloads:
        capacity = next(
            row["rps"]
            for row in rows
            if (row["workload"], row["target"], row["connections"])
            == (workload, "registry", capacity_at)
        )
        for share in LOADS:
            measure(f"{workload} at {share:.0%} load", path, *script, rate=share * capacity)


WORKLOADS = ("reads", "misses", "writes", "fanout", "surfaces")
WRITE_TENANT = "bench-writes"
WRITE_PROMPTS = 100


async def prepare_writes(url: str, token: str) -> None:
    """The tenant the admin-write workload writes to: WRITE_PROMPTS prompts, created once."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as api:
        created = await api.post("/api/v1/tenants", json={"slug": WRITE_TENANT})
        if created.status_code not in (201, 409):
            raise RuntimeError(f"creating {WRITE_TENANT}: {created.status_code} {created.text}")
        for i in range(WRITE_PROMPTS):
            prompt = await api.post(
                f"/api/v1/tenants/{WRITE_TENANT}/prompts",
                json={
                    "name": f"w-{i:03d}",
                    "messages": [{"role": "user", "content": {"type": "text", "text": "v1"}}],
                },
            )
            if prompt.status_code not in (201, 409):
                raise RuntimeError(f"creating w-{i:03d}: {prompt.status_code} {prompt.text}")


async def prepare_skills(url: str, token: str, skills: int) -> None:
    """The skills of the peer tenant, the SKILL.md files the peers serve as resources: written
    through the admin API once (a second run finds them), labelled production."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as api:

        async def write(indexes: range) -> None:
            for i in indexes:
                body = {
                    "name": peer_skill_name(i),
                    "files": [{"path": "SKILL.md", "text": peer_skill(i)}],
                    "labels": ["production"],
                }
                made = await api.post(f"/api/v1/tenants/{PEER_TENANT}/skills", json=body)
                if made.status_code not in (201, 409):
                    raise RuntimeError(f"skill {i}: {made.status_code} {made.text}")

        await asyncio.gather(*(write(range(k, skills, 4)) for k in range(4)))


def worker_pids(parent: int) -> list[int]:
    """The uvicorn worker processes of ``registry serve`` (its Python children); the server itself
    when it has none (one worker serves in the main process)."""
    found = []
    for child in psutil.Process(parent).children():
        with suppress(psutil.Error):
            if any("spawn_main" in part for part in child.cmdline()):
                found.append(child.pid)
    return sorted(found) or [parent]


def rss_kib(pid: int) -> int:
    return int(psutil.Process(pid).memory_info().rss // 1024)


def connections_of(pid: int, port: int) -> int:
    """Established TCP connections to ``port`` held by process ``pid`` (its clients' streams)."""
    return sum(
        1
        for c in psutil.Process(pid).net_connections(kind="tcp")
        if c.laddr and c.laddr.port == port and c.status == psutil.CONN_ESTABLISHED
    )


VALUES = {"topic": "billing", "ticket": "AB-1", "audience": "engineers"}


async def make_targets(url: str, path: Path, count: int = 200_000) -> int:
    """Random (tenant, prompt) pairs of the bench tenants, each with valid values for the arguments
    its production version declares: the prompts/get load is real work, never an error."""
    connection = await asyncpg.connect(**asyncpg_arguments(url))
    try:
        rows = await connection.fetch(
            """
            SELECT t.slug, l.prompt_name,
                   coalesce(json_agg(json_build_object('name', a.name, 'enum', a.enum))
                            FILTER (WHERE a.name IS NOT NULL), '[]') AS arguments
            FROM (SELECT l.* FROM labels l
                  JOIN tenants t ON t.id = l.tenant_id AND t.slug ~ '^bench-[0-9]{4}$'
                  WHERE l.label = 'production' ORDER BY random() LIMIT $1) l
            JOIN tenants t ON t.id = l.tenant_id
            LEFT JOIN prompt_arguments a
                   ON a.tenant_id = l.tenant_id AND a.prompt_id = l.prompt_id AND a.version = l.version
            GROUP BY t.slug, l.prompt_name
            """,
            count,
        )
    finally:
        await connection.close()
    with path.open("w") as out:
        for row in rows:
            arguments = {
                a["name"]: (a["enum"][0] if a["enum"] else VALUES[a["name"]])
                for a in json.loads(row["arguments"])
            }
            out.write(f"/mcp/{row['slug']}\t{row['prompt_name']}\t{json.dumps(arguments)}\n")
    return len(rows)


async def _count_tenants(url: str) -> dict[str, int]:
    connection = await asyncpg.connect(**asyncpg_arguments(url))
    try:
        bench = await connection.fetchval(
            "SELECT count(*) FROM tenants WHERE slug ~ '^bench-[0-9]{4}$'"
        )
        per_tenant = await connection.fetchval(
            "SELECT count(*) FROM prompts p JOIN tenants t ON t.id = p.tenant_id WHERE t.slug = 'bench-0000'"
        )
        big = await connection.fetchval(
            "SELECT count(*) FROM prompts p JOIN tenants t ON t.id = p.tenant_id WHERE t.slug = $1",
            BIG_TENANT,
        )
    finally:
        await connection.close()
    if not bench or not big:
        sys.exit("no benchmark data: run bench/seed first")
    return {"bench": int(bench), "per_tenant": int(per_tenant), BIG_TENANT: int(big)}


def _prompt_count(tenants: dict[str, int], slug: str) -> int:
    return tenants[slug]


def _embedded_url(settings: Any) -> str:
    from registry.db.embedded import EmbeddedPostgres

    return EmbeddedPostgres(settings.data_dir).url()


if __name__ == "__main__":
    main()
