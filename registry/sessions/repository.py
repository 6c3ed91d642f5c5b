"""SQL for MCP sessions."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.models import McpSession


async def insert_session(session: AsyncSession, **values: Any) -> McpSession:
    result = await session.execute(insert(McpSession).values(**values).returning(McpSession))
    return result.scalar_one()


async def session_by_id(
    session: AsyncSession, tenant_id: uuid.UUID, session_id: str
) -> McpSession | None:
    result = await session.execute(
        select(McpSession).where(McpSession.tenant_id == tenant_id, McpSession.id == session_id)
    )
    return result.scalar_one_or_none()


async def update_session(
    session: AsyncSession, tenant_id: uuid.UUID, session_id: str, **values: Any
) -> None:
    await session.execute(
        update(McpSession)
        .where(McpSession.tenant_id == tenant_id, McpSession.id == session_id)
        .values(**values)
    )


async def purge(session: AsyncSession, *, idle_before: datetime, ended_before: datetime) -> int:
    """Delete sessions idle or ended long enough ago (an operator transaction: spans tenants)."""
    result = await session.execute(
        delete(McpSession).where(
            or_(
                McpSession.last_seen_at < idle_before,
                McpSession.ended_at < ended_before,
            )
        )
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def now() -> Any:
    return func.now()


async def evict(
    session: AsyncSession,
    tenant_id: uuid.UUID,
    *,
    keep: int,
    key_id: uuid.UUID | None = None,
    client_address: str | None = None,
    whole_tenant: bool = False,
) -> int:
    """Delete the least recently used sessions of one caller (a key, or an anonymous address) or of
    the whole tenant, so that at most ``keep`` remain; returns how many went."""
    query = select(McpSession.id).where(McpSession.tenant_id == tenant_id)
    if not whole_tenant:
        query = query.where(
            McpSession.key_id == key_id
            if key_id is not None
            else (McpSession.key_id.is_(None) & (McpSession.client_address == client_address))
        )
    # Rows another initialize is evicting are skipped, not waited for: no two evictions deadlock.
    surplus = (
        query.order_by(McpSession.last_seen_at.desc())
        .offset(keep)
        .with_for_update(skip_locked=True)
    )
    result = await session.execute(
        delete(McpSession).where(McpSession.tenant_id == tenant_id, McpSession.id.in_(surplus))
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]
