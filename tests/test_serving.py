"""What `registry serve` adds to uvicorn's protocol, in a real uvicorn on a real socket (kept MCP
answers sent by the protocol itself are tested with the rest of the replay, tests/mcp/test_replay.py)."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

from registry.serving import TimedHeadProtocol
from tests.conftest import serving_over_a_socket


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
