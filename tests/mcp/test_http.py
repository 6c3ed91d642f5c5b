"""The MCP endpoint over Streamable HTTP, raw, at every session-era revision, schema-checked."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import asyncpg
import httpx
import pytest

from registry.events.listener import CHANNEL
from registry.mcp import shaping
from registry.prompts.listing import served_prompt
from registry.revisions import revision_of
from tests.api.conftest import SIMPLE, Api, auth
from tests.mcp.conftest import ACCEPT, CONFORMANCE_PROMPTS, RawMcp, add_prompts, seed_prompts
from tests.mcp.schema import check_response

REVISIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]

AUDIO = base64.b64encode(b"RIFF\x00\x00\x00\x00WAVEfmt ").decode()
RICH: dict[str, Any] = {
    "name": "rich",
    "title": "Rich prompt",
    "description": "Every kind of content",
    "icons": [{"src": "https://example.com/icon.png", "mimeType": "image/png"}],
    "arguments": [
        {"name": "topic", "title": "Topic", "description": "what to write about", "required": True,
         "enum": ["alpha", "beta", "alphabet", "gamma"]},
        {"name": "tone", "suggestions": ["warm", "formal"], "default": "warm"},
    ],
    "messages": [
        {"role": "user", "content": {"type": "text", "text": "Write about {{topic}} ({{tone}}).",
                                     "annotations": {"audience": ["user"], "priority": 0.5,
                                                     "lastModified": "2026-01-01T00:00:00Z"}}},
        {"role": "assistant", "content": {"type": "audio", "mimeType": "audio/wav", "data": AUDIO}},
        {"role": "user", "content": {"type": "resource_link", "uri": "https://example.com/guide",
                                     "name": "guide", "title": "Style guide", "description": "read first"}},
        {"role": "user", "content": {"type": "resource", "resource": {
            "uri": "notes://{{topic}}", "mimeType": "text/plain", "text": "Notes on {{topic}}"}}},
    ],
}  # fmt: skip


@pytest.fixture
async def tenant(api: Api) -> dict[str, str]:
    keys = await api.tenant("acme", title="Acme")
    await add_prompts(api, "acme", keys["publisher"], [*CONFORMANCE_PROMPTS, RICH])
    return keys


def mcp(api: Api, keys: dict[str, str], path: str = "/mcp/acme") -> RawMcp:
    return RawMcp(api.client, path, headers=auth(keys["reader"]))


@pytest.mark.parametrize("revision", REVISIONS)
async def test_lifecycle_and_every_method(api: Api, tenant: dict[str, str], revision: str) -> None:
    client = mcp(api, tenant)
    result = await client.initialize(revision)
    assert result["protocolVersion"] == revision
    assert result["capabilities"]["prompts"] == {"listChanged": True}
    assert ("completions" in result["capabilities"]) == (revision >= "2025-03-26")
    assert result["serverInfo"]["name"] == "prompt-registry"
    assert ("title" in result["serverInfo"]) == (revision >= "2025-06-18")
    assert ("icons" in result["serverInfo"]) == (revision >= "2025-11-25")

    assert await client.result("ping") == {}
    listed = await client.result("prompts/list")
    names = [p["name"] for p in listed["prompts"]]
    assert names == sorted(names)
    assert "nextCursor" not in listed
    rich = next(p for p in listed["prompts"] if p["name"] == "rich")
    assert ("title" in rich) == (revision >= "2025-06-18")
    assert ("icons" in rich) == (revision >= "2025-11-25")
    assert rich["arguments"][0]["required"] is True

    got = await client.result("prompts/get", {"name": "rich", "arguments": {"topic": "beta"}})
    kinds = [m["content"]["type"] for m in got["messages"]]
    text = got["messages"][0]["content"]
    assert text["text"] == "Write about beta (warm)."
    assert ("lastModified" in text["annotations"]) == (revision >= "2025-06-18")
    if revision >= "2025-06-18":
        assert kinds == ["text", "audio", "resource_link", "resource"]
    elif revision == "2025-03-26":
        assert kinds == ["text", "audio", "text", "resource"]
    else:  # audio becomes an embedded resource with the same bytes; the link becomes text
        assert kinds == ["text", "resource", "text", "resource"]
        assert got["messages"][1]["content"]["resource"]["blob"] == AUDIO
        assert got["messages"][1]["content"]["resource"]["uri"].startswith("registry://acme/blobs/")
    if revision < "2025-06-18":
        assert (
            got["messages"][2]["content"]["text"]
            == "Style guide: https://example.com/guide\nread first"
        )
    assert got["messages"][3]["content"]["resource"]["text"] == "Notes on beta"

    completion = await client.result(
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "rich"}, "argument": {"name": "topic", "value": "alp"},
         **({"context": {"arguments": {"tone": "warm"}}} if revision >= "2025-06-18" else {})},
    )  # fmt: skip
    assert completion["completion"] == {
        "values": ["alpha", "alphabet"],
        "total": 2,
        "hasMore": False,
    }
    assert await client.result("logging/setLevel", {"level": "warning"}) == {}

    deleted = await api.client.delete("/mcp/acme", headers=client._headers())
    assert deleted.status_code == 204
    assert (await client.raw("ping")).status_code == 404


@pytest.mark.parametrize("revision", REVISIONS)
async def test_errors_are_json_rpc_and_schema_valid(
    api: Api, tenant: dict[str, str], revision: str
) -> None:
    client = mcp(api, tenant)
    await client.initialize(revision)
    cases: list[tuple[str, dict[str, Any], int, str]] = [
        ("prompts/get", {"name": "nope"}, -32602, "unknown prompt 'nope'"),
        ("prompts/get", {"name": "rich"}, -32602, "missing required argument 'topic'"),
        ("prompts/get", {"name": "rich", "arguments": {"topic": "delta"}}, -32602, "argument 'topic' must be one of"),
        ("prompts/get", {"name": "rich", "arguments": {"topic": "beta", "x": "1"}}, -32602, "unknown argument 'x'"),
        ("prompts/get", {"name": "rich", "arguments": {"topic": 3}}, -32602, "invalid params: arguments.topic"),
        ("prompts/get", {"name": 42}, -32602, "invalid params: name"),
        ("prompts/get", {}, -32602, "invalid params: name"),
        ("prompts/list", {"cursor": "forged.cursor"}, -32602, "invalid cursor"),
        ("completion/complete", {"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "a", "value": ""}}, -32602, "unknown prompt"),
        ("completion/complete", {"ref": {"type": "ref/prompt", "name": "rich"}, "argument": {"name": "zzz", "value": ""}}, -32602, "has no argument 'zzz'"),
        ("completion/complete", {"ref": {"type": "ref/resource", "uri": "x://y"}, "argument": {"name": "a", "value": ""}}, -32602, "prompt arguments only"),
        ("logging/setLevel", {"level": "loud"}, -32602, "invalid params: level"),
        ("tools/list", {}, -32601, "method not found"),
        ("resources/read", {"uri": "x"}, -32602, "Resource not found: x"),
        ("resources/directory/read", {"uri": "skill://x"}, -32601, "method not found"),
    ]  # fmt: skip
    for method, params, code, message in cases:
        error = await client.error(method, params)
        assert error["code"] == code, (method, params, error)
        assert message in error["message"], (method, params, error)


async def test_transport_rules(api: Api, tenant: dict[str, str]) -> None:
    c = api.client
    client = mcp(api, tenant)
    await client.initialize()
    headers = client._headers()

    parse = await c.post("/mcp/acme", content=b"{not json", headers=headers)
    assert (parse.status_code, parse.json()["error"]["code"]) == (400, -32700)
    bad: object
    for bad in ({"id": 1}, {"jsonrpc": "1.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 1, "method": 5},
                {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}, [], "text", 7):  # fmt: skip
        response = await c.post("/mcp/acme", json=bad, headers=headers)
        assert response.status_code == 400, bad
        assert response.json()["error"]["code"] == -32600, bad
    # Notifications and responses: 202, no body.
    for message in ({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
                    {"jsonrpc": "2.0", "id": 9, "result": {}}):  # fmt: skip
        accepted = await c.post("/mcp/acme", json=message, headers=headers)
        assert (accepted.status_code, accepted.content) == (202, b"")
    # Batches belong to 2025-03-26 only.
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
    ]
    refused = await c.post("/mcp/acme", json=batch, headers=headers)
    assert refused.status_code == 400
    old = mcp(api, tenant)
    await old.initialize("2025-03-26")
    answered = await c.post("/mcp/acme", json=[*batch, {"jsonrpc": "2.0", "method": "notifications/initialized"},
                                               {"jsonrpc": "2.0", "id": 3}], headers=old._headers())  # fmt: skip
    assert answered.status_code == 200
    body = answered.json()
    assert [m["id"] for m in body] == [1, 2, 3]  # the invalid item answered with its readable id
    assert body[2]["error"]["code"] == -32600
    for message in body[:2]:
        check_response("2025-03-26", "ping", message)
    init_in_batch = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-03-26"},
        }
    ]
    assert (
        await c.post("/mcp/acme", json=init_in_batch, headers=old._headers())
    ).status_code == 400

    # Sessions: missing header 400, unknown 404, protocol header checked.
    no_session = {k: v for k, v in headers.items() if k != "Mcp-Session-Id"}
    assert (await c.post("/mcp/acme", json=batch[0], headers=no_session)).status_code == 400
    assert (
        await c.post("/mcp/acme", json=batch[0], headers={**headers, "Mcp-Session-Id": "x" * 43})
    ).status_code == 404
    bad_version = await c.post(
        "/mcp/acme", json=batch[0], headers={**headers, "MCP-Protocol-Version": "2099-01-01"}
    )
    assert bad_version.status_code == 400
    other_supported = await c.post(
        "/mcp/acme", json=batch[0], headers={**headers, "MCP-Protocol-Version": "2025-03-26"}
    )
    assert other_supported.status_code == 200
    missing_version = {k: v for k, v in headers.items() if k != "MCP-Protocol-Version"}
    assert (await c.post("/mcp/acme", json=batch[0], headers=missing_version)).status_code == 200

    # Origin: absent or allowed passes (any port on localhost); anything else is 403.
    assert (
        await c.post(
            "/mcp/acme", json=batch[0], headers={**headers, "Origin": "http://localhost:6274"}
        )
    ).status_code == 200
    assert (
        await c.post(
            "/mcp/acme", json=batch[0], headers={**headers, "Origin": "http://127.0.0.1:3000"}
        )
    ).status_code == 200
    assert (
        await c.post(
            "/mcp/acme", json=batch[0], headers={**headers, "Origin": "https://evil.example"}
        )
    ).status_code == 403

    # A version the server does not speak gets the newest it does.
    newer = mcp(api, tenant)
    assert (await newer.initialize("2099-12-31"))["protocolVersion"] == "2025-11-25"


@pytest.mark.parametrize("settings_overrides", [{"max_request_bytes": 2048}])
async def test_request_body_limit(api: Api, tenant: dict[str, str]) -> None:
    client = mcp(api, tenant)
    await client.initialize()
    big = await client.raw("prompts/get", {"name": "rich", "arguments": {"topic": "x" * 5000}})
    assert big.status_code == 413
    assert (await client.raw("ping")).status_code == 200


async def test_auth(api: Api, tenant: dict[str, str]) -> None:
    c = api.client
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}}  # fmt: skip
    missing = await c.post("/mcp/acme", json=init, headers={"Accept": ACCEPT})
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert (
        'resource_metadata="http://test/.well-known/oauth-protected-resource/mcp/acme"'
        in missing.headers["www-authenticate"]
    )
    wrong = await c.post(
        "/mcp/acme", json=init, headers={"Accept": ACCEPT, "Authorization": "Bearer wrong"}
    )
    assert wrong.status_code == 403  # a refused key: the reason, not an invitation to OAuth
    assert wrong.json()["error"]["message"] == "invalid API key"
    assert 'error="invalid_token"' in wrong.headers["www-authenticate"]
    other = await api.tenant("other")
    assert (
        await c.post("/mcp/acme", json=init, headers={"Accept": ACCEPT, **auth(other["admin"])})
    ).status_code == 403
    # A session is bound to the credential that made it.
    client = mcp(api, tenant)
    await client.initialize()
    as_editor = await c.post("/mcp/acme", json={"jsonrpc": "2.0", "id": 2, "method": "ping"},
                             headers={**client._headers(), **auth(tenant["editor"])})  # fmt: skip
    assert as_editor.status_code == 404

    # A public-read tenant serves without a key; a key of another tenant is still refused.
    await api.client.post(
        "/api/v1/tenants", json={"slug": "open", "public_read": True}, headers=api.operator
    )
    anonymous = RawMcp(api.client, "/mcp/open")
    await anonymous.initialize()
    assert (await anonymous.result("prompts/list")) == {"prompts": []}
    assert (
        await c.post("/mcp/open", json=init, headers={"Accept": ACCEPT, **auth(other["admin"])})
    ).status_code == 403


async def test_a_worker_serves_its_own_write_before_its_notification_comes_back(
    api: Api, tenant: dict[str, str]
) -> None:
    """What a worker commits, it serves on its next request, without waiting for the change's
    notification to come back through LISTEN (deafened here: its cached answers stay trusted)."""
    c = api.client
    v2 = {k: v for k, v in SIMPLE.items() if k != "name"} | {"description": "second"}
    await add_prompts(api, "acme", tenant["publisher"], [SIMPLE])
    await c.post(
        "/api/v1/tenants/acme/prompts/greet/versions", json=v2, headers=auth(tenant["editor"])
    )
    production = mcp(api, tenant)
    await production.initialize()

    async def served() -> tuple[str | None, str]:
        listed = await production.result("prompts/list")
        got = await production.result("prompts/get", {"name": "greet", "arguments": {"who": "a"}})
        entry = next(p for p in listed["prompts"] if p["name"] == "greet")
        return entry.get("description"), got["description"]

    assert await served() == ("Says hello", "Says hello")  # now cached
    feed = api.app.state.feed
    await feed.connection.remove_listener(CHANNEL, feed._on_notify)
    assert feed.connected.is_set()  # still trusted
    moved = await c.put(
        "/api/v1/tenants/acme/prompts/greet/labels/production",
        json={"version": 2},
        headers=auth(tenant["publisher"]),
    )
    assert moved.status_code == 200, moved.text
    assert await served() == ("second", "second")


async def test_labels_and_pins(api: Api, tenant: dict[str, str]) -> None:
    c = api.client
    v2 = {k: v for k, v in SIMPLE.items() if k != "name"} | {"description": "second"}
    await add_prompts(api, "acme", tenant["publisher"], [SIMPLE])
    await c.post(
        "/api/v1/tenants/acme/prompts/greet/versions",
        json={**v2, "labels": ["staging"]},
        headers=auth(tenant["editor"]),
    )
    production, staging = mcp(api, tenant), mcp(api, tenant, "/mcp/acme/staging")
    await production.initialize()
    await staging.initialize()
    assert (await production.result("prompts/get", {"name": "greet", "arguments": {"who": "a"}}))[
        "description"
    ] == "Says hello"
    assert (await staging.result("prompts/get", {"name": "greet", "arguments": {"who": "a"}}))[
        "description"
    ] == "second"
    assert [p["name"] for p in (await staging.result("prompts/list"))["prompts"]] == ["greet"]
    # The same endpoints with a trailing slash, as a client may write them.
    for path, description in (("/mcp/acme/", "Says hello"), ("/mcp/acme/staging/", "second")):
        slashed = mcp(api, tenant, path)
        await slashed.initialize()
        got = await slashed.result("prompts/get", {"name": "greet", "arguments": {"who": "a"}})
        assert got["description"] == description
    pinned = await production.result("prompts/get", {"name": "greet@2", "arguments": {"who": "a"}})
    assert pinned["description"] == "second"
    by_label = await production.result(
        "prompts/get", {"name": "greet@staging", "arguments": {"who": "a"}}
    )
    assert by_label["description"] == "second"
    assert (
        "has no version 9"
        in (await production.error("prompts/get", {"name": "greet@9"}))["message"]
    )
    # A session belongs to the label it was opened on.
    crossed = await c.post(
        "/mcp/acme/staging",
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        headers=production._headers(),
    )
    assert crossed.status_code == 404
    assert (
        await c.post("/mcp/acme/Bad_Label", json={}, headers=production._headers())
    ).status_code == 404

    # A list follows its label's moves (each label row carries its version's entry).
    async def listed() -> dict[str, str | None]:
        result = await production.result("prompts/list")
        return {p["name"]: p.get("description") for p in result["prompts"]}

    assert (await listed())["greet"] == "Says hello"
    moved = await c.put(
        "/api/v1/tenants/acme/prompts/greet/labels/production",
        json={"version": 2},
        headers=auth(tenant["publisher"]),
    )
    assert moved.status_code == 200, moved.text
    assert (await listed())["greet"] == "second"
    # Archived prompts disappear from MCP, and come back when restored.
    await c.post("/api/v1/tenants/acme/prompts/greet/archive", headers=auth(tenant["publisher"]))
    assert "greet" not in await listed()
    assert (await production.error("prompts/get", {"name": "greet", "arguments": {"who": "a"}}))[
        "code"
    ] == -32602
    await c.post("/api/v1/tenants/acme/prompts/greet/unarchive", headers=auth(tenant["publisher"]))
    assert (await listed())["greet"] == "second"


@pytest.mark.parametrize("revision", REVISIONS)
async def test_stored_entries_list_as_each_revision_shapes_them(
    api: Api, tenant: dict[str, str], superuser: asyncpg.Connection, revision: str
) -> None:
    """Versions written through the API store their list entry; the seeded ones have none (as
    versions written before schema 0015): one page holding both lists what shaping each row at read
    time lists, at every revision, page by page."""
    await seed_prompts(superuser, "acme", 7, prefix="q")
    tenant_id = await superuser.fetchval("SELECT id FROM tenants WHERE slug = 'acme'")
    stored = await superuser.fetch(
        "SELECT p.name, v.list_entry IS NOT NULL AS has FROM prompt_versions v "
        "JOIN prompts p ON p.tenant_id = v.tenant_id AND p.id = v.prompt_id WHERE v.tenant_id = $1",
        tenant_id,
    )
    assert {row["name"]: row["has"] for row in stored} == {
        **{body["name"]: True for body in [*CONFORMANCE_PROMPTS, RICH]},
        **{f"q{i:06d}": False for i in range(1, 8)},
    }
    rows = json.loads(
        await superuser.fetchval(
            "SELECT registry_served_page_v1($1, 'production', NULL, 100)::text", tenant_id
        )
    )
    expected = shaping.prompt_entries(revision_of(revision), [served_prompt(*r) for r in rows])
    patched = await api.client.patch(
        "/api/v1/tenants/acme", json={"page_size": 4}, headers=api.operator
    )  # before the first MCP request, so no worker holds the tenant yet
    assert patched.status_code == 200, patched.text
    client = mcp(api, tenant)
    await client.initialize(revision)
    listed: list[dict[str, Any]] = []
    cursor = None
    while True:
        result = await client.result("prompts/list", {"cursor": cursor} if cursor else {})
        listed += result["prompts"]
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    assert listed == expected
    assert any("icons" in entry for entry in listed) == (revision >= "2025-11-25")


async def test_pagination_walks_a_large_tenant_once(
    api: Api, tenant: dict[str, str], superuser: asyncpg.Connection
) -> None:
    await seed_prompts(superuser, "acme", 5100)
    client = mcp(api, tenant)
    await client.initialize("2025-06-18")
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        result = await client.result("prompts/list", {"cursor": cursor} if cursor else {})
        pages += 1
        seen += [p["name"] for p in result["prompts"]]
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 5100 + 5
    assert seen == sorted(seen)
    assert pages <= 52  # the page size grows so a large tenant fits in about 50 pages
    # Rendering a seeded prompt works like any other.
    got = await client.result("prompts/get", {"name": "p000042", "arguments": {"who": "Ann"}})
    assert got["messages"][0]["content"]["text"] == "Hello Ann from p000042"

    # A cursor is bound to its tenant and label, and a tampered one is refused.
    first = await client.result("prompts/list")
    token = first["nextCursor"]
    labelled = await api.client.put(
        "/api/v1/tenants/acme/prompts/test_simple_prompt/labels/staging",
        json={"version": 1},
        headers=auth(tenant["publisher"]),
    )
    assert labelled.status_code == 200, labelled.text
    staging = mcp(api, tenant, "/mcp/acme/staging")
    await staging.initialize()
    assert (await staging.error("prompts/list", {"cursor": token}))["code"] == -32602
    body, _, tag = token.partition(".")
    tampered = body[:-2] + ("A" if body[-2] != "A" else "B") + body[-1] + "." + tag
    assert (await client.error("prompts/list", {"cursor": tampered}))["code"] == -32602


async def test_concurrent_sessions_and_workers_share_nothing_in_memory(
    api: Api, tenant: dict[str, str], pg_server: Any, db_name: str
) -> None:
    """A session made by one app instance is served by another (sessions live in PostgreSQL)."""
    from registry.app import create_app
    from registry.config import load_settings

    client = mcp(api, tenant)
    await client.initialize()
    other_app = create_app(load_settings(database_url=pg_server.url(db_name), gc_freeze=False))
    async with other_app.router.lifespan_context(other_app):
        transport = httpx.ASGITransport(app=other_app)
        async with httpx.AsyncClient(transport=transport, base_url="http://other") as other:
            same_session = RawMcp(other, "/mcp/acme", headers=client.headers, revision=client.revision,
                                  session_id=client.session_id)  # fmt: skip
            results = await asyncio.gather(*(same_session.result("prompts/list") for _ in range(5)))
            assert all(len(r["prompts"]) == 5 for r in results)


async def test_instructions_come_from_tenant_settings(api: Api, tenant: dict[str, str]) -> None:
    patched = await api.client.patch(
        "/api/v1/tenants/acme",
        json={"instructions": "Use the production prompts."},
        headers=auth(tenant["admin"]),
    )
    assert patched.status_code == 200
    for revision in REVISIONS:
        client = mcp(api, tenant)
        assert (await client.initialize(revision))["instructions"] == "Use the production prompts."


async def test_stale_cursor_is_refused(
    api: Api, tenant: dict[str, str], superuser: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    await seed_prompts(superuser, "acme", 1050)
    client = mcp(api, tenant)
    await client.initialize()
    fresh = (await client.result("prompts/list"))["nextCursor"]
    assert (await client.result("prompts/list", {"cursor": fresh}))["prompts"]
    later = time.time() + 3601  # past REGISTRY_SESSION_IDLE_SECONDS (default 3600)
    monkeypatch.setattr("registry.tokens.now", lambda: later)
    error = await client.error("prompts/list", {"cursor": fresh})
    assert error["code"] == -32602
    assert "expired cursor" in error["message"]
