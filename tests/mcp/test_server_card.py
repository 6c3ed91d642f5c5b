"""Server Cards (SEP-2127's extension): each tenant endpoint's card where the extension reserves it
(``<endpoint>/server-card``), checked against the constraints the extension's schema sets (required
members, the name's pattern, the remote's transport and URL, the media type, CORS, ETag); a public
tenant's card is anyone's, another's needs its credential; the AI Catalog lists the public tenants
only; the card's remote is a working endpoint."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from tests.conftest import Api, LiveServer, auth, registry_command
from tests.mcp.test_stateless import Stateless

# What the extension's schema (server-card.schema.json, v1) requires of a card, restated.
CARD = {
    "type": "object",
    "required": ["$schema", "name", "version", "description"],
    "properties": {
        "$schema": {"const": "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json"},
        "name": {"type": "string", "pattern": "^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$", "maxLength": 200},
        "description": {"type": "string", "maxLength": 100},
        "title": {"type": "string", "maxLength": 100},
        "version": {"type": "string", "maxLength": 255},
        "remotes": {"type": "array", "items": {
            "type": "object", "required": ["type", "url"],
            "properties": {
                "type": {"enum": ["sse", "streamable-http"]},
                "url": {"type": "string", "pattern": "^(https?://[^\\s]+|\\{[a-zA-Z_][a-zA-Z0-9_]*\\}[^\\s]*)$"},
                "supportedProtocolVersions": {"type": "array", "items": {"type": "string"}},
            }}},
    },
}  # fmt: skip


async def test_cards_and_the_catalog(api: Api) -> None:
    public = await api.tenant("open", public_read=True, title="Open prompts")
    private = await api.tenant("closed")
    got = await api.client.get("/mcp/open/server-card",
                               headers={"Accept": "application/mcp-server-card+json"})  # fmt: skip
    assert got.status_code == 200, got.text
    assert got.headers["content-type"].startswith("application/mcp-server-card+json")
    assert got.headers["access-control-allow-origin"] == "*"
    card: dict[str, Any] = got.json()
    jsonschema.validate(card, CARD)
    assert card["name"] == "test/open" and card["title"] == "Open prompts"
    (remote,) = card["remotes"]
    assert remote["url"] == "http://test/mcp/open" and "headers" not in remote
    assert "2026-07-28" in remote["supportedProtocolVersions"]
    again = await api.client.get(
        "/mcp/open/server-card", headers={"If-None-Match": got.headers["etag"]}
    )
    assert again.status_code == 304

    label = await api.client.get("/mcp/open/staging/server-card", headers=auth(public["reader"]))
    assert label.status_code == 200 and label.json()["remotes"][0]["url"].endswith(
        "/mcp/open/staging"
    )
    draft = await api.client.get(
        "/mcp/open/staging/server-card"
    )  # anonymous: published labels only
    assert draft.status_code == 401
    published = await api.client.get("/mcp/open/production/server-card")
    assert published.status_code == 200, published.text

    hidden = await api.client.get("/mcp/closed/server-card")
    assert hidden.status_code in (401, 404), hidden.text
    other = await api.client.get("/mcp/closed/server-card", headers=auth(public["reader"]))
    assert other.status_code in (401, 403, 404), other.text
    mine = await api.client.get("/mcp/closed/server-card", headers=auth(private["reader"]))
    assert mine.status_code == 200, mine.text
    jsonschema.validate(mine.json(), CARD)
    (closed_remote,) = mine.json()["remotes"]
    assert closed_remote["headers"][0]["name"] == "Authorization"
    assert closed_remote["headers"][0]["isSecret"] is True
    assert private["reader"].removeprefix("Bearer ") not in mine.text  # no secret in a card

    for path in ("/.well-known/ai-catalog.json", "/.well-known/mcp/server-card.json"):
        catalog = await api.client.get(path)
        assert catalog.status_code == 200, catalog.text
        entries = catalog.json()["entries"]
        assert [e["url"] for e in entries] == ["http://test/mcp/open/server-card"]
        assert entries[0]["type"] == "application/mcp-server-card+json"

    # The remote the card names is the endpoint: a client connects with what it says.
    mcp = Stateless(api.client, remote["url"].removeprefix("http://test"), {})
    assert "supportedVersions" in await mcp.result("server/discover")


@pytest.mark.slow
def test_server_json_for_the_official_registry(live_server: LiveServer) -> None:
    """`registry server-json` on a live server: what the official MCP Registry's server.json
    (2025-12-11) holds for a remote, made from the tenant's card; a private tenant's says the
    Authorization header it needs, and needs the tenant's key to be made."""
    live_server.tenant("open", public_read=True, roles=())
    private = live_server.tenant("closed", roles=("reader",))
    env = {"REGISTRY_URL": live_server.url, "REGISTRY_API_KEY": ""}
    made = registry_command(
        "server-json", "--tenant", "open", "--name", "com.example/open", env=env
    )
    assert made.returncode == 0, made.stderr
    published = json.loads(made.stdout)
    assert published["$schema"].endswith("/2025-12-11/server.schema.json")
    assert published["name"] == "com.example/open"
    (remote,) = published["remotes"]
    assert remote == {"type": "streamable-http", "url": f"{live_server.url}/mcp/open"}
    refused = registry_command("server-json", "--tenant", "closed", env=env)
    assert refused.returncode == 1 and "401" in refused.stderr
    keyed = registry_command("server-json", "--tenant", "closed",
                             env={**env, "REGISTRY_API_KEY": private["reader"]})  # fmt: skip
    assert keyed.returncode == 0, keyed.stderr
    (remote,) = json.loads(keyed.stdout)["remotes"]
    assert remote["headers"][0]["name"] == "Authorization"
    assert private["reader"] not in keyed.stdout
