"""Tenants (operator), their keys (tenant admin) and their audit log."""

from __future__ import annotations

import logging
import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response

from registry.api.auth import require_credential, require_operator, tenant_scope
from registry.api.paging import pages
from registry.db.engine import Database
from registry.db.pagination import Page, PageRequest
from registry.principal import Principal
from registry.tenants import service
from registry.tenants.schemas import (
    AuditOut,
    IssuerOut,
    IssuersIn,
    KeyCreate,
    KeyCreated,
    KeyOut,
    KeyPatch,
    TenantCreate,
    TenantOut,
    TenantPatch,
)

router = APIRouter(
    prefix="/api/v1/tenants", tags=["tenants"], dependencies=[Depends(require_credential)]
)
logger = logging.getLogger("registry.api")
Operator = Annotated[Principal, Depends(require_operator)]
Pages = Annotated[PageRequest, Depends(pages(100))]


@router.post("", status_code=201, response_model=TenantOut, summary="Create a tenant (operator)")
async def create_tenant(body: TenantCreate, request: Request, operator: Operator) -> TenantOut:
    db: Database = request.app.state.db
    async with db.app_tx() as session:
        tenant = await service.create_tenant(
            session,
            slug=body.slug,
            title=body.title,
            public_read=body.public_read,
            actor=operator.actor,
        )
        return TenantOut.model_validate(tenant)


@router.get("", response_model=Page[TenantOut], summary="List tenants (operator)")
async def list_tenants(request: Request, operator: Operator, page: Pages) -> Page[TenantOut]:
    db: Database = request.app.state.db
    async with db.app_tx() as session:
        return await service.tenants_page(session, page)


@router.get("/{tenant}", response_model=TenantOut, summary="A tenant's settings")
async def get_tenant(tenant: str, request: Request) -> TenantOut:
    async with tenant_scope(request, tenant, "reader") as scope:
        return TenantOut.model_validate(scope.tenant)


@router.patch("/{tenant}", response_model=TenantOut, summary="Change a tenant's settings (admin)")
async def update_tenant(tenant: str, body: TenantPatch, request: Request) -> TenantOut:
    async with tenant_scope(request, tenant, "admin") as scope:
        updated = await service.update_tenant(
            scope.session, scope.tenant, body, actor=scope.principal.actor
        )
        return TenantOut.model_validate(updated)


@router.delete("/{tenant}", status_code=204, summary="Delete a tenant (operator)")
async def delete_tenant(
    tenant: str, request: Request, operator: Operator, force: bool = False
) -> Response:
    async with tenant_scope(request, tenant, "admin") as scope:
        await service.delete_tenant(scope.session, scope.tenant, force=force)
    logger.info("tenant_deleted", extra={"fields": {"tenant": tenant, "force": force}})
    return Response(status_code=204)


@router.post("/{tenant}/keys", status_code=201, response_model=KeyCreated, summary="Create a key")
async def create_key(tenant: str, body: KeyCreate, request: Request) -> KeyCreated:
    async with tenant_scope(request, tenant, "admin") as scope:
        key, secret = await service.create_key(
            scope.session,
            tenant=scope.tenant,
            role=body.role,
            name=body.name,
            actor=scope.principal.actor,
            expires_at=body.expires_at,
            owner=body.owner,
        )
        return KeyCreated(**service.key_out(key).model_dump(), secret=secret)


@router.get("/{tenant}/keys", response_model=list[KeyOut], summary="List keys (never secrets)")
async def list_keys(tenant: str, request: Request) -> list[KeyOut]:
    async with tenant_scope(request, tenant, "admin") as scope:
        return [service.key_out(k) for k in await service.list_keys(scope.session, scope.tenant.id)]


@router.patch(
    "/{tenant}/keys/{key_id}", response_model=KeyOut, summary="Name the person who holds a key"
)
async def update_key(tenant: str, key_id: uuid.UUID, body: KeyPatch, request: Request) -> KeyOut:
    async with tenant_scope(request, tenant, "admin") as scope:
        key = await service.set_key_owner(
            scope.session,
            tenant_id=scope.tenant.id,
            key_id=key_id,
            owner=body.owner,
            actor=scope.principal.actor,
        )
        return service.key_out(key)


@router.delete("/{tenant}/keys/{key_id}", status_code=204, summary="Revoke a key at once")
async def revoke_key(tenant: str, key_id: uuid.UUID, request: Request) -> Response:
    async with tenant_scope(request, tenant, "admin") as scope:
        await service.revoke_key(
            scope.session, tenant_id=scope.tenant.id, key_id=key_id, actor=scope.principal.actor
        )
    return Response(status_code=204)


@router.get(
    "/{tenant}/issuers", response_model=list[IssuerOut], summary="The OAuth issuers it trusts"
)
async def list_issuers(tenant: str, request: Request) -> list[IssuerOut]:
    async with tenant_scope(request, tenant, "admin") as scope:
        return await service.list_issuers(scope.session, scope.tenant)


@router.put(
    "/{tenant}/issuers",
    response_model=list[IssuerOut],
    summary="Set the OAuth issuers it trusts and how their claims map to roles (admin)",
)
async def set_issuers(tenant: str, body: IssuersIn, request: Request) -> list[IssuerOut]:
    async with tenant_scope(request, tenant, "admin") as scope:
        return await service.set_issuers(scope.session, scope.tenant, scope.principal.actor, body)


@router.get("/{tenant}/audit", response_model=Page[AuditOut], summary="The audit log, newest first")
async def list_audit(
    tenant: str,
    request: Request,
    page: Pages,
    action: str | None = None,
    target: str | None = None,
) -> Page[AuditOut]:
    async with tenant_scope(request, tenant, "admin") as scope:
        return await service.list_audit(
            scope.session, scope.tenant, page, action=action, target=target
        )
