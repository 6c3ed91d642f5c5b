"""The notifications on the registry's channel, each payload parsed once into one of a few typed
notices (what the listener's handlers are subscribed by). Payloads carry ids only (the triggers in
``migrations/sql/`` write them): which tenant, and what of it changed."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class WebhooksQueued:
    """A committed change queued webhook deliveries."""

    tenant: uuid.UUID


@dataclass(frozen=True)
class AccessChanged:
    """Who may read the tenant may have changed: a key, an issuer, the tenant's settings."""

    tenant: uuid.UUID


@dataclass(frozen=True)
class SessionEnded:
    tenant: uuid.UUID
    session: str


@dataclass(frozen=True)
class TenantDeleted:
    tenant: uuid.UUID


@dataclass(frozen=True)
class Changed:
    """What the tenant serves changed, up to ``seq``: of one label (``labelled`` and ``label``), or
    of any (``label`` None)."""

    tenant: uuid.UUID
    seq: int | None
    labelled: bool
    label: str | None
    # False for a change that changes nothing served (a change request's review events): caches
    # stay, and no MCP stream is told.
    serves: bool = True


@dataclass(frozen=True)
class LibraryChanged:
    """A consent of the library ``tenant`` changed (an offer, or a subscription to it): whom its
    changes reach, and what its subscribers serve, may have changed."""

    tenant: uuid.UUID


Notice = WebhooksQueued | AccessChanged | SessionEnded | TenantDeleted | Changed | LibraryChanged


def parse(payload: str) -> Notice | None:
    """The notice a payload carries; None for one that cannot be read."""
    try:
        event: Any = json.loads(payload)
        tenant = uuid.UUID(str(event["tenant"]))
    except (ValueError, KeyError, TypeError):
        return None
    if event.get("webhooks"):
        return WebhooksQueued(tenant)
    if event.get("auth"):
        return AccessChanged(tenant)
    if isinstance(event.get("session"), str):
        return SessionEnded(tenant, event["session"])
    if event.get("deleted"):
        return TenantDeleted(tenant)
    if event.get("library"):
        return LibraryChanged(tenant)
    seq = event.get("seq")
    label = event.get("label")
    return Changed(
        tenant,
        seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
        "label" in event,
        label if isinstance(label, str) else None,
        event.get("serves") is not False,
    )
