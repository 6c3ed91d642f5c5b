"""Request counts and latencies per REST route (the route's template, never the raw path)."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from registry.metrics import REQUESTS, tally, timings


class RequestMetrics:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith("/mcp/"):  # MCP counts per method
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = scope.get("route")
            name = f"{scope['method']} {getattr(route, 'path', 'unmatched')}"
            timings("rest", name).observe(time.perf_counter() - started)
            tally(REQUESTS, "rest", name, str(status)).inc()
