"""What every server-sent-event stream of a worker shares, whichever door it came through (MCP GET
streams and subscriptions/listen, the REST change stream): the bound on open streams per caller and
per tenant, who the caller is for that bound, and how long a stream may wait for its next event."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from registry.errors import TooManyStreams
from registry.events.hub import Subscription
from registry.principal import Principal


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
