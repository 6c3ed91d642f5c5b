"""Reads from a real streaming replica (REGISTRY_READ_DATABASE_URLS): used while fresh, never
behind what the worker has seen (replay paused with pg_wal_replay_pause(): the primary answers at
once), skipped while lagging past the bound or unreachable, used again once it catches up."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import httpx
import pytest
from sqlalchemy import text

from registry.db import repository as repo
from registry.db.connect import APP_ROLE
from registry.db.engine import Database
from registry.db.replicas import Replicas
from registry.prompts import hot_reads
from tests.conftest import OPERATOR_TOKEN, PgServer, start_server, stop_server
from tests.db.test_hygiene import PID, SEEN, SETTING
from tests.replica import Replica
from tests.streams import initialize

pytestmark = pytest.mark.slow
WAIT = 60  # seconds: a bound on every wait, never a sleep of its own
STATELESS = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": STATELESS,
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def prompt(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "labels": ["production"],
        "messages": [{"role": "user", "content": {"type": "text", "text": f"I am {name}"}}],
    }


async def mcp(
    client: httpx.AsyncClient, key: str, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    headers = {
        "Authorization": f"Bearer {key}",
        "MCP-Protocol-Version": STATELESS,
        "Mcp-Method": method,
        **({"Mcp-Name": params["name"]} if "name" in params else {}),
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}
    answer = await client.post("/mcp/acme", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    return dict(answer.json()["result"])


async def in_session(
    client: httpx.AsyncClient, key: str, calls: list[tuple[str, dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Initialize a 2025-06-18 session, make ``calls``, and return its prompts/list."""
    headers = {"Authorization": f"Bearer {key}", "Accept": "application/json, text/event-stream"}
    headers |= await initialize(client, "/mcp/acme", "2025-06-18", headers)
    for index, (method, params) in enumerate([*calls, ("prompts/list", {})], start=2):
        body = {"jsonrpc": "2.0", "id": index, "method": method, "params": params}
        answer = await client.post("/mcp/acme", json=body, headers=headers)
        assert answer.status_code == 200, answer.text
        assert "result" in answer.json(), answer.text
    return list(answer.json()["result"]["prompts"])


async def until(check: Callable[[], Awaitable[Any]], what: str) -> Any:
    """Wait (bounded) for ``check()`` to return something true; returns it."""
    deadline = asyncio.get_running_loop().time() + WAIT
    while True:
        found = await check()
        if found:
            return found
        assert asyncio.get_running_loop().time() < deadline, f"never: {what}"
        await asyncio.sleep(0.05)


async def replica_state(client: httpx.AsyncClient) -> dict[str, Any]:
    ready = (await client.get("/readyz")).json()
    (state,) = ready["replicas"]
    return dict(state)


async def test_reads_use_a_fresh_replica_and_never_go_behind(
    pg_server: PgServer, db_name: str, replica: Replica, superuser: asyncpg.Connection
) -> None:
    standby = await replica.connect(db_name)
    server = start_server(
        {
            "REGISTRY_DATABASE_URL": pg_server.plain_url(db_name),
            "REGISTRY_READ_DATABASE_URLS": replica.url(db_name),
            "REGISTRY_REPLICA_MAX_LAG_SECONDS": "2",
            "REGISTRY_OPERATOR_TOKEN": OPERATOR_TOKEN,
        }
    )
    client = httpx.AsyncClient(base_url=server.url, timeout=30)
    try:
        keys = await asyncio.to_thread(
            server.tenant, "acme", roles=("publisher",), prompts=[prompt("one")]
        )
        key = keys["publisher"]
        auth = {"Authorization": f"Bearer {key}"}
        base = "/api/v1/tenants/acme"
        seq = await superuser.fetchval(
            "SELECT s.seq FROM change_sequences s JOIN tenants t ON t.id = s.tenant_id "
            "WHERE t.slug = 'acme'"
        )

        async def replayed() -> bool:
            return bool(
                await standby.fetchval(
                    "SELECT s.seq >= $1 FROM change_sequences s JOIN tenants t ON t.id = s.tenant_id "
                    "WHERE t.slug = 'acme'",
                    seq,
                )
            )

        async def usable() -> bool:
            return bool((await replica_state(client))["usable"])

        async def skipped() -> bool:
            return not await usable()

        await until(replayed, "the replica replays the writes")
        await until(usable, "the replica is usable")

        # Fresh: reads go to the replica (the worker opens its connections there).
        for _ in range(5):
            assert (await client.get(f"{base}/prompts/one", headers=auth)).status_code == 200
            listed = (await mcp(client, key, "prompts/list", {}))["prompts"]
            assert [p["name"] for p in listed] == ["one"]
        readers = await standby.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = 'registry-replica'"
        )
        assert readers >= 1

        # Replay paused: a write made now is answered at once, by the primary.
        await standby.execute("SELECT pg_wal_replay_pause()")
        try:
            created = await client.post(f"{base}/prompts", json=prompt("fresh"), headers=auth)
            assert created.status_code == 201, created.text
            assert (await client.get(f"{base}/prompts/fresh", headers=auth)).status_code == 200
            listed = (await mcp(client, key, "prompts/list", {}))["prompts"]
            assert [p["name"] for p in listed] == ["fresh", "one"]
            got = await mcp(client, key, "prompts/get", {"name": "fresh"})
            assert got["messages"][0]["content"]["text"] == "I am fresh"
            # A session (2025-06-18): its reads too, and its writes (the log level) on the primary.
            listed = await in_session(client, key, [("logging/setLevel", {"level": "debug"})])
            assert [p["name"] for p in listed] == ["fresh", "one"]
            # ...and the replica indeed does not have it yet.
            assert await standby.fetchval("SELECT count(*) FROM prompts WHERE name = 'fresh'") == 0
            # Behind the primary for longer than the bound: skipped.
            await until(skipped, "the lagging replica is skipped")
            assert "lagging" in (await replica_state(client))["problem"]
        finally:
            await standby.execute("SELECT pg_wal_replay_resume()")
        await until(usable, "the replica is used again")
        assert (await client.get(f"{base}/prompts/fresh", headers=auth)).status_code == 200
    finally:
        await client.aclose()
        stop_server(server)
        await standby.close()


async def test_an_unreachable_replica_is_skipped(pg_server: PgServer, db_name: str) -> None:
    server = start_server(
        {
            "REGISTRY_DATABASE_URL": pg_server.plain_url(db_name),
            "REGISTRY_READ_DATABASE_URLS": "postgresql://nobody:secret@127.0.0.1:1/nowhere",
            "REGISTRY_OPERATOR_TOKEN": OPERATOR_TOKEN,
        }
    )
    client = httpx.AsyncClient(base_url=server.url, timeout=30)
    try:
        key = (await asyncio.to_thread(server.tenant, "acme", prompts=[prompt("one")]))["publisher"]
        auth = {"Authorization": f"Bearer {key}"}
        got = await client.get("/api/v1/tenants/acme/prompts/one", headers=auth)
        assert got.status_code == 200, got.text
        assert (await mcp(client, key, "prompts/get", {"name": "one"}))["messages"]
        state = await replica_state(client)
        assert state["usable"] is False
        assert state["replica"] == "127.0.0.1:1/nowhere"  # never its password
    finally:
        await client.aclose()
        stop_server(server)


async def test_a_replica_that_never_answers_is_down_within_the_check_timeout() -> None:
    """A server that takes connections and says nothing (one being rebuilt, say): each check gives
    up on it within its timeout, so the worker's watch goes on sampling the primary."""
    accepted: list[asyncio.StreamWriter] = []

    async def silent(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)  # kept open, never written to

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    replicas = Replicas(
        [f"postgresql+asyncpg://registry@127.0.0.1:{port}/registry"],
        pool_size=1, pooled=False, max_lag_seconds=5.0, check_timeout=0.5,
    )  # fmt: skip
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        await replicas.check(started, 1)
        assert loop.time() - started < 5  # asyncpg alone would wait 60 s to connect
        [replica] = replicas.replicas
        assert accepted, "the check never reached the silent server"
        assert not replica.usable and replica.problem == "unreachable: TimeoutError"
    finally:
        await replicas.dispose()
        server.close()
        for writer in accepted:
            writer.close()


async def test_the_next_transaction_on_a_replica_connection_sees_no_tenant(
    pg_server: PgServer,
    db_name: str,
    replica: Replica,
    superuser: asyncpg.Connection,
    two_tenants: tuple[uuid.UUID, uuid.UUID],
) -> None:
    """Connection hygiene on a replica: after a tenant's read transaction there (``tenant_read_tx``)
    and after the hot path's statement on its plain pool, the next transaction on the same
    connection (one each: the backend pid says so) sees no tenant and runs as the connecting role.
    Two things keep it so, each enough alone: the settings are the transaction's own, and a read
    transaction on a replica ends by rolling back."""
    alpha, _ = two_tenants
    standby = await replica.connect(db_name)
    try:
        await until(
            lambda: standby.fetchval("SELECT count(*) = 2 FROM tenants"), "both tenants replayed"
        )
    finally:
        await standby.close()
    url = replica.url(db_name).replace("postgresql://", "postgresql+asyncpg://", 1)
    replicas = Replicas([url], pool_size=1, pooled=False, max_lag_seconds=60)
    replicas.trusted = lambda: True  # as when the worker's LISTEN connection is up
    db = Database(pg_server.url(db_name), pool_size=1, max_overflow=0, replicas=replicas)
    position = await superuser.fetchval("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')")
    await replicas.check(asyncio.get_running_loop().time(), int(position))
    [standby_replica] = replicas.replicas
    assert standby_replica.usable, standby_replica.problem
    try:
        async with db.tenant_read_tx(alpha) as session:
            used = (await session.execute(PID)).scalar_one()
            assert (await session.execute(SEEN)).scalar_one() == 1  # alpha's row, and only it
            assert (await session.execute(text("SELECT pg_is_in_recovery()"))).scalar_one()
        after = standby_replica.sessions()
        try:
            assert (await after.execute(PID)).scalar_one() == used
            assert (await after.execute(text("SELECT current_user = session_user"))).scalar_one()
            assert (await after.execute(SETTING)).scalar_one() in (None, "")
            await repo.enter_role(after, APP_ROLE)  # the application role with no tenant
            assert (await after.execute(SEEN)).scalar_one() == 0
        finally:
            await after.close()

        pool = await replicas.pool(alpha)
        assert pool is not None, "the replica's plain pool did not take the read"
        assert (
            await hot_reads.served_page(pool, alpha, "production", after=None, limit=10) is not None
        )
        async with pool.acquire() as connection:
            assert await connection.fetchval(
                "SELECT current_setting('registry.tenant_id', true)"
            ) in (None, "")
            assert await connection.fetchval("SELECT current_user = session_user")
    finally:
        await db.dispose()
