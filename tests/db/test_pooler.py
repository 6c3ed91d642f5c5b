"""The registry through a real PgBouncer in transaction mode: the CLI (migrate, writes), the REST
API under concurrent writers, MCP in both eras, and list_changed fan-out to every worker, with
LISTEN on PostgreSQL itself as the README says."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.conftest import (
    OPERATOR_TOKEN,
    Instances,
    LiveServer,
    PgServer,
    fresh_slug,
    module_instances,
    registry_command,
)
from tests.pgbouncer import Pooler
from tests.streams import ACCEPT, initialize, seq_of, streams, write

pytestmark = pytest.mark.slow
STATELESS = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": STATELESS,
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def env_through(pooler: Pooler, pg_server: PgServer, database: str, **extra: str) -> dict[str, str]:
    """The settings of a pooled deployment: the database URL through PgBouncer, LISTEN direct."""
    return {
        "REGISTRY_DATABASE_URL": pooler.url(database),
        "REGISTRY_LISTEN_URL": pg_server.plain_url(database),
        "REGISTRY_OPERATOR_TOKEN": OPERATOR_TOKEN,
        **extra,
    }


def ok(*args: str, env: dict[str, str]) -> str:
    result = registry_command(*args, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
async def pooled(
    pgbouncer: Pooler, pg_server: PgServer, template_db: str
) -> AsyncIterator[Instances]:
    """One instance of two workers through the pooler, on a database of its own, shared by the
    module's server tests (each keeps to a tenant of its own)."""
    urls = functools.partial(env_through, pgbouncer, pg_server)
    async with module_instances(pg_server, template_db, (2,), urls=urls) as shared:
        yield shared


@pytest.fixture
def pooled_server(pooled: Instances) -> LiveServer:
    return pooled.servers[0]


def test_cli_migrates_and_writes_through_the_pooler(
    pgbouncer: Pooler, pg_server: PgServer, empty_db_name: str
) -> None:
    # The pooled setting is detected from the separate listen URL; each command is a new client
    # that lands on the server connections the previous ones used.
    env = env_through(pgbouncer, pg_server, empty_db_name)
    ok("migrate", env=env)
    ok("migrate", env=env)  # at head: a second run through the same server connections
    for slug in ("acme", "globex", "initech"):
        assert f"created tenant {slug}" in ok("tenant", "create", slug, env=env)
    listing = ok("tenant", "list", env=env)
    assert {"acme", "globex", "initech"} <= set(listing.split())


def test_without_the_pooler_setting_named_statements_collide(
    pgbouncer: Pooler, pg_server: PgServer, db_name: str
) -> None:
    # Why the setting exists: the driver's cached statements outlive the transaction on a server
    # connection that the next client then receives.
    env = env_through(pgbouncer, pg_server, db_name, REGISTRY_DATABASE_POOLER="none")
    outcomes = [registry_command("tenant", "list", env=env) for _ in range(3)]
    failed = [outcome.stderr for outcome in outcomes if outcome.returncode != 0]
    assert failed and "prepared statement" in failed[0], [o.stderr for o in outcomes]
    fixed = env_through(pgbouncer, pg_server, db_name, REGISTRY_DATABASE_POOLER="transaction")
    for _ in range(3):
        ok("tenant", "list", env=fixed)


def test_rest_writes_and_reads_through_the_pooler(pooled_server: LiveServer) -> None:
    acme = fresh_slug("acme")
    keys = pooled_server.tenant(acme, roles=("publisher", "reader"))
    publisher = {"Authorization": f"Bearer {keys['publisher']}"}
    reader = {"Authorization": f"Bearer {keys['reader']}"}
    base = f"{pooled_server.url}/api/v1/tenants/{acme}/prompts"

    def body(text: str) -> dict[str, Any]:
        return {
            "messages": [{"role": "user", "content": {"type": "text", "text": text + " {{x}}"}}],
            "arguments": [{"name": "x"}],
        }

    for index in range(4):
        created = httpx.post(base, json={"name": f"p{index}", **body("initial")}, headers=publisher)
        assert created.status_code == 201, created.text

    def new_version(index: int) -> int:
        return httpx.post(
            f"{base}/p{index % 4}/versions", json=body(f"v{index}"), headers=publisher, timeout=60
        ).status_code

    # 40 writers at once over both workers' pools: every transaction multiplexed on 4 server
    # connections, each write its own version, none lost.
    with concurrent.futures.ThreadPoolExecutor(max_workers=20) as pool:
        statuses = list(pool.map(new_version, range(40)))
    assert statuses == [201] * 40
    for index in range(4):
        versions = httpx.get(f"{base}/p{index}/versions?limit=100", headers=reader).json()
        assert len(versions["items"]) == 11
        moved = httpx.put(
            f"{base}/p{index}/labels/production", json={"version": 3}, headers=publisher
        )
        assert moved.status_code == 200, moved.text
    rendered = httpx.post(
        f"{base}/p0/render", json={"label": "production", "arguments": {"x": "y"}}, headers=reader
    )
    assert rendered.status_code == 200, rendered.text
    assert rendered.json()["messages"][0]["content"]["text"].endswith(" y")
    assert httpx.get(f"{pooled_server.url}/readyz").status_code == 200


async def test_mcp_in_both_eras_through_the_pooler(pooled_server: LiveServer) -> None:
    prompts = [
        {
            "name": f"greet{i}",
            "arguments": [{"name": "who", "required": True}],
            "messages": [{"role": "user", "content": {"type": "text", "text": "Hi {{who}}"}}],
        }
        for i in range(3)
    ]
    acme = fresh_slug("acme")
    key = pooled_server.tenant(acme, roles=("reader",), prompts=prompts)["reader"]
    headers = {"Authorization": f"Bearer {key}", "Accept": ACCEPT}
    async with httpx.AsyncClient(base_url=pooled_server.url, headers=headers) as client:
        # The session era (2025-03-26): initialize, then calls within the session.
        session = await initialize(client, f"/mcp/{acme}", "2025-03-26")
        listed = await client.post(
            f"/mcp/{acme}",
            json={"jsonrpc": "2.0", "id": 2, "method": "prompts/list"},
            headers=session,
        )
        assert [p["name"] for p in listed.json()["result"]["prompts"]] == [
            "greet0",
            "greet1",
            "greet2",
        ]
        # The stateless era (2026-07-28): every request carries its own metadata.
        for index in range(10):
            got = await client.post(
                f"/mcp/{acme}",
                json={
                    "jsonrpc": "2.0",
                    "id": index,
                    "method": "prompts/get",
                    "params": {
                        "name": f"greet{index % 3}",
                        "arguments": {"who": "Ada"},
                        "_meta": META,
                    },
                },
                headers={
                    "MCP-Protocol-Version": STATELESS,
                    "Mcp-Method": "prompts/get",
                    "Mcp-Name": f"greet{index % 3}",
                },
            )
            assert got.status_code == 200, got.text
            text = got.json()["result"]["messages"][0]["content"]["text"]
            assert text == "Hi Ada"


async def test_fan_out_reaches_every_worker_through_the_pooler(
    pooled_server: LiveServer, pooled: Instances
) -> None:
    superuser = pooled.superuser
    acme = fresh_slug("acme")
    key = pooled_server.tenant(acme)["publisher"]
    # Enough sessions that both workers hold some (uvicorn's workers share the socket).
    async with streams(pooled_server, acme, key, 20) as opened:
        await asyncio.to_thread(write, pooled_server, acme, key, "one")
        expected = await seq_of(superuser, acme)
        assert await asyncio.gather(*(stream.next() for stream in opened)) == [expected] * 20
