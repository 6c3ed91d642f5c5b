"""A primary whose commits wait for a synchronous standby that is not there (as after a failover
manager crashed and its standby was promoted away): a write is answered 503 with Retry-After
within REGISTRY_COMMIT_WAIT_SECONDS instead of hanging, /readyz says writes are not acknowledged,
and once commits are acknowledged again both come back, the retried write written once.

Only this test's database waits: the server's default is ``synchronous_commit = local`` while the
test runs (which no other database notices: there is no standby), and its database alone says
``on``. Everything is put back, even when the test fails."""

from __future__ import annotations

import asyncio
import time

import httpx

from tests.conftest import (
    OPERATOR_TOKEN,
    SIMPLE,
    PgServer,
    _create_database,
    _drop_database,
    start_server,
    stop_server,
)

VERSION = {"arguments": SIMPLE["arguments"], "messages": [{"role": "user", "text": "Hey {{who}}"}]}


async def _system(pg_server: PgServer, *statements: str) -> None:
    conn = await pg_server.connect()
    try:
        for statement in statements:
            await conn.execute(statement)
        await conn.execute("SELECT pg_reload_conf()")
    finally:
        await conn.close()


async def test_a_commit_nobody_acknowledges_is_answered_not_waited_on(
    pg_server: PgServer, template_db: str
) -> None:
    name = await _create_database(pg_server, template_db)
    await _system(
        pg_server,
        f'ALTER DATABASE "{name}" SET synchronous_commit = on',
        "ALTER SYSTEM SET synchronous_commit = local",
    )
    server = start_server(
        {"REGISTRY_DATABASE_URL": pg_server.plain_url(name), "REGISTRY_OPERATOR_TOKEN": OPERATOR_TOKEN,
         "REGISTRY_COMMIT_WAIT_SECONDS": "1"}
    )  # fmt: skip
    try:
        keys = server.tenant("acme", prompts=[SIMPLE])
        versions = f"{server.url}/api/v1/tenants/acme/prompts/greet/versions"
        auth = {"Authorization": f"Bearer {keys['publisher']}"}
        await _system(pg_server, "ALTER SYSTEM SET synchronous_standby_names = 'ghost'")
        async with httpx.AsyncClient(timeout=30) as client:
            started = time.monotonic()
            refused = await client.post(versions, json=VERSION, headers=auth)
            waited = time.monotonic() - started
            assert refused.status_code == 503, refused.text
            assert refused.json()["code"] == "write_not_acknowledged", refused.text
            assert refused.headers["retry-after"] == "5"
            assert waited < 20, waited  # answered, not hung (the bound is 1 s)
            ready = await client.get(f"{server.url}/readyz")
            assert ready.status_code == 503 and "not acknowledged" in ready.text, ready.text
            await _system(pg_server, "ALTER SYSTEM RESET synchronous_standby_names")
            for _ in range(100):  # the next probe's commit is acknowledged again
                if (await client.get(f"{server.url}/readyz")).status_code == 200:
                    break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("/readyz never came back")
            again = await client.post(versions, json=VERSION, headers=auth)
            assert again.status_code in (200, 201), again.text
            shown = await client.get(
                f"{server.url}/api/v1/tenants/acme/prompts/greet", headers=auth
            )
            assert shown.json()["latest_version"] == 2  # the retried write is there once
    finally:
        await _system(
            pg_server,
            "ALTER SYSTEM RESET synchronous_standby_names",
            "ALTER SYSTEM RESET synchronous_commit",
        )
        stop_server(server)
        await _drop_database(pg_server, name)
