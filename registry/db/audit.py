"""Append-only records written in the caller's transaction: the audit log and the change log."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from registry.db import repository as repo


async def record_audit(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    actor: str,
    action: str,
    target: str,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
) -> None:
    """Queue an audit row; the transaction appends it, with the change-log rows, in the one statement
    it runs just before it commits (rolled back with everything else when the transaction fails)."""
    session.info.setdefault(_PENDING_AUDIT, []).append(
        {
            "tenant_id": tenant_id,
            "actor": actor,
            "action": action,
            "target": target,
            "before": before,
            "after": after,
        }
    )


_PENDING_AUDIT = "registry_pending_audit"
_PENDING = "registry_pending_changes"


def record_change(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    kind: str,
    prompt_id: uuid.UUID | None = None,
    label: str | None = None,
    detail: dict[str, Any] | None = None,
) -> None:
    """Queue a change-log row (``detail``: what a change request's events add to it); the
    transaction appends the queue just before it commits.

    The row takes the tenant's next sequence number only as the transaction commits (a deferred
    trigger updates the tenant row, whose lock is held until the commit ends): a tenant's writers
    wait on one another for their commits' own work, never for a round trip of their clients.
    """
    session.info.setdefault(_PENDING, []).append(
        {
            "tenant_id": tenant_id,
            "kind": kind,
            "prompt_id": prompt_id,
            "label": label,
            "detail": detail,
        }
    )


async def append_pending(session: AsyncSession) -> set[uuid.UUID]:
    """Append the queued audit and change rows in one statement (the change rows are numbered as
    the transaction commits); the tenants whose changes were appended."""
    audit = session.info.pop(_PENDING_AUDIT, None) or []
    changes = session.info.pop(_PENDING, None) or []
    if not audit and not changes:
        return set()
    await repo.append_journal(session, audit, changes)
    return {change["tenant_id"] for change in changes}
