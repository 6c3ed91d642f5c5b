"""An uncached prompts/list page of ``bench-big``, in-process, each way the registry builds one or
has built one: the stored entries concatenated, as the label rows carry them (the revisions since
2025-11-25, schema 0016), the same entries read from each label's version row (schema 0015's
function, kept for workers of that release), and the served rows shaped in the worker (older
revisions, and every page before schema 0015). No HTTP, no cache.

    REGISTRY_DATA_DIR=... python -m bench.pages [--size 1000] [--pages 30] [--rounds 3]

Reads a database seeded by ``bench/seed`` (its ``bench-big`` tenant). Each round reads ``--pages``
pages starting at names spread over the tenant once each way untimed (so that PostgreSQL's buffers
hold their rows, as for a tenant in use), then times them, the two ways in alternating order, on
one asyncpg connection;
prints per way the median and the slowest page, in milliseconds: the database's part (the one round
trip) and the worker's (parsing and shaping, encoding the JSON array), and their sum.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import orjson

from bench.seed import BIG_TENANT
from registry.db.models import Tenant
from registry.mcp import shaping
from registry.prompts import reading
from registry.revisions import revision_of

LABEL = "production"


class TimedConnection:
    """The connection the reading functions are given: it times their round trip."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn
        self.ms = 0.0

    async def fetch(self, *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return await self.conn.fetch(*args)
        finally:
            self.ms = (time.perf_counter() - started) * 1000

    async def fetchval(self, *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return await self.conn.fetchval(*args)
        finally:
            self.ms = (time.perf_counter() - started) * 1000


async def stored(reads: Any, tenant: Tenant, after: str, size: int) -> None:
    await reading.served_entries(reads, tenant, LABEL, after=after, limit=size)


class FromVersions:
    """The connection as schema 0015's page function answered: the entries read from the versions."""

    def __init__(self, timed: TimedConnection) -> None:
        self.timed = timed

    async def fetch(self, query: str, *args: Any) -> Any:
        older = query.replace("registry_served_entries_v2(", "registry_served_entries_v1(")
        assert older != query, f"not the entries function: {query}"  # else both ways time one
        return await self.timed.fetch(older, *args)


async def from_versions(reads: Any, tenant: Tenant, after: str, size: int) -> None:
    await reading.served_entries(FromVersions(reads), tenant, LABEL, after=after, limit=size)


async def shaped(reads: Any, tenant: Tenant, after: str, size: int) -> None:
    page, _ = await reading.served_page(reads, tenant, LABEL, after=after, limit=size)
    orjson.dumps(
        shaping.prompt_entries(revision_of("2025-11-25"), page)
    )  # as registry.mcp.caching does


async def measure(url: str, size: int, pages: int, rounds: int) -> None:
    conn = await asyncpg.connect(url)
    tenant_id = await conn.fetchval("SELECT id FROM tenants WHERE slug = $1", BIG_TENANT)
    names = [
        row[0]
        for row in await conn.fetch(
            "SELECT prompt_name FROM labels WHERE tenant_id = $1 AND label = $2 ORDER BY 1",
            tenant_id,
            LABEL,
        )
    ]
    tenant, timed = Tenant(id=tenant_id, slug=BIG_TENANT), TimedConnection(conn)
    if len(names) <= size:
        sys.exit(f"{BIG_TENANT} serves {len(names)} prompts: seed more than --size")
    ways: dict[str, Callable[[Any, Tenant, str, int], Awaitable[None]]] = {
        "stored entries, label rows": stored,
        "stored entries, version rows (0015)": from_versions,
        "shaped in the worker": shaped,
    }
    results: dict[str, list[tuple[float, float]]] = {way: [] for way in ways}
    for round_ in range(rounds):
        starts = [names[(i * 7919 + round_ * 104729) % (len(names) - size)] for i in range(pages)]
        for after in starts:  # untimed: PostgreSQL's buffers hold the pages' rows, for both ways
            for run in ways.values():
                await run(timed, tenant, after, size)
        for index, after in enumerate(starts):
            shift = index % len(ways)  # each way goes first as often as the others
            order = list(ways.items())[shift:] + list(ways.items())[:shift]
            for way, run in order:
                started = time.perf_counter()
                await run(timed, tenant, after, size)
                total = (time.perf_counter() - started) * 1000
                results[way].append((timed.ms, total - timed.ms))
    await conn.close()
    print(f"pages of {size:,} from {BIG_TENANT} ({len(names):,} served), {pages * rounds} each way")
    print("| way | database p50 ms | worker p50 ms | total p50 ms | total max ms |")
    print("|---|---|---|---|---|")
    for way, parts in results.items():
        totals = [db + worker for db, worker in parts]
        print(
            f"| {way} | {statistics.median(p[0] for p in parts):.2f} "
            f"| {statistics.median(p[1] for p in parts):.2f} "
            f"| {statistics.median(totals):.2f} | {max(totals):.2f} |"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench/pages", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1000, help="prompts per page")
    parser.add_argument("--pages", type=int, default=30, help="pages per round, each way")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    from registry.db.attach import attached_database

    with attached_database() as url:
        url = url.replace("postgresql+asyncpg://", "postgresql://")
        asyncio.run(measure(url, args.size, args.pages, args.rounds))


if __name__ == "__main__":
    main()
