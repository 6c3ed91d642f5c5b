"""Webhook endpoints as a tenant admin manages them: register (the secret shown once), list, change,
rotate the secret (the previous one keeps signing through an overlap), remove; the delivery log of an
endpoint and redelivery of one message. Callers own the tenant transaction; every change is audited
(never with a secret)."""

from __future__ import annotations

import base64
import secrets
import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from registry import outbound
from registry.db.audit import record_audit
from registry.db.models import Tenant
from registry.db.webhook_models import WebhookEndpoint
from registry.errors import InvalidInput, NotFound
from registry.principal import Principal
from registry.webhooks import repository as repo
from registry.webhooks.schemas import (
    AttemptOut,
    DeliveryOut,
    EndpointCreated,
    EndpointIn,
    EndpointOut,
    EndpointPatch,
    SecretRotated,
)

ROTATION_OVERLAP = timedelta(hours=24)  # the previous secret signs too, this long
MAX_ENDPOINTS = 20  # per tenant


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


ALLOWED_BY = (
    "REGISTRY_WEBHOOK_ALLOW_PRIVATE"  # the setting that lets webhooks reach private addresses
)


def _check_url(url: str, allow_private: bool) -> None:
    try:
        _, host, _ = outbound.check_url(url)
        outbound.check_literal(host, allow_private=allow_private)
    except outbound.PrivateAddress as refused:
        raise InvalidInput(
            f"url: {refused}{outbound.allowed_hint(ALLOWED_BY)}", field="url"
        ) from None
    except outbound.Refused as refused:
        raise InvalidInput(f"url: {refused}", field="url") from None


async def create(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    body: EndpointIn,
    *,
    allow_private: bool,
) -> EndpointCreated:
    _check_url(body.url, allow_private)
    if len(await repo.endpoints(session, tenant.id)) >= MAX_ENDPOINTS:
        raise InvalidInput(f"a tenant has at most {MAX_ENDPOINTS} webhook endpoints", field="url")
    secret = new_secret()
    row = await repo.insert_endpoint(
        session,
        tenant_id=tenant.id,
        url=body.url,
        events=sorted(set(body.events)),
        description=body.description,
        secret=secret,
        created_by=caller.actor,
    )
    await record_audit(
        session,
        tenant_id=tenant.id,
        actor=caller.actor,
        action="webhook.create",
        target=f"webhook:{row.id}",
        after={"url": row.url, "events": row.events},
    )
    return EndpointCreated(**EndpointOut.model_validate(row).model_dump(), secret=secret)


async def list_endpoints(session: AsyncSession, tenant: Tenant) -> list[EndpointOut]:
    return [EndpointOut.model_validate(r) for r in await repo.endpoints(session, tenant.id)]


async def _find(
    session: AsyncSession, tenant: Tenant, endpoint_id: uuid.UUID, *, lock: bool = False
) -> WebhookEndpoint:
    row = await repo.endpoint(session, tenant.id, endpoint_id, lock=lock)
    if row is None:
        raise NotFound(f"no webhook endpoint {endpoint_id}", field="webhook")
    return row


async def change(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    endpoint_id: uuid.UUID,
    body: EndpointPatch,
) -> EndpointOut:
    row = await _find(session, tenant, endpoint_id, lock=True)
    values: dict[str, object] = {}
    if body.events is not None:
        values["events"] = sorted(set(body.events))
    if body.description is not None:
        values["description"] = body.description
    if body.enabled is True and row.disabled_at is not None:
        values.update(disabled_at=None, disabled_reason=None, failing_since=None)
    if body.enabled is False and row.disabled_at is None:
        values.update(disabled_at=datetime.now(UTC), disabled_reason=f"disabled by {caller.actor}")
    if not values:
        return EndpointOut.model_validate(row)
    updated = await repo.update_endpoint(session, tenant.id, endpoint_id, **values)
    await record_audit(
        session,
        tenant_id=tenant.id,
        actor=caller.actor,
        action="webhook.update",
        target=f"webhook:{endpoint_id}",
        after={k: str(v) for k, v in values.items()},
    )
    return EndpointOut.model_validate(updated)


async def rotate(
    session: AsyncSession, tenant: Tenant, caller: Principal, endpoint_id: uuid.UUID
) -> SecretRotated:
    row = await _find(session, tenant, endpoint_id, lock=True)
    secret, until = new_secret(), datetime.now(UTC) + ROTATION_OVERLAP
    await repo.update_endpoint(
        session,
        tenant.id,
        endpoint_id,
        secret=secret,
        previous_secret=row.secret,
        previous_until=until,
    )
    await record_audit(
        session,
        tenant_id=tenant.id,
        actor=caller.actor,
        action="webhook.rotate",
        target=f"webhook:{endpoint_id}",
        after={"previous_until": until.isoformat()},
    )
    return SecretRotated(secret=secret, previous_until=until)


async def remove(
    session: AsyncSession, tenant: Tenant, caller: Principal, endpoint_id: uuid.UUID
) -> None:
    row = await _find(session, tenant, endpoint_id, lock=True)
    await repo.delete_endpoint(session, tenant.id, endpoint_id)
    await record_audit(
        session,
        tenant_id=tenant.id,
        actor=caller.actor,
        action="webhook.delete",
        target=f"webhook:{endpoint_id}",
        before={"url": row.url},
    )


async def delivery_log(
    session: AsyncSession,
    tenant: Tenant,
    endpoint_id: uuid.UUID,
    *,
    status: str | None,
    before: int | None,
    limit: int,
) -> list[DeliveryOut]:
    await _find(session, tenant, endpoint_id)
    rows = await repo.deliveries(
        session, tenant.id, endpoint_id, status=status, before=before, limit=limit
    )
    attempts = await repo.attempts_of(session, tenant.id, [r.id for r in rows])
    return [
        DeliveryOut.model_validate(row).model_copy(
            update={"log": [AttemptOut.model_validate(a) for a in attempts[row.id]]}
        )
        for row in rows
    ]


async def redeliver(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    endpoint_id: uuid.UUID,
    delivery_id: int,
) -> DeliveryOut:
    """The same message (same webhook-id, so receivers can tell it again) queued once more."""
    await _find(session, tenant, endpoint_id)
    original = await repo.delivery(session, tenant.id, endpoint_id, delivery_id)
    if original is None:
        raise NotFound(f"endpoint {endpoint_id} has no delivery {delivery_id}", field="delivery")
    copy = await repo.insert_delivery(
        session,
        tenant_id=tenant.id,
        endpoint_id=endpoint_id,
        message_id=original.message_id,
        event_type=original.event_type,
        payload=original.payload,
    )
    await record_audit(
        session,
        tenant_id=tenant.id,
        actor=caller.actor,
        action="webhook.redeliver",
        target=f"webhook:{endpoint_id}",
        after={"delivery": copy.id, "of": delivery_id},
    )
    return DeliveryOut.model_validate(copy)
