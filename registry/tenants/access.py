"""Who is calling, and on which tenant: one transaction per request, scoped to the path's tenant.

``async with tenant_scope(db, operator_token, slug, credential, "editor") as scope:`` resolves the
tenant, authenticates the bearer credential inside the same transaction (as the application role, tenant
set), checks the role, and commits when the block ends. A key only ever acts on its own tenant: on
another tenant's path it gets 403 (when the key is valid) whatever its role, and never learns whether
that tenant exists. Shared by the REST API and the MCP endpoint.
"""

from __future__ import annotations

import hmac
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Protocol

from pydantic import SecretStr
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.engine import Database
from registry.db.models import Tenant
from registry.errors import Forbidden, KeyRefused, NotFound, RegistryError, Unauthenticated
from registry.principal import OPERATOR, Principal
from registry.tenants import oauth
from registry.tenants import service as tenants
from registry.tenants.oauth import TokenVerifier


@dataclass(frozen=True)
class TenantScope:
    session: AsyncSession
    tenant: Tenant
    principal: Principal


logger = logging.getLogger("registry.access")


class Rollback(Exception):
    """Raised inside a scope to end its transaction without committing (dry runs)."""


class RememberedCallers(Protocol):
    """What a worker remembers of tenants and checked credentials (registry.mcp.caching.Directory):
    a reader takes ``generation()`` before reading the database and hands it to ``put_*``, so a
    value read across an invalidation is served but not kept."""

    def generation(self) -> int: ...
    def tenant(self, slug: str) -> Tenant | None: ...
    def tenant_id(self, slug: str) -> uuid.UUID | None: ...
    def put_tenant(self, tenant: Tenant, generation: int) -> None: ...
    def principal(self, tenant_id: uuid.UUID, credential: str) -> Principal | None: ...
    def put_principal(self, credential: str, principal: Principal, generation: int) -> None: ...


def anonymous_reader(tenant: Tenant) -> Principal:
    """A caller without a credential, on a tenant that serves anonymous readers."""
    return Principal(role="reader", tenant_id=tenant.id, anonymous=True)


async def reader(
    db: Database,
    operator_token: SecretStr | None,
    slug: str,
    credential: str | None,
    *,
    tokens: TokenVerifier | None,
    remembered: RememberedCallers | None,
) -> tuple[Tenant, Principal]:
    """The path's tenant and a caller who may read it (anonymously where it is public): from what
    the worker remembers when it has checked this credential before (no database), else one
    transaction, then remembered. The operator is never remembered."""
    if remembered is not None and not is_operator(operator_token, credential):
        tenant = remembered.tenant(slug)
        if tenant is not None:
            if credential is None:
                if tenant.public_read:
                    return tenant, anonymous_reader(tenant)
            elif (principal := remembered.principal(tenant.id, credential)) is not None:
                return tenant, principal
    generation = remembered.generation() if remembered is not None else 0
    async with tenant_scope(
        db, operator_token, slug, credential, "reader", allow_anonymous=True, tokens=tokens
    ) as scope:
        tenant, principal = scope.tenant, scope.principal
    if remembered is not None:
        remember(remembered, generation, tenant, principal, credential)
    return tenant, principal


def remember(
    remembered: RememberedCallers,
    generation: int,
    tenant: Tenant,
    principal: Principal,
    credential: str | None,
) -> None:
    """Keep what a transaction settled (``generation`` taken before it began): the tenant, and the
    caller of a key or a token (a token's principal expires with it; a change of the tenant's
    keys, issuers or key switch drops them all through the 'auth' notification)."""
    remembered.put_tenant(tenant, generation)
    if credential is not None and (principal.key_id is not None or principal.subject is not None):
        remembered.put_principal(credential, principal, generation)


def remembered_writer(
    remembered: RememberedCallers | None,
    operator_token: SecretStr | None,
    slug: str,
    credential: str | None,
    role: str,
) -> tuple[uuid.UUID, Principal] | None:
    """The path's tenant (its id) and a caller with ``role`` on it, settled without the database,
    for a write that checks an API key again in its own statement (registry.prompts.at_once): the
    operator, or a key this worker checked a moment ago. None for any other caller (a token, a key
    not remembered): the write's transaction settles it, as for every request."""
    if remembered is None or credential is None:
        return None
    tenant_id = remembered.tenant_id(slug)
    if tenant_id is None:
        return None
    if is_operator(operator_token, credential):
        principal = OPERATOR
    else:
        found = remembered.principal(tenant_id, credential)
        if found is None or found.key_id is None or found.tenant_id != tenant_id:
            return None
        principal = found
    return (tenant_id, principal) if principal.has(role) else None


def parse_bearer(header: str | None) -> str | None:
    """The credential of an ``Authorization: Bearer`` header; None when there is no header."""
    if header is None:
        return None
    scheme, _, credential = header.partition(" ")
    if scheme.lower() != "bearer" or not credential.strip():
        raise Unauthenticated("the Authorization header must be 'Bearer <api key>'")
    return credential.strip()


def is_operator(operator_token: SecretStr | None, credential: str | None) -> bool:
    return (
        credential is not None
        and operator_token is not None
        and hmac.compare_digest(credential.encode(), operator_token.get_secret_value().encode())
    )


async def _foreign_key_is_valid(db: Database, key_tenant: uuid.UUID | None, secret: str) -> bool:
    if key_tenant is None:
        return False
    try:
        async with db.tenant_tx(key_tenant) as session:
            await tenants.authenticate(session, key_tenant, secret)
    except KeyRefused:
        return False
    return True


async def _token_principal(
    session: AsyncSession,
    tenant: Tenant | None,
    slug: str,
    credential: str,
    tokens: TokenVerifier | None,
) -> Principal | None:
    """The principal of an OAuth access token; None when ``credential`` is to be checked as an
    API key (it is one, or an opaque string that no trusted issuer can introspect)."""
    if tokens is None or oauth.credential_kind(credential) == "api_key":
        return None
    if tenant is None:
        if oauth.credential_kind(credential) == "jwt":
            # the same words as for an untrusted issuer: a token cannot probe which tenants exist
            raise oauth.InvalidToken(f"tenant {slug!r} does not trust the issuer of this token")
        return None
    trusted = await tenants.issuers(session, tenant.id)
    if not tokens.accepts(credential, trusted):
        return None
    return await tokens.principal(credential, tenant, trusted)


@asynccontextmanager
async def tenant_scope(
    db: Database,
    operator_token: SecretStr | None,
    slug: str,
    credential: str | None,
    role: str,
    *,
    allow_anonymous: bool = False,
    rollback: bool = False,
    read_only: bool = False,
    tokens: TokenVerifier | None = None,
) -> AsyncIterator[TenantScope]:
    """``read_only``: the caller's block only reads, so a read replica as fresh as this worker's
    knowledge of the tenant may serve it; who the caller is is always settled on the primary (a
    revoked key is refused at once, a new one accepted at once)."""
    if read_only and db.replicas.any:
        async with tenant_scope(
            db,
            operator_token,
            slug,
            credential,
            role,
            allow_anonymous=allow_anonymous,
            tokens=tokens,
        ) as checked:  # fmt: skip  (it commits: a rollback would expire the tenant it loaded)
            settled = checked.tenant, checked.principal
        async with db.tenant_read_tx(settled[0].id) as session:
            yield TenantScope(session, *settled)
        return
    operator = is_operator(operator_token, credential)
    # A credential shaped like an API key is looked up in the round trip that enters the path's
    # tenant, among that tenant's keys only (another tenant's key finds none there).
    key_hash = (
        tenants.hash_secret(credential)
        if credential is not None and not operator and tenants.tenant_of_secret(credential)
        else None
    )
    foreign = False
    used: Principal | None = None
    try:
        # Scoped to the path's tenant from the start: nothing of it is read before the caller is
        # settled below, and a caller refused there ends the transaction.
        async with db.named_tenant_tx(slug, key_hash=key_hash) as (session, tenant, key):
            if operator:
                if tenant is None:
                    raise NotFound(f"tenant {slug!r} not found", field="tenant")
                principal = OPERATOR
            elif credential is None:
                if not (allow_anonymous and tenant is not None and tenant.public_read):
                    raise Unauthenticated(
                        "missing 'Authorization: Bearer <api key or access token>'", missing=True
                    )
                principal = anonymous_reader(tenant)
            elif token := await _token_principal(session, tenant, slug, credential, tokens):
                principal = token
            else:
                if tenant is None or tenants.tenant_of_secret(credential) != tenant.id:
                    foreign = True
                    raise KeyRefused("invalid API key")
                if not tenant.api_keys:
                    raise KeyRefused(
                        f"tenant {slug!r} accepts OAuth access tokens only: its API keys are off"
                    )
                principal = tenants.key_principal(tenant.id, key)
                used = principal if principal.use_due else None
            if not principal.has(role):
                scope = oauth.insufficient_scope(principal, role)
                extra = {"insufficient_scope": scope} if scope else {}
                raise Forbidden(
                    f"this needs the {role} role; the caller has {principal.role}", **extra
                )
            assert tenant is not None  # every branch above refused a tenant that does not exist
            yield TenantScope(session, tenant, principal)
            if rollback:
                raise Rollback
    except Rollback:
        pass
    except KeyRefused:
        # The key is not for this path: "another tenant" if it is a valid key of some other
        # tenant, else "invalid" (the same status: a key cannot probe which tenants exist).
        key_tenant = tenants.tenant_of_secret(credential) if foreign and credential else None
        if credential and await _foreign_key_is_valid(db, key_tenant, credential):
            # The same words whether the path's tenant exists or not: a key cannot probe for one.
            raise Forbidden(
                f"no tenant {slug!r} is visible to this API key: it belongs to another tenant "
                "(check the tenant in the address)"
            ) from None
        raise
    if used is not None and used.tenant_id is not None:
        await _record_use(db, used.tenant_id, used)


def check_anonymous(
    tenant: Tenant, principal: Principal, label: str | None, *, version: int | None = None
) -> None:
    """Anonymous readers of a public tenant read its published labels (the protected ones, such as
    production) and nothing else: no other label, no pinned version, unless the tenant opts in
    (public_drafts). Callers with a key are not concerned."""
    if not principal.anonymous or tenant.public_drafts:
        return
    if version is not None:
        raise Forbidden(
            f"anonymous callers read the published labels of {tenant.slug!r} only "
            f"({_published(tenant)}), not pinned versions: send an API key"
        )
    if label is not None and label not in tenant.protected_labels:
        raise Unauthenticated(
            f"anonymous callers read the published labels of {tenant.slug!r} only "
            f"({_published(tenant)}); send an API key to read {label!r}"
        )


def _published(tenant: Tenant) -> str:
    return ", ".join(tenant.protected_labels) or "none"


async def _record_use(db: Database, tenant_id: uuid.UUID, principal: Principal) -> None:
    try:
        async with db.tenant_tx(tenant_id) as session:
            await tenants.record_use(session, principal)
    except (RegistryError, SQLAlchemyError, OSError) as error:  # a lost stamp is no failed request
        logger.warning("key_use_not_recorded", extra={"fields": {"error": type(error).__name__}})
