"""Webhook endpoints over REST (tenant admins): register, list, change, rotate, remove; the delivery
log of an endpoint and redelivery. One service call per route (``registry.webhooks.service``)."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request, Response

from registry.api.auth import require_credential, tenant_scope
from registry.naming import MAX_SEQUENCE
from registry.webhooks import service
from registry.webhooks.schemas import (
    DeliveryOut,
    DeliveryStatus,
    EndpointCreated,
    EndpointIn,
    EndpointOut,
    EndpointPatch,
    SecretRotated,
)

router = APIRouter(
    prefix="/api/v1/tenants/{tenant}/webhooks",
    tags=["webhooks"],
    dependencies=[Depends(require_credential)],
)
DeliveryId = Annotated[int, Path(ge=1, le=MAX_SEQUENCE)]


def _allow_private(request: Request) -> bool:
    return bool(request.app.state.settings.webhook_allow_private)


@router.post("", status_code=201, response_model=EndpointCreated, summary="Register an endpoint")
async def create(tenant: str, body: EndpointIn, request: Request) -> EndpointCreated:
    async with tenant_scope(request, tenant, "admin") as scope:
        return await service.create(
            scope.session,
            scope.tenant,
            scope.principal,
            body,
            allow_private=_allow_private(request),
        )


@router.get("", response_model=list[EndpointOut], summary="Endpoints (never their secrets)")
async def list_endpoints(tenant: str, request: Request) -> list[EndpointOut]:
    async with tenant_scope(request, tenant, "admin") as scope:
        return await service.list_endpoints(scope.session, scope.tenant)


@router.patch("/{endpoint_id}", response_model=EndpointOut, summary="Enable, disable or change")
async def change(
    tenant: str, endpoint_id: uuid.UUID, body: EndpointPatch, request: Request
) -> EndpointOut:
    async with tenant_scope(request, tenant, "admin") as scope:
        return await service.change(scope.session, scope.tenant, scope.principal, endpoint_id, body)


@router.post(
    "/{endpoint_id}/rotate",
    response_model=SecretRotated,
    summary="A new secret (the previous one keeps signing for 24 hours)",
)
async def rotate(tenant: str, endpoint_id: uuid.UUID, request: Request) -> SecretRotated:
    async with tenant_scope(request, tenant, "admin") as scope:
        return await service.rotate(scope.session, scope.tenant, scope.principal, endpoint_id)


@router.delete("/{endpoint_id}", status_code=204, summary="Remove an endpoint and its log")
async def remove(tenant: str, endpoint_id: uuid.UUID, request: Request) -> Response:
    async with tenant_scope(request, tenant, "admin") as scope:
        await service.remove(scope.session, scope.tenant, scope.principal, endpoint_id)
    return Response(status_code=204)


@router.get(
    "/{endpoint_id}/deliveries",
    response_model=list[DeliveryOut],
    summary="The delivery log, newest first, each delivery with its attempts",
)
async def deliveries(
    tenant: str,
    endpoint_id: uuid.UUID,
    request: Request,
    status: DeliveryStatus | None = None,
    before: Annotated[int | None, Query(ge=1, le=MAX_SEQUENCE)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> list[DeliveryOut]:
    async with tenant_scope(request, tenant, "admin") as scope:
        return await service.delivery_log(
            scope.session, scope.tenant, endpoint_id, status=status, before=before, limit=limit
        )


@router.post(
    "/{endpoint_id}/deliveries/{delivery_id}/redeliver",
    status_code=202,
    response_model=DeliveryOut,
    summary="Send a delivery's message again (same webhook-id)",
)
async def redeliver(
    tenant: str, endpoint_id: uuid.UUID, delivery_id: DeliveryId, request: Request
) -> DeliveryOut:
    async with tenant_scope(request, tenant, "admin") as scope:
        return await service.redeliver(
            scope.session, scope.tenant, scope.principal, endpoint_id, delivery_id
        )
