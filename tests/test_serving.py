"""What `registry serve` adds to uvicorn's protocol, in a real uvicorn on a real socket."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import uvicorn

from registry.serving import TimedHeadProtocol


async def _ok(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]}
    )
    await send({"type": "http.response.body", "body": b"ok"})


async def test_a_connection_keeps_its_attributes_without_a_dictionary_of_its_own() -> None:
    """CPython keeps up to 29 attributes of an object beside it, their names shared with its class;
    one more and every connection builds a dictionary of its own (1.3 KB, measured with
    tracemalloc: every open stream holds one). uvicorn's protocol sets 28 by the end of a first
    request; ours may add one. A uvicorn release that sets more fails here, not in production."""
    config = uvicorn.Config(_ok, http=TimedHeadProtocol, lifespan="off", log_level="warning")
    config.load()
    server = uvicorn.Server(config)
    server.lifespan = config.lifespan_class(config)
    listening = socket.create_server(("127.0.0.1", 0))
    await server.startup(sockets=[listening])
    try:
        reader, writer = await asyncio.open_connection(*listening.getsockname())
        writer.write(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
        assert (await reader.readuntil(b"ok")).startswith(b"HTTP/1.1 200")
        (protocol,) = server.server_state.connections  # kept alive, its first request answered
        assert isinstance(protocol, TimedHeadProtocol)
        assert len(vars(protocol)) < 30, sorted(vars(protocol))
        writer.close()
    finally:
        server.should_exit = True
        await server.shutdown(sockets=[listening])
