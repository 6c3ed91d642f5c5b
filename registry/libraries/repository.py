"""The SQL of libraries. Each side writes only its own consent (row-level security); each reads of
the other's only what was addressed to it (the SELECT policies of schema 0033)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, TypeAlias

import asyncpg
from sqlalchemy import delete, func, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.connect import stored_json
from registry.db.library_models import LibraryOffer, LibrarySubscription
from registry.db.models import Tenant
from registry.db.repository import driver


async def tenant_named(session: AsyncSession, slug: str) -> Tenant | None:
    result = await session.execute(select(Tenant).where(Tenant.slug == slug))
    return result.scalar_one_or_none()


async def slugs(session: AsyncSession, ids: set[uuid.UUID]) -> dict[uuid.UUID, str]:
    if not ids:
        return {}
    result = await session.execute(select(Tenant.id, Tenant.slug).where(Tenant.id.in_(ids)))
    return {row.id: row.slug for row in result}


async def put_offer(
    session: AsyncSession, library_id: uuid.UUID, subscriber_id: uuid.UUID | None, label: str
) -> LibraryOffer:
    """The library's offer to ``subscriber_id`` (None: every tenant), made or its label changed."""
    target = text("coalesce(subscriber_id, '00000000-0000-0000-0000-000000000000'::uuid)")
    statement = (
        pg_insert(LibraryOffer)
        .values(tenant_id=library_id, subscriber_id=subscriber_id, label=label)
        .on_conflict_do_update(
            index_elements=[LibraryOffer.tenant_id, target],
            set_={"label": label, "created_at": func.now()},
        )
        .returning(LibraryOffer)
    )
    return (await session.execute(statement)).scalar_one()


async def offers_of(session: AsyncSession, library_id: uuid.UUID) -> Sequence[LibraryOffer]:
    result = await session.execute(
        select(LibraryOffer)
        .where(LibraryOffer.tenant_id == library_id)
        .order_by(LibraryOffer.subscriber_id.nulls_first())
    )
    return result.scalars().all()


async def delete_offer(
    session: AsyncSession, library_id: uuid.UUID, subscriber_id: uuid.UUID | None
) -> bool:
    match = (
        LibraryOffer.subscriber_id.is_(None)
        if subscriber_id is None
        else LibraryOffer.subscriber_id == subscriber_id
    )
    result = await session.execute(
        delete(LibraryOffer).where(LibraryOffer.tenant_id == library_id, match)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


async def offer_to(
    session: AsyncSession, library_id: uuid.UUID, subscriber_id: uuid.UUID
) -> LibraryOffer | None:
    """The library's offer that reaches ``subscriber_id``: made to it by name, else to every tenant
    (visible to the subscriber through the offered_to_v1 policy)."""
    result = await session.execute(
        select(LibraryOffer)
        .where(
            LibraryOffer.tenant_id == library_id,
            (LibraryOffer.subscriber_id == subscriber_id) | LibraryOffer.subscriber_id.is_(None),
        )
        .order_by(LibraryOffer.subscriber_id.nulls_last())
        .limit(1)
    )
    return result.scalar_one_or_none()


async def offers_to(session: AsyncSession, subscriber_id: uuid.UUID) -> Sequence[LibraryOffer]:
    """Every offer made to ``subscriber_id``, by name or to every tenant (other tenants' offers it
    may read through offered_to_v1; its own offers, as a library, are left out)."""
    result = await session.execute(
        select(LibraryOffer).where(
            LibraryOffer.tenant_id != subscriber_id,
            (LibraryOffer.subscriber_id == subscriber_id) | LibraryOffer.subscriber_id.is_(None),
        )
    )
    return result.scalars().all()


async def subscribers_of(
    session: AsyncSession, library_id: uuid.UUID
) -> Sequence[LibrarySubscription]:
    """The subscriptions made to the library (visible to it through the subscribed_to_v1 policy)."""
    result = await session.execute(
        select(LibrarySubscription).where(LibrarySubscription.library_id == library_id)
    )
    return result.scalars().all()


async def published(
    session: AsyncSession, library_id: uuid.UUID, prompt_id: uuid.UUID, label: str, version: int
) -> bool:
    """Whether ``label`` serves or has served ``version`` of the prompt (what a pin may reach)."""
    found = await session.scalar(
        text("SELECT registry_library_published_v1(:library, :prompt, :label, :version)"),
        {"library": library_id, "prompt": prompt_id, "label": label, "version": version},
    )
    return bool(found)


async def subscription(
    session: AsyncSession, tenant_id: uuid.UUID, library_id: uuid.UUID, *, lock: bool = False
) -> LibrarySubscription | None:
    query = select(LibrarySubscription).where(
        LibrarySubscription.tenant_id == tenant_id, LibrarySubscription.library_id == library_id
    )
    result = await session.execute(query.with_for_update() if lock else query)
    return result.scalar_one_or_none()


async def subscriptions_of(
    session: AsyncSession, tenant_id: uuid.UUID
) -> Sequence[LibrarySubscription]:
    result = await session.execute(
        select(LibrarySubscription).where(LibrarySubscription.tenant_id == tenant_id)
    )
    return result.scalars().all()


async def insert_subscription(session: AsyncSession, **values: Any) -> LibrarySubscription:
    statement = pg_insert(LibrarySubscription).values(**values).returning(LibrarySubscription)
    return (await session.execute(statement)).scalar_one()


async def update_subscription(
    session: AsyncSession, row: LibrarySubscription, values: dict[str, Any]
) -> LibrarySubscription:
    await session.execute(
        update(LibrarySubscription)
        .where(
            LibrarySubscription.tenant_id == row.tenant_id,
            LibrarySubscription.library_id == row.library_id,
        )
        .values(updated_at=func.now(), **values)
    )
    await session.refresh(row)
    return row


async def delete_subscription(session: AsyncSession, row: LibrarySubscription) -> None:
    await session.execute(
        delete(LibrarySubscription).where(
            LibrarySubscription.tenant_id == row.tenant_id,
            LibrarySubscription.library_id == row.library_id,
        )
    )


async def granted(session: AsyncSession, library_id: uuid.UUID) -> str | None:
    """The label of the library the transaction's tenant may read (both consents), or None."""
    label = await session.scalar(
        text("SELECT registry_library_grant_v1(:library)"), {"library": library_id}
    )
    return None if label is None else str(label)


# --- serving: one statement each, on the hot path's plain pool (schema 0035) ----------------------

READS = "SELECT library_id, library, label, follow, pins, prefix FROM registry_library_reads_v1($1)"
ENTRIES = "SELECT name, version, entry FROM registry_library_entries_v1($1, $2, $3, $4)"
COUNT = "SELECT registry_library_count_v1($1, $2)"
SERVED_VERSION = "SELECT registry_library_served_version_v1($1, $2, $3)"
SUBSCRIBERS = "SELECT tenant_id, follow FROM registry_library_subscribers_v1($1)"
BLOBS = "SELECT sha256, mime_type, data FROM registry_library_blobs_v1($1, $2, $3)"
SKILLS = (
    "SELECT name, version, description, frontmatter, files "
    "FROM registry_library_skills_v1($1, $2, $3, $4, $5)"
)
EVERY_SUBSCRIPTION = "SELECT tenant_id FROM registry_library_subscriptions_v1($1)"
OFFERING = "SELECT id FROM tenants WHERE library_offers > 0"
OFFERS = "SELECT library_offers > 0 FROM tenants WHERE id = $1"

Reads: TypeAlias = asyncpg.Pool | AsyncSession


async def reads_of(reads: Reads, tenant_id: uuid.UUID) -> list[Any]:
    """The libraries ``tenant_id`` reads now: rows of (library_id, library, label, follow, pins,
    prefix), by the library's name."""
    return list(await (await driver(reads)).fetch(READS, tenant_id))


async def entries(
    reads: Reads, tenant_id: uuid.UUID, library_id: uuid.UUID, after: str | None, limit: int
) -> list[tuple[str, int, str | None]]:
    rows = await (await driver(reads)).fetch(ENTRIES, tenant_id, library_id, after, limit)
    return [(row[0], row[1], row[2]) for row in rows]


async def count(reads: Reads, tenant_id: uuid.UUID, library_id: uuid.UUID) -> int:
    return int(await (await driver(reads)).fetchval(COUNT, tenant_id, library_id))


async def served_version(
    reads: Reads, tenant_id: uuid.UUID, library_id: uuid.UUID, name: str
) -> dict[str, Any]:
    raw = await (await driver(reads)).fetchval(SERVED_VERSION, tenant_id, library_id, name)
    found: dict[str, Any] = stored_json(raw) if isinstance(raw, str) else raw
    return found


async def skills(
    reads: Reads,
    tenant_id: uuid.UUID,
    library_id: uuid.UUID,
    *,
    after: str | None,
    name: str | None,
    limit: int,
) -> list[Any]:
    """Rows of (name, version, description, frontmatter, files) the library serves the tenant."""
    found = await (await driver(reads)).fetch(SKILLS, tenant_id, library_id, after, name, limit)
    return [(r[0], r[1], r[2], _json(r[3]), _json(r[4]) or []) for r in found]


def _json(raw: Any) -> Any:
    return stored_json(raw) if isinstance(raw, str) else raw


async def blobs(
    reads: Reads, tenant_id: uuid.UUID, library_id: uuid.UUID, shas: list[bytes]
) -> dict[bytes, tuple[str, bytes]]:
    """sha256 -> (media type, bytes) of the library's blobs asked for, through its grant."""
    rows = await (await driver(reads)).fetch(BLOBS, tenant_id, library_id, shas)
    return {bytes(row[0]): (row[1], bytes(row[2])) for row in rows}


async def subscribers(reads: Reads, library_id: uuid.UUID) -> list[tuple[uuid.UUID, bool]]:
    """The tenants that read ``library_id`` now, and whether each follows its label."""
    rows = await (await driver(reads)).fetch(SUBSCRIBERS, library_id)
    return [(row[0], row[1]) for row in rows]


async def every_subscription(reads: Reads, library_id: uuid.UUID) -> list[uuid.UUID]:
    """Every tenant that subscribed to ``library_id``, read or not (an offer withdrawn)."""
    return [row[0] for row in await (await driver(reads)).fetch(EVERY_SUBSCRIPTION, library_id)]


async def offering(reads: Reads) -> set[uuid.UUID]:
    """The tenants that offer themselves as a library to any tenant."""
    return {row[0] for row in await (await driver(reads)).fetch(OFFERING)}


async def offers(reads: Reads, tenant_id: uuid.UUID) -> bool:
    return bool(await (await driver(reads)).fetchval(OFFERS, tenant_id))
