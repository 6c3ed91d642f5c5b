"""MCP sessions are bounded: per key (or anonymous address) and per tenant, least recently used
going first, and in what each keeps of its client's declarations."""

from __future__ import annotations

import asyncio

import pytest

from tests.conftest import Api, auth
from tests.mcp.conftest import RawMcp


@pytest.fixture
def settings_overrides() -> dict[str, object]:
    return {"sessions_per_caller": 3, "sessions_per_tenant": 5}


async def test_sessions_beyond_the_bounds_go_least_recently_used_first(api: Api) -> None:
    keys = await api.tenant("acme", public_read=True)
    clients = [RawMcp(api.client, "/mcp/acme", headers=auth(keys["reader"])) for _ in range(5)]
    for client in clients:
        await client.initialize()
    alive = [(await c.raw("ping")).status_code for c in clients]
    assert alive == [404, 404, 200, 200, 200]  # the key holds 3
    anonymous = [RawMcp(api.client, "/mcp/acme") for _ in range(3)]
    for client in anonymous:
        await client.initialize()
    # The tenant holds 5: the anonymous address's 3 and the key's 2 most recent.
    statuses = [(await c.raw("ping")).status_code for c in [*clients, *anonymous]]
    assert statuses.count(200) == 5
    assert [(await c.raw("ping")).status_code for c in anonymous] == [200, 200, 200]


async def test_what_a_session_keeps_of_its_client_is_bounded(api: Api) -> None:
    keys = await api.tenant("acme")
    client = RawMcp(api.client, "/mcp/acme", headers=auth(keys["reader"]))
    answer = await api.client.post(
        "/mcp/acme",
        json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"x": "y" * 10_000},
            "clientInfo": {"name": "t", "version": "1"}}},
        headers=client._headers(),
    )  # fmt: skip
    assert answer.status_code == 422, answer.text
    assert "the most a session keeps is 4096" in answer.json()["error"]["message"]
    assert "mcp-session-id" not in answer.headers


async def test_concurrent_initializes_past_the_bound_all_succeed(api: Api) -> None:
    """Evictions of one caller's sessions race without deadlocking: every initialize answers."""
    keys = await api.tenant("acme")
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
    headers = {**auth(keys["reader"]), "Accept": "application/json, text/event-stream"}
    answers = await asyncio.gather(
        *(api.client.post("/mcp/acme", json=init, headers=headers) for _ in range(30))
    )
    assert [a.status_code for a in answers] == [200] * 30, [a.text for a in answers]
    # Racing evictions skip each other's rows, so a burst may leave a few more for a moment; the
    # next initialize of the caller brings it back to the bound.
    answers.append(await api.client.post("/mcp/acme", json=init, headers=headers))
    alive = 0
    for answer in answers:
        client = RawMcp(api.client, "/mcp/acme", headers=auth(keys["reader"]))
        client.session_id = answer.headers["mcp-session-id"]
        alive += (await client.raw("ping")).status_code == 200
    assert alive == 3
