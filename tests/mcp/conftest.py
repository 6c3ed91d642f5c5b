"""MCP fixtures: a raw Streamable HTTP client that checks every answer against the schema of the
negotiated revision, tenants with prompts, and bulk seeding for large tenants."""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import httpx
import pytest

from tests.conftest import Api, PgServer, auth, start_server, stop_server
from tests.mcp.schema import check_response
from tests.mcp.transports import TRANSPORTS, McpClient, stdio

ACCEPT = "application/json, text/event-stream"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()

# The prompts the official conformance suite expects, each with a description.
CONFORMANCE_PROMPTS: list[dict[str, Any]] = [
    {"name": "test_simple_prompt", "description": "A simple prompt without arguments",
     "messages": [{"role": "user", "content": {"type": "text", "text": "This is a simple prompt for testing."}}]},
    {"name": "test_prompt_with_arguments", "description": "A prompt with required arguments",
     "arguments": [{"name": "arg1", "description": "First test argument", "required": True,
                    "suggestions": ["test-one", "test-two", "other"]},
                   {"name": "arg2", "description": "Second test argument", "required": True}],
     "messages": [{"role": "user", "content": {"type": "text",
                   "text": "Prompt with arguments: arg1='{{arg1}}', arg2='{{arg2}}'"}}]},
    {"name": "test_prompt_with_embedded_resource", "description": "A prompt that includes an embedded resource",
     "arguments": [{"name": "resourceUri", "description": "URI of the resource to embed", "required": True}],
     "messages": [
         {"role": "user", "content": {"type": "resource", "resource": {
             "uri": "{{resourceUri}}", "mimeType": "text/plain",
             "text": "Embedded resource content for {{resourceUri}}."}}},
         {"role": "user", "content": {"type": "text", "text": "Please process the embedded resource above."}}]},
    {"name": "test_prompt_with_image", "description": "A prompt that includes image content",
     "messages": [
         {"role": "user", "content": {"type": "image", "mimeType": "image/png", "data": PNG}},
         {"role": "user", "content": {"type": "text", "text": "Please analyze the image above."}}]},
]  # fmt: skip


# Skills for the suite's skills scenarios (they discover what is served): one with a subfolder, so
# that directory reads have a folder to descend into (the suite explores the first listed).
CONFORMANCE_SKILLS: list[dict[str, Any]] = [
    {"name": "pdf-processing", "files": [
        {"path": "SKILL.md", "text": "---\nname: pdf-processing\ndescription: Extract, fill, and "
         "assemble PDF documents\nmetadata:\n  owner: documents\n---\n# PDF processing\n\nSee "
         "references/FORMS.md for forms.\n"},
        {"path": "references/FORMS.md", "text": "# Forms\n\nFill every field.\n"},
        {"path": "scripts/extract.py", "text": "print('extract')\n"},
    ]},
    {"name": "code-review", "files": [
        {"path": "SKILL.md", "text": "---\nname: code-review\ndescription: How we review a change\n"
         "---\n# Review\n\n1. Tests pass. See references/CHECKLIST.md.\n"},
        {"path": "references/CHECKLIST.md", "text": "- [ ] tests\n- [ ] docs\n"},
    ]},
]  # fmt: skip


async def add_prompts(
    api: Api, slug: str, key: str, bodies: list[dict[str, Any]], label: str = "production"
) -> None:
    for body in bodies:
        response = await api.client.post(
            f"/api/v1/tenants/{slug}/prompts", json={**body, "labels": [label]}, headers=auth(key)
        )
        assert response.status_code == 201, response.text


async def serve_tools_and_a_skill(api: Api, slug: str, keys: dict[str, str]) -> None:
    """The tenant's tools turned on, and the code-review skill (CONFORMANCE_SKILLS) on production."""
    on = await api.client.patch(
        f"/api/v1/tenants/{slug}", json={"mcp_tools": True}, headers=auth(keys["admin"])
    )
    assert on.status_code == 200, on.text
    made = await api.client.post(
        f"/api/v1/tenants/{slug}/skills",
        json={**CONFORMANCE_SKILLS[1], "labels": ["production"]},
        headers=auth(keys["publisher"]),
    )
    assert made.status_code == 201, made.text


@dataclass
class RawMcp:
    """Streamable HTTP by hand: headers as a client sends them, every answer schema-checked."""

    client: httpx.AsyncClient
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    revision: str = "2025-11-25"
    session_id: str | None = None
    next_id: int = 0

    def _headers(self, **extra: str) -> dict[str, str]:
        headers = {"Accept": ACCEPT, **self.headers}
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
            headers["MCP-Protocol-Version"] = self.revision
        return {**headers, **extra}

    async def initialize(self, revision: str = "2025-11-25") -> dict[str, Any]:
        response = await self.client.post(
            self.path,
            json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": revision, "capabilities": {},
                "clientInfo": {"name": "registry-tests", "version": "1"}}},
            headers=self._headers(),
        )  # fmt: skip
        assert response.status_code == 200, response.text
        body = response.json()
        self.revision = body["result"]["protocolVersion"]
        self.session_id = response.headers["mcp-session-id"]
        check_response(self.revision, "initialize", body)
        sent = await self.client.post(
            self.path,
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers=self._headers(),
        )
        assert sent.status_code == 202
        return dict(body["result"])

    async def raw(
        self, method: str, params: dict[str, Any] | None = None, **headers: str
    ) -> httpx.Response:
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        return await self.client.post(self.path, json=message, headers=self._headers(**headers))

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """The whole response message, after checking it against the revision's schema."""
        response = await self.raw(method, params)
        assert response.status_code == 200, response.text
        body = dict(response.json())
        if method in (
            "initialize",
            "ping",
            "prompts/list",
            "prompts/get",
            "completion/complete",
            "logging/setLevel",
            "tools/list",
            "tools/call",
            "resources/list",
            "resources/read",
        ):
            check_response(self.revision, method, body)
        return body

    async def result(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        body = await self.call(method, params)
        assert "result" in body, body
        return dict(body["result"])

    async def error(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        body = await self.call(method, params)
        assert "error" in body, body
        return dict(body["error"])


async def seed_prompts(
    db: asyncpg.Connection, slug: str, count: int, *, label: str = "production", prefix: str = "p"
) -> None:
    """``count`` prompts with one version, one argument and a label, in a few statements (as the
    superuser, so quickly); each renders to ``Hello {{who}} from <name>``."""
    tenant_id: uuid.UUID = await db.fetchval("SELECT id FROM tenants WHERE slug = $1", slug)
    await db.execute(
        """
        WITH made AS (
            INSERT INTO prompts (tenant_id, name, latest_version)
            SELECT $1, $3 || lpad(i::text, 6, '0'), 1 FROM generate_series(1, $2) AS i
            RETURNING id, name
        ), versions AS (
            INSERT INTO prompt_versions (tenant_id, prompt_id, version, description, author, content_hash)
            SELECT $1, id, 1, 'Prompt ' || name, 'seed', sha256(convert_to(name, 'UTF8')) FROM made
            RETURNING prompt_id
        ), args AS (
            INSERT INTO prompt_arguments (tenant_id, prompt_id, version, position, name, required)
            SELECT $1, id, 1, 0, 'who', true FROM made RETURNING prompt_id
        ), msgs AS (
            INSERT INTO prompt_messages (tenant_id, prompt_id, version, position, role, content)
            SELECT $1, id, 1, 0, 'user', jsonb_build_object('type', 'text', 'text', 'Hello {{who}} from ' || name)
            FROM made RETURNING prompt_id
        ), latest AS (
            INSERT INTO labels (tenant_id, prompt_id, label, prompt_name, version, updated_by)
            SELECT $1, id, 'latest', name, 1, 'seed' FROM made RETURNING prompt_id
        )
        INSERT INTO labels (tenant_id, prompt_id, label, prompt_name, version, updated_by)
        SELECT $1, id, $4, name, 1, 'seed' FROM made
        """,
        tenant_id, count, prefix, label,
    )  # fmt: skip


# --- one scenario, every transport ---------------------------------------------------------


@pytest.fixture(params=TRANSPORTS)
async def mcp(
    request: pytest.FixtureRequest, api: Api, pg_server: PgServer, db_name: str
) -> AsyncIterator[McpClient]:
    """A session-era client of tenant acme (CONFORMANCE_PROMPTS, labelled production; a reader's
    key where the transport takes keys), not yet initialized: in-process Streamable HTTP, ``registry
    mcp-stdio`` in a child process, and a live server (uvicorn in a child process)."""
    keys = await api.tenant("acme")
    await add_prompts(api, "acme", keys["publisher"], CONFORMANCE_PROMPTS)
    reader = {"Authorization": keys["reader"]}
    if request.param == "http":
        yield RawMcp(api.client, "/mcp/acme", headers=reader)
    elif request.param == "stdio":
        async for client in stdio({"REGISTRY_DATABASE_URL": pg_server.plain_url(db_name)}):
            yield client
    else:
        server = start_server({"REGISTRY_DATABASE_URL": pg_server.plain_url(db_name)})
        try:
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
                yield RawMcp(http, "/mcp/acme", headers=reader)
        finally:
            stop_server(server)
