"""Nothing of one tenant is visible through another tenant's endpoint: cursors, sessions, keys."""

from __future__ import annotations

from datetime import timedelta

import asyncpg
import pytest

from tests.api.conftest import Api, auth
from tests.mcp.conftest import RawMcp, add_prompts, seed_prompts


async def test_cross_tenant_probes(api: Api, superuser: asyncpg.Connection) -> None:
    a = await api.tenant("alpha")
    b = await api.tenant("bravo")
    await add_prompts(api, "alpha", a["publisher"], [{
        "name": "alpha_secret", "description": "alpha only",
        "arguments": [{"name": "x", "enum": ["alpha-value-1", "alpha-value-2"]}],
        "messages": [{"role": "user", "content": {"type": "text", "text": "secret {{x}}"}}]}])  # fmt: skip
    await seed_prompts(superuser, "alpha", 1050)
    await seed_prompts(superuser, "bravo", 1050)
    alpha = RawMcp(api.client, "/mcp/alpha", headers=auth(a["reader"]))
    bravo = RawMcp(api.client, "/mcp/bravo", headers=auth(b["reader"]))
    await alpha.initialize()
    await bravo.initialize()

    # A cursor from alpha is refused by bravo (same label, same names: only the binding differs).
    cursor = (await alpha.result("prompts/list"))["nextCursor"]
    assert (await bravo.error("prompts/list", {"cursor": cursor}))["code"] == -32602
    # Names, completions and pins of alpha do not resolve in bravo.
    assert (await bravo.error("prompts/get", {"name": "alpha_secret"}))["code"] == -32602
    assert (await bravo.error("prompts/get", {"name": "alpha_secret@1"}))["code"] == -32602
    error = await bravo.error("completion/complete", {
        "ref": {"type": "ref/prompt", "name": "alpha_secret"}, "argument": {"name": "x", "value": "alpha"}})  # fmt: skip
    assert "alpha-value" not in str(error)
    listed = [p["name"] for p in (await bravo.result("prompts/list"))["prompts"]]
    assert "alpha_secret" not in listed

    # alpha's session id on bravo's endpoint (with bravo's key): unknown there.
    crossed = await api.client.post(
        "/mcp/bravo", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        headers={**bravo._headers(), "Mcp-Session-Id": alpha.session_id or ""},
    )  # fmt: skip
    assert crossed.status_code == 404
    # alpha's key on bravo's endpoint: 403, with or without a session.
    with_alpha_key = await api.client.post(
        "/mcp/bravo", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        headers={**bravo._headers(), **auth(a["reader"])},
    )  # fmt: skip
    assert with_alpha_key.status_code == 403
    get_stream = await api.client.get(
        "/mcp/bravo", headers={**alpha._headers(), "Accept": "text/event-stream"}
    )
    assert get_stream.status_code == 403
    delete = await api.client.delete("/mcp/bravo", headers=alpha._headers())
    assert delete.status_code == 403
    assert (await alpha.raw("ping")).status_code == 200  # alpha's session survived the probes


@pytest.mark.parametrize("settings_overrides", [{"session_idle_seconds": 60}])
async def test_idle_sessions_expire(api: Api, superuser: asyncpg.Connection) -> None:
    keys = await api.tenant("acme")
    client = RawMcp(api.client, "/mcp/acme", headers=auth(keys["reader"]))
    await client.initialize()
    assert (await client.raw("ping")).status_code == 200
    await superuser.execute(
        "UPDATE mcp_sessions SET last_seen_at = now() - $1::interval", timedelta(seconds=61)
    )
    assert (await client.raw("ping")).status_code == 404
    await client.initialize()  # a client re-initializes and goes on
    assert (await client.raw("ping")).status_code == 200


async def test_purge_removes_dead_sessions(api: Api, superuser: asyncpg.Connection) -> None:
    from registry.sessions import service as sessions

    keys = await api.tenant("acme")
    for _ in range(3):
        await RawMcp(api.client, "/mcp/acme", headers=auth(keys["reader"])).initialize()
    await superuser.execute(
        "UPDATE mcp_sessions SET last_seen_at = now() - interval '2 hours' WHERE id IN "
        "(SELECT id FROM mcp_sessions LIMIT 2)"
    )
    db = api.client._transport.app.state.db  # type: ignore[attr-defined]
    async with db.operator_tx() as session:
        assert await sessions.purge_expired(session, idle=timedelta(hours=1)) == 2
    assert await superuser.fetchval("SELECT count(*) FROM mcp_sessions") == 1
