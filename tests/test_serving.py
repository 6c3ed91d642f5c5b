"""What `registry serve` adds to uvicorn's protocol, in a real uvicorn on a real socket (kept MCP
answers sent by the protocol itself are tested with the rest of the replay, tests/mcp/test_replay.py)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator
from typing import Any
from urllib.parse import urlsplit

import pytest

from registry.config import get_settings
from registry.events.hub import Hub
from registry.events.streams import EventStream
from registry.http_protocol import TimedHeadProtocol
from tests.conftest import serving_over_a_socket
from tests.mcp.test_directory import eventually
from tests.streams import stream_tasks


async def _ok(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]}
    )
    await send({"type": "http.response.body", "body": b"ok"})


async def test_a_connection_keeps_its_attributes_without_a_dictionary_of_its_own() -> None:
    """CPython keeps up to 29 attributes of an object beside it, their names shared with its class;
    one more and every connection builds a dictionary of its own (1.3 KB, measured with
    tracemalloc: every open stream holds one). uvicorn's protocol sets 28 by the end of a first
    request; ours keeps its own in slots. A uvicorn release that sets more fails here, not in
    production."""
    connections: list[Any] = []

    async def ok(scope: dict[str, Any], receive: Any, send: Any) -> None:
        connections.append(scope)
        await _ok(scope, receive, send)

    async with serving_over_a_socket(ok) as (url, server):
        where = urlsplit(url)
        reader, writer = await asyncio.open_connection(where.hostname, where.port)
        writer.write(b"POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 2\r\n\r\n{}")
        assert (await reader.readuntil(b"ok")).startswith(b"HTTP/1.1 200")
        writer.write(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
        assert (await reader.readuntil(b"ok")).startswith(b"HTTP/1.1 200")
        (protocol,) = server.server_state.connections  # kept alive, its requests answered
        assert isinstance(protocol, TimedHeadProtocol)
        assert len(vars(protocol)) < 30, sorted(vars(protocol))
        assert len(connections) == 2  # an app with no answer_at_once: each request is a task
        writer.close()


async def test_a_stream_is_one_task_and_ends_when_its_client_goes_away() -> None:
    """The protocol tells a stream of its connection's loss (registry.events.streams
    CONNECTION_LOST): no second task waits for the disconnect."""
    hub, tenant = Hub(), uuid.uuid4()
    ended = asyncio.Event()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        subscription = hub.subscribe(tenant, None, seen=0)

        async def events() -> AsyncGenerator[bytes]:
            with subscription:
                yield b"data: hello\n\n"
                while not subscription.closed:
                    await subscription.next(30)

        await EventStream(events(), subscription, release=ended.set)(scope, receive, send)

    async with serving_over_a_socket(app) as (url, _):
        where = urlsplit(url)
        reader, writer = await asyncio.open_connection(where.hostname, where.port)
        writer.write(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
        await reader.readuntil(b"data: hello\n\n")
        assert stream_tasks() == 0  # the request's own task alone: no watcher of the stream's
        writer.close()
        await asyncio.wait_for(ended.wait(), 10)
        assert not hub.watching(tenant)


async def test_a_client_reading_slowly_makes_writes_wait_and_then_gets_everything() -> None:
    """A connection's flow control waits on an event whose waiters are made at the first wait
    (registry.http_protocol): a client that reads nothing for a while pauses the writes, and gets every
    byte once it reads."""
    chunk, chunks = b"x" * (1 << 20), 32
    finished = asyncio.Event()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        length = str(len(chunk) * chunks).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", length)]})  # fmt: skip
        for _ in range(chunks):
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        finished.set()

    async with serving_over_a_socket(app) as (url, server):
        where = urlsplit(url)
        reader, writer = await asyncio.open_connection(where.hostname, where.port, limit=1 << 16)
        writer.write(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
        await reader.readuntil(b"\r\n\r\n")
        (protocol,) = server.server_state.connections

        async def paused() -> bool:  # the kernel's buffers are full: writes wait
            return bool(protocol.flow.write_paused)

        await eventually(paused, seconds=10)
        assert not finished.is_set()
        received = 0
        while received < len(chunk) * chunks and (read := await reader.read(1 << 20)):
            received += len(read)
        await asyncio.wait_for(finished.wait(), 10)
        assert received == len(chunk) * chunks
        writer.close()


async def test_a_kept_alive_connection_whose_next_head_trickles_in_is_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A head that arrives whole is not timed; one that a read leaves unfinished is, on a
    kept-alive connection too (its first request answered, uvicorn's keep-alive timer stopped)."""
    monkeypatch.setenv("REGISTRY_HEAD_TIMEOUT_SECONDS", "0.5")
    get_settings.cache_clear()
    try:
        async with serving_over_a_socket(_ok) as (url, server):
            where = urlsplit(url)
            reader, writer = await asyncio.open_connection(where.hostname, where.port)
            writer.write(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
            assert (await reader.readuntil(b"ok")).startswith(b"HTTP/1.1 200")
            (protocol,) = server.server_state.connections
            assert protocol.head_timer is None  # the whole head came in one read
            writer.write(b"GET / HTTP/1.1\r\nHost: te")  # a head that never ends
            assert await asyncio.wait_for(reader.read(), 10) == b""  # closed by the server
            writer.close()
    finally:
        get_settings.cache_clear()
