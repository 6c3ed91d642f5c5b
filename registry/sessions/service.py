"""Session life: created by initialize, found by id within its tenant, bound to its credential and
label, kept alive by use, ended by DELETE or by idling past the configured time."""

from __future__ import annotations

import json
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.models import McpSession
from registry.errors import InvalidInput
from registry.sessions import repository as repo


class SessionGone(Exception):
    """No live session with this id for this tenant, label and credential (HTTP 404)."""


def new_session_id() -> str:
    # 256 random bits in visible ASCII (URL-safe base64), as the transport requires.
    return secrets.token_urlsafe(32)


# What one session may keep of what its client declared (clientInfo and capabilities together).
MAX_STORED_BYTES = 4096


@dataclass(frozen=True)
class Bounds:
    """How many live sessions one caller (a key, or an anonymous client's address) and one tenant
    may hold; past them the least recently used go (their clients initialize again on 404)."""

    per_caller: int
    per_tenant: int


async def start(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    label: str,
    key_id: uuid.UUID | None,
    client_address: str | None,
    protocol_version: str,
    client_info: dict[str, Any] | None,
    client_capabilities: dict[str, Any] | None,
    bounds: Bounds,
) -> McpSession:
    declared = len(json.dumps([client_info, client_capabilities], separators=(",", ":")))
    if declared > MAX_STORED_BYTES:
        raise InvalidInput(
            f"initialize params: clientInfo and capabilities take {declared} bytes; "
            f"the most a session keeps is {MAX_STORED_BYTES}",
            field="clientInfo",
        )
    address = None if key_id is not None else client_address
    await repo.evict(
        session, tenant_id, keep=bounds.per_caller - 1, key_id=key_id, client_address=address
    )
    await repo.evict(session, tenant_id, keep=bounds.per_tenant - 1, whole_tenant=True)
    return await repo.insert_session(
        session,
        tenant_id=tenant_id,
        id=new_session_id(),
        label=label,
        key_id=key_id,
        client_address=address,
        protocol_version=protocol_version,
        client_info=client_info,
        client_capabilities=client_capabilities,
    )


async def resume(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    session_id: str,
    label: str,
    key_id: uuid.UUID | None,
    idle: timedelta,
) -> McpSession:
    """The live session, or SessionGone. Last use is recorded at most every idle/10."""
    found = (
        await repo.session_by_id(session, tenant_id, session_id) if len(session_id) <= 128 else None
    )
    now = datetime.now(UTC)
    if (
        found is None
        or found.ended_at is not None
        or found.label != label
        or found.key_id != key_id
        or now - found.last_seen_at > idle
    ):
        raise SessionGone
    if now - found.last_seen_at > idle / 10:
        await repo.update_session(session, tenant_id, session_id, last_seen_at=repo.now())
    return found


async def end(session: AsyncSession, mcp_session: McpSession) -> None:
    await repo.update_session(session, mcp_session.tenant_id, mcp_session.id, ended_at=repo.now())


async def set_log_level(session: AsyncSession, mcp_session: McpSession, level: str) -> None:
    await repo.update_session(session, mcp_session.tenant_id, mcp_session.id, log_level=level)


async def purge_expired(session: AsyncSession, *, idle: timedelta) -> int:
    now = datetime.now(UTC)
    return await repo.purge(session, idle_before=now - idle, ended_before=now - timedelta(hours=1))
