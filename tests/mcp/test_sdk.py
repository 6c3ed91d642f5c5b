"""The official MCP Python SDK as the client, over its Streamable HTTP transport, against a real
uvicorn: every method, at every session-era revision, and a 1,000+ prompt tenant walked page by page."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import mcp.client.session as sdk_session
import pytest
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.conftest import OPERATOR_TOKEN, LiveServer, PgServer, module_server
from tests.mcp.conftest import CONFORMANCE_PROMPTS, seed_prompts
from tests.mcp.schema import check_notification

pytestmark = pytest.mark.slow
REVISIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}


@asynccontextmanager
async def sdk_client(
    url: str, key: str | None, revision: str, monkeypatch: pytest.MonkeyPatch, handler: Any = None
) -> AsyncIterator[ClientSession]:
    monkeypatch.setattr(sdk_session, "LATEST_HANDSHAKE_VERSION", revision)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, message_handler=handler) as session,
    ):
        yield session


@pytest.fixture(scope="module")
async def live_server(pg_server: PgServer, template_db: str) -> AsyncIterator[LiveServer]:
    """One server for the module (each test has tenants of its own)."""
    async with module_server(pg_server, template_db) as server:
        yield server


@pytest.mark.parametrize("revision", REVISIONS)
async def test_sdk_client_every_method(
    live_server: LiveServer, revision: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    slug = f"acme-{revision}"
    key = live_server.tenant(slug, prompts=CONFORMANCE_PROMPTS)["publisher"]
    async with sdk_client(f"{live_server.url}/mcp/{slug}", key, revision, monkeypatch) as session:
        init = await session.initialize()
        assert init.protocol_version == revision
        assert init.capabilities.prompts is not None
        assert init.capabilities.prompts.list_changed is True
        await session.send_ping()
        listed = await session.list_prompts()
        assert [p.name for p in listed.prompts] == sorted(p["name"] for p in CONFORMANCE_PROMPTS)
        assert all(p.description for p in listed.prompts)
        got = await session.get_prompt("test_prompt_with_arguments", {"arg1": "one", "arg2": "two"})
        text = got.messages[0].content
        assert isinstance(text, types.TextContent)
        assert text.text == "Prompt with arguments: arg1='one', arg2='two'"
        image = await session.get_prompt("test_prompt_with_image")
        assert isinstance(image.messages[0].content, types.ImageContent)
        resource = await session.get_prompt(
            "test_prompt_with_embedded_resource", {"resourceUri": "x://1"}
        )
        assert isinstance(resource.messages[0].content, types.EmbeddedResource)
        completion = await session.complete(
            types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments"),
            {"name": "arg1", "value": "test"},
        )
        assert completion.completion.values == ["test-one", "test-two"]
        await session.set_logging_level("info")
        with pytest.raises(MCPError) as missing:
            await session.get_prompt("test_prompt_with_arguments", {"arg1": "only one"})
        assert missing.value.error.code == -32602
        assert "arg2" in missing.value.error.message
        with pytest.raises(MCPError) as unknown:
            await session.get_prompt("no_such_prompt")
        assert unknown.value.error.code == -32602


async def test_sdk_walks_every_page_of_a_large_tenant(
    live_server: LiveServer, pg_server: PgServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = live_server.tenant("big", prompts=CONFORMANCE_PROMPTS)["publisher"]
    assert live_server.database is not None
    superuser = await pg_server.connect(live_server.database)
    try:
        await seed_prompts(superuser, "big", 1200)
    finally:
        await superuser.close()
    async with sdk_client(f"{live_server.url}/mcp/big", key, "2025-11-25", monkeypatch) as session:
        await session.initialize()
        names: list[str] = []
        cursor: str | None = None
        pages = 0
        while True:
            page = await session.list_prompts(params=types.PaginatedRequestParams(cursor=cursor))
            pages += 1
            names += [p.name for p in page.prompts]
            cursor = page.next_cursor
            if cursor is None:
                break
        assert len(names) == len(set(names)) == 1204
        assert pages == 2  # the whole list up to the cap (1,000) in a page, then the rest
        seeded = [n for n in names if n.startswith("p")]
        for name in seeded[:2] + seeded[-2:]:
            prompt = await session.get_prompt(name, {"who": "SDK"})
            content = prompt.messages[0].content
            assert isinstance(content, types.TextContent)
            assert content.text == f"Hello SDK from {name}"


async def test_public_tenant_needs_no_key(
    live_server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    live_server.tenant("open", public_read=True, prompts=CONFORMANCE_PROMPTS)
    async with sdk_client(
        f"{live_server.url}/mcp/open", None, "2025-11-25", monkeypatch
    ) as session:
        await session.initialize()
        assert len((await session.list_prompts()).prompts) == 4


async def _sse_events(response: httpx.Response) -> AsyncIterator[dict[str, str]]:
    event: dict[str, str] = {}
    async for line in response.aiter_lines():
        if line == "":
            if event:
                yield event
            event = {}
        elif not line.startswith(":"):
            field, _, value = line.partition(":")
            event[field] = value.removeprefix(" ")


@pytest.mark.parametrize(("revision", "primed"), [("2025-11-25", True), ("2025-06-18", False)])
async def test_get_stream_is_session_bound_primed_and_resumable(
    live_server: LiveServer, revision: str, primed: bool
) -> None:
    slug = f"stream-{revision}"
    key = live_server.tenant(slug, prompts=CONFORMANCE_PROMPTS)["publisher"]
    headers = {"Authorization": f"Bearer {key}", "Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(base_url=live_server.url, headers=headers, timeout=30) as client:
        init = await client.post(
            f"/mcp/{slug}",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": revision,
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            },
        )
        session = {
            "Mcp-Session-Id": init.headers["mcp-session-id"],
            "MCP-Protocol-Version": revision,
        }
        stream_headers = {**session, "Accept": "text/event-stream"}
        assert (
            await client.get(f"/mcp/{slug}", headers={**stream_headers, "Mcp-Session-Id": "nope"})
        ).status_code == 404
        assert (
            await client.get(f"/mcp/{slug}", headers={**session, "Accept": "application/json"})
        ).status_code == 406
        # Without a session, GET belongs to no revision this endpoint serves statelessly: 405.
        sessionless = await client.get(f"/mcp/{slug}", headers={"Accept": "text/event-stream"})
        assert sessionless.status_code == 405

        # Up to date: only the priming event (2025-11-25), whose id is the tenant's change sequence.
        async with client.stream("GET", f"/mcp/{slug}", headers=stream_headers) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            events = _sse_events(response)
            if primed:
                first = await asyncio.wait_for(anext(events), 10)
                assert first["data"] == ""
                assert int(first["id"]) >= 4
        # Resuming from an old event id: told at once that the list changed.
        async with client.stream(
            "GET", f"/mcp/{slug}", headers={**stream_headers, "Last-Event-ID": "1"}
        ) as response:
            events = _sse_events(response)
            event = await asyncio.wait_for(anext(events), 10)
            if primed:
                event = await asyncio.wait_for(anext(events), 10)
            message = json.loads(event["data"])
            check_notification(revision, "PromptListChangedNotification", message)
            assert int(event["id"]) >= 4


async def test_sdk_message_handler_hears_list_changed(
    live_server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = live_server.tenant("heard", prompts=CONFORMANCE_PROMPTS)["publisher"]
    heard = asyncio.Event()

    async def handler(message: Any) -> None:
        if isinstance(message, types.PromptListChangedNotification):
            heard.set()

    async with sdk_client(
        f"{live_server.url}/mcp/heard", key, "2025-11-25", monkeypatch, handler
    ) as session:
        await session.initialize()
        before = {p.name for p in (await session.list_prompts()).prompts}
        # The SDK opens its GET stream in the background after initialize: wait until it is open.
        async with httpx.AsyncClient() as probe:
            for _ in range(150):
                if (
                    "registry_open_streams 1.0"
                    in (await probe.get(f"{live_server.url}/metrics", headers=OPERATOR)).text
                ):
                    break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("the SDK never opened its GET stream")
        body = {
            "name": "fresh",
            "labels": ["production"],
            "description": "new",
            "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
        }
        created = await asyncio.to_thread(
            httpx.post,
            f"{live_server.url}/api/v1/tenants/heard/prompts",
            json=body,
            headers={"Authorization": f"Bearer {key}"},
        )
        assert created.status_code == 201
        await asyncio.wait_for(heard.wait(), 15)
        after = {p.name for p in (await session.list_prompts()).prompts}
        assert after - before == {"fresh"}
