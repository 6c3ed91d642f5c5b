"""SQL for the Events extension's webhook subscriptions (schema 0036). Only this module builds their
queries.

Subscribing, refreshing and unsubscribing run in the tenant's transaction (row-level security). The
dispatcher's claim and sweep span tenants, so they run as the owner role (``Database.operator_tx``),
never for a request; what it settles names the tenant and the lease it holds."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import delete, func, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.webhook_models import EventSubscription


async def find(
    session: AsyncSession, tenant_id: uuid.UUID, subscription_id: str
) -> EventSubscription | None:
    """The subscription, locked for the caller's transaction (a refresh and a delivery's settle
    take turns)."""
    result = await session.execute(
        select(EventSubscription)
        .where(EventSubscription.tenant_id == tenant_id, EventSubscription.id == subscription_id)
        .with_for_update()
    )
    return result.scalar_one_or_none()


async def verified(session: AsyncSession, tenant_id: uuid.UUID, principal: str, url: str) -> bool:
    """Whether this principal already has a subscription to this URL: its endpoint proved its
    intent then, and the proof covers every subscription of the principal to the URL."""
    result = await session.execute(
        select(EventSubscription.id)
        .where(
            EventSubscription.tenant_id == tenant_id,
            EventSubscription.principal == principal,
            EventSubscription.url == url,
        )
        .limit(1)
    )
    return result.scalar_one_or_none() is not None


async def counts(session: AsyncSession, tenant_id: uuid.UUID, principal: str) -> tuple[int, int]:
    """How many subscriptions the principal holds, and the tenant."""
    result = await session.execute(
        select(
            func.count().filter(EventSubscription.principal == principal),
            func.count(),
        ).where(EventSubscription.tenant_id == tenant_id)
    )
    mine, every = result.one()
    return int(mine), int(every)


async def insert_subscription(session: AsyncSession, **values: Any) -> EventSubscription | None:
    """The new subscription, or None when one of the same key exists (written meanwhile)."""
    result = await session.execute(
        pg_insert(EventSubscription)
        .values(**values)
        .on_conflict_do_nothing(index_elements=["tenant_id", "id"])
        .returning(EventSubscription)
    )
    return result.scalar_one_or_none()


async def update_subscription(
    session: AsyncSession, tenant_id: uuid.UUID, subscription_id: str, **values: Any
) -> EventSubscription:
    result = await session.execute(
        update(EventSubscription)
        .where(EventSubscription.tenant_id == tenant_id, EventSubscription.id == subscription_id)
        .values(updated_at=func.now(), **values)
        .returning(EventSubscription)
        .execution_options(synchronize_session=False, populate_existing=True)
    )
    return result.scalar_one()


async def delete_subscription(
    session: AsyncSession, tenant_id: uuid.UUID, subscription_id: str
) -> bool:
    result = await session.execute(
        delete(EventSubscription)
        .where(EventSubscription.tenant_id == tenant_id, EventSubscription.id == subscription_id)
        .returning(EventSubscription.id)
    )
    return result.scalar_one_or_none() is not None


# Due: active, not expired, not leased, its next try due, and its tenant's log past its position;
# at most ``per_tenant`` of one tenant leased at once across every worker.
_CLAIM = text(
    """
    WITH candidates AS (
        SELECT s.tenant_id, s.id, s.next_attempt_at,
               row_number() OVER (PARTITION BY s.tenant_id ORDER BY s.next_attempt_at, s.id)
                   AS place
          FROM event_subscriptions s
          JOIN change_sequences c ON c.tenant_id = s.tenant_id
         WHERE s.active AND s.expires_at > now() AND s.next_attempt_at <= now()
           AND (s.leased_until IS NULL OR s.leased_until <= now())
           AND c.seq > s.position
    ), sending AS (
        SELECT tenant_id, count(*) AS n
          FROM event_subscriptions
         WHERE leased_until > now()
         GROUP BY tenant_id
    ), picked AS (
        SELECT c.tenant_id, c.id
          FROM candidates c LEFT JOIN sending s ON s.tenant_id = c.tenant_id
         WHERE c.place + coalesce(s.n, 0) <= :per_tenant
         ORDER BY c.next_attempt_at, c.id
         LIMIT :limit
    )
    UPDATE event_subscriptions s
       SET lease = gen_random_uuid(), leased_until = now() + make_interval(secs => :lease_seconds)
      FROM picked p
     WHERE s.tenant_id = p.tenant_id AND s.id = p.id
       -- checked again on the row as it is now: a worker that leased it meanwhile wins
       AND (s.leased_until IS NULL OR s.leased_until <= now())
    RETURNING s.tenant_id, s.id, s.principal, s.url, s.name, s.arguments, s.secret,
              s.previous_secret, s.previous_until, s.position, s.attempts, s.lease,
              s.failed_since
    """
)


async def claim_due(
    session: AsyncSession, limit: int, *, per_tenant: int, lease_seconds: float
) -> list[dict[str, Any]]:
    """Subscriptions with something to deliver, each leased to the caller for ``lease_seconds``."""
    result = await session.execute(
        _CLAIM, {"limit": limit, "per_tenant": per_tenant, "lease_seconds": lease_seconds}
    )
    return [dict(row) for row in result.mappings().all()]


async def settle(
    session: AsyncSession,
    tenant_id: uuid.UUID,
    subscription_id: str,
    lease: uuid.UUID,
    *,
    extend_seconds: float | None,
    **values: Any,
) -> bool:
    """Record what a delivery did (``values``) if the caller's lease is still the subscription's,
    extending the lease by ``extend_seconds`` (None: released); whether it was recorded (else
    another worker took the subscription over once the lease ran out)."""
    if extend_seconds is None:
        values |= {"lease": None, "leased_until": None}
    else:
        values["leased_until"] = func.now() + func.make_interval(0, 0, 0, 0, 0, 0, extend_seconds)
    result = await session.execute(
        update(EventSubscription)
        .where(
            EventSubscription.tenant_id == tenant_id,
            EventSubscription.id == subscription_id,
            EventSubscription.lease == lease,
        )
        .values(**values)
        .returning(EventSubscription.id)
    )
    return result.scalar_one_or_none() is not None


async def sweep_expired(session: AsyncSession) -> int:
    """Forget the subscriptions whose grant ran out (their clients stopped refreshing)."""
    result = await session.execute(
        delete(EventSubscription)
        .where(EventSubscription.expires_at <= func.now())
        .returning(EventSubscription.id)
    )
    return len(result.all())
