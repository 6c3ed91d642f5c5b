"""Who is using the console: server-side sessions behind an opaque, HttpOnly cookie.

A session is opened by pasting an API key (checked as the REST API checks it; only the key's id is
kept, never its secret) or by signing in at the tenant's identity provider (authorization code with
PKCE; the access token is validated like any other and then dropped). On every request the session is
read in the request's own transaction and the caller checked again: a key must still authenticate
(revocation, expiry and a tenant turning keys off end the session at once), a token's session ends
with the token, and the role it needs is compared as the REST API compares it. Each session has its
own CSRF token, which every state-changing request must carry.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from registry.console import repository as repo
from registry.db.engine import Database, enter_tenant
from registry.db.models import Tenant
from registry.errors import BadCsrf, Forbidden, KeyRefused, NotSignedIn
from registry.principal import Principal
from registry.tenants import service as tenants

COOKIE = "registry_console"
LONGEST = timedelta(hours=8)


@dataclass(frozen=True)
class ConsoleScope:
    session: AsyncSession
    tenant: Tenant
    principal: Principal
    csrf: str


def _digest(cookie: str) -> str:
    return hashlib.sha256(cookie.encode()).hexdigest()


async def open_session(
    session: AsyncSession, tenant: Tenant, principal: Principal
) -> tuple[str, datetime]:
    """A new session for ``principal`` (in a transaction scoped to ``tenant``): the cookie value
    to hand the browser, and when it ends."""
    now = datetime.now(UTC)
    ends = now + LONGEST
    if principal.expires_at is not None:
        ends = min(ends, principal.expires_at)
    cookie = secrets.token_urlsafe(32)
    await repo.delete_expired(session, tenant.id, now)
    await repo.insert_session(
        session,
        tenant_id=tenant.id,
        digest=_digest(cookie),
        key_id=principal.key_id,
        subject=principal.subject if principal.key_id is None else None,
        role=principal.role,
        csrf=secrets.token_urlsafe(24),
        expires_at=ends,
    )
    return cookie, ends


async def close_session(session: AsyncSession, tenant: Tenant, cookie: str) -> None:
    await repo.delete_session(session, tenant.id, _digest(cookie))


# Why the sign-in page is shown, by the code its address carries: only these words are ever shown
# there (the address is anyone's to write, so it never carries the words themselves).
SIGN_IN_REASONS = {
    "first": "sign in to this tenant first",
    "ended": "your session has ended: sign in again",
    "keys-off": "this tenant no longer accepts API keys: sign in again",
    "key-refused": "the key of your session was revoked or has expired: sign in again",
}


def _not_signed_in(reason: str) -> NotSignedIn:
    return NotSignedIn(SIGN_IN_REASONS[reason], reason=reason)


@asynccontextmanager
async def console_scope(
    db: Database, slug: str, cookie: str | None, role: str, *, csrf: str | None = None
) -> AsyncIterator[ConsoleScope]:
    """One transaction for one console request: the tenant, the signed-in caller checked again,
    the role compared; ``csrf`` (a state change) must equal the session's token."""
    async with db.app_tx() as session:
        tenant = await tenants.find_tenant(session, slug)
        if tenant is None or not cookie:
            raise _not_signed_in("first")
        await enter_tenant(session, tenant.id)
        found = await repo.session_by_digest(session, tenant.id, _digest(cookie))
        if found is None or found.expires_at <= datetime.now(UTC):
            raise _not_signed_in("ended")
        if found.key_id is not None:
            if not tenant.api_keys:
                raise _not_signed_in("keys-off")
            try:
                key = await tenants.live_key(session, tenant.id, found.key_id)
            except KeyRefused:
                raise _not_signed_in("key-refused") from None
            principal = Principal(
                role=key.role, tenant_id=tenant.id, key_id=key.id, expires_at=key.expires_at
            )
        else:
            principal = Principal(
                role=found.role,
                tenant_id=tenant.id,
                subject=found.subject,
                expires_at=found.expires_at,
            )
        if csrf is not None and not hmac.compare_digest(csrf.encode(), found.csrf.encode()):
            raise BadCsrf("the form is stale or was not sent by this console: reload the page")
        if not principal.has(role):
            raise Forbidden(f"this needs the {role} role; you have {principal.role}")
        yield ConsoleScope(session, tenant, principal, found.csrf)
