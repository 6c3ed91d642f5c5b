"""2026-07-28 against real servers: subscriptions/listen and the official SDK 2.x `Client`."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import httpx
import httpx2
import pytest
from mcp import types
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import (
    OPERATOR_TOKEN,
    LiveServer,
    PgServer,
    fresh_slug,
    module_instances,
    start_server,
    stop_server,
)
from tests.mcp.conftest import CONFORMANCE_PROMPTS
from tests.mcp.schema import validate

pytestmark = pytest.mark.slow
REVISION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": REVISION,
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture(scope="module")
async def servers(pg_server: PgServer, template_db: str) -> AsyncIterator[tuple[LiveServer, ...]]:
    """Two instances on one database, the second of two workers, shared by the module's tests
    (each keeps to tenants of its own)."""
    async with module_instances(pg_server, template_db, (1, 2)) as shared:
        yield tuple(shared.servers)


def write(server: LiveServer, slug: str, key: str, name: str, label: str = "production") -> None:
    body = {
        "name": name,
        "labels": [label],
        "description": name,
        "messages": [{"role": "user", "content": {"type": "text", "text": name}}],
    }
    response = httpx.post(
        f"{server.url}/api/v1/tenants/{slug}/prompts",
        json=body,
        headers={"Authorization": f"Bearer {key}"},
    )
    assert response.status_code == 201, response.text


async def listen(
    client: httpx.AsyncClient,
    request_id: int | str,
    notifications: dict[str, Any],
    path: str = "/mcp/acme",
    comments: asyncio.Queue[str] | None = None,
) -> AsyncGenerator[dict[str, Any]]:
    params = {"_meta": META, "notifications": notifications}
    headers = {
        "MCP-Protocol-Version": REVISION,
        "Mcp-Method": "subscriptions/listen",
        "Accept": "application/json, text/event-stream",
    }
    body = {"jsonrpc": "2.0", "id": request_id, "method": "subscriptions/listen", "params": params}
    async with client.stream("POST", path, json=body, headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                yield json.loads(line[5:])
            elif line.startswith(":") and comments is not None:
                comments.put_nowait(line)


async def test_listen_streams_ack_filter_and_tell(servers: tuple[LiveServer, LiveServer]) -> None:
    first, second = servers
    acme = fresh_slug("acme")
    key = first.tenant(acme, prompts=CONFORMANCE_PROMPTS)["publisher"]
    async with httpx.AsyncClient(
        base_url=first.url, headers={"Authorization": f"Bearer {key}"}, timeout=30
    ) as client:
        prompts_a = listen(client, 7, {"promptsListChanged": True}, f"/mcp/{acme}")
        prompts_b = listen(client, "second", {"promptsListChanged": True}, f"/mcp/{acme}")
        tools_only = listen(client, 9, {"toolsListChanged": True}, f"/mcp/{acme}")
        acks = [await asyncio.wait_for(anext(s), 10) for s in (prompts_a, prompts_b, tools_only)]
        for ack, sub_id, honored in zip(
            acks, (7, "second", 9), ({"promptsListChanged": True},) * 2 + ({},), strict=True
        ):
            validate(REVISION, "SubscriptionsAcknowledgedNotification", ack)
            assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == sub_id
            assert ack["params"]["notifications"] == honored  # what is not offered is left out
        tools_next = asyncio.ensure_future(anext(tools_only))

        await asyncio.to_thread(write, second, acme, key, "fresh")  # through another instance
        for stream, sub_id in ((prompts_a, 7), (prompts_b, "second")):
            changed = await asyncio.wait_for(anext(stream), 10)
            validate(REVISION, "PromptListChangedNotification", changed)
            assert changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == sub_id
        assert not tools_next.done()  # no notification type it did not ask for
        tools_next.cancel()
        for stream in (prompts_a, prompts_b, tools_only):
            await stream.aclose()


async def test_listen_keeps_alive_then_ends_gracefully_on_shutdown(
    pg_server: PgServer, db_name: str
) -> None:
    server = start_server(
        {
            "REGISTRY_DATABASE_URL": pg_server.plain_url(db_name),
            "REGISTRY_OPERATOR_TOKEN": OPERATOR_TOKEN,
            "REGISTRY_SSE_KEEPALIVE_SECONDS": "0.4",
        }
    )
    try:
        key = server.tenant("acme", prompts=CONFORMANCE_PROMPTS)["publisher"]
        async with httpx.AsyncClient(
            base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=30
        ) as client:
            comments: asyncio.Queue[str] = asyncio.Queue()
            stream = listen(client, 11, {"promptsListChanged": True}, comments=comments)
            await asyncio.wait_for(anext(stream), 10)
            following = asyncio.ensure_future(anext(stream))  # reads the stream meanwhile
            for _ in range(3):  # an idle stream says it is alive, again and again (by the clock)
                assert await asyncio.wait_for(comments.get(), 10) == ": keep-alive"
            server.process.send_signal(signal.SIGTERM)
            closing = await asyncio.wait_for(following, 10)
            assert closing == {
                "jsonrpc": "2.0",
                "id": 11,
                "result": {
                    "resultType": "complete",
                    "_meta": {"io.modelcontextprotocol/subscriptionId": 11},
                },
            }
            with pytest.raises(StopAsyncIteration):
                await asyncio.wait_for(anext(stream), 10)
    finally:
        stop_server(server)


async def test_sdk_client_in_2026_mode(servers: tuple[LiveServer, LiveServer]) -> None:
    first, second = servers
    acme = fresh_slug("acme")
    key = first.tenant(acme, prompts=CONFORMANCE_PROMPTS)["publisher"]
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(30, read=60)
    )
    async with (
        http,
        Client(streamable_http_client(f"{first.url}/mcp/{acme}", http_client=http)) as client,
    ):
        assert client.session.protocol_version == REVISION  # discovered, not initialized
        listed = await client.list_prompts()
        assert len(listed.prompts) == 4
        got = await client.get_prompt("test_prompt_with_arguments", {"arg1": "x", "arg2": "y"})
        assert isinstance(got.messages[0].content, types.TextContent)
        assert got.messages[0].content.text == "Prompt with arguments: arg1='x', arg2='y'"
        completion = await client.complete(
            types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments"),
            {"name": "arg1", "value": "test"},
        )
        assert completion.completion.values == ["test-one", "test-two"]
        async with client.listen(prompts_list_changed=True) as subscription:
            await asyncio.to_thread(write, second, acme, key, "announced")
            event = await asyncio.wait_for(anext(aiter(subscription)), 15)
            assert event is not None
        assert len((await client.list_prompts()).prompts) == 5


async def test_sdk_fills_missing_arguments_through_its_elicitation_callback(
    servers: tuple[LiveServer, LiveServer],
) -> None:
    first, _ = servers
    acme = fresh_slug("acme")
    key = first.tenant(acme, prompts=CONFORMANCE_PROMPTS)["publisher"]
    asked: list[dict[str, Any]] = []

    async def fill_in(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        asked.append(params.requested_schema)
        return types.ElicitResult(action="accept", content={"arg1": "from-form", "arg2": "too"})

    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(30, read=60)
    )
    async with (
        http,
        Client(
            streamable_http_client(f"{first.url}/mcp/{acme}", http_client=http),
            elicitation_callback=fill_in,
        ) as client,
    ):
        got = await client.get_prompt("test_prompt_with_arguments")
    assert asked
    assert asked[0]["required"] == ["arg1", "arg2"]
    assert isinstance(got.messages[0].content, types.TextContent)
    assert got.messages[0].content.text == "Prompt with arguments: arg1='from-form', arg2='too'"


async def test_listen_streams_end_with_their_key_or_public_access(
    servers: tuple[LiveServer, LiveServer],
) -> None:
    """On every worker: a revoked key's streams, and anonymous streams once the tenant stops being
    public, end at once with the reason."""
    first, second = servers
    acme, pub = fresh_slug("acme"), fresh_slug("pub")
    keys = first.tenant(acme, roles=("reader", "admin"), prompts=CONFORMANCE_PROMPTS)
    first.tenant(pub, public_read=True, prompts=CONFORMANCE_PROMPTS)
    operator = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    listed = (
        await asyncio.to_thread(
            httpx.get, f"{first.url}/api/v1/tenants/{acme}/keys", headers=operator
        )
    ).json()
    reader_id = next(k["id"] for k in listed if k["role"] == "reader")
    wanted = {"promptsListChanged": True}
    async with (
        httpx.AsyncClient(
            base_url=second.url, headers={"Authorization": f"Bearer {keys['reader']}"}, timeout=30
        ) as keyed,
        httpx.AsyncClient(base_url=second.url, timeout=30) as anonymous,
    ):
        streams = [
            listen(keyed, i, wanted, f"/mcp/{acme}") for i in range(4)
        ]  # over both workers of second
        public = [listen(anonymous, 10 + i, wanted, path=f"/mcp/{pub}") for i in range(4)]
        for stream in [*streams, *public]:
            await asyncio.wait_for(anext(stream), 10)  # acknowledged
        revoked = await asyncio.to_thread(
            httpx.delete, f"{first.url}/api/v1/tenants/{acme}/keys/{reader_id}", headers=operator
        )
        assert revoked.status_code == 204
        for stream in streams:
            ended = await asyncio.wait_for(anext(stream), 15)
            assert ended["error"]["code"] == -32001, ended
            assert "revoked" in ended["error"]["message"]
            with pytest.raises(StopAsyncIteration):
                await asyncio.wait_for(anext(stream), 10)
        closed = await asyncio.to_thread(
            httpx.patch, f"{first.url}/api/v1/tenants/{pub}", json={"public_read": False},
            headers=operator,
        )  # fmt: skip
        assert closed.status_code == 200
        for stream in public:
            ended = await asyncio.wait_for(anext(stream), 15)
            if "method" in ended:  # the settings changed what is served: told first
                assert ended["method"] == "notifications/prompts/list_changed", ended
                ended = await asyncio.wait_for(anext(stream), 15)
            assert "no longer serves anonymous readers" in ended["error"]["message"], ended


async def stream_events(
    client: httpx.AsyncClient, path: str, params: dict[str, Any]
) -> AsyncGenerator[dict[str, Any]]:
    """The Events extension's events/stream (its draft, SEP-3415): the frames of one subscription."""
    headers = {
        "MCP-Protocol-Version": REVISION,
        "Mcp-Method": "events/stream",
        "Accept": "application/json, text/event-stream",
    }
    body = {"jsonrpc": "2.0", "id": 11, "method": "events/stream",
            "params": {"_meta": META, **params}}  # fmt: skip
    async with client.stream("POST", path, json=body, headers=headers) as response:
        assert response.status_code == 200
        if not response.headers["content-type"].startswith("text/event-stream"):
            yield json.loads(await response.aread())  # refused: one JSON-RPC error, no stream
            return
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                yield json.loads(line[5:])


async def test_events_stream_pushes_what_another_instance_writes(
    servers: tuple[LiveServer, LiveServer],
) -> None:
    first, second = servers
    acme = fresh_slug("acme")
    key = first.tenant(acme, prompts=CONFORMANCE_PROMPTS)["publisher"]
    path = f"/mcp/{acme}"
    async with httpx.AsyncClient(
        base_url=first.url, headers={"Authorization": f"Bearer {key}"}, timeout=30
    ) as client:
        refused = stream_events(client, path, {"name": "nope", "arguments": {}})
        error = await asyncio.wait_for(anext(refused), 10)
        assert error["error"]["code"] == -32023 and error["id"] == 11
        await refused.aclose()
        frames = stream_events(
            client, path, {"name": "prompt.changed", "arguments": {"name": "fresh"}}
        )
        active = await asyncio.wait_for(anext(frames), 10)
        assert active["method"] == "notifications/events/active", active
        assert active["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 11
        start = active["params"]["cursor"]
        await asyncio.to_thread(write, second, acme, key, "other")  # filtered out
        await asyncio.to_thread(write, second, acme, key, "fresh")  # through another instance
        event = await asyncio.wait_for(anext(frames), 10)
        assert event["method"] == "notifications/events/event", event
        params = event["params"]
        assert params["name"] == "prompt.changed" and params["data"]["prompt"] == "fresh"
        assert params["cursor"] and params["eventId"].startswith("seq-")
        await frames.aclose()
        # Reconnecting with the cursor it started from replays what came after it, once.
        again = stream_events(client, path, {"name": "prompt.changed",
                                             "arguments": {"name": "fresh"}, "cursor": start})  # fmt: skip
        assert (await asyncio.wait_for(anext(again), 10))["method"] == "notifications/events/active"
        replayed = await asyncio.wait_for(anext(again), 10)
        assert replayed["params"]["eventId"] == params["eventId"]
        await again.aclose()
