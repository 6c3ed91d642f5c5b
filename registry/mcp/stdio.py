"""MCP over stdin/stdout, for clients that launch a command: one JSON-RPC message per line, both eras.

A request carrying `_meta` with a protocol version (and `server/discover`, the stdio probe) is served
statelessly by revision 2026-07-28; `initialize` starts the session era, whose negotiated revision is
kept in memory for the life of the process. `subscriptions/listen` delivers list changes on stdout,
fed by this process's own LISTEN connection; `notifications/cancelled` ends a subscription.
The process reads the configured database directly, as a reader of one tenant. Logs go to stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable
from typing import Any, BinaryIO, TextIO

from pydantic import ValidationError

from registry.config import Settings
from registry.db.engine import Database, LazyTx, listen_connection
from registry.db.models import Tenant
from registry.errors import NotFound, RegistryError
from registry.events.hub import Hub
from registry.events.listener import ChangeFeed
from registry.mcp import core, errors, events, notifications, stateless
from registry.mcp.caching import McpCaches
from registry.mcp.core import Core
from registry.mcp.errors import InvalidRequest, McpError
from registry.mcp.feed import DatabaseChanges
from registry.mcp.protocol import Message, encode_json, error_message
from registry.principal import Principal
from registry.prompts import reading
from registry.revisions import LATEST_SESSION_REVISION
from registry.tenants import service as tenants
from registry.usage.ledger import Ledger

Writer = Callable[[dict[str, Any]], Awaitable[None]]


class StdioServer:
    def __init__(
        self,
        db: Database,
        settings: Settings,
        slug: str,
        label: str | None,
        hub: Hub,
        write: Writer,
    ) -> None:
        self.db = db
        self.settings = settings
        self.slug = slug
        self.label = label
        self.hub = hub
        self.write = write
        self.revision: str | None = None  # the session era's negotiated revision, once initialized
        self.caches = McpCaches()  # never live: every answer reads the database
        self.core = Core(settings, db, self.caches, Ledger(settings, db.reads))
        self.subscriptions: dict[Any, asyncio.Task[None]] = {}

    async def tenant_and_label(self) -> tuple[Tenant, str]:
        async with self.db.app_tx() as session:
            tenant = await tenants.find_tenant(session, self.slug)
        if tenant is None:
            raise NotFound(f"tenant {self.slug!r} not found")
        return tenant, self.label or tenant.default_label

    async def handle_line(self, line: bytes | str) -> list[dict[str, Any]]:
        """The responses to one line of input (none for notifications and responses). Whatever the
        line holds, it is answered and the server reads on: one bad line never ends the process."""
        try:
            parsed = core.parse(
                line, not_json="parse error: the line is not valid JSON", batches=False
            )
        except McpError as error:
            return [core.answer_error(error.request_id, error)]
        message = parsed.first
        assert isinstance(message, Message)
        try:
            answer = await self.handle(message)
        except McpError as error:
            return [core.answer_error(message.id, error)]
        except RegistryError as error:  # the tenant went away, the database is down...
            return [error_message(message.id, error.jsonrpc_code, error.message)]
        except Exception as error:  # noqa: BLE001 - answered as JSON-RPC, like the HTTP transport
            down = errors.unavailable(error)
            if down is not None:
                return [error_message(message.id, down.jsonrpc_code, down.message)]
            internal = errors.internal(error, message.method)
            return [error_message(message.id, internal.code, internal.message, internal.data)]
        return [answer] if answer is not None else []

    async def handle(self, message: Message) -> dict[str, Any] | None:
        if message.kind == "notification" and message.method == "notifications/cancelled":
            task = self.subscriptions.pop(message.params.get("requestId"), None)
            if task is not None:
                task.cancel()
            return None
        if message.kind != "request":
            return None
        if stateless.is_stateless(message, None, None) or message.method == "server/discover":
            return await self.handle_stateless(message)
        tenant, label = await self.tenant_and_label()
        if message.method == "initialize":
            async with LazyTx(self.db, tenant.id) as tx:
                await reading.check_label(await tx.session(), tenant, label)
            revision, response = self.core.initialize(message, tenant, label)
            self.revision = revision or self.revision
            return response
        if self.revision is None and message.method != "ping":
            raise InvalidRequest("send initialize first (or use _meta)")
        return await self.dispatch(message, tenant, label, self.revision or LATEST_SESSION_REVISION)

    async def handle_stateless(self, message: Message) -> dict[str, Any] | None:
        revision = self.core.stateless_revision(message)
        tenant, label = await self.tenant_and_label()
        if message.method == "subscriptions/listen":
            if message.id in self.subscriptions:
                raise InvalidRequest("a subscription with this id is open")
            self.subscriptions[message.id] = asyncio.create_task(
                self.listen(message, tenant, label)
            )
            return None  # the acknowledgment comes from the subscription itself
        if message.method == "events/stream":
            return await self.events_stream(message, tenant)
        return await self.dispatch(message, tenant, label, revision)

    async def events_stream(self, message: Message, tenant: Tenant) -> dict[str, Any] | None:
        """The Events extension's push delivery on this transport: refused at once with the
        draft's error, else its notifications written as lines until the client cancels the
        request (``notifications/cancelled``) or input ends."""
        if message.id in self.subscriptions:
            raise InvalidRequest("a subscription with this id is open")
        codec = await self.db.tokens()
        try:
            parsed = events.PollParams.model_validate(message.params)
            position = events.checked(codec, tenant, self.principal(tenant), parsed)
        except (ValidationError, McpError) as error:  # the draft: an error, and no stream
            answer = errors.in_result(error, message.method)
            return error_message(message.id, answer.code, answer.message, answer.data)
        subscription = self.hub.subscribe(tenant.id, None, seen=tenant.change_seq)
        keepalive = self.settings.sse_keepalive_seconds
        pushed = events.pushed(
            self.db, codec, tenant, position, subscription, message.id, keepalive
        )

        async def forward() -> None:
            try:
                async for sent in pushed:
                    await self.write(sent)
            finally:
                self.subscriptions.pop(message.id, None)

        self.subscriptions[message.id] = asyncio.create_task(forward())
        return None

    async def dispatch(
        self, message: Message, tenant: Tenant, label: str, revision: str
    ) -> dict[str, Any] | None:
        async with LazyTx(self.db, tenant.id) as tx:
            reader = self.principal(tenant)
            answer, _, _ = await self.core.call(tx, tenant, reader, label, revision, message)
            return answer

    @staticmethod
    def principal(tenant: Tenant) -> Principal:
        """Who a stdio client is: the local process that started the server, a reader of the
        tenant."""
        return Principal(role="reader", tenant_id=tenant.id)

    async def listen(self, message: Message, tenant: Tenant, label: str) -> None:
        granted = notifications.honored(message, tenant)
        kinds = notifications.honored_kinds(granted)
        try:
            with self.hub.subscribe(tenant.id, label, seen=tenant.change_seq) as subscription:
                await self.write(notifications.acknowledged(message.id, granted))
                while not subscription.closed:
                    if await subscription.next(60) is not None:
                        for kind in kinds:
                            await self.write(notifications.list_changed(kind, message.id))
                await self.write(notifications.closed(message.id))
        finally:
            self.subscriptions.pop(message.id, None)

    async def close(self) -> None:
        for task in list(self.subscriptions.values()):
            task.cancel()
        await asyncio.gather(*self.subscriptions.values(), return_exceptions=True)


async def run_stdio(
    db: Database,
    settings: Settings,
    slug: str,
    label: str | None,
    stdin: BinaryIO | None = None,
    stdout: TextIO = sys.stdout,
) -> None:
    """Serve lines from ``stdin`` (bytes: a line that is not UTF-8 is answered, not fatal) until it
    ends; a line longer than the request limit is answered and skipped."""
    source = stdin if stdin is not None else sys.stdin.buffer
    limit = settings.max_request_bytes
    lock = asyncio.Lock()

    async def write(message: dict[str, Any]) -> None:
        async with lock:
            stdout.write(encode_json(message).decode() + "\n")
            stdout.flush()

    hub = Hub()
    listen_url = settings.listen_dsn() or db.url
    feed = ChangeFeed(lambda: listen_connection(listen_url), hub, DatabaseChanges(db), caches=[])
    server = StdioServer(db, settings, slug, label, hub, write)
    await server.tenant_and_label()  # fail early, before any client talks to us
    listener = asyncio.create_task(feed.run())
    ledger = asyncio.create_task(server.core.ledger.run())
    try:
        while True:
            line = await asyncio.to_thread(source.readline, limit + 1)
            if not line:
                return
            if len(line) > limit and not line.endswith(b"\n"):
                while line and not line.endswith(b"\n"):  # skip the rest of the line
                    line = await asyncio.to_thread(source.readline, limit + 1)
                too_long = InvalidRequest(f"the line is longer than the limit of {limit} bytes")
                await write(core.answer_error(None, too_long))
                continue
            if line.strip():
                for answer in await server.handle_line(line):
                    await write(answer)
    finally:
        ledger.cancel()
        await server.core.ledger.close()  # what this process served, written before it ends
        await server.close()
        await feed.stop()
        listener.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await listener
