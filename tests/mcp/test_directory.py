"""What each worker remembers of tenants and credentials (so a cached answer needs no database) is
dropped by the change notifications: a revoked key, a key past its expiry, a tenant no longer public
are refused as soon as the notification arrives, and a tenant's new settings are served."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from tests.conftest import Api, auth
from tests.mcp.conftest import CONFORMANCE_PROMPTS, add_prompts
from tests.mcp.test_stateless import Stateless, meta


async def eventually(check: Callable[[], Awaitable[bool]], seconds: float = 5.0) -> None:
    """The notification travels through PostgreSQL to the listener: allow it a moment."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "the change never took effect"
        await asyncio.sleep(0.02)


async def status(client: Stateless) -> int:
    return (await client.post("prompts/list", {"_meta": meta()})).status_code


async def test_a_revoked_key_is_refused_once_the_notification_arrives(api: Api) -> None:
    keys = await api.tenant("acme")
    await add_prompts(api, "acme", keys["publisher"], CONFORMANCE_PROMPTS)
    created = await api.client.post(
        "/api/v1/tenants/acme/keys", json={"role": "reader"}, headers=auth(keys["admin"])
    )
    client = Stateless(api.client, "/mcp/acme", auth(f"Bearer {created.json()['secret']}"))
    for _ in range(3):  # the first request checks the key in the database, the next ones do not
        assert await status(client) == 200
    revoked = await api.client.delete(
        f"/api/v1/tenants/acme/keys/{created.json()['id']}", headers=auth(keys["admin"])
    )
    assert revoked.status_code == 204

    async def refused() -> bool:
        return await status(client) == 403

    await eventually(refused)
    assert await status(client) == 403


async def test_a_key_past_its_expiry_is_refused_even_while_remembered(api: Api) -> None:
    keys = await api.tenant("acme")
    soon = datetime.now(UTC) + timedelta(seconds=1.5)
    created = await api.client.post(
        "/api/v1/tenants/acme/keys",
        json={"role": "reader", "expires_at": soon.isoformat()},
        headers=auth(keys["admin"]),
    )
    client = Stateless(api.client, "/mcp/acme", auth(f"Bearer {created.json()['secret']}"))
    assert await status(client) == 200
    assert await status(client) == 200  # remembered
    await asyncio.sleep(max(0.0, (soon - datetime.now(UTC)).total_seconds()) + 0.1)
    assert await status(client) == 403  # no notification comes for an expiry: the cache checks it


async def test_tenant_settings_reach_cached_requests(api: Api) -> None:
    keys = await api.tenant("acme", public_read=True)
    await add_prompts(api, "acme", keys["publisher"], CONFORMANCE_PROMPTS)
    anonymous = Stateless(api.client, "/mcp/acme", {})
    discovered = await anonymous.result("server/discover")
    assert discovered.get("instructions") is None
    patched = await api.client.patch(
        "/api/v1/tenants/acme",
        json={"instructions": "Prefer the short prompts."},
        headers=auth(keys["admin"]),
    )
    assert patched.status_code == 200

    async def instructed() -> bool:
        found = await anonymous.result("server/discover")
        return found.get("instructions") == "Prefer the short prompts."

    await eventually(instructed)
    closed = await api.client.patch(
        "/api/v1/tenants/acme", json={"public_read": False}, headers=auth(keys["admin"])
    )
    assert closed.status_code == 200

    async def refused() -> bool:
        return await status(anonymous) == 401

    await eventually(refused)
