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
    per stream, open or idle)."""

    __slots__ = (
        "_pending",
        "_waiter",
        "closed",
        "hub",
        "label",
        "owner",
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
        self.closed = False
        self.reason: str | None = None  # why the server ended it, when not a shutdown

    def __enter__(self) -> Subscription:
        self.hub._add(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.hub._remove(self)

    def offer(self, seq: int) -> None:
        if seq > self.seen and (self._pending is None or seq > self._pending):
            self._pending = seq
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
        """The newest undelivered sequence, or None after ``wait_seconds`` (or once the hub closed).

        The timeout is a timer on the loop that ends the same wait, not ``asyncio.wait_for``: on
        Python 3.11 that wraps each wait in a task of its own, and a burst wakes thousands of
        streams at once (bench/fanout measures it)."""
        if self._pending is None and not self.closed:
            loop = asyncio.get_running_loop()
            self._waiter = waiter = loop.create_future()
            timer = loop.call_later(wait_seconds, self._wake)
            try:
                await waiter
            finally:
                timer.cancel()
                self._waiter = None
            if self._pending is None:  # the timer woke it, or the subscription closed
                return None
        seq, self._pending = self._pending, None
        if seq is not None:
            self.seen = seq
        return seq


class Hub:
    def __init__(self) -> None:
        self._subscribers: dict[uuid.UUID, set[Subscription]] = defaultdict(set)
        self._published: dict[uuid.UUID, int] = {}  # the newest sequence told, per watched tenant
        self.closed = False

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
        for subscribers in self._subscribers.values():
            for subscription in subscribers:
                subscription.close()
