"""Failover decided by a real manager: a Patroni cluster of two nodes and one etcd (tests/patroni.py).

The registry (two workers) writes continuously through a URL naming both nodes
(target_session_attrs=read-write) while the leader's postmaster is killed; Patroni promotes the
synchronous standby. Writes fail with 503 during the switch (never 500, never half written) and
succeed after it; /readyz is 200 again (the LISTEN connection and the pools followed the new leader);
an open MCP stream is told of the changes made after it; every acknowledged write is on the new leader.
Then the old leader rejoins as a replica (Patroni rewinds it when it must) and the registry, whose
read-replica URL names both nodes with target_session_attrs=standby, reads from it. /metrics tells the
operator each step: the primary in use, the listeners, the replica's lag."""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable

import httpx
import pytest

from registry.config import to_asyncpg_url
from registry.db import migrate
from tests.conftest import OPERATOR_TOKEN, start_server, stop_server
from tests.patroni import WAIT, Cluster, patroni_cluster  # noqa: F401 - the fixture
from tests.streams import streams
from tests.writes import Writer, tenant_with_prompt

pytestmark = pytest.mark.slow


async def until(
    check: Callable[[], bool], what: str, shown: Callable[[], object] | None = None
) -> float:
    """Wait (bounded) until ``check()`` is true; the seconds it took. ``shown``: what the failure
    message shows of the state it last saw."""
    started = time.monotonic()
    while not await asyncio.to_thread(check):
        if time.monotonic() - started >= WAIT:
            seen = await asyncio.to_thread(shown) if shown is not None else None
            raise AssertionError(f"never {what}" + (f"; last seen: {seen}" if shown else ""))
        await asyncio.sleep(0.05)
    return time.monotonic() - started


async def test_patroni_failover_and_rejoin(patroni_cluster: Cluster) -> None:  # noqa: F811
    cluster = patroni_cluster
    old, new = cluster.nodes
    await asyncio.to_thread(migrate.upgrade, to_asyncpg_url(cluster.url("registry")))
    server = start_server(
        {
            "REGISTRY_DATABASE_URL": cluster.url("registry"),
            "REGISTRY_LISTEN_URL": cluster.url("registry"),
            "REGISTRY_READ_DATABASE_URLS": cluster.url("registry", "standby"),
            "REGISTRY_DATABASE_POOLER": "none",
            "REGISTRY_OPERATOR_TOKEN": OPERATOR_TOKEN,
            "PROMETHEUS_MULTIPROC_DIR": tempfile.mkdtemp(prefix="registry-metrics-"),
        },
        workers=2,
    )
    try:
        # Both workers know the leader before it fails (each samples it every second).
        await until(lambda: server.metric("registry_primary").get(f'{{server="{old.address}"}}') == 1,
                    "the leader reported as the primary")  # fmt: skip
        key = await tenant_with_prompt(server, "acme", "p")

        def ready() -> bool:
            return httpx.get(f"{server.url}/readyz", timeout=5).status_code == 200

        async with streams(server, "acme", key, 1, label="latest") as (stream,):
            async with Writer(server.url, "acme", "p", key) as writer:
                while len(writer.acknowledged) < 20:  # writing, and the stream hearing it
                    await asyncio.wait_for(stream.next(), WAIT)
                killed_at = time.monotonic()
                old.kill_postmaster()
                await cluster.wait_for({new.name: "leader"})
                promoted = time.monotonic() - killed_at
                await writer.resumed(5)
                writing = time.monotonic() - killed_at
                await until(ready, "ready again")
                readied = time.monotonic() - killed_at
            # The stream is told of what was written after the switch: the listener moved too.
            connection = await new.connect("registry")
            try:
                await writer.lost_nothing(connection, stream)
            finally:
                await connection.close()

        # Both workers write to the new leader, and say so; both listeners are up.
        await until(lambda: server.metric("registry_primary") == {
            f'{{server="{old.address}"}}': 0, f'{{server="{new.address}"}}': 1},
            "the new leader reported as the primary",
            lambda: server.metric("registry_primary"))  # fmt: skip
        await until(  # each worker's listener back (each on its own backoff)
            lambda: server.metric("registry_listeners_connected") == {"": 2}, "two listeners"
        )

        # The old leader rejoins as the new leader's replica, and the registry reads from it.
        rejoin_started = time.monotonic()
        members = await cluster.wait_for({old.name: "sync_standby", new.name: "leader"})
        assert members[old.name]["timeline"] == members[new.name]["timeline"]

        async def reading_from_replica() -> bool:
            """Every worker finds the replica usable and has its read connections on the old leader,
            which is in recovery."""
            found = (await asyncio.to_thread(httpx.get, f"{server.url}/readyz", timeout=5)).json()
            usable = await asyncio.to_thread(server.metric, "registry_replica_usable")
            if not found.get("replicas") or not usable or set(usable.values()) != {1}:
                return False
            connection = await old.connect("registry")
            try:
                return bool(await connection.fetchval("SELECT pg_is_in_recovery()")) and (
                    await connection.fetchval(
                        "SELECT count(*) FROM pg_stat_activity "
                        "WHERE application_name = 'registry-replica-reads'"
                    )
                    >= 2  # one per worker at least
                )
            finally:
                await connection.close()

        deadline = time.monotonic() + WAIT
        while not await reading_from_replica():
            assert time.monotonic() < deadline, "never read from the rejoined replica"
            await asyncio.sleep(0.1)
        rejoined = time.monotonic() - rejoin_started
        rewound = "running pg_rewind" in old.said(last=10**7)
        print(
            f"patroni failover: promoted {promoted:.2f} s, writes again {writing:.2f} s, ready "
            f"{readied:.2f} s after the leader's postmaster was killed; {writer.statuses.count(503)} "
            f"answered 503; old leader reading as a replica {rejoined:.2f} s later"
            f"{' (pg_rewind ran)' if rewound else ''}"
        )
    except AssertionError as failed:  # what the workers logged says why (the log goes with them)
        said = server.said()
        first = said.find("unhandled_error")  # a 500's traceback first, then the log's end
        shown = said[max(first - 500, 0) : first + 6000] + "\n...\n" if first >= 0 else ""
        raise AssertionError(f"{failed}\nthe server's log:\n{shown}{said[-4000:]}") from None
    finally:
        stop_server(server)
