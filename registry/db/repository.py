"""SQL of the database layer itself: entering a transaction's role and tenant, health and schema
checks, server-wide secrets, and the append-only audit and change logs. Only this module builds
them (the domains have their own repositories)."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
from sqlalchemy import func, insert, select, text
from sqlalchemy.exc import ProgrammingError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from registry.db.models import AuditLog, ChangeLog, RegistrySecret

# One round trip: drop to the application role and set the tenant, both for this transaction only.
_ENTER_TENANT = text(
    "SELECT set_config('role', :role, true), set_config('registry.tenant_id', :tenant, true)"
)
_ENTER_ROLE = text("SELECT set_config('role', :role, true)")
_SET_TENANT = text("SELECT set_config('registry.tenant_id', :tenant, true)")


async def enter_role(session: AsyncSession, role: str, tenant_id: uuid.UUID | None = None) -> None:
    """This transaction runs as ``role`` (and sees ``tenant_id``'s rows only, when given)."""
    if tenant_id is None:
        await session.execute(_ENTER_ROLE, {"role": role})
    else:
        await session.execute(_ENTER_TENANT, {"role": role, "tenant": str(tenant_id)})


async def set_tenant(session: AsyncSession, tenant_id: uuid.UUID) -> None:
    await session.execute(_SET_TENANT, {"tenant": str(tenant_id)})


async def ping(conn: AsyncConnection) -> None:
    await conn.execute(text("SELECT 1"))


async def probe(connection: asyncpg.Connection) -> None:
    """A round trip on a plain driver connection (the LISTEN connection's liveness check)."""
    await connection.fetchval("SELECT 1")


async def migration_revision(conn: AsyncConnection) -> str | None:
    """The Alembic revision the schema is at; None for a database never migrated."""
    try:
        result = await conn.execute(text("SELECT version_num FROM alembic_version"))
    except ProgrammingError:  # no alembic_version table
        return None
    return result.scalar_one_or_none()


async def read_secret(session: AsyncSession, name: str) -> bytes:
    result = await session.execute(select(RegistrySecret.secret).where(RegistrySecret.name == name))
    return bytes(result.scalar_one())


async def insert_audit(session: AsyncSession, **values: Any) -> None:
    await session.execute(insert(AuditLog).values(**values))


async def append_changes(session: AsyncSession, rows: list[dict[str, Any]]) -> list[int]:
    """Append change-log rows (a trigger numbers them per tenant and NOTIFYs on commit), stamped
    with the moment of appending; returns their sequence numbers in the order given."""
    stamped = [{**row, "created_at": func.clock_timestamp()} for row in rows]
    result = await session.execute(insert(ChangeLog).values(stamped).returning(ChangeLog.seq))
    return sorted(int(seq) for seq in result.scalars())
