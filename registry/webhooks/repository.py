"""SQL for webhook endpoints, deliveries and attempts. Only this module builds their queries.

Endpoint management runs in the tenant's transaction (row-level security). The dispatcher's claim
spans tenants, so it runs as the owner role (``Database.operator_tx``), never for a request."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, delete, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.webhook_models import WebhookAttempt, WebhookDelivery, WebhookEndpoint


async def insert_endpoint(session: AsyncSession, **values: Any) -> WebhookEndpoint:
    result = await session.execute(
        insert(WebhookEndpoint).values(**values).returning(WebhookEndpoint)
    )
    return result.scalar_one()


async def endpoints(session: AsyncSession, tenant_id: uuid.UUID) -> Sequence[WebhookEndpoint]:
    result = await session.execute(
        select(WebhookEndpoint)
        .where(WebhookEndpoint.tenant_id == tenant_id)
        .order_by(WebhookEndpoint.created_at, WebhookEndpoint.id)
    )
    return result.scalars().all()


async def endpoint(
    session: AsyncSession, tenant_id: uuid.UUID, endpoint_id: uuid.UUID, *, lock: bool = False
) -> WebhookEndpoint | None:
    query = select(WebhookEndpoint).where(
        WebhookEndpoint.tenant_id == tenant_id, WebhookEndpoint.id == endpoint_id
    )
    if lock:
        query = query.with_for_update()
    return (await session.execute(query)).scalar_one_or_none()


async def update_endpoint(
    session: AsyncSession, tenant_id: uuid.UUID, endpoint_id: uuid.UUID, **values: Any
) -> WebhookEndpoint:
    result = await session.execute(
        update(WebhookEndpoint)
        .where(WebhookEndpoint.tenant_id == tenant_id, WebhookEndpoint.id == endpoint_id)
        .values(**values)
        .returning(WebhookEndpoint)
        .execution_options(synchronize_session=False, populate_existing=True)
    )
    return result.scalar_one()


async def delete_endpoint(
    session: AsyncSession, tenant_id: uuid.UUID, endpoint_id: uuid.UUID
) -> None:
    await session.execute(
        delete(WebhookEndpoint).where(
            WebhookEndpoint.tenant_id == tenant_id, WebhookEndpoint.id == endpoint_id
        )
    )


async def deliveries(
    session: AsyncSession,
    tenant_id: uuid.UUID,
    endpoint_id: uuid.UUID,
    *,
    status: str | None,
    before: int | None,
    limit: int,
) -> Sequence[WebhookDelivery]:
    query = select(WebhookDelivery).where(
        WebhookDelivery.tenant_id == tenant_id, WebhookDelivery.endpoint_id == endpoint_id
    )
    if status is not None:
        query = query.where(WebhookDelivery.status == status)
    if before is not None:
        query = query.where(WebhookDelivery.id < before)
    result = await session.execute(query.order_by(WebhookDelivery.id.desc()).limit(limit))
    return result.scalars().all()


async def delivery(
    session: AsyncSession, tenant_id: uuid.UUID, endpoint_id: uuid.UUID, delivery_id: int
) -> WebhookDelivery | None:
    result = await session.execute(
        select(WebhookDelivery).where(
            WebhookDelivery.tenant_id == tenant_id,
            WebhookDelivery.endpoint_id == endpoint_id,
            WebhookDelivery.id == delivery_id,
        )
    )
    return result.scalar_one_or_none()


async def attempts_of(
    session: AsyncSession, tenant_id: uuid.UUID, delivery_ids: Sequence[int]
) -> dict[int, list[WebhookAttempt]]:
    found: dict[int, list[WebhookAttempt]] = {d: [] for d in delivery_ids}
    if not delivery_ids:
        return found
    result = await session.execute(
        select(WebhookAttempt)
        .where(WebhookAttempt.tenant_id == tenant_id, WebhookAttempt.delivery_id.in_(delivery_ids))
        .order_by(WebhookAttempt.delivery_id, WebhookAttempt.attempt)
    )
    for attempt in result.scalars().all():
        found[attempt.delivery_id].append(attempt)
    return found


async def insert_delivery(session: AsyncSession, **values: Any) -> WebhookDelivery:
    result = await session.execute(
        insert(WebhookDelivery).values(**values).returning(WebhookDelivery)
    )
    return result.scalar_one()


# --- the dispatcher (owner role, across tenants) ---------------------------------------------

_CLAIM = text(
    """
    WITH candidates AS (  -- due, not leased, and the oldest pending delivery of its endpoint
        SELECT d.tenant_id, d.id, d.next_attempt_at,
               row_number() OVER (PARTITION BY d.tenant_id ORDER BY d.next_attempt_at, d.id)
                   AS place
          FROM webhook_deliveries d
          JOIN webhook_endpoints e ON e.tenant_id = d.tenant_id AND e.id = d.endpoint_id
         WHERE d.status = 'pending'
           AND d.next_attempt_at <= now()
           AND (d.leased_until IS NULL OR d.leased_until <= now())
           AND e.disabled_at IS NULL
           AND NOT EXISTS (
               SELECT 1 FROM webhook_deliveries o
                WHERE o.tenant_id = d.tenant_id AND o.endpoint_id = d.endpoint_id
                  AND o.status = 'pending' AND o.id < d.id)
    ), sending AS (  -- what each tenant has in flight now, in every worker
        SELECT tenant_id, count(*) AS n
          FROM webhook_deliveries
         WHERE status = 'pending' AND leased_until > now()
         GROUP BY tenant_id
    ), picked AS (
        SELECT c.tenant_id, c.id
          FROM candidates c LEFT JOIN sending s ON s.tenant_id = c.tenant_id
         WHERE c.place + coalesce(s.n, 0) <= :per_tenant
         ORDER BY c.next_attempt_at, c.id
         LIMIT :limit
    )
    UPDATE webhook_deliveries d
       SET leased_until = now() + make_interval(secs => :lease_seconds)
      FROM picked p, webhook_endpoints e
     WHERE d.tenant_id = p.tenant_id AND d.id = p.id
       AND e.tenant_id = d.tenant_id AND e.id = d.endpoint_id
       -- checked again on the row as it is now: a worker that leased it meanwhile wins
       AND d.status = 'pending' AND (d.leased_until IS NULL OR d.leased_until <= now())
    RETURNING d.tenant_id, d.id, d.message_id, d.payload, d.attempts, d.created_at,
              d.leased_until, e.id AS endpoint_id, e.url, e.secret, e.previous_secret,
              e.previous_until, e.failing_since
    """
)


async def claim_due(
    session: AsyncSession, limit: int, *, per_tenant: int, lease_seconds: float
) -> list[dict[str, Any]]:
    """Due deliveries, each the oldest pending one of its endpoint, leased to the caller for
    ``lease_seconds`` (another worker takes none of them before the lease runs out); at most
    ``per_tenant`` of one tenant in flight across all workers, so one tenant's slow receivers
    hold up that tenant only."""
    result = await session.execute(
        _CLAIM, {"limit": limit, "per_tenant": per_tenant, "lease_seconds": lease_seconds}
    )
    return [dict(row) for row in result.mappings().all()]


async def record_attempt(
    session: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    delivery_id: int,
    attempt: int,
    status_code: int | None,
    error: str | None,
    latency_ms: int,
    response_body: str | None,
) -> None:
    await session.execute(
        insert(WebhookAttempt).values(
            tenant_id=tenant_id,
            delivery_id=delivery_id,
            attempt=attempt,
            status_code=status_code,
            error=error,
            latency_ms=latency_ms,
            response_body=response_body,
        )
    )


async def settle_delivery(
    session: AsyncSession,
    tenant_id: uuid.UUID,
    delivery_id: int,
    *,
    lease: datetime,
    attempts: int,
    status: str,
    next_attempt_at: datetime | None,
    delivered_at: datetime | None,
) -> bool:
    """The delivery's outcome, if the caller's lease is still the delivery's (else another worker
    took it over once the lease ran out, and this outcome is not recorded); whether it was."""
    values: dict[str, Any] = {
        "attempts": attempts,
        "status": status,
        "delivered_at": delivered_at,
        "leased_until": None,
    }
    if next_attempt_at is not None:
        values["next_attempt_at"] = next_attempt_at
    result = await session.execute(
        update(WebhookDelivery)
        .where(
            and_(
                WebhookDelivery.tenant_id == tenant_id,
                WebhookDelivery.id == delivery_id,
                WebhookDelivery.leased_until == lease,
            )
        )
        .values(**values)
        .returning(WebhookDelivery.id)
    )
    return result.scalar_one_or_none() is not None


async def mark_endpoint(
    session: AsyncSession, tenant_id: uuid.UUID, endpoint_id: uuid.UUID, **values: Any
) -> None:
    await session.execute(
        update(WebhookEndpoint)
        .where(WebhookEndpoint.tenant_id == tenant_id, WebhookEndpoint.id == endpoint_id)
        .values(**values)
    )
