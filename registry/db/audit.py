"""Append-only records written in the caller's transaction: the audit log and the change log."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.models import AuditLog, ChangeLog


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
    await session.execute(
        insert(AuditLog).values(
            tenant_id=tenant_id,
            actor=actor,
            action=action,
            target=target,
            before=before,
            after=after,
        )
    )


async def record_change(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    kind: str,
    prompt_id: uuid.UUID | None = None,
    label: str | None = None,
) -> int:
    """Append to the tenant's change log; a trigger assigns the sequence and NOTIFYs on commit."""
    result = await session.execute(
        insert(ChangeLog)
        .values(tenant_id=tenant_id, kind=kind, prompt_id=prompt_id, label=label, seq=0)
        .returning(ChangeLog.seq)
    )
    return int(result.scalar_one())
