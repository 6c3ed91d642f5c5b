"""MCP over stdin/stdout, for clients that launch a command: one JSON-RPC message per line.

The process is the session: the revision negotiated by initialize is kept in memory. It reads the
configured database directly, as a reader of one tenant (whoever may run the command may read the
database already). Logs go to stderr; stdout carries protocol messages only.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TextIO

from registry.config import Settings
from registry.db.engine import Database
from registry.errors import NotFound
from registry.mcp import handlers
from registry.mcp.caching import McpCaches
from registry.mcp.protocol import (
    INVALID_REQUEST,
    PARSE_ERROR,
    McpError,
    Message,
    classify,
    error_message,
)
from registry.principal import Principal
from registry.tenants import service as tenants

Writer = Callable[[dict[str, Any]], Awaitable[None]]


class StdioServer:
    def __init__(self, db: Database, settings: Settings, slug: str, label: str | None) -> None:
        self.db = db
        self.settings = settings
        self.slug = slug
        self.label = label
        self.revision: str | None = None
        self.caches = McpCaches()  # never live here: no LISTEN connection, so nothing is kept

    async def tenant_and_label(self) -> tuple[Any, str]:
        async with self.db.app_tx() as session:
            tenant = await tenants.find_tenant(session, self.slug)
        if tenant is None:
            raise NotFound(f"tenant {self.slug!r} not found")
        return tenant, self.label or tenant.default_label

    async def handle_line(self, line: str) -> list[dict[str, Any]]:
        """The responses to one line of input (none for notifications and responses)."""
        try:
            payload = json.loads(line)
        except ValueError:
            return [error_message(None, PARSE_ERROR, "parse error: the line is not valid JSON")]
        try:
            message = classify(payload)
        except McpError as error:
            return [error_message(error.data, error.code, error.message)]
        return [answer] if (answer := await self.handle(message)) is not None else []

    async def handle(self, message: Message) -> dict[str, Any] | None:
        tenant, label = await self.tenant_and_label()
        if message.method == "initialize" and message.kind == "request":
            try:
                params = handlers.InitializeParams.model_validate(message.params)
            except ValueError as error:
                return error_message(message.id, -32602, f"invalid initialize params: {error}")
            self.revision = handlers.negotiate(params.protocolVersion)
            return {
                "jsonrpc": "2.0",
                "id": message.id,
                "result": handlers.initialize_result(self.revision, tenant, label, self.settings),
            }
        if self.revision is None and message.kind == "request" and message.method != "ping":
            return error_message(message.id, INVALID_REQUEST, "send initialize first")
        async with self.db.tenant_tx(tenant.id) as session:
            call = handlers.Call(
                db=session,
                tenant=tenant,
                label=label,
                principal=Principal(role="reader", tenant_id=tenant.id),
                revision=self.revision or "2025-11-25",
                settings=self.settings,
                mac_key=await self.db.mac_key(),
                caches=self.caches,
            )
            return await handlers.dispatch(call, message)


async def run_stdio(
    db: Database,
    settings: Settings,
    slug: str,
    label: str | None,
    stdin: TextIO = sys.stdin,
    stdout: TextIO = sys.stdout,
) -> None:
    server = StdioServer(db, settings, slug, label)
    await server.tenant_and_label()  # fail early, before any client talks to us
    lock = asyncio.Lock()

    async def write(message: dict[str, Any]) -> None:
        async with lock:
            stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
            stdout.flush()

    while True:
        line = await asyncio.to_thread(stdin.readline)
        if not line:
            return
        if line.strip():
            for answer in await server.handle_line(line):
                await write(answer)
