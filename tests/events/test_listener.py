"""The LISTEN connection's life: a clean stop is not reported as a lost connection."""

from __future__ import annotations

import asyncio
import logging

import pytest

from registry.db.engine import Database, listen_connection
from registry.events.hub import Hub
from registry.events.listener import ChangeFeed
from registry.mcp.feed import DatabaseChanges
from tests.conftest import PgServer


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
