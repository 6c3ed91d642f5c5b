"""What `registry serve` adds to uvicorn: a bound on the time a request's head may take.

uvicorn times out idle keep-alive connections, but not a head that trickles in: a client sending a
header line now and then holds a connection (and a slot of ``limit_concurrency``) for as long as it
likes. ``TimedHeadProtocol`` is uvicorn's httptools protocol with a timer from a connection's
first byte (or a new request's) to the end of its headers; past ``REGISTRY_HEAD_TIMEOUT_SECONDS``
the connection is closed. A body has its own bound (``REGISTRY_BODY_TIMEOUT_SECONDS``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from registry.config import get_settings

PROTOCOL = "registry.serving:TimedHeadProtocol"  # for uvicorn's `http` option, in every worker


class TimedHeadProtocol(HttpToolsProtocol):
    """One attribute more than uvicorn's protocol, and no more: CPython keeps an object's first 29
    attributes beside it, sharing their names with the class; a 30th (uvicorn's count with two of
    ours, the last set with the first request) makes every connection build a dictionary of its
    own, 1.3 KB more for each open connection or stream (tracemalloc). The timeout is read from the
    settings each time instead (they are cached)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._time_head()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._time_head()  # each request's head, on a kept-alive connection too

    def on_headers_complete(self) -> None:
        self._untime_head()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._untime_head()
        super().connection_lost(exc)

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
