"""SQL for tenants and API keys. Only this module builds their queries."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, delete, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.errors import translate_db_error
from registry.db.models import ApiKey, AuditLog, Prompt, Tenant, TenantIssuer


async def insert_tenant(
    session: AsyncSession, *, slug: str, title: str | None, public_read: bool
) -> Tenant:
    result = await session.execute(
        insert(Tenant).values(slug=slug, title=title, public_read=public_read).returning(Tenant)
    )
    return result.scalar_one()


async def tenant_by_id(session: AsyncSession, tenant_id: uuid.UUID) -> Tenant | None:
    result = await session.execute(select(Tenant).where(Tenant.id == tenant_id))
    return result.scalar_one_or_none()


async def live_key_ids(session: AsyncSession, tenant_id: uuid.UUID) -> set[uuid.UUID]:
    """The keys of the tenant that still authenticate (neither revoked nor expired)."""
    result = await session.execute(
        select(ApiKey.id).where(
            ApiKey.tenant_id == tenant_id,
            ApiKey.revoked_at.is_(None),
            or_(ApiKey.expires_at.is_(None), ApiKey.expires_at > func.now()),
        )
    )
    return set(result.scalars().all())


# Every authenticated request runs these two: built once, not per call (building and keying an ORM
# select costs more worker CPU than its round trip; bench/profile's write workload showed it).
_TENANT_BY_SLUG = select(Tenant).where(Tenant.slug == bindparam("slug"))
_KEY_BY_HASH = select(ApiKey).where(
    ApiKey.tenant_id == bindparam("tenant_id"), ApiKey.secret_hash == bindparam("secret_hash")
)


async def tenant_by_slug(session: AsyncSession, slug: str) -> Tenant | None:
    result = await session.execute(_TENANT_BY_SLUG, {"slug": slug})
    return result.scalar_one_or_none()


async def list_tenants(
    session: AsyncSession, *, after: str | None = None, limit: int | None = None
) -> Sequence[Tenant]:
    query = select(Tenant).order_by(Tenant.slug).limit(limit)
    if after is not None:
        query = query.where(Tenant.slug > after)
    return (await session.execute(query)).scalars().all()


async def public_tenants(session: AsyncSession, limit: int) -> Sequence[Tenant]:
    """Tenants that serve anyone (public reads), by name, at most ``limit``."""
    query = select(Tenant).where(Tenant.public_read).order_by(Tenant.slug).limit(limit)
    return (await session.execute(query)).scalars().all()


async def insert_key(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    name: str,
    role: str,
    secret_hash: bytes,
    created_by: str,
    expires_at: datetime | None,
    owner: str | None = None,
) -> ApiKey:
    statement = (
        insert(ApiKey)
        .values(
            tenant_id=tenant_id,
            name=name,
            role=role,
            owner=owner,
            secret_hash=secret_hash,
            created_by=created_by,
            expires_at=expires_at,
        )
        .returning(ApiKey)
    )
    try:
        result = await session.execute(statement)
    except IntegrityError as error:
        raise translate_db_error(error, name=name) from error
    return result.scalar_one()


async def list_keys(session: AsyncSession, tenant_id: uuid.UUID) -> Sequence[ApiKey]:
    result = await session.execute(
        select(ApiKey).where(ApiKey.tenant_id == tenant_id).order_by(ApiKey.created_at, ApiKey.id)
    )
    return result.scalars().all()


async def key_by_id(session: AsyncSession, key_id: uuid.UUID) -> ApiKey | None:
    result = await session.execute(select(ApiKey).where(ApiKey.id == key_id))
    return result.scalar_one_or_none()


async def key_by_hash(
    session: AsyncSession, tenant_id: uuid.UUID, secret_hash: bytes
) -> ApiKey | None:
    result = await session.execute(
        _KEY_BY_HASH, {"tenant_id": tenant_id, "secret_hash": secret_hash}
    )
    return result.scalar_one_or_none()


async def revoke_key(
    session: AsyncSession, tenant_id: uuid.UUID, key_id: uuid.UUID
) -> ApiKey | None:
    result = await session.execute(
        update(ApiKey)
        .where(ApiKey.tenant_id == tenant_id, ApiKey.id == key_id, ApiKey.revoked_at.is_(None))
        .values(revoked_at=func.now())
        .returning(ApiKey)
    )
    return result.scalar_one_or_none()


async def set_key_owner(
    session: AsyncSession, tenant_id: uuid.UUID, key_id: uuid.UUID, owner: str
) -> ApiKey | None:
    result = await session.execute(
        update(ApiKey)
        .where(ApiKey.tenant_id == tenant_id, ApiKey.id == key_id)
        .values(owner=owner)
        .returning(ApiKey)
    )
    return result.scalar_one_or_none()


async def key_owners(
    session: AsyncSession, tenant_id: uuid.UUID, key_ids: list[uuid.UUID]
) -> dict[uuid.UUID, str | None]:
    """The owner of each of ``key_ids`` (revoked keys included) that exists."""
    if not key_ids:
        return {}
    result = await session.execute(
        select(ApiKey.id, ApiKey.owner).where(ApiKey.tenant_id == tenant_id, ApiKey.id.in_(key_ids))
    )
    return {row.id: row.owner for row in result}


async def key_names(
    session: AsyncSession, tenant_id: uuid.UUID, key_ids: list[uuid.UUID]
) -> dict[uuid.UUID, tuple[str | None, str | None]]:
    """The owner and name of each of ``key_ids`` (revoked keys included) that exists."""
    if not key_ids:
        return {}
    result = await session.execute(
        select(ApiKey.id, ApiKey.owner, ApiKey.name).where(
            ApiKey.tenant_id == tenant_id, ApiKey.id.in_(key_ids)
        )
    )
    return {row.id: (row.owner, row.name) for row in result}


def key_snapshot(key: ApiKey) -> dict[str, Any]:
    """What the audit log keeps of a key: never its hash."""
    return {
        "id": str(key.id),
        "name": key.name,
        "role": key.role,
        "owner": key.owner,
        "expires_at": key.expires_at.isoformat() if key.expires_at else None,
        "revoked_at": key.revoked_at.isoformat() if key.revoked_at else None,
    }


async def update_tenant(session: AsyncSession, tenant: Tenant, values: dict[str, Any]) -> Tenant:
    result = await session.execute(
        update(Tenant)
        .where(Tenant.id == tenant.id)
        .values(**values, updated_at=func.now())
        .returning(Tenant)
        .execution_options(populate_existing=True)
    )
    return result.scalar_one()


async def delete_tenant(session: AsyncSession, tenant: Tenant) -> None:
    await session.execute(delete(Tenant).where(Tenant.id == tenant.id))


async def count_prompts(session: AsyncSession, tenant_id: uuid.UUID) -> int:
    result = await session.execute(
        select(func.count()).select_from(Prompt).where(Prompt.tenant_id == tenant_id)
    )
    return int(result.scalar_one())


async def touch_key(session: AsyncSession, tenant_id: uuid.UUID, key_id: uuid.UUID) -> None:
    """Stamp the key's last use, unless another transaction holds its row (SKIP LOCKED: never wait)."""
    free = (
        select(ApiKey.id)
        .where(ApiKey.tenant_id == tenant_id, ApiKey.id == key_id)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    await session.execute(
        update(ApiKey)
        .where(ApiKey.tenant_id == tenant_id, ApiKey.id == free)
        .values(last_used_at=func.now())
    )


async def list_audit(
    session: AsyncSession,
    tenant_id: uuid.UUID,
    *,
    before: int | None,
    limit: int,
    action: str | None,
    target: str | None,
) -> Sequence[AuditLog]:
    query = (
        select(AuditLog)
        .where(AuditLog.tenant_id == tenant_id)
        .order_by(AuditLog.id.desc())
        .limit(limit)
    )
    if before is not None:
        query = query.where(AuditLog.id < before)
    if action:
        query = query.where(AuditLog.action == action)
    if target:
        query = query.where(AuditLog.target == target)
    return (await session.execute(query)).scalars().all()


async def sequences(session: AsyncSession, tenant_ids: list[uuid.UUID]) -> dict[uuid.UUID, int]:
    result = await session.execute(
        select(Tenant.id, Tenant.change_seq).where(Tenant.id.in_(tenant_ids))
    )
    return {row[0]: int(row[1]) for row in result.all()}


async def issuers_of(session: AsyncSession, tenant_id: uuid.UUID) -> Sequence[TenantIssuer]:
    result = await session.execute(
        select(TenantIssuer)
        .where(TenantIssuer.tenant_id == tenant_id)
        .order_by(TenantIssuer.issuer)
    )
    return result.scalars().all()


async def replace_issuers(
    session: AsyncSession, tenant_id: uuid.UUID, issuers: list[dict[str, Any]], actor: str
) -> None:
    await session.execute(delete(TenantIssuer).where(TenantIssuer.tenant_id == tenant_id))
    if issuers:
        await session.execute(
            insert(TenantIssuer),
            [{"tenant_id": tenant_id, "created_by": actor, **i} for i in issuers],
        )
