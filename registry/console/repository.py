"""The console's SQL: its sessions (tenant-owned, under row-level security)."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import delete, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.models import ConsoleSession


async def insert_session(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    digest: str,
    key_id: uuid.UUID | None,
    subject: str | None,
    role: str,
    csrf: str,
    expires_at: datetime,
) -> None:
    await session.execute(
        insert(ConsoleSession).values(
            tenant_id=tenant_id,
            id=digest,
            key_id=key_id,
            subject=subject,
            role=role,
            csrf=csrf,
            expires_at=expires_at,
        )
    )


async def session_by_digest(
    session: AsyncSession, tenant_id: uuid.UUID, digest: str
) -> ConsoleSession | None:
    result = await session.execute(
        select(ConsoleSession).where(
            ConsoleSession.tenant_id == tenant_id, ConsoleSession.id == digest
        )
    )
    return result.scalar_one_or_none()


async def delete_session(session: AsyncSession, tenant_id: uuid.UUID, digest: str) -> None:
    await session.execute(
        delete(ConsoleSession).where(
            ConsoleSession.tenant_id == tenant_id, ConsoleSession.id == digest
        )
    )


async def delete_expired(session: AsyncSession, tenant_id: uuid.UUID, now: datetime) -> None:
    await session.execute(
        delete(ConsoleSession).where(
            ConsoleSession.tenant_id == tenant_id, ConsoleSession.expires_at <= now
        )
    )
