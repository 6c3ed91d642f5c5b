"""Who is calling, and on which tenant: one transaction per request, scoped to the path's tenant.

``async with tenant_scope(request, slug, "editor") as scope:`` resolves the tenant, authenticates the
bearer credential inside the same transaction (as the application role, tenant set), checks the role,
and commits when the block ends. A key only ever acts on its own tenant: on another tenant's path it
gets 403 (when the key is valid) whatever its role, and never learns whether that tenant exists.
"""

from __future__ import annotations

import hmac
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncSession

from registry.config import Settings
from registry.db.engine import Database, enter_tenant
from registry.db.models import Tenant
from registry.errors import Forbidden, NotFound, RegistryError, Unauthenticated
from registry.principal import OPERATOR, Principal
from registry.tenants import service as tenants


@dataclass(frozen=True)
class TenantScope:
    session: AsyncSession
    tenant: Tenant
    principal: Principal


class _Rollback(Exception):
    """Raised inside a scope to end its transaction without committing (dry runs)."""


def bearer(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, credential = header.partition(" ")
    if scheme.lower() != "bearer" or not credential.strip():
        raise Unauthenticated("the Authorization header must be 'Bearer <api key>'")
    return credential.strip()


def require_credential(request: Request) -> None:
    """Router-level: a missing or malformed credential is 401 before any body is even parsed."""
    if bearer(request) is None:
        raise Unauthenticated("missing 'Authorization: Bearer <api key>'")


def is_operator(settings: Settings, credential: str | None) -> bool:
    token = settings.operator_token
    return (
        credential is not None
        and token is not None
        and hmac.compare_digest(credential.encode(), token.get_secret_value().encode())
    )


def require_operator(request: Request) -> Principal:
    credential = bearer(request)
    if credential is None:
        raise Unauthenticated("missing 'Authorization: Bearer <operator token>'")
    if not is_operator(request.app.state.settings, credential):
        raise Forbidden("this route needs the operator token (REGISTRY_OPERATOR_TOKEN)")
    return OPERATOR


async def _foreign_key_is_valid(db: Database, key_tenant: uuid.UUID | None, secret: str) -> bool:
    if key_tenant is None:
        return False
    try:
        async with db.tenant_tx(key_tenant) as session:
            await tenants.authenticate(session, key_tenant, secret)
    except Unauthenticated:
        return False
    return True


@asynccontextmanager
async def tenant_scope(
    request: Request,
    slug: str,
    role: str,
    *,
    allow_anonymous: bool = False,
    rollback: bool = False,
) -> AsyncIterator[TenantScope]:
    db: Database = request.app.state.db
    credential = bearer(request)
    operator = is_operator(request.app.state.settings, credential)
    foreign = False
    try:
        async with db.app_tx() as session:
            tenant = await tenants.find_tenant(session, slug)
            if operator:
                if tenant is None:
                    raise NotFound(f"tenant {slug!r} not found", field="tenant")
                principal = OPERATOR
            elif credential is None:
                if not (allow_anonymous and tenant is not None and tenant.public_read):
                    raise Unauthenticated("missing 'Authorization: Bearer <api key>'")
                principal = Principal(role="reader", tenant_id=tenant.id, anonymous=True)
            else:
                key_tenant = tenants.tenant_of_secret(credential)
                if tenant is None or key_tenant != tenant.id:
                    foreign = True
                    raise Unauthenticated("invalid API key")
                await enter_tenant(session, tenant.id)
                principal = await tenants.authenticate(session, tenant.id, credential)
            if not principal.has(role):
                raise Forbidden(f"this needs the {role} role; the caller has {principal.role}")
            await enter_tenant(session, tenant.id)
            yield TenantScope(session, tenant, principal)
            if rollback:
                raise _Rollback
    except _Rollback:
        return
    except Unauthenticated:
        # The key is not for this path: 403 if it is a valid key of some other tenant, else 401.
        key_tenant = tenants.tenant_of_secret(credential) if foreign and credential else None
        if credential and await _foreign_key_is_valid(db, key_tenant, credential):
            raise Forbidden("this API key belongs to another tenant") from None
        raise


__all__ = ["RegistryError", "TenantScope", "bearer", "require_operator", "tenant_scope"]
