"""The REST side of authentication: the bearer header, the operator check, the tenant scope."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Request

from registry.config import Settings
from registry.errors import Forbidden, Unauthenticated
from registry.principal import OPERATOR, Principal
from registry.tenants import access
from registry.tenants.access import TenantScope


def settings_of(request: Request) -> Settings:
    """The service's settings, as the app holds them (one place for every router)."""
    settings: Settings = request.app.state.settings
    return settings


def bearer(request: Request) -> str | None:
    return access.parse_bearer(request.headers.get("authorization"))


async def require_credential(request: Request) -> None:
    """Router-level: a missing or malformed credential is 401 before any body is even parsed.

    ``async`` although it awaits nothing: FastAPI runs a plain function dependency in a thread of
    its pool, a hop per request for a header check (bench/profile's write workload showed it)."""
    if bearer(request) is None:
        raise Unauthenticated(
            "missing 'Authorization: Bearer <api key or access token>'", missing=True
        )


async def require_operator(request: Request) -> Principal:
    credential = bearer(request)
    if credential is None:
        raise Unauthenticated("missing 'Authorization: Bearer <operator token>'")
    if not access.is_operator(request.app.state.settings.operator_token, credential):
        raise Forbidden("this route needs the operator token (REGISTRY_OPERATOR_TOKEN)")
    return OPERATOR


@asynccontextmanager
async def tenant_scope(
    request: Request,
    slug: str,
    role: str,
    *,
    rollback: bool = False,
    read_only: bool = False,
    remember: bool = False,
) -> AsyncIterator[TenantScope]:
    """``read_only``: the route only reads prompts, so a fresh read replica may answer it.
    ``remember``: the tenant and the caller, once settled, are kept by this worker (``callers``)
    for the writes it answers in one call."""
    credential = bearer(request)
    remembered = callers(request) if remember else None
    generation = remembered.generation() if remembered is not None else 0
    async with access.tenant_scope(
        request.app.state.db,
        request.app.state.settings.operator_token,
        slug,
        credential,
        role,
        rollback=rollback,
        read_only=read_only,
        tokens=request.app.state.tokens,
    ) as scope:
        if remembered is not None:  # settled now: the write that follows changes the tenant
            access.remember(remembered, generation, scope.tenant, scope.principal, credential)
        yield scope


def callers(request: Request) -> access.RememberedCallers | None:
    """What this worker remembers of tenants and checked callers, while its caches hear every
    change (None when they do not)."""
    remembered: access.RememberedCallers | None = request.app.state.callers()
    return remembered
