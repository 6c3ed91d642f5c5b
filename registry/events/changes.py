"""The change stream an application follows (``GET /api/v1/tenants/{tenant}/changes``): every change
of what the tenant serves, read from the change log in sequence order, replayed from where the client
left off, then live, woken by the same LISTEN hub as MCP streams.

Events (server-sent events, the sequence number as their id):
  ``ready``   the sequence the stream starts after (sent first; a client with no position starts here)
  ``change``  ``{"seq", "kind", "artifact", "prompt", "skill", "label", "at"}``: ``artifact``
              says which kind of artifact it is about (``prompt``, ``skill``; None for the tenant's
              own changes and a change request's review); a skill's changes have kinds ``skill.*``
              and name the skill; a change request's events (``change_request.opened``,
              ``.approved``, ``.rejected``, ``.withdrawn``, ``.stale``, ``.applied``) add
              ``change_request`` (its id, state and moves), and only ``.applied`` changes what is
              served; ``prompt`` and ``skill`` both None mean the whole
              tenant (a setting) or a deleted one; ``label`` None means every label
  ``gap``     the log cannot replay what the client missed (it asked for a position the log does not
              hold): re-read what you cache, then carry on from this event's id
  ``closed``  the server is shutting down (reconnect elsewhere); ``denied`` the caller may no longer read

A filter by label or prompt keeps the changes that may concern it (a change of the whole tenant, or of
a prompt under every label, always passes).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from registry.artifacts.kinds import of_event
from registry.db import repository as repo
from registry.db.engine import Database
from registry.events.hub import Subscription
from registry.events.streams import KEEP_ALIVE, frame

PAGE = 500  # change-log rows read at a time


@dataclass(frozen=True)
class Change:
    seq: int
    kind: str
    prompt: str | None
    label: str | None
    at: datetime
    skill: str | None = None
    detail: dict[str, Any] | None = None

    def concerns(self, label: str | None, prompt: str | None) -> bool:
        if prompt is not None and self.skill is not None:
            return False  # a skill's change is no prompt's
        return (label is None or self.label is None or self.label == label) and (
            prompt is None or self.prompt is None or self.prompt == prompt
        )

    def data(self) -> dict[str, Any]:
        artifact = of_event(self.kind)
        data = {
            "seq": self.seq,
            "kind": self.kind,
            "artifact": artifact.name if artifact is not None else None,
            "prompt": self.prompt,
            "skill": self.skill,
            "label": self.label,
            "at": self.at.isoformat(),
        }
        return data | self.detail if self.detail else data


LIBRARY_CHANGED = "library.changed"


def _library_changed(seq: int) -> dict[str, Any]:
    """What the stream says when a library the tenant follows changed what it serves: a change
    of the whole tenant (no prompt named), under the number of the tenant's newest own change."""
    at = datetime.now(UTC).isoformat()
    return dict.fromkeys(("artifact", "prompt", "skill", "label")) | {
        "seq": seq,
        "kind": LIBRARY_CHANGED,
        "at": at,
    }


def sse(event: str, seq: int, data: dict[str, Any]) -> bytes:
    return frame(data, event_id=seq, event=event)


async def changes_after(
    session: AsyncSession, tenant_id: uuid.UUID, after: int, limit: int = PAGE
) -> list[Change]:
    """The tenant's changes past ``after``, oldest first (at most ``limit``): what the change
    stream and the MCP Events extension read."""
    rows = await repo.changes_after(session, tenant_id, after, limit)
    return [
        Change(
            r["seq"], r["kind"], r["prompt"], r["label"], r["created_at"], r["skill"], r["detail"]
        )
        for r in rows
    ]


async def replay_from(
    session: AsyncSession, tenant_id: uuid.UUID, after: int, current: int
) -> tuple[int, bool]:
    """Where replay after ``after`` starts, and whether that skips what the log cannot replay
    (a position ahead of the log, ``current``: a restored database; or rows no longer held)."""
    if after > current:
        return current, True
    if after < current:
        oldest = await repo.oldest_change(session, tenant_id)
        if oldest is not None and oldest > after + 1:
            return oldest - 1, True
    return after, False


async def _read(db: Database, tenant_id: uuid.UUID, after: int) -> list[Change]:
    async with db.tenant_tx(tenant_id) as session:
        return await changes_after(session, tenant_id, after)


async def _start(db: Database, tenant_id: uuid.UUID, after: int, current: int) -> tuple[int, bool]:
    async with db.tenant_tx(tenant_id) as session:
        return await replay_from(session, tenant_id, after, current)


async def stream(
    db: Database,
    subscription: Subscription,
    *,
    after: int,
    current: int,
    label: str | None,
    prompt: str | None,
    wait: Callable[[Any], float],
) -> AsyncGenerator[bytes]:
    """The events of one change stream, until the server or the caller's access ends it (or the
    client goes away: ``subscription`` is closed then), told by ``subscription``, a subscription
    to every label of the tenant."""
    tenant_id = subscription.tenant_id
    with subscription:
        sent, gap = await _start(db, tenant_id, after, current)
        if gap:
            yield sse("gap", sent, {"after": after, "resume_after": sent})
        yield sse("ready", sent, {"seq": sent})
        while not subscription.closed:
            changes = await _read(db, tenant_id, sent)
            for change in changes:
                if change.concerns(label, prompt):
                    yield sse("change", change.seq, change.data())
                sent = change.seq
            if len(changes) == PAGE:
                continue  # more to replay
            if await subscription.next(wait(subscription)) is None and not subscription.closed:
                yield KEEP_ALIVE
            if subscription.poked:  # a library it follows changed: not a change of its own log
                subscription.poked = False
                yield sse("change", sent, _library_changed(sent))
        if subscription.reason is not None:
            yield sse("denied", sent, {"reason": subscription.reason})
        else:
            yield sse("closed", sent, {})
