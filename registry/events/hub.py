"""The per-process fan-out hub: subscribers per tenant, told of each change of that tenant.

Each subscription holds only the newest change sequence it has not yet delivered, so a burst of
changes (or a slow reader) costs one pending number, never a growing queue: ten changes in a row reach
a stream as one list_changed. Publishing never waits on a subscriber.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict
from typing import Any

from registry.metrics import OPEN_STREAMS


class Subscription:
    """One subscriber of a tenant's changes. ``with hub.subscribe(...) as subscription`` (or a
    subscription made first and entered later: a stream's answer holds it before its body runs)
    registers it with the hub while the block runs.

    Held by every open stream for as long as it is open, so it keeps little: the newest pending
    number, and a future only while someone waits (an ``asyncio.Event`` would keep a waiter queue
    per stream, open or idle), and a waiting stream's keep-alive is a moment for the hub's clock to
    wake it at, not a timer of its own."""

    __slots__ = (
        "_due",
        "_pending",
        "_waiter",
        "closed",
        "hub",
        "label",
        "libraries",
        "owner",
        "poked",
        "reason",
        "seen",
        "tenant_id",
    )

    def __init__(
        self, hub: Hub, tenant_id: uuid.UUID, label: str | None, seen: int, owner: Any = None
    ) -> None:
        self.hub = hub
        self.tenant_id = tenant_id
        self.label = label  # None: every change of the tenant (the REST change stream)
        self.seen = seen  # the change sequence this subscriber is up to date with
        self.owner = owner  # who opened it (the transport's principal), checked again on changes
        self._pending: int | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._due: float | None = None  # when the hub's clock ends the current wait (loop time)
        self.closed = False
        self.reason: str | None = None  # why the server ended it, when not a shutdown
        self.poked = False  # told by ``poke`` since the stream last looked
        self.libraries: set[uuid.UUID] | None = None  # the libraries whose pokes it was told

    def __enter__(self) -> Subscription:
        self.hub._add(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.hub._remove(self)

    def offer(self, seq: int) -> None:
        if seq > self.seen and (self._pending is None or seq > self._pending):
            self._pending = seq
            self._wake()

    def poke(self, library: uuid.UUID | None = None) -> None:
        """What the subscriber serves changed without a change of its own tenant (a library it
        follows published): told as the newest change it has, no new number."""
        self.poked = True
        if library is not None:
            if self.libraries is None:
                self.libraries = set()
            self.libraries.add(library)
        if self._pending is None:
            self._pending = self.seen
            self._wake()

    def close(self, reason: str | None = None) -> None:
        if not self.closed:
            self.reason = reason
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def next(self, wait_seconds: float) -> int | None:
        """The newest undelivered sequence, or None after at most ``wait_seconds`` (or once the
        hub closed).

        The timeout ends the same wait, not ``asyncio.wait_for``: on Python 3.11 that wraps each
        wait in a task of its own, and a burst wakes thousands of streams at once (bench/fanout
        measures it). A long wait (a keep-alive) is ended by the hub's clock, up to one tick early;
        a short one (a key about to expire) by a timer of its own."""
        if self._pending is None and not self.closed:
            loop = asyncio.get_running_loop()
            self._waiter = waiter = loop.create_future()
            timer = self.hub._time(self, loop, wait_seconds)
            try:
                await waiter
            finally:
                if timer is not None:
                    timer.cancel()
                self._waiter = self._due = None
            if self._pending is None:  # the timer woke it, or the subscription closed
                return None
        seq, self._pending = self._pending, None
        if seq is not None:
            self.seen = seq
        return seq


class Hub:
    """``tick_seconds``: how often the clock that ends the subscribers' long waits looks at them
    (None: every wait has a timer of its own). One clock for every open stream of the worker: an
    idle stream holds a number where a timer on the loop cost it about 540 bytes (tracemalloc)."""

    def __init__(self, tick_seconds: float | None = None) -> None:
        self._subscribers: dict[uuid.UUID, set[Subscription]] = defaultdict(set)
        self._published: dict[uuid.UUID, int] = {}  # the newest sequence told, per watched tenant
        self.closed = False
        self.tick_seconds = tick_seconds
        self._clock: asyncio.TimerHandle | None = None

    def _time(
        self, subscription: Subscription, loop: asyncio.AbstractEventLoop, wait_seconds: float
    ) -> asyncio.TimerHandle | None:
        """End ``subscription``'s wait after at most ``wait_seconds``: by the clock when the wait
        spans two ticks or more (then not sooner than one tick before), else by a timer returned
        for the waiter to cancel."""
        tick = self.tick_seconds
        registered = subscription in self._subscribers.get(subscription.tenant_id, ())
        if tick is None or wait_seconds < 2 * tick or not registered:  # the clock sees only these
            return loop.call_later(wait_seconds, subscription._wake)
        subscription._due = loop.time() + wait_seconds
        if self._clock is None:
            self._clock = loop.call_later(tick, self._tick, loop)
        return None

    def _tick(self, loop: asyncio.AbstractEventLoop) -> None:
        """Wake the waits due before the next tick; tick again while any is left."""
        assert self.tick_seconds is not None
        self._clock = None
        due_by, waiting = loop.time() + self.tick_seconds, False
        for subscribers in self._subscribers.values():
            for subscription in subscribers:
                due = subscription._due
                if due is None:
                    continue
                if due < due_by:
                    subscription._due = None
                    subscription._wake()
                else:
                    waiting = True
        if waiting:
            self._clock = loop.call_later(self.tick_seconds, self._tick, loop)

    def subscribe(
        self, tenant_id: uuid.UUID, label: str | None, seen: int, owner: Any = None
    ) -> Subscription:
        """A subscription to enter (``with``): told of the tenant's changes while entered."""
        return Subscription(self, tenant_id, label, seen, owner)

    def _add(self, subscription: Subscription) -> None:
        if self.closed:
            subscription.close()
        tenant_id = subscription.tenant_id
        self._subscribers[tenant_id].add(subscription)
        self._published[tenant_id] = max(self._published.get(tenant_id, 0), subscription.seen)
        OPEN_STREAMS.inc()

    def _remove(self, subscription: Subscription) -> None:
        OPEN_STREAMS.dec()
        subscribers = self._subscribers.get(subscription.tenant_id)
        if subscribers is not None:
            subscribers.discard(subscription)
            if not subscribers:
                del self._subscribers[subscription.tenant_id]
                self._published.pop(subscription.tenant_id, None)

    def watching(self, tenant_id: uuid.UUID) -> bool:
        return tenant_id in self._subscribers

    def published(self, tenant_id: uuid.UUID) -> int:
        return self._published.get(tenant_id, 0)

    def publish(self, tenant_id: uuid.UUID, seq: int, labels: set[str] | None = None) -> int:
        """Tell the tenant's subscribers of ``labels`` (all, when None) that its sequence reached
        ``seq``; returns how many were told."""
        if seq > self._published.get(tenant_id, -1) and tenant_id in self._subscribers:
            self._published[tenant_id] = seq
        told = 0
        for subscription in self._subscribers.get(tenant_id, ()):
            if labels is None or subscription.label is None or subscription.label in labels:
                subscription.offer(seq)
                told += 1
        return told

    def poke(self, tenant_id: uuid.UUID, library: uuid.UUID | None = None) -> int:
        """Tell every subscriber of the tenant that what it serves changed (``Subscription.poke``),
        by ``library``; returns how many were told."""
        subscriptions = self._subscribers.get(tenant_id, ())
        for subscription in subscriptions:
            subscription.poke(library)
        return len(subscriptions)

    def close_tenant(self, tenant_id: uuid.UUID) -> None:
        """The tenant is gone: end its streams."""
        for subscription in self._subscribers.get(tenant_id, ()):
            subscription.close()

    def tenants(self) -> list[uuid.UUID]:
        return list(self._subscribers)

    def subscriptions(self, tenant_id: uuid.UUID) -> list[Subscription]:
        return list(self._subscribers.get(tenant_id, ()))

    def close(self) -> None:
        self.closed = True
        if self._clock is not None:
            self._clock.cancel()
            self._clock = None
        for subscribers in self._subscribers.values():
            for subscription in subscribers:
                subscription.close()
