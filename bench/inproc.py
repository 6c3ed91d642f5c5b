"""The registry's own work per MCP request, without an HTTP server: prompts/get and prompts/list
(2026-07-28) called through the ASGI app, answered from memory and (prompts/get) not, so that two
checkouts can be compared on what they do themselves (run it from each checkout, in turns, against a
migrated database of its own).

    REGISTRY_DATABASE_URL=postgresql://... python -m bench.inproc [--calls 5000] [--profile]

Creates tenant ``inproc`` (with an operator token it sets itself), a key and one prompt; prints the
fastest and the median of five runs of ``--calls`` calls (microseconds per call), and the CPU time of
a prompts/get that misses the worker's caches (a fifth as many calls; its wall time would include
PostgreSQL's); ``--profile`` adds cProfile's top functions for prompts/get.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import time
from collections.abc import Callable
from typing import Any

OPERATOR = "inproc-operator-token-0123456789abcdef"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "inproc", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
MCP = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2026-07-28",
}


def _scope(method: str, path: str, headers: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 5555), "server": ("127.0.0.1", 8000), "state": {},
    }  # fmt: skip


async def call(app: Any, method: str, path: str, headers: dict[str, str], body: bytes) -> Any:
    """One request through the ASGI app; returns (status, body)."""
    sent = False
    status, chunks = 0, []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client stays until the answer is sent
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(_scope(method, path, headers), receive, send)
    return status, b"".join(chunks)


async def _prepare(app: Any) -> None:
    operator = {"content-type": "application/json", "authorization": f"Bearer {OPERATOR}"}
    status, body = await call(app, "POST", "/api/v1/tenants", operator, b'{"slug": "inproc"}')
    assert status in (201, 409), body
    status, body = await call(
        app, "POST", "/api/v1/tenants/inproc/keys", operator, b'{"role": "publisher"}'
    )
    assert status == 201, body
    writer = {
        "content-type": "application/json",
        "authorization": f"Bearer {json.loads(body)['secret']}",
    }
    prompt = {
        "name": "p1",
        "arguments": [{"name": "topic"}],
        "messages": [{"role": "user", "content": {"type": "text", "text": "About {{topic}}"}}],
    }
    status, body = await call(
        app, "POST", "/api/v1/tenants/inproc/prompts", writer, json.dumps(prompt).encode()
    )
    assert status in (201, 409), body
    status, body = await call(
        app, "PUT", "/api/v1/tenants/inproc/prompts/p1/labels/production", writer, b'{"version": 1}'
    )
    assert status == 200, body
    MCP["authorization"] = writer["authorization"]


async def _time(
    app: Any,
    headers: dict[str, str],
    body: bytes,
    calls: int,
    before: Callable[[], None] | None = None,
) -> list[tuple[float, float]]:
    """Five runs of ``calls`` calls (``before`` runs ahead of each): per call, sorted, the wall
    time and this process's CPU time in microseconds."""
    for _ in range(2000 if before is None else 200):  # warm: caches filled, code paths taken
        status, answer = await call(app, "POST", "/mcp/inproc", headers, body)
    assert status == 200, answer
    assert b'"result"' in answer, answer
    runs = []
    for _ in range(5):
        started, cpu = time.perf_counter(), time.process_time()
        for _ in range(calls):
            if before is not None:
                before()
            await call(app, "POST", "/mcp/inproc", headers, body)
        runs.append(
            (
                (time.perf_counter() - started) / calls * 1e6,
                (time.process_time() - cpu) / calls * 1e6,
            )
        )
    return sorted(runs)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    os.environ["REGISTRY_OPERATOR_TOKEN"] = OPERATOR
    from registry.app import create_app  # after the token is in the environment

    app = create_app()
    async with app.router.lifespan_context(app):
        await _prepare(app)
        get = {**MCP, "mcp-method": "prompts/get", "mcp-name": "p1"}
        get_body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "prompts/get", "params": {
            "_meta": META, "name": "p1", "arguments": {"topic": "billing"}}}).encode()  # fmt: skip
        listing = {**MCP, "mcp-method": "prompts/list"}
        list_body = json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "prompts/list", "params": {"_meta": META}}
        ).encode()
        for name, headers, body in (
            ("prompts/get", get, get_body),
            ("prompts/list", listing, list_body),
        ):
            runs = await _time(app, headers, body, args.calls)
            print(f"{name}: {runs[0][0]:.1f} µs per call at best, median {runs[2][0]:.1f}")
        # A miss: the version resolved, read (one round trip), compiled and rendered, as when a
        # worker has not seen it (the tenant and the caller stay known, as they do under load).
        assert app.mcp is not None
        caches = app.mcp.caches

        def forget() -> None:
            caches.resolved.clear()
            caches.versions.clear()
            caches.answers.clear()

        cpu = sorted(run[1] for run in await _time(app, get, get_body, args.calls // 5, forget))
        print(
            f"prompts/get, not in memory: {cpu[0]:.1f} µs of this process's CPU per call at best, "
            f"median {cpu[2]:.1f}"
        )
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            for _ in range(args.calls):
                await call(app, "POST", "/mcp/inproc", get, get_body)
            profile.disable()
            pstats.Stats(profile).sort_stats("tottime").print_stats(30)


if __name__ == "__main__":
    asyncio.run(main())
