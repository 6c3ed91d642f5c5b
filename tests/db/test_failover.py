"""Failover without loss: a primary with a synchronous standby is stopped hard and the standby
promoted; with a multi-host database URL (target_session_attrs=read-write) the registry finds the new
primary by itself. Writes during the switch fail with 503 (never 500, never half written) and succeed
after it, the LISTEN connection moves too, an open MCP stream is told after the switch, and every write
acknowledged before the failure is there after it."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from registry.db import migrate
from registry.db.embedded import PORT, SUPERUSER, EmbeddedPostgres, binary
from tests.conftest import OPERATOR_TOKEN, start_server, stop_server
from tests.replica import make_standby
from tests.streams import streams
from tests.writes import Writer, tenant_with_prompt

pytestmark = pytest.mark.slow
WAIT = 60  # seconds: a bound on every wait, never a sleep of its own


def url_of(*servers: EmbeddedPostgres) -> str:
    """One URL naming every server, that connects only to the one that accepts writes."""
    hosts = "&".join(f"host={server.socket_dir}:{PORT}" for server in servers)
    return f"postgresql://{SUPERUSER}@/registry?{hosts}&target_session_attrs=read-write"


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[EmbeddedPostgres, EmbeddedPostgres]]:
    if os.environ.get("REGISTRY_TEST_DATABASE_URL"):
        pytest.skip("the failover test needs the embedded server's binaries")
    root = Path(tempfile.mkdtemp(prefix="registry-failover-"))
    primary = EmbeddedPostgres(root / "primary", settings={"synchronous_commit": "on"})
    standby: EmbeddedPostgres | None = None
    with primary.serve() as url:
        migrate.upgrade(url)
        try:
            standby = make_standby(
                str(primary.socket_dir), root / "standby", {"cluster_name": "standby"}
            )
            yield primary, standby
        finally:
            if standby is not None:
                standby.stop()
            shutil.rmtree(root, ignore_errors=True)


async def synchronous(primary: EmbeddedPostgres) -> None:
    """Make the standby the primary's synchronous standby (set once it exists: commits would wait
    for it before), and wait (bounded) until it is."""
    connection = await asyncpg.connect(
        host=str(primary.socket_dir), port=PORT, user=SUPERUSER, database="postgres"
    )
    try:
        await connection.execute("ALTER SYSTEM SET synchronous_standby_names = 'standby'")
        await connection.execute("SELECT pg_reload_conf()")
        deadline = asyncio.get_running_loop().time() + WAIT
        while (
            await connection.fetchval(
                "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'"
            )
            != 1
        ):
            assert asyncio.get_running_loop().time() < deadline, "the standby never became sync"
            await asyncio.sleep(0.05)
    finally:
        await connection.close()


async def test_failover_loses_no_acknowledged_write(
    pair: tuple[EmbeddedPostgres, EmbeddedPostgres],
) -> None:
    primary, standby = pair
    await synchronous(primary)
    server = start_server(
        {
            "REGISTRY_DATABASE_URL": url_of(primary, standby),
            # The listener's own URL, as a deployment behind a pooler sets it: multi-host too, so
            # the LISTEN connection follows the promotion and /readyz is ready again.
            "REGISTRY_LISTEN_URL": url_of(standby, primary),
            "REGISTRY_DATABASE_POOLER": "none",
            "REGISTRY_OPERATOR_TOKEN": OPERATOR_TOKEN,
        }
    )
    try:
        key = await tenant_with_prompt(server, "acme", "p")

        # The stream of the label each new version moves (latest).
        async with streams(server, "acme", key, 1, label="latest") as (stream,):
            async with Writer(server.url, "acme", "p", key) as writer:
                while len(writer.acknowledged) < 20:  # writing, and streams hearing it
                    await asyncio.wait_for(stream.next(), WAIT)
                stopped_at = time.monotonic()
                await asyncio.to_thread(
                    primary.run,
                    binary("pg_ctl"),
                    "-D",
                    str(primary.pgdata),
                    "-m",
                    "immediate",
                    "stop",
                )
                await asyncio.to_thread(
                    standby.run, binary("pg_ctl"), "-D", str(standby.pgdata), "-w", "promote"
                )
                await writer.resumed(5)
                recovered = time.monotonic() - stopped_at
            # The stream is told of the changes made after the switch (the listener moved too):
            # its last event is the tenant's sequence on the new primary.
            connection = await asyncpg.connect(
                host=str(standby.socket_dir), port=PORT, user=SUPERUSER, database="registry"
            )
            try:
                await writer.lost_nothing(connection, stream)
            finally:
                await connection.close()

        failed = writer.statuses.count(503)
        ready = (await asyncio.to_thread(httpx.get, f"{server.url}/readyz")).json()
        assert ready["status"] == "ready"
        print(
            f"failover: writes resumed {recovered:.2f} s after the primary stopped; {failed} answered 503"
        )
    finally:
        stop_server(server)
