"""list_changed fan-out through PostgreSQL LISTEN/NOTIFY, across real server processes."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from tests.conftest import (
    OPERATOR_TOKEN,
    Instances,
    LiveServer,
    PgServer,
    fresh_slug,
    module_instances,
    start_server,
    stop_server,
    wait_listeners,
)
from tests.streams import ACCEPT, WAIT, Stream, seq_of, streams, write

pytestmark = pytest.mark.slow

OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}


@pytest.fixture(scope="module")
async def instances(pg_server: PgServer, template_db: str) -> AsyncIterator[Instances]:
    """Two registry instances on one database, the second running two workers, shared by the
    module's tests (each keeps to tenants of its own)."""
    async with module_instances(
        pg_server, template_db, (1, 2),
        REGISTRY_STREAMS_PER_CALLER="1000",  # 500 streams (and sessions) of one key
        REGISTRY_SESSIONS_PER_CALLER="1000",
    ) as shared:  # fmt: skip
        yield shared


@pytest.fixture
def servers(instances: Instances) -> tuple[LiveServer, LiveServer]:
    first, second = instances.servers
    return first, second


@pytest.fixture
def superuser(instances: Instances) -> asyncpg.Connection:
    """The module database's superuser connection (bypasses row-level security)."""
    return instances.superuser


async def test_write_on_one_instance_reaches_a_stream_on_another(
    servers: tuple[LiveServer, LiveServer], superuser: asyncpg.Connection
) -> None:
    first, second = servers
    alpha, bravo = fresh_slug("alpha"), fresh_slug("bravo")
    alpha_key = first.tenant(alpha)["publisher"]
    bravo_key = first.tenant(bravo)["publisher"]
    async with (
        streams(first, alpha, alpha_key, 1) as (a,),
        streams(first, bravo, bravo_key, 1) as (b,),
    ):
        await asyncio.to_thread(write, second, alpha, alpha_key, "one")
        assert await a.next() == await seq_of(superuser, alpha)
        # bravo's stream heard nothing of alpha: its first event is its own sentinel write.
        await asyncio.to_thread(write, second, bravo, bravo_key, "sentinel")
        assert await b.next() == await seq_of(superuser, bravo)
        assert b.events.empty()

        # A staging label change is not production's business; production hears its own next change.
        await asyncio.to_thread(write, second, alpha, alpha_key, "staged", label="staging")
        await asyncio.to_thread(write, second, alpha, alpha_key, "two")
        assert await a.next() == await seq_of(superuser, alpha)
        assert a.events.empty()


async def test_rolled_back_write_notifies_nobody(
    servers: tuple[LiveServer, LiveServer], superuser: asyncpg.Connection
) -> None:
    first, second = servers
    alpha = fresh_slug("alpha")
    key = first.tenant(alpha)["publisher"]
    async with streams(first, alpha, key, 1) as (stream,):
        # An import whose second prompt is bad: the first one's change rows roll back with it.
        bundle = {
            "prompts": [
                {
                    "name": "good",
                    "labels": {"production": 1},
                    "versions": [
                        {
                            "version": 1,
                            "messages": [
                                {"role": "user", "content": {"type": "text", "text": "fine"}}
                            ],
                        }
                    ],
                },
                {
                    "name": "bad",
                    "versions": [
                        {
                            "version": 1,
                            "messages": [
                                {"role": "user", "content": {"type": "text", "text": "{{broken"}}
                            ],
                        }
                    ],
                },
            ]
        }
        refused = await asyncio.to_thread(
            httpx.post,
            f"{second.url}/api/v1/tenants/{alpha}/import",
            json=bundle,
            headers={"Authorization": f"Bearer {key}"},
        )
        assert refused.status_code == 422
        before = await seq_of(superuser, alpha)
        await asyncio.to_thread(write, second, alpha, key, "sentinel")
        assert await stream.next() == before + 2  # the sentinel's own changes (latest, production)
        assert stream.events.empty()


async def test_listener_outage_still_ends_with_the_client_told(
    servers: tuple[LiveServer, LiveServer], superuser: asyncpg.Connection
) -> None:
    first, second = servers
    alpha = fresh_slug("alpha")
    key = first.tenant(alpha)["publisher"]
    async with streams(first, alpha, key, 1) as (stream,):
        await wait_listeners(superuser, 3)  # one per worker process: 1 + 2
        killed = await superuser.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = 'registry-listener' AND datname = current_database()"
        )
        assert killed == 3  # one per worker process: 1 + 2
        await asyncio.to_thread(write, second, alpha, key, "during-outage")
        assert await stream.next() == await seq_of(superuser, alpha)
        await wait_listeners(superuser, 3)  # they came back, one connection per worker again
        metrics = (
            await asyncio.to_thread(httpx.get, f"{first.url}/metrics", headers=OPERATOR)
        ).text
        assert "registry_listener_reconnects_total 1.0" in metrics


async def test_resuming_with_an_old_event_id_is_told_at_once(
    servers: tuple[LiveServer, LiveServer], superuser: asyncpg.Connection
) -> None:
    first, _ = servers
    alpha = fresh_slug("alpha")
    key = first.tenant(alpha)["publisher"]
    await asyncio.to_thread(write, first, alpha, key, "one")
    headers = {"Accept": ACCEPT, "Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=first.url, headers=headers, timeout=30) as client:
        stream = Stream(client, f"/mcp/{alpha}")
        await stream.open(last_event_id=0)
        assert await stream.next() == await seq_of(superuser, alpha)
        await stream.close()


async def test_500_streams_get_one_notification_per_burst(
    servers: tuple[LiveServer, LiveServer], superuser: asyncpg.Connection
) -> None:
    first, second = servers
    alpha = fresh_slug("alpha")
    key = first.tenant(alpha)["publisher"]
    async with streams(second, alpha, key, 500) as opened:
        # A burst: ten prompts in one transaction (an import), twenty change rows, twenty NOTIFYs.
        bundle = {
            "prompts": [
                {
                    "name": f"burst-{i}",
                    "labels": {"production": 1},
                    "versions": [
                        {
                            "version": 1,
                            "messages": [
                                {"role": "user", "content": {"type": "text", "text": f"burst {i}"}}
                            ],
                        }
                    ],
                }
                for i in range(10)
            ]
        }
        imported = await asyncio.to_thread(
            httpx.post,
            f"{first.url}/api/v1/tenants/{alpha}/import",
            json=bundle,
            headers={"Authorization": f"Bearer {key}"},
            timeout=30,
        )
        assert imported.status_code == 200, imported.text
        burst_end = await seq_of(superuser, alpha)
        received = await asyncio.gather(*(s.next() for s in opened))
        assert received == [burst_end] * 500
        # Exactly one per stream: the next event anyone sees is the next write's.
        await asyncio.to_thread(write, first, alpha, key, "after")
        following = await asyncio.gather(*(s.next() for s in opened))
        assert following == [await seq_of(superuser, alpha)] * 500
        metrics = (
            await asyncio.to_thread(httpx.get, f"{second.url}/metrics", headers=OPERATOR)
        ).text
        assert "registry_open_streams 500.0" in metrics


async def test_shutdown_ends_open_streams_cleanly(pg_server: PgServer, db_name: str) -> None:
    server = start_server(
        {
            "REGISTRY_DATABASE_URL": pg_server.plain_url(db_name),
            "REGISTRY_OPERATOR_TOKEN": OPERATOR_TOKEN,
        }
    )
    try:
        key = server.tenant("alpha")["publisher"]
        headers = {"Accept": ACCEPT, "Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60) as client:
            stream = Stream(client, "/mcp/alpha")
            await stream.open()
            assert stream.task is not None
            server.process.terminate()
            # The server ends the body itself (a forced close would cut the chunked body and fail).
            await asyncio.wait_for(stream.task, WAIT)
    finally:
        stop_server(server)
    assert server.process.returncode in (
        0,
        -signal.SIGTERM,
    )  # uvicorn re-raises the signal it handled


async def test_cached_answers_follow_every_notified_change(
    servers: tuple[LiveServer, LiveServer],
) -> None:
    server, _ = servers  # the instance of one worker: its caches answer every call below
    alpha = fresh_slug("alpha")
    key = server.tenant(alpha)["publisher"]
    await asyncio.to_thread(write, server, alpha, key, "greet")
    auth = {"Authorization": f"Bearer {key}"}
    hits, sent = "registry_cache_hits_total", "registry_notifications_sent_total"
    lists = ('{cache="listings"}', '{cache="answers"}')
    async with (
        streams(server, alpha, key, 1) as (stream,),
        httpx.AsyncClient(
            base_url=server.url, headers={"Accept": ACCEPT, **auth}, timeout=30
        ) as client,
    ):
        hits_before = await asyncio.to_thread(server.metric, hits)
        sent_before = (await asyncio.to_thread(server.metric, sent)).get("", 0.0)
        session = {
            "Mcp-Session-Id": stream.headers["Mcp-Session-Id"],
            "MCP-Protocol-Version": "2025-11-25",
        }

        async def call(method: str, params: dict[str, Any]) -> Any:
            answer = await client.post(
                f"/mcp/{alpha}",
                headers=session,
                json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
            )
            return answer.json()["result"]

        async def names() -> list[str]:
            return [p["name"] for p in (await call("prompts/list", {}))["prompts"]]

        async def description() -> str:
            return str((await call("prompts/get", {"name": "greet"}))["description"])

        for _ in range(3):  # warm the caches
            assert await names() == ["greet"]
            assert await description() == "greet"
        # A new prompt, then a new version of greet under production.
        await asyncio.to_thread(write, server, alpha, key, "hello")
        await stream.next()
        assert await names() == ["greet", "hello"]
        body = {
            "description": "greet, second",
            "labels": ["production"],
            "messages": [{"role": "user", "content": {"type": "text", "text": "v2"}}],
        }
        created = await client.post(f"/api/v1/tenants/{alpha}/prompts/greet/versions", json=body)
        assert created.status_code == 201
        await stream.next()
        assert await description() == "greet, second"
        # Archived: gone from the list and from prompts/get.
        await client.post(f"/api/v1/tenants/{alpha}/prompts/hello/archive")
        await stream.next()
        assert await names() == ["greet"]
        metrics = (await client.get("/metrics", headers=OPERATOR)).text
    # The lists answered from memory: pages, or (a first page asked again) the answers kept.
    hits_after = await asyncio.to_thread(server.metric, hits)
    assert sum(hits_after.get(c, 0.0) - hits_before.get(c, 0.0) for c in lists) >= 2
    assert 'registry_requests_total{kind="mcp",name="prompts/list",outcome="ok"}' in metrics
    assert (
        'registry_request_seconds_count{kind="rest",name="POST /api/v1/tenants/{tenant}/prompts"}'
        in metrics
    )
    # one per change told the stream
    assert (await asyncio.to_thread(server.metric, sent))[""] - sent_before == 3


async def test_a_session_deleted_through_another_instance_ends_its_stream(
    servers: tuple[LiveServer, LiveServer],
) -> None:
    first, second = servers
    alpha = fresh_slug("alpha")
    key = first.tenant(alpha)["publisher"]
    async with streams(first, alpha, key, 1) as (stream,):
        assert stream.task is not None and not stream.task.done()
        deleted = await asyncio.to_thread(
            httpx.delete,
            f"{second.url}/mcp/{alpha}",
            headers={**stream.headers, "Authorization": f"Bearer {key}"},
        )
        assert deleted.status_code == 204
        await asyncio.wait_for(asyncio.shield(stream.task), WAIT)  # the server ended the stream
