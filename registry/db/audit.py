"""Append-only records written in the caller's transaction: the audit log and the change log."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from registry.db import repository as repo


@dataclass(frozen=True, slots=True)
class AuditRow:
    """An audit-log row as the journal's statements take it (``repo.journal_ctes``)."""

    tenant_id: uuid.UUID
    actor: str
    action: str
    target: str
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ChangeRow:
    """A change-log row as the journal's statements take it (``detail``: what a change request's
    events add to it)."""

    tenant_id: uuid.UUID
    kind: str
    prompt_id: uuid.UUID | None = None
    label: str | None = None
    detail: dict[str, Any] | None = None


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
    row = AuditRow(tenant_id, actor, action, target, before, after)
    session.info.setdefault(_PENDING_AUDIT, []).append(row)


_PENDING_AUDIT = "registry_pending_audit"
_PENDING = "registry_pending_changes"
_APPENDED = "registry_changes_appended"


def record_change(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    kind: str,
    prompt_id: uuid.UUID | None = None,
    label: str | None = None,
    detail: dict[str, Any] | None = None,
) -> None:
    """Queue a change-log row; the transaction appends the queue just before it commits.

    The row takes the tenant's next sequence number only as the transaction commits (a deferred
    trigger updates the tenant row, whose lock is held until the commit ends): a tenant's writers
    wait on one another for their commits' own work, never for a round trip of their clients.
    """
    row = ChangeRow(tenant_id, kind, prompt_id, label, detail)
    session.info.setdefault(_PENDING, []).append(row)


def with_pending(
    session: AsyncSession, audit: list[AuditRow], changes: list[ChangeRow]
) -> tuple[list[AuditRow], list[ChangeRow]]:
    """The queued audit and change rows followed by ``audit`` and ``changes``: what a statement
    appends with its own write (``repo.journal_ctes``), so that the log keeps the transaction's
    order and the statement before the commit has nothing left to do. Once the statement did write,
    ``appended`` is told; when it did not, the queue stays as it was."""
    return (
        [*session.info.get(_PENDING_AUDIT, ()), *audit],
        [*session.info.get(_PENDING, ()), *changes],
    )


def appended(
    session: AsyncSession, changes: list[ChangeRow], tenant_id: uuid.UUID | None = None
) -> None:
    """A statement of the caller's appended the rows ``with_pending`` gave it (``changes`` the
    change rows), and change rows of its own for ``tenant_id`` if given: the queue is empty now,
    and their tenants count as changed when the transaction commits, as the queued ones do."""
    session.info.pop(_PENDING_AUDIT, None)
    session.info.pop(_PENDING, None)
    changed = session.info.setdefault(_APPENDED, set())
    changed.update(change.tenant_id for change in changes)
    if tenant_id is not None:
        changed.add(tenant_id)


async def append_pending(session: AsyncSession) -> set[uuid.UUID]:
    """Append the queued audit and change rows in one statement (the change rows are numbered as
    the transaction commits); the tenants whose changes were appended, by it or by the caller's
    statements (``appended``)."""
    audit: list[AuditRow] = session.info.pop(_PENDING_AUDIT, None) or []
    changes: list[ChangeRow] = session.info.pop(_PENDING, None) or []
    changed: set[uuid.UUID] = session.info.pop(_APPENDED, None) or set()
    if audit or changes:
        await repo.append_journal(session, audit, changes)
    return changed | {change.tenant_id for change in changes}
