"""The LISTEN connection's life: a clean stop is not reported as a lost connection; what it tells
the webhook dispatcher."""

from __future__ import annotations

import asyncio
import logging
import uuid

import asyncpg
import pytest

from registry.db.audit import record_change
from registry.db.engine import Database, listen_connection
from registry.events.hub import Hub
from registry.events.listener import ChangeFeed
from registry.mcp.feed import DatabaseChanges
from tests.conftest import PgServer
from tests.db.test_rls import seed_tenant


async def test_a_clean_stop_logs_no_lost_listener(
    pg_server: PgServer, db_name: str, db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    url = pg_server.url(db_name)
    feed = ChangeFeed(lambda: listen_connection(url), Hub(), DatabaseChanges(db), caches=[])
    running = asyncio.create_task(feed.run())
    await asyncio.wait_for(feed.connected.wait(), 15)
    with caplog.at_level(logging.INFO, logger="registry.events"):
        await feed.stop()
        await asyncio.wait_for(running, 15)
    assert "listener_lost" not in caplog.text


async def test_the_dispatcher_is_woken_only_by_changes_that_queued_deliveries(
    pg_server: PgServer, db_name: str, db: Database, superuser: asyncpg.Connection
) -> None:
    """A change of a tenant with no webhook endpoint wakes no dispatcher; one that queued
    deliveries does, once per transaction, after the change's own notification."""
    hooked = await seed_tenant(superuser, "hooked")  # has an endpoint for every event
    quiet = await superuser.fetchval("INSERT INTO tenants (slug) VALUES ('quiet') RETURNING id")
    heard: asyncio.Queue[uuid.UUID] = asyncio.Queue()
    woken: list[str] = []
    feed = ChangeFeed(
        lambda: listen_connection(pg_server.url(db_name)),
        Hub(),
        DatabaseChanges(db),
        caches=[],
        sequences=[lambda tenant_id, seq: heard.put_nowait(tenant_id)],
        outbox=[lambda: woken.append("woken")],
    )
    running = asyncio.create_task(feed.run())
    try:
        await asyncio.wait_for(feed.connected.wait(), 15)
        assert woken == ["woken"]  # connecting: whatever was queued meanwhile is looked for
        woken.clear()
        async with db.tenant_tx(quiet) as session:
            record_change(session, tenant_id=quiet, kind="x")
        assert await asyncio.wait_for(heard.get(), 15) == quiet
        async with db.tenant_tx(hooked) as session:
            record_change(session, tenant_id=hooked, kind="x")
            record_change(session, tenant_id=hooked, kind="y")
        assert [await asyncio.wait_for(heard.get(), 15) for _ in range(2)] == [hooked, hooked]
        # The outbox's notification follows the change's own within the same transaction, and
        # notifications arrive in commit order: a second commit of the quiet tenant, heard, means
        # everything before it was handled.
        async with db.tenant_tx(quiet) as session:
            record_change(session, tenant_id=quiet, kind="x")
        assert await asyncio.wait_for(heard.get(), 15) == quiet
        assert woken == ["woken"]  # once: both deliveries of the one transaction in one payload
        queued = await superuser.fetch(
            "SELECT tenant_id, event_type FROM webhook_deliveries WHERE event_type IN ('x', 'y') "
            "ORDER BY id"
        )
        assert [(r["tenant_id"], r["event_type"]) for r in queued] == [(hooked, "x"), (hooked, "y")]
    finally:
        await feed.stop()
        await asyncio.wait_for(running, 15)
