"""What `registry serve` adds to uvicorn: a bound on the time a request's head may take, and kept
MCP answers sent by the protocol itself.

uvicorn times out idle keep-alive connections, but not a head that trickles in: a client sending a
header line now and then holds a connection (and a slot of ``limit_concurrency``) for as long as it
likes. ``TimedHeadProtocol`` is uvicorn's httptools protocol with a timer from a connection's
start (or, on a kept-alive connection, from the end of the read that began a request's head) to
the end of its headers; past ``REGISTRY_HEAD_TIMEOUT_SECONDS`` the connection is closed. A head
that arrives whole in one read, as almost every one does, is never timed: no timer is made and
cancelled for it. A body has its own bound (``REGISTRY_BODY_TIMEOUT_SECONDS``).

uvicorn starts a task for every request as its head ends. For a POST whose whole body arrives in
the same read as its head (every small request of a kept-alive client), the protocol first asks the
app (``answer_at_once``, found on the app or on what it wraps) for an answer it may send at once: a
kept MCP answer sent again from the request's bytes (``registry.mcp.replay``), decided by the same
checks the task would make. Such an answer is written in one piece, with uvicorn's own default
headers, and no task, ASGI message or request object is made for it. Anything else, and a request
whose body has not all arrived when the read ends, gets its task as uvicorn would have started it,
in the same read (the body's timeout runs from there, as before).
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable
from typing import Any, Literal

from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from registry.config import get_settings
from registry.events.streams import CONNECTION_LOST, ConnectionLost

logger = logging.getLogger("registry.http_protocol")
PROTOCOL = (
    "registry.http_protocol:TimedHeadProtocol"  # for uvicorn's `http` option, in every worker
)

# What an app offers the protocol: the headers (Content-Length among them) and body of an answer
# to send now, or None.
Answerer = Callable[[Any, bytes], tuple[list[tuple[bytes, bytes]], bytes] | None]
_RECEIVING = object()  # ``held`` while a read is parsed and no request waits for its body
_STATUS_200 = b"HTTP/1.1 200 OK\r\n"
# A kept answer this long or longer goes to the transport beside its head, not copied after it: a
# list's page may be a megabyte (the transport writes both in one system call).
_JOIN_BELOW = 64 * 1024
_WRAPPED = 4  # how deep an app may be wrapped (uvicorn's proxy headers and message logger)


class _Pipeline(list[Any]):
    """uvicorn's queue of a connection's pipelined requests (``appendleft``, ``pop``, truth) as a
    list: an empty deque costs every connection, and so every open stream, about 600 bytes, an
    empty list 56. Requests are rarely pipelined, and then a few at a time."""

    __slots__ = ()

    def appendleft(self, item: Any) -> None:
        self.insert(0, item)


class _WaitersLater(asyncio.Event):
    """An ``asyncio.Event`` whose waiters' deque (about 600 bytes) is made at the first wait: the
    flow control's "writable" event of a connection is waited on only when a client reads slower
    than the connection writes."""

    def __init__(self) -> None:  # asyncio.Event's own state, but for the deque
        self._waiters: Any = ()
        self._value = False

    async def wait(self) -> Literal[True]:
        if type(self._waiters) is tuple:
            self._waiters = collections.deque()
        return await super().wait()


class _Flow(FlowControl):
    """uvicorn's flow control of a connection with a writable event that holds no deque until a
    write has to wait."""

    def __init__(self, transport: asyncio.Transport) -> None:
        super().__init__(transport)
        self._is_writable_event = _WaitersLater()
        self._is_writable_event.set()


def _nothing() -> None:
    pass


def _answerer(app: Any) -> Answerer | None:
    """The app's ``answer_at_once``, looked for through the middleware uvicorn wraps it in."""
    for _ in range(_WRAPPED):
        found = getattr(app, "answer_at_once", None)
        if found is not None:
            return found  # type: ignore[no-any-return]
        app = getattr(app, "app", None)
    return None


class TimedHeadProtocol(HttpToolsProtocol):
    """Its own attributes are slots: CPython keeps an object's first 29 dictionary attributes
    beside it, sharing their names with the class; a 30th (uvicorn's protocol sets 28) would make
    every connection build a dictionary of its own, 1.3 KB more for each open connection or stream
    (tracemalloc). The timeout is read from the settings each time (they are cached)."""

    __slots__ = ("answerer", "head_timer", "heading", "held", "lost")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.head_timer: asyncio.TimerHandle | None = None
        self.heading = False  # a request's head began and has not ended
        self.answerer = _answerer(self.app)
        self.pipeline = _Pipeline()  # type: ignore[assignment]
        # None outside a read; _RECEIVING in one; the request (cycle and app) whose task waits
        # for the end of the read, in case its body comes with it and the app answers at once.
        self.held: Any = None
        self.lost: ConnectionLost | None = None  # told of the connection's loss

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.flow = _Flow(transport)
        self._time_head()

    def data_received(self, data: bytes) -> None:
        self.held = _RECEIVING if self.answerer is not None else None
        try:
            super().data_received(data)
        finally:
            held, self.held = self.held, None
            if held is not None and held is not _RECEIVING:  # its body is still to come
                self._start(*held)
            if self.heading and self.head_timer is None:  # a head this read did not end
                self._time_head()

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        if (
            self.held is _RECEIVING
            and app is self.app  # not uvicorn's 503 past limit_concurrency
            and cycle.scope["method"] == "POST"
            and cycle.keep_alive
            and not cycle.waiting_for_100_continue
        ):
            self.held = (cycle, app)
            return
        self._start(cycle, app)

    def _start(self, cycle: RequestResponseCycle, app: Any) -> None:
        """The request's task, as uvicorn starts it, with what to tell of the connection's loss."""
        scope: dict[str, Any] = cycle.scope  # type: ignore[assignment]
        scope[CONNECTION_LOST] = self.lost = ConnectionLost()
        super()._start_asgi_task(cycle, app)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        held = self.held
        if held is None or held is _RECEIVING or held[0] is not self.cycle:
            return
        self.held = _RECEIVING
        cycle, app = held
        assert self.answerer is not None  # held only when there is one
        try:
            answer = self.answerer(cycle.scope, bytes(cycle.body))
        except Exception:  # the task's path answers it, with its errors
            logger.exception("answering a request at once failed; it goes to the app")
            answer = None
        if answer is None:
            self._start(cycle, app)
            return
        headers, body = answer
        content = [_STATUS_200]
        for name, value in (*self.server_state.default_headers, *headers):
            content += (name, b": ", value, b"\r\n")
        content.append(b"\r\n")
        cycle.response_started = cycle.response_complete = True
        if len(body) < _JOIN_BELOW:
            content.append(body)
            self.transport.write(b"".join(content))
        else:
            self.transport.writelines((b"".join(content), body))
        self.on_response_complete()  # the next pipelined request, or the keep-alive timer
        cycle.on_response = _nothing  # as uvicorn's task ends: no cycle of references is left

    def on_message_begin(self) -> None:
        super().on_message_begin()
        # Each request's head is timed, on a kept-alive connection too, from the end of the read
        # that began it if that read did not end it (a head that came whole needs no timer).
        self.heading = True

    def on_headers_complete(self) -> None:
        self.heading = False
        self._untime_head()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._untime_head()
        lost, self.lost = self.lost, None
        super().connection_lost(exc)
        if lost is not None:
            lost.lose()

    def _time_head(self) -> None:
        self._untime_head()
        seconds = get_settings().head_timeout_seconds
        self.head_timer = self.loop.call_later(seconds, self._head_too_slow)

    def _untime_head(self) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def _head_too_slow(self) -> None:
        self.head_timer = None
        if not self.transport.is_closing():
            self.transport.close()
