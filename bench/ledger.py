"""What the serve ledger costs and how fast it answers (issue 69).

    [REGISTRY_DATABASE_URL=postgresql://...] python -m bench.ledger [--calls 5000] [--rounds 8]
        [--prompts 100000] [--callers 1000] [--hours 3]

1. **The hot path's price**: a cached prompts/get through the ASGI app (as bench/inproc calls it),
   sent again from its bytes and, with a new header each time, answered from the answer cache by
   the full path; ``--rounds`` rounds of ``--calls`` calls with the ledger counting and not, in
   turns, in one process: this process's CPU per call, the median of each side and their ratio.
2. **Its writes at scale**: a tenant of ``--prompts`` prompts (binary COPY, as bench/seed) whose
   ``--callers`` callers are each answered one prompt every minute for ``--hours`` hours, each minute
   written as a worker's flush writes it (one statement of ``--callers`` counters): the wall time
   of a flush and the PostgreSQL backend's CPU for it, and the rows each table gains per day.
3. **Its questions** on that tenant, each timed five times in its tenant transaction: the versions
   of a prompt still served, callers and clients per version, a version's first and last answer,
   the prompts nobody loaded, the most served prompts, and who a label reaches.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from bench.inproc import OPERATOR, call, prepare, prompts_get


def _cpu_of(pid: int) -> float:
    """Seconds of CPU the process ``pid`` has used (user and system)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def count_alone(ledger: Any, number: int = 1_000_000) -> None:
    """The count itself, ``number`` times on one key (what each answer adds), against an empty
    call."""
    import timeit

    from registry.usage.schemas import Key

    key = Key(uuid.uuid4().int, "prompt", "p1", 1, "production", "prompts/get",
              f"key:{uuid.uuid4()}", "inproc/1")  # fmt: skip
    ledger.count(key)
    runs = []
    for _ in range(5):
        counted = timeit.timeit(lambda: ledger.count(key), number=number)
        empty = timeit.timeit(lambda: None, number=number)
        runs.append((counted - empty) / number * 1e9)  # ns per call
    ledger.taken()
    print(f"Ledger.count alone: median {statistics.median(runs):.0f} ns per answer "
          f"({min(runs):.0f}-{max(runs):.0f}, five runs of {number:,})")  # fmt: skip


async def hot_path(app: Any, calls: int, rounds: int) -> None:
    ledger = app.mcp.core.ledger
    count_alone(ledger, min(1_000_000, calls * 200))
    headers, body = prompts_get()
    for _ in range(2000):  # warm: caches, code paths, the replay kept
        await call(app, "POST", "/mcp/inproc", headers, body)
    unique = iter(range(1 << 40))

    async def replayed() -> None:
        await call(app, "POST", "/mcp/inproc", headers, body)

    async def cached() -> None:  # a new header: a new digest, so the full path and its cache
        await call(app, "POST", "/mcp/inproc", {**headers, "x-n": str(next(unique))}, body)

    for name, work in (("sent again from its bytes", replayed), ("from the answer cache", cached)):
        sides: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(rounds):
            for counting in (True, False):
                ledger.enabled = counting
                started = time.process_time()
                for _ in range(calls):
                    await work()
                sides[counting].append((time.process_time() - started) / calls * 1e6)
        ledger.enabled = True
        on, off = statistics.median(sides[True]), statistics.median(sides[False])
        print(f"cached prompts/get, {name}: {on:.1f} µs of CPU per call with the ledger, "
              f"{off:.1f} without (medians of {rounds} rounds of {calls}, in turns): "
              f"{(on / off - 1) * 100:+.1f} %; rounds with {min(sides[True]):.1f}-"
              f"{max(sides[True]):.1f}, without {min(sides[False]):.1f}-{max(sides[False]):.1f}")  # fmt: skip
    await ledger.flush()


async def scale(url: str, prompts: int, callers: int, hours: int) -> uuid.UUID:
    import asyncpg

    from bench.seed import Rows, copy_rows, tenant_rows
    from registry.db.connect import asyncpg_arguments
    from registry.usage import repository

    conn = await asyncpg.connect(**asyncpg_arguments(url))
    try:
        slug = f"ledger-{uuid.uuid4().hex[:8]}"
        rows = Rows()
        started = time.monotonic()
        tenant_rows(rows, random.Random(1), slug, prompts)  # noqa: S311 - benchmark data
        await copy_rows(conn, rows)
        tenant_id = rows.tenants[0][0]
        print(f"tenant {slug}: {prompts:,} prompts written in {time.monotonic() - started:.0f} s")
        rng = random.Random(2)  # noqa: S311 - benchmark data
        names = [f"prompt-{i:06d}" for i in range(prompts)]
        clients = ["agent/1.0", "agent/1.1", "ide/3.2", "batch/0.9", ""]
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        first = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(hours=hours)
        walls, cpus = [], []
        for minute in range(hours * 60):
            at = first + timedelta(minutes=minute)
            columns: list[list[Any]] = [[] for _ in range(13)]
            for caller in range(callers):
                row = (tenant_id, "prompt", names[int(rng.paretovariate(1.2)) % prompts],
                       rng.randint(1, 3), "production", "prompts/get", f"key:{caller:08d}",
                       clients[caller % len(clients)], at, 1, at, at + timedelta(seconds=30), 0)  # fmt: skip
                for column, value in zip(columns, row, strict=True):
                    column.append(value)
            cpu, wall = _cpu_of(pid), time.perf_counter()
            await repository.record(conn, columns)
            walls.append((time.perf_counter() - wall) * 1e3)
            cpus.append((_cpu_of(pid) - cpu) * 1e3)
        print(f"flush of {callers:,} counters (one minute), {hours * 60} flushes: wall median "
              f"{statistics.median(walls):.1f} ms (p99 {sorted(walls)[int(len(walls) * 0.99)]:.1f}), "
              f"PostgreSQL CPU median {statistics.median(cpus):.1f} ms")  # fmt: skip
        for table in ("usage_minutes", "usage_hours", "usage_days"):
            held = await conn.fetchval(
                f"SELECT count(*) FROM {table} WHERE tenant_id = $1", tenant_id
            )
            print(
                f"{table}: {held:,} rows for {hours} h, {held * 24 // hours:,} a day at this rate"
            )
        await conn.execute("ANALYZE usage_minutes, usage_hours, usage_days")
        return uuid.UUID(str(tenant_id))
    finally:
        await conn.close()


async def questions(app: Any, tenant_id: uuid.UUID) -> None:
    from registry.db.models import Tenant
    from registry.db.pagination import PageRequest
    from registry.usage import service

    db = app.state.db
    tokens = await db.tokens()
    page = PageRequest(100, None, tokens)
    async with db.tenant_tx(tenant_id) as session:
        tenant = await session.get(Tenant, tenant_id)
    assert tenant is not None
    week = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=7)
    top = "prompt-000001"  # the most asked (Pareto)
    asked: list[tuple[str, Callable[[Any], Awaitable[Any]]]] = [
        ("versions of a prompt still served (7 days)", lambda s: service.usage(
            s, tenant, service.UsageQuery(name=top, since=week, by="version"), page)),
        ("callers and clients of one version", lambda s: service.usage(
            s, tenant, service.UsageQuery(name=top, version=2, since=week, by="caller,client"), page)),
        ("first and last answer of each version", lambda s: service.usage(
            s, tenant, service.UsageQuery(name=top, by="version"), page)),
        ("a prompt's answers per version per hour (its chart)", lambda s: service.usage(
            s, tenant, service.UsageQuery(name=top, since=week, by="version,hour"), page)),
        ("prompts nobody loaded (first page)", lambda s: service.idle(s, tenant, "prompt", 7, page)),
        ("the 100 most served prompts (7 days)", lambda s: service.usage(
            s, tenant, service.UsageQuery(since=week, sort="answers"), page)),
        ("who moving production of a prompt reaches", lambda s: service.reach(
            s, tenant, "prompt", top, "production")),
    ]  # fmt: skip
    for name, question in asked:
        times = []
        for _ in range(5):
            async with db.tenant_tx(tenant_id) as session:
                started = time.perf_counter()
                await question(session)
                times.append((time.perf_counter() - started) * 1e3)
        print(
            f"{name}: median {statistics.median(times):.1f} ms ({min(times):.1f}-{max(times):.1f})"
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--prompts", type=int, default=100_000)
    parser.add_argument("--callers", type=int, default=1000)
    parser.add_argument("--hours", type=int, default=3)
    args = parser.parse_args()
    os.environ["REGISTRY_OPERATOR_TOKEN"] = OPERATOR
    os.environ.setdefault(
        "REGISTRY_USAGE_FLUSH_SECONDS", "300"
    )  # flushed by the bench, not a timer
    from registry.app import create_app

    app = create_app()
    async with app.router.lifespan_context(app):
        await prepare(app)
        await hot_path(app, args.calls, args.rounds)
        if args.prompts:
            tenant_id = await scale(app.state.db.url, args.prompts, args.callers, args.hours)
            await questions(app, tenant_id)


if __name__ == "__main__":
    if os.environ.get("REGISTRY_DATABASE_URL"):
        asyncio.run(main())
    else:  # the embedded server of REGISTRY_DATA_DIR, at head
        from registry.db.attach import attached_database

        with attached_database() as url:
            os.environ["REGISTRY_DATABASE_URL"] = url
            asyncio.run(main())
