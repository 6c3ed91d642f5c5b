"""What every server-sent-event stream of a worker shares, whichever door it came through (MCP GET
streams and subscriptions/listen, the REST change stream): how events are framed, the keep-alive
loop, where a resuming client is up to, the bound on open streams per caller and per tenant, who the
caller is for that bound, and how long a stream may wait for its next event."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import Counter
from collections.abc import AsyncGenerator, Callable
from datetime import UTC, datetime
from typing import Any, cast

import orjson
from starlette.datastructures import MutableHeaders
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from registry.errors import TooManyStreams
from registry.events.hub import Subscription
from registry.naming import ascii_number
from registry.principal import Principal

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
KEEP_ALIVE = b": keep-alive\n\n"
# Every stream's answer head, shared (a tuple: nothing appends to it in place; see EventStream).
_SSE_RAW_HEADERS = (
    *((name.lower().encode(), value.encode()) for name, value in SSE_HEADERS.items()),
    (b"content-type", b"text/event-stream; charset=utf-8"),
)

# `registry serve`'s HTTP protocol (registry.http_protocol) puts a ``ConnectionLost`` on the scope of each
# request it hands the app, under this key: a stream tells it what to call when the connection is
# lost, and needs no task of its own waiting to notice (under another server, a task notices).
CONNECTION_LOST = "registry.connection_lost"


class ConnectionLost:
    """What to call when a request's connection is lost: told by the app, called by the
    protocol once the connection is gone (at once, if it was gone before it was told)."""

    __slots__ = ("callback", "happened")

    def __init__(self) -> None:
        self.callback: Callable[[], None] | None = None
        self.happened = False

    def tell(self, callback: Callable[[], None] | None) -> None:
        """Call ``callback`` when the connection is lost; None: call nothing any more."""
        self.callback = callback
        if callback is not None and self.happened:
            self.lose()

    def lose(self) -> None:
        self.happened = True
        callback, self.callback = self.callback, None
        if callback is not None:
            callback()


def frame(
    data: Any, *, event_id: int | None = None, event: str | None = None, retry_ms: int | None = None
) -> bytes:
    """One event: ``data`` as compact JSON (None: an empty data line), with its id, type and the
    client's reconnection delay when given."""
    head = b""
    if event_id is not None:
        head += b"id: %d\n" % event_id
    if event is not None:
        head += b"event: %s\n" % event.encode()
    if retry_ms is not None:
        head += b"retry: %d\n" % retry_ms
    body = b"" if data is None else orjson.dumps(data)
    return head + b"data: " + body + b"\n\n"


async def heard(subscription: Subscription, keepalive: float) -> AsyncGenerator[int | None]:
    """What a stream hears until it is closed: each change's sequence number, and None when the
    keep-alive interval passed without one (the stream sends ``KEEP_ALIVE`` then)."""
    while not subscription.closed:
        seq = await subscription.next(wait_seconds(subscription, keepalive))
        if seq is None and subscription.closed:
            return
        yield seq


def last_event_id(header: str | None, current: int) -> int:
    """Where a resuming client is up to (``Last-Event-ID``); a missing or unreadable id means "up
    to date", and an id past the log's end is taken as its end."""
    seen = ascii_number(header.strip(), maximum=2**63 - 1) if header is not None else None
    return current if seen is None else min(seen, current)


class EventStream(Response):
    """A ``text/event-stream`` answer: the bytes of ``events``, sent from the request's own task
    until the client goes away (then ``subscription`` is closed, which ends ``events``: told by
    `registry serve`'s protocol, ``CONNECTION_LOST``, or noticed by one small task waiting for it
    under another server); ``release`` is called however the stream ends. ``events`` reads nothing
    of the request: the request's header fields are emptied once the stream's head is sent.

    Every open stream holds what its answer holds for as long as it is open. Starlette's
    StreamingResponse runs each one under an anyio task group of two tasks (on the ASGI 2.3
    servers uvicorn is): about 4 KB more per open stream, measured with tracemalloc. The head is
    one tuple shared by every stream (370 bytes each otherwise); a stream whose headers are
    changed (CORS) gets its own list first."""

    media_type = "text/event-stream"

    def __init__(
        self,
        events: AsyncGenerator[bytes],
        subscription: Subscription,
        *,
        release: Callable[[], None] | None = None,
    ) -> None:
        self.events = events
        self.subscription = subscription
        self.release = release
        self.status_code = 200
        self.background = None
        self.raw_headers = cast(list[tuple[bytes, bytes]], _SSE_RAW_HEADERS)

    @property
    def headers(self) -> MutableHeaders:
        if isinstance(self.raw_headers, tuple):  # the shared head: a copy of its own to change
            self.raw_headers = list(self.raw_headers)
        return super().headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        lost: ConnectionLost | None = scope.get(CONNECTION_LOST)
        watcher = None
        if lost is not None:  # about 1.3 KB less per open stream than a task (tracemalloc)
            lost.tell(self.subscription.close)
        else:
            watcher = asyncio.get_running_loop().create_task(self._watch(receive))
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": self.status_code,
                    "headers": self.raw_headers,
                }
            )
            # Whoever made the stream read the request's header fields before it began (``events``
            # must not): an open stream keeps none of them, though its server keeps the scope
            # (about 110 bytes a field, tracemalloc).
            headers = scope.get("headers")
            if type(headers) is list:
                headers.clear()
            async for chunk in self.events:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            if lost is not None:
                lost.tell(None)
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
            await self.events.aclose()  # its subscription leaves the hub, even when sending failed
            if self.release is not None:
                self.release()

    async def _watch(self, receive: Receive) -> None:
        """Until the client goes away (a request's body was read whole before the stream began:
        what comes next is the disconnect)."""
        while (await receive())["type"] != "http.disconnect":
            pass
        self.subscription.close()


class StreamSlots:
    """Open streams of this worker per caller (a key, or an anonymous client's address) and per
    tenant, bounded: one caller cannot hold every connection a worker has."""

    def __init__(self, per_caller: int, per_tenant: int) -> None:
        self.per_caller = per_caller
        self.per_tenant = per_tenant
        self.callers: Counter[Any] = Counter()
        self.tenants: Counter[uuid.UUID] = Counter()

    def take(self, tenant_id: uuid.UUID, caller: Any) -> Callable[[], None]:
        """A slot for a new stream, or TooManyStreams; call what it returns once the stream ends."""
        if self.callers[caller] >= self.per_caller:
            raise TooManyStreams(
                f"this caller already holds {self.per_caller} open streams here: close one first"
            )
        if self.tenants[tenant_id] >= self.per_tenant:
            raise TooManyStreams(
                f"this tenant already holds {self.per_tenant} open streams here: try again later"
            )
        self.callers[caller] += 1
        self.tenants[tenant_id] += 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            for counter, key in ((self.callers, caller), (self.tenants, tenant_id)):
                counter[key] -= 1
                if counter[key] <= 0:
                    del counter[key]

        return release


def caller_of(principal: Principal, address: str | None) -> Any:
    """Whose stream it is, for the bound: the key, else the client's address."""
    if principal.key_id is not None:
        return principal.key_id
    return ("address", address)


def wait_seconds(subscription: Subscription, keepalive: float) -> float:
    """How long a stream may wait for its next event: the keep-alive interval, or less when its
    key expires sooner (then it is closed: the key no longer reads)."""
    owner = subscription.owner
    if isinstance(owner, Principal) and owner.expires_at is not None:
        left = (owner.expires_at - datetime.now(UTC)).total_seconds()
        if left <= 0:
            subscription.close("the API key has expired")
            return 0
        return min(keepalive, left)
    return keepalive
