"""Tenant and API-key operations. Callers own the transaction; these functions only flush."""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.audit import record_audit, record_change
from registry.db.engine import enter_tenant
from registry.db.models import ApiKey, Tenant, TenantIssuer
from registry.db.pagination import Page, PageRequest
from registry.db.repository import StoredKey
from registry.errors import Conflict, Forbidden, InvalidInput, KeyRefused, NotFound
from registry.naming import API_KEY_PREFIX, ROLE_RANK, SLUG_RE
from registry.principal import Principal
from registry.tenants import repository as repo
from registry.tenants.schemas import (
    AuditOut,
    IssuerOut,
    IssuersIn,
    KeyOut,
    ResourceMetadata,
    TenantOut,
    TenantPatch,
)

OPERATOR = "operator"
_SECRET_PREFIX = API_KEY_PREFIX


def new_secret(tenant_id: uuid.UUID) -> str:
    """``prk_<tenant id>_<256 random bits>``: the tenant id lets a request on another tenant's path be
    told apart (403) from a key that does not exist (401) without any cross-tenant lookup."""
    return f"{_SECRET_PREFIX}{tenant_id.hex}_{secrets.token_urlsafe(32)}"


def hash_secret(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


def tenant_of_secret(secret: str) -> uuid.UUID | None:
    if not secret.startswith(_SECRET_PREFIX):
        return None
    tenant_hex, _, rest = secret[len(_SECRET_PREFIX) :].partition("_")
    if not rest:
        return None
    try:
        return uuid.UUID(hex=tenant_hex)
    except ValueError:
        return None


def check_slug(slug: str) -> str:
    if not SLUG_RE.fullmatch(slug):
        raise InvalidInput(
            f"invalid tenant slug {slug!r}: use 1-63 lowercase letters, digits and hyphens, "
            "starting with a letter or digit",
            field="slug",
        )
    return slug


def check_role(role: str) -> str:
    if role not in ROLE_RANK:
        raise InvalidInput(
            f"unknown role {role!r}: use one of {', '.join(ROLE_RANK)}", field="role"
        )
    return role


async def create_tenant(
    session: AsyncSession, *, slug: str, title: str | None, public_read: bool, actor: str
) -> Tenant:
    """In an ``app_tx``: creates the tenant, then scopes the transaction to it for the audit row."""
    tenant = await repo.insert_tenant(
        session, slug=check_slug(slug), title=title, public_read=public_read
    )
    await enter_tenant(session, tenant.id)
    await record_audit(
        session,
        tenant_id=tenant.id,
        actor=actor,
        action="tenant.create",
        target=f"tenant:{slug}",
        after={"slug": slug, "title": title, "public_read": public_read},
    )
    return tenant


async def get_tenant(session: AsyncSession, slug: str) -> Tenant:
    tenant = await repo.tenant_by_slug(session, slug)
    if tenant is None:
        raise NotFound(f"tenant {slug!r} not found", field="tenant")
    return tenant


async def find_tenant_by_id(session: AsyncSession, tenant_id: uuid.UUID) -> Tenant | None:
    return await repo.tenant_by_id(session, tenant_id)


async def live_key_ids(session: AsyncSession, tenant_id: uuid.UUID) -> set[uuid.UUID]:
    """In a transaction scoped to the tenant: the ids of its keys that still authenticate."""
    return await repo.live_key_ids(session, tenant_id)


async def live_key(session: AsyncSession, tenant_id: uuid.UUID, key_id: uuid.UUID) -> ApiKey:
    """In a transaction scoped to the tenant: the key, if it still authenticates (KeyRefused
    naming why not); for callers that hold a key's id rather than its secret (console sessions)."""
    key = await repo.key_by_id(session, key_id)
    if key is None or key.tenant_id != tenant_id:
        raise KeyRefused("the API key of this session no longer exists")
    if key.revoked_at is not None:
        raise KeyRefused("the API key of this session has been revoked")
    if key.expires_at is not None and key.expires_at <= datetime.now(UTC):
        raise KeyRefused(f"the API key of this session expired at {key.expires_at.isoformat()}")
    return key


async def public_tenants(session: AsyncSession, limit: int) -> Sequence[Tenant]:
    return await repo.public_tenants(session, limit)


async def list_tenants(session: AsyncSession) -> Sequence[Tenant]:
    return await repo.list_tenants(session)


async def tenants_page(session: AsyncSession, page: PageRequest) -> Page[TenantOut]:
    """Tenants by slug (an operator's listing: it spans tenants)."""
    listing = ["tenants"]
    after = page.after(listing, str)
    rows = await repo.list_tenants(session, after=after[0] if after else None, limit=page.limit + 1)
    found, next_cursor = page.cut(listing, rows, lambda row: row.slug)
    return Page(items=[TenantOut.model_validate(t) for t in found], next_cursor=next_cursor)


async def create_key(
    session: AsyncSession,
    *,
    tenant: Tenant,
    role: str,
    name: str | None,
    actor: str,
    expires_at: datetime | None = None,
    owner: str | None = None,
) -> tuple[ApiKey, str]:
    """In a transaction scoped to ``tenant``. Returns the key and its secret (shown once, never
    stored). A tenant with approvals on needs the key's owner: approvals count people."""
    check_role(role)
    owner = _owner(owner) if owner else None
    if tenant.approvals and not owner:
        raise InvalidInput(
            f"tenant {tenant.slug!r} has approvals on, which count people, not keys: give the "
            "key's owner (the person who holds it, a name or an email)",
            field="owner",
        )
    if expires_at is not None:
        if expires_at.tzinfo is None:
            raise InvalidInput("expires_at needs a time zone (e.g. ...Z)", field="expires_at")
        if expires_at <= datetime.now(UTC):
            raise InvalidInput(
                f"expires_at {expires_at.isoformat()} is in the past: a key would be born expired",
                field="expires_at",
            )
    secret = new_secret(tenant.id)
    key = await repo.insert_key(
        session,
        tenant_id=tenant.id,
        name=name or f"{role}-{secrets.token_hex(3)}",
        role=role,
        secret_hash=hash_secret(secret),
        created_by=actor,
        expires_at=expires_at,
        owner=owner,
    )
    await record_audit(
        session,
        tenant_id=tenant.id,
        actor=actor,
        action="key.create",
        target=f"key:{key.id}",
        after=repo.key_snapshot(key),
    )
    return key, secret


async def set_key_owner(
    session: AsyncSession, *, tenant_id: uuid.UUID, key_id: uuid.UUID, owner: str, actor: str
) -> ApiKey:
    """In a transaction scoped to ``tenant_id``: the person who holds a key, named (or renamed)."""
    key = await repo.set_key_owner(session, tenant_id, key_id, _owner(owner))
    if key is None:
        raise NotFound(f"key {key_id} not found", field="key_id")
    await record_audit(
        session,
        tenant_id=tenant_id,
        actor=actor,
        action="key.update",
        target=f"key:{key.id}",
        after=repo.key_snapshot(key),
    )
    return key


def _owner(owner: str) -> str:
    found = owner.strip()
    if not 1 <= len(found) <= 200:
        raise InvalidInput(
            "a key's owner is a name or an email of 1 to 200 characters", field="owner"
        )
    return found


async def people(
    session: AsyncSession, tenant_id: uuid.UUID, actors: Iterable[str]
) -> dict[str, str]:
    """The person behind each actor as the audit names it, for counting people rather than
    credentials: a key with an owner is its owner (case aside: two keys of one owner are one
    person), an OAuth token its subject at its issuer, anything else (a key without an owner, the
    operator) itself."""
    actors = list(actors)
    key_ids = _key_ids(actors)
    owners = await repo.key_owners(session, tenant_id, list(key_ids.values()))
    found = {}
    for actor in actors:
        owner = owners.get(key_ids[actor]) if actor in key_ids else None
        found[actor] = f"owner:{owner.casefold()}" if owner else actor
    return found


def _key_ids(actors: Iterable[str | None]) -> dict[str, uuid.UUID]:
    found = {}
    for actor in actors:
        if actor and actor.startswith("key:"):
            with contextlib.suppress(ValueError):
                found[actor] = uuid.UUID(actor[4:])
    return found


def shown_actor(actor: str, key: tuple[str | None, str | None] | None = None) -> str:
    """An actor as a person reads it, everywhere one is shown (console pages, change requests over
    REST, the CLI): a key (``key``: its owner and name, None when it was deleted) by its owner and
    name, its id's start beside them since names may repeat; a token by its subject at its issuer;
    anything else (the operator) as it is."""
    if actor.startswith("key:"):
        short = actor[4:12]
        if key is None:
            return f"a deleted key ({short}…)"
        owner, name = key
        person = f"{owner}, {name}" if owner and name else owner or name or "an unnamed key"
        return f"{person} (key {short}…)"
    if actor.startswith("token:"):
        return actor[6:]
    return actor


async def display_names(
    session: AsyncSession, tenant_id: uuid.UUID, actors: Iterable[str | None]
) -> dict[str, str]:
    """Each of ``actors`` as ``shown_actor`` shows it (one query for the keys among them)."""
    named = [actor for actor in actors if actor]
    key_ids = _key_ids(named)
    keys = await repo.key_names(session, tenant_id, sorted(set(key_ids.values())))
    return {
        actor: shown_actor(actor, keys.get(key_ids[actor]) if actor in key_ids else None)
        for actor in named
    }


async def list_keys(session: AsyncSession, tenant_id: uuid.UUID) -> Sequence[ApiKey]:
    return await repo.list_keys(session, tenant_id)


async def find_key_tenant(session: AsyncSession, key_id: uuid.UUID) -> uuid.UUID:
    """In an ``operator_tx`` (crosses tenants): which tenant a key belongs to."""
    key = await repo.key_by_id(session, key_id)
    if key is None:
        raise NotFound(f"key {key_id} not found", field="key_id")
    return key.tenant_id


async def revoke_key(
    session: AsyncSession, *, tenant_id: uuid.UUID, key_id: uuid.UUID, actor: str
) -> ApiKey:
    """In a transaction scoped to ``tenant_id``. Revoking an already revoked key is a not-found."""
    key = await repo.revoke_key(session, tenant_id, key_id)
    if key is None:
        raise NotFound(f"key {key_id} not found or already revoked", field="key_id")
    await record_audit(
        session,
        tenant_id=tenant_id,
        actor=actor,
        action="key.revoke",
        target=f"key:{key.id}",
        after=repo.key_snapshot(key),
    )
    return key


async def find_tenant(session: AsyncSession, slug: str) -> Tenant | None:
    """The tenant named ``slug``, or None (also for a string that cannot be a slug)."""
    if not SLUG_RE.fullmatch(slug):
        return None
    return await repo.tenant_by_slug(session, slug)


async def update_tenant(
    session: AsyncSession, tenant: Tenant, patch: TenantPatch, *, actor: str
) -> Tenant:
    """In a transaction scoped to ``tenant``."""
    values = patch.model_dump(exclude_unset=True)
    if "protected_labels" in values:
        values["protected_labels"] = list(dict.fromkeys(values["protected_labels"] or []))
    _check_approvals(tenant, values)
    if "api_keys" in values and actor != "operator":
        raise Forbidden("only an operator turns a tenant's API keys on or off", field="api_keys")
    for key in (
        "public_read",
        "public_drafts",
        "mcp_tools",
        "default_label",
        "protected_labels",
        "approvals",
        "api_keys",
    ):
        if key in values and values[key] is None:
            raise InvalidInput(f"{key} cannot be null", field=key)
    if not values:
        return tenant
    before = {k: getattr(tenant, k) for k in values}
    updated = await repo.update_tenant(session, tenant, values)
    record_change(session, tenant_id=tenant.id, kind="tenant.update")
    await record_audit(
        session,
        tenant_id=tenant.id,
        actor=actor,
        action="tenant.update",
        target=f"tenant:{tenant.slug}",
        before=before,
        after={k: getattr(updated, k) for k in values},
    )
    return updated


def _check_approvals(tenant: Tenant, values: dict[str, Any]) -> None:
    """Approvals are for protected labels only (a label anyone may move needs no review)."""
    approvals = values.get("approvals", tenant.approvals) or {}
    protected = values.get("protected_labels", tenant.protected_labels) or []
    unprotected = sorted(set(approvals) - set(protected))
    if unprotected:
        raise InvalidInput(
            f"approvals name label {unprotected[0]!r}, which is not protected: protect it too "
            f"(protected_labels) or leave it out",
            field="approvals",
        )


async def sequences(session: AsyncSession, tenant_ids: list[uuid.UUID]) -> dict[uuid.UUID, int]:
    """Each tenant's change sequence now (a tenant that is gone is absent)."""
    return await repo.sequences(session, tenant_ids)


async def delete_tenant(session: AsyncSession, tenant: Tenant, *, force: bool) -> None:
    """Only an empty tenant, unless ``force``: then everything it holds goes with it."""
    prompts = await repo.count_prompts(session, tenant.id)
    if prompts and not force:
        raise Conflict(
            f"tenant {tenant.slug!r} still has {prompts} prompt(s): delete them or pass force=true",
            field="force",
        )
    await repo.delete_tenant(session, tenant)


# A key's last use is recorded at most this often, so reads do not each write (caches of checked
# credentials check them again as often, so the record stays true).
TOUCH_EVERY = timedelta(seconds=60)


async def authenticate(session: AsyncSession, tenant_id: uuid.UUID, secret: str) -> Principal:
    """In a transaction scoped to ``tenant_id``: the principal behind ``secret``, or KeyRefused."""
    return key_principal(tenant_id, await repo.key_by_hash(session, tenant_id, hash_secret(secret)))


def key_principal(tenant_id: uuid.UUID, key: ApiKey | StoredKey | None) -> Principal:
    """The principal of ``tenant_id``'s API key as read (None: no key has the secret's hash), or
    KeyRefused: the one check of a key, whichever statement read it."""
    if key is None:
        raise KeyRefused("invalid API key")
    now = datetime.now(UTC)
    if key.revoked_at is not None:
        raise KeyRefused("this API key has been revoked")
    if key.expires_at is not None and key.expires_at <= now:
        raise KeyRefused(f"this API key expired at {key.expires_at.isoformat()}")
    due = key.last_used_at is None or now - key.last_used_at > TOUCH_EVERY
    return Principal(
        role=key.role, tenant_id=tenant_id, key_id=key.id, expires_at=key.expires_at, use_due=due
    )


async def record_use(session: AsyncSession, principal: Principal) -> None:
    """Record that the key was used: in a short transaction of its own, never the request's, so
    that no request of a key waits behind another's (a row lock held to the end of a slow request),
    and skipped when another transaction is recording it already."""
    if principal.tenant_id is not None and principal.key_id is not None:
        await repo.touch_key(session, principal.tenant_id, principal.key_id)


async def list_audit(
    session: AsyncSession,
    tenant: Tenant,
    page: PageRequest,
    *,
    action: str | None = None,
    target: str | None = None,
) -> Page[AuditOut]:
    listing = ["audit", tenant.id.hex]
    before = page.after(listing, int)
    rows = await repo.list_audit(
        session,
        tenant.id,
        before=before[0] if before else None,
        limit=page.limit + 1,
        action=action,
        target=target,
    )
    found, next_cursor = page.cut(listing, rows, lambda row: row.id)
    return Page(
        items=[AuditOut.model_validate(r, from_attributes=True) for r in found],
        next_cursor=next_cursor,
    )


def key_out(key: ApiKey) -> KeyOut:
    return KeyOut.model_validate(key, from_attributes=True)


# --- OAuth issuers ---------------------------------------------------------------------------


async def list_issuers(session: AsyncSession, tenant: Tenant) -> list[IssuerOut]:
    return [IssuerOut.model_validate(i) for i in await repo.issuers_of(session, tenant.id)]


async def set_issuers(
    session: AsyncSession, tenant: Tenant, actor: str, body: IssuersIn
) -> list[IssuerOut]:
    """Replace the issuers the tenant trusts (an empty list: OAuth off, API keys only)."""
    names = [i.issuer for i in body.issuers]
    if len(set(names)) != len(names):
        raise InvalidInput("an issuer is listed twice", field="issuers")
    before = [i.issuer for i in await repo.issuers_of(session, tenant.id)]
    await repo.replace_issuers(
        session,
        tenant.id,
        [
            {
                "issuer": i.issuer,
                "rules": [r.model_dump(exclude_none=True) for r in i.rules],
                "introspection_client_id": i.introspection_client_id,
                "introspection_secret": i.introspection_secret,
            }
            for i in body.issuers
        ],
        actor,
    )
    record_change(session, tenant_id=tenant.id, kind="tenant.update")  # who may read changed
    await record_audit(
        session,
        tenant_id=tenant.id,
        actor=actor,
        action="tenant.issuers",
        target=f"tenant:{tenant.slug}",
        before={"issuers": before},
        after={"issuers": names},
    )
    return await list_issuers(session, tenant)


async def trusted_issuers(session: AsyncSession, slug: str) -> tuple[Tenant | None, list[str]]:
    """In an application transaction: the tenant named ``slug`` (entered) and the issuers it
    trusts; (None, []) for a tenant that does not exist."""
    tenant = await find_tenant(session, slug)
    if tenant is None:
        return None, []
    await enter_tenant(session, tenant.id)
    return tenant, [i.issuer for i in await repo.issuers_of(session, tenant.id)]


async def resource_metadata(
    session: AsyncSession, slug: str, resource: str, *, scopes: Sequence[str]
) -> ResourceMetadata:
    """The protected resource metadata of a tenant's ``resource`` (in an application transaction).
    A tenant that does not exist reads as one that trusts no issuer and takes no key, so the
    document cannot tell which tenants exist."""
    tenant, trusted = await trusted_issuers(session, slug)
    keys = tenant is not None and tenant.api_keys
    ways = (["oauth"] if trusted else []) + (["api_key"] if keys else [])
    if trusted:
        how = "OAuth access tokens" + (" or API keys" if keys else "")
    else:
        how = "API keys only: it trusts no OAuth issuer" if keys else "no credential"
    return ResourceMetadata(
        resource=resource,
        authorization_servers=trusted,
        scopes_supported=list(scopes),
        resource_name=f"Prompt Registry, tenant {slug!r} (accepts {how})",
        authentication=ways,
    )


async def issuers(session: AsyncSession, tenant_id: uuid.UUID) -> Sequence[TenantIssuer]:
    """The issuers a tenant trusts, as stored (for checking tokens)."""
    return await repo.issuers_of(session, tenant_id)
