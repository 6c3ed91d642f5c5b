"""The LISTEN connection's life: a clean stop is not reported as a lost connection; what it tells
the webhook dispatcher."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
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


class StallingRelay:
    """A relay between a client and PostgreSQL that can stop passing bytes: the connection stays
    open and silent, as behind a stalled network path or a frozen backend."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.server: asyncio.Server | None = None
        self.tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.host.startswith("/"):
            upstream = await asyncio.open_unix_connection(f"{self.host}/.s.PGSQL.{self.port}")
        else:
            upstream = await asyncio.open_connection(self.host, self.port)
        for source, target in ((reader, upstream[1]), (upstream[0], writer)):
            task = asyncio.create_task(self._pipe(source, target))
            self.tasks.add(task)

    async def _pipe(self, source: asyncio.StreamReader, target: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while data := await source.read(65536):
                await self.flowing.wait()
                target.write(data)
                await target.drain()
        target.close()

    async def stop(self) -> None:
        self.flowing.set()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.server is not None:
            self.server.close()


async def test_a_silent_connection_ends_the_trust_in_what_the_worker_keeps(
    pg_server: PgServer, db_name: str, db: Database
) -> None:
    """The LISTEN connection stays open but carries nothing (a revocation made now would go
    unheard): the worker stops trusting its caches (and so its checked credentials) once its
    trust window has passed without a word, and trusts them again once it hears the database."""
    kwargs = pg_server.asyncpg_kwargs(db_name)
    relay = StallingRelay(str(kwargs["host"]), int(kwargs["port"]))  # type: ignore[call-overload]
    port = await relay.start()
    through = {**kwargs, "host": "127.0.0.1", "port": port}
    feed = ChangeFeed(
        lambda: asyncpg.connect(**through), Hub(), DatabaseChanges(db), caches=[],
        probe_seconds=0.5,
    )  # fmt: skip
    running = asyncio.create_task(feed.run())
    try:
        await asyncio.wait_for(feed.connected.wait(), 15)
        assert feed.hearing()
        relay.flowing.clear()
        # The trust is a window of time: past its end, with nothing heard, it is over. (A word
        # already past the relay when it stopped may still land once: the window then restarts.)
        for _ in range(3):
            last = feed.heard_at
            await asyncio.sleep(last + feed.trust_seconds + 0.1 - time.monotonic())
            if feed.heard_at == last:
                break
        assert feed.heard_at == last, "words kept coming through a stalled connection"
        assert not feed.hearing()
        relay.flowing.set()
        async with asyncio.timeout(15):
            while not feed.hearing():  # noqa: ASYNC110 - a window of time, not an event
                await asyncio.sleep(0.05)
    finally:
        await feed.stop()
        await asyncio.wait_for(running, 15)
        await relay.stop()
