"""The isolation matrix: every route of the route table (registry.app.ROUTERS) and every method of
the MCP method table, each against every kind of caller that must not reach tenant bravo: each role
of tenant alpha, a revoked key, an expired key, a made-up key and an anonymous caller of a private
tenant; with the worker's caches cold, and warm (the worker already holding both tenants and the
caller's checked credential), in one worker and across two. Every cell is refused (401 or 403, or
the console's sign-in), and no refusal carries anything of bravo. The other side: each role of
bravo reads what its role allows, and anonymous callers of a public tenant read its published
label over MCP and nothing else. A route or method without an entry here fails the test, so a new
door cannot land without its cell.

OAuth tokens minted for another tenant's audience or by another tenant's issuer (JWT and
introspected) are refused by the OAuth tests (tests/oauth), against a real identity provider.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, Literal

import asyncpg
import httpx
import pytest
from fastapi.routing import APIRoute

from registry.app import ROUTERS
from registry.mcp.handlers import METHODS, TRANSPORT_METHODS
from tests.conftest import OPERATOR_TOKEN, Api, PgServer, auth, start_server, stop_server

STREAM_SECONDS = 10  # a refusal takes milliseconds; a stream accepted never ends in-process
SECRET = "bravo-only-text-5e1f"  # in bravo's prompt, description and settings: never in a refusal
PNG = b"\x89PNG\r\n\x1a\n" + b"bravo"

Door = Literal["tenant", "operator", "public", "console", "console-public"]


@dataclass(frozen=True)
class Entry:
    door: Door
    body: Any = None  # JSON, or bytes sent as they are
    query: dict[str, str] = field(default_factory=dict)


VERSION = {"messages": [{"role": "user", "content": {"type": "text", "text": "x"}}]}
BUNDLE = {"format": "prompt-registry/v1", "prompts": [], "blobs": {}}
T = "/api/v1/tenants/{tenant}"
P = T + "/prompts/{name}"
S = T + "/skills/{name}"
CR = T + "/change-requests/{request_id}"
SKILL_FILES = {"files": [{"path": "SKILL.md", "text": "---\nname: planted\ndescription: x\n---\n"}]}

REST: dict[tuple[str, str], Entry] = {
    # served to anyone: no tenant's data behind them
    ("GET", "/.well-known/oauth-authorization-server"): Entry("public"),
    ("GET", "/.well-known/oauth-authorization-server/{rest:path}"): Entry("public"),
    ("GET", "/.well-known/oauth-protected-resource/api/v1/tenants/{tenant}"): Entry("public"),
    ("GET", "/.well-known/oauth-protected-resource/mcp/{tenant}"): Entry("public"),
    ("GET", "/.well-known/oauth-protected-resource/mcp/{tenant}/{label}"): Entry("public"),
    ("GET", "/.well-known/openid-configuration"): Entry("public"),
    ("GET", "/.well-known/openid-configuration/{rest:path}"): Entry("public"),
    ("GET", "/authorize"): Entry("public"),
    ("POST", "/register"): Entry("public", {"redirect_uris": ["http://127.0.0.1:9/cb"]}),
    ("POST", "/token"): Entry("public"),
    ("GET", "/docs"): Entry("public"),
    ("GET", "/.well-known/prompt-registry/signing-key"): Entry("public"),
    ("GET", "/.well-known/ai-catalog.json"): Entry("public"),  # public tenants' cards only
    ("GET", "/.well-known/mcp/server-card.json"): Entry("public"),
    ("GET", "/mcp/{tenant}/server-card"): Entry("tenant"),
    ("GET", "/mcp/{tenant}/{label}/server-card"): Entry("tenant"),
    ("GET", "/.well-known/prompt-registry/signing-keys"): Entry("public"),
    ("GET", "/healthz"): Entry("public"),
    ("GET", "/readyz"): Entry("public"),
    ("GET", "/metrics"): Entry("operator"),
    # the operator's
    ("GET", "/api/v1/tenants"): Entry("operator"),
    ("POST", "/api/v1/tenants"): Entry("operator", {"slug": "made-by-a-stranger"}),
    ("DELETE", T): Entry("operator"),
    # a tenant's
    ("GET", T): Entry("tenant"),
    ("PATCH", T): Entry("tenant", {"title": "taken over"}),
    ("GET", T + "/audit"): Entry("tenant"),
    ("POST", T + "/blobs"): Entry("tenant", PNG),
    ("GET", T + "/blobs/{sha256}"): Entry("tenant"),
    ("GET", T + "/changes"): Entry("tenant"),
    ("GET", T + "/export"): Entry("tenant"),
    ("POST", T + "/import"): Entry("tenant", BUNDLE, {"dry_run": "true"}),
    ("POST", T + "/push-plan"): Entry("tenant", {"prompts": [{"name": "planted", **VERSION}]}),
    ("GET", T + "/issuers"): Entry("tenant"),
    ("PUT", T + "/issuers"): Entry("tenant", {"issuers": []}),
    ("GET", T + "/keys"): Entry("tenant"),
    ("POST", T + "/keys"): Entry("tenant", {"name": "mine now", "role": "admin"}),
    ("DELETE", T + "/keys/{key_id}"): Entry("tenant"),
    ("PATCH", T + "/keys/{key_id}"): Entry("tenant", {"owner": "planted@example.com"}),
    ("GET", T + "/prompts"): Entry("tenant"),
    ("POST", T + "/prompts"): Entry("tenant", {"name": "planted", **VERSION}),
    ("DELETE", P): Entry("tenant"),
    ("GET", P): Entry("tenant"),
    ("PATCH", P): Entry("tenant", {"tags": ["planted"]}),
    ("POST", P + "/archive"): Entry("tenant"),
    ("POST", P + "/unarchive"): Entry("tenant"),
    ("GET", P + "/diff"): Entry("tenant", query={"from": "1", "to": "1"}),
    ("GET", P + "/history"): Entry("tenant"),
    ("GET", P + "/impact"): Entry("tenant"),
    ("GET", P + "/labels"): Entry("tenant"),
    ("PUT", P + "/labels/{label}"): Entry("tenant", {"version": 1}),
    ("DELETE", P + "/labels/{label}"): Entry("tenant"),
    ("GET", P + "/labels/{label}/history"): Entry("tenant"),
    ("POST", P + "/refresh"): Entry("tenant", {}),
    ("POST", P + "/render"): Entry("tenant", {"arguments": {}}),
    ("GET", P + "/versions"): Entry("tenant"),
    ("POST", P + "/versions"): Entry("tenant", VERSION),
    ("GET", P + "/versions/{version}"): Entry("tenant"),
    ("POST", P + "/versions/{version}/restore"): Entry("tenant"),
    ("GET", T + "/skills"): Entry("tenant"),
    ("POST", T + "/skills"): Entry("tenant", {"name": "planted", **SKILL_FILES}),
    ("GET", S): Entry("tenant"),
    ("DELETE", S): Entry("tenant"),
    ("PATCH", S): Entry("tenant", {"tests": []}),
    ("POST", S + "/test"): Entry("tenant", {}),
    ("POST", S + "/archive"): Entry("tenant", {"archived": True}),
    ("GET", S + "/diff"): Entry("tenant", query={"from": "1", "to": "1"}),
    ("PUT", S + "/labels/{label}"): Entry("tenant", {"version": 1}),
    ("DELETE", S + "/labels/{label}"): Entry("tenant"),
    ("GET", S + "/versions"): Entry("tenant"),
    ("POST", S + "/versions"): Entry("tenant", SKILL_FILES),
    ("GET", S + "/versions/{version}"): Entry("tenant"),
    ("GET", S + "/versions/{version}/files/{path:path}"): Entry("tenant"),
    ("POST", P + "/test"): Entry("tenant", {}),
    ("GET", T + "/change-requests"): Entry("tenant"),
    ("POST", T + "/change-requests"): Entry(
        "tenant",
        {
            "description": "planted",
            "moves": [{"prompt": "bravo-prompt", "label": "production", "version": 1}],
        },
    ),
    ("GET", CR): Entry("tenant"),
    ("PATCH", CR): Entry("tenant", {"description": "taken over"}),
    ("POST", CR + "/approve"): Entry("tenant", {}),
    ("POST", CR + "/reject"): Entry("tenant", {}),
    ("POST", CR + "/comment"): Entry("tenant", {"comment": "planted"}),
    ("POST", CR + "/withdraw"): Entry("tenant"),
    ("POST", CR + "/apply"): Entry("tenant"),
    ("GET", T + "/served"): Entry("tenant"),
    ("PUT", P + "/labels/{label}/rollout"): Entry("tenant", {"version": 1}),
    ("GET", P + "/labels/{label}/rollout"): Entry("tenant"),
    ("POST", P + "/labels/{label}/rollout/{action}"): Entry("tenant"),
    ("PUT", S + "/labels/{label}/rollout"): Entry("tenant", {"version": 1}),
    ("GET", S + "/labels/{label}/rollout"): Entry("tenant"),
    ("POST", S + "/labels/{label}/rollout/{action}"): Entry("tenant"),
    ("POST", T + "/feedback"): Entry("tenant", {"receipt": {}, "outcome": "good"}),
    # libraries: bravo offers to alpha and subscribes to charlie's library; only bravo's admin acts
    ("POST", T + "/subscribers"): Entry("tenant", {"tenant": "alpha", "label": "production"}),
    ("GET", T + "/subscribers"): Entry("tenant"),
    ("DELETE", T + "/subscribers/{subscriber}"): Entry("tenant"),
    ("GET", P + "/subscribers"): Entry("tenant"),
    ("POST", T + "/libraries"): Entry("tenant", {"library": "charlie", "label": "production"}),
    ("GET", T + "/libraries"): Entry("tenant"),
    ("PATCH", T + "/libraries/{library}"): Entry("tenant", {"follow": True}),
    ("DELETE", T + "/libraries/{library}"): Entry("tenant"),
    ("GET", T + "/usage"): Entry("tenant"),
    ("GET", T + "/usage/idle"): Entry("tenant"),
    ("GET", T + "/usage/reach"): Entry(
        "tenant", query={"kind": "prompt", "name": "bravo-prompt", "label": "production"}
    ),
    ("GET", T + "/served/{name}"): Entry("tenant"),
    ("GET", T + "/webhooks"): Entry("tenant"),
    ("POST", T + "/webhooks"): Entry("tenant", {"url": "https://hooks.example/x"}),
    ("DELETE", T + "/webhooks/{endpoint_id}"): Entry("tenant"),
    ("PATCH", T + "/webhooks/{endpoint_id}"): Entry("tenant", {"enabled": False}),
    ("GET", T + "/webhooks/{endpoint_id}/deliveries"): Entry("tenant"),
    ("POST", T + "/webhooks/{endpoint_id}/deliveries/{delivery_id}/redeliver"): Entry("tenant"),
    ("POST", T + "/webhooks/{endpoint_id}/rotate"): Entry("tenant"),
    # the console (a session cookie of another tenant's console is no session here)
    ("GET", "/ui"): Entry("console-public"),
    ("GET", "/ui/callback"): Entry("console-public"),
    ("GET", "/ui/static/{name}"): Entry("console-public"),
    ("GET", "/favicon.ico"): Entry("console-public"),
    ("GET", "/ui/{tenant}/login"): Entry("console-public"),
    ("POST", "/ui/{tenant}/login"): Entry("console-public", {"key": "wrong"}),
    ("GET", "/ui/{tenant}/login/oidc"): Entry("console-public"),
    ("GET", "/ui/{tenant}/audit"): Entry("console"),
    ("POST", "/ui/{tenant}/blobs"): Entry("console"),
    ("GET", "/ui/{tenant}/blobs/{sha256}"): Entry("console"),
    ("POST", "/ui/{tenant}/check"): Entry("console"),
    ("GET", "/ui/{tenant}/connect"): Entry("console"),
    ("GET", "/ui/{tenant}/usage"): Entry("console"),
    ("POST", "/ui/{tenant}/prompts/{name}/rollout"): Entry("console"),
    ("POST", "/ui/{tenant}/prompts/{name}/rollout/{action}"): Entry("console"),
    ("POST", "/ui/{tenant}/skills/{name}/rollout"): Entry("console"),
    ("POST", "/ui/{tenant}/skills/{name}/rollout/{action}"): Entry("console"),
    ("GET", "/ui/{tenant}/libraries"): Entry("console"),
    ("POST", "/ui/{tenant}/libraries/subscribe"): Entry("console"),
    ("POST", "/ui/{tenant}/libraries/{library}/change"): Entry("console"),
    ("POST", "/ui/{tenant}/libraries/{library}/end"): Entry("console"),
    ("POST", "/ui/{tenant}/libraries/offer"): Entry("console"),
    ("POST", "/ui/{tenant}/libraries/withdraw/{subscriber}"): Entry("console"),
    ("GET", "/ui/{tenant}/keys"): Entry("console"),
    ("POST", "/ui/{tenant}/keys"): Entry("console"),
    ("POST", "/ui/{tenant}/keys/{key_id}/revoke"): Entry("console"),
    ("POST", "/ui/{tenant}/logout"): Entry("console"),
    ("GET", "/ui/{tenant}/new"): Entry("console"),
    ("GET", "/ui/{tenant}/prompts"): Entry("console"),
    ("GET", "/ui/{tenant}/prompts/{name}"): Entry("console"),
    ("POST", "/ui/{tenant}/prompts/{name}/archive"): Entry("console"),
    ("GET", "/ui/{tenant}/prompts/{name}/diff"): Entry("console"),
    ("GET", "/ui/{tenant}/prompts/{name}/edit"): Entry("console"),
    ("POST", "/ui/{tenant}/prompts/{name}/label"): Entry("console"),
    ("GET", "/ui/{tenant}/prompts/{name}/preview"): Entry("console"),
    ("POST", "/ui/{tenant}/prompts/{name}/preview"): Entry("console"),
    ("POST", "/ui/{tenant}/prompts/{name}/restore"): Entry("console"),
    ("GET", "/ui/{tenant}/prompts/{name}/versions/{version}"): Entry("console"),
    ("POST", "/ui/{tenant}/save"): Entry("console"),
    ("GET", "/ui/{tenant}/settings"): Entry("console"),
    ("GET", "/ui/{tenant}/change-requests"): Entry("console"),
    ("GET", "/ui/{tenant}/change-requests/{request_id}"): Entry("console"),
    ("POST", "/ui/{tenant}/change-requests/{request_id}/approve"): Entry("console"),
    ("POST", "/ui/{tenant}/change-requests/{request_id}/reject"): Entry("console"),
    ("POST", "/ui/{tenant}/change-requests"): Entry("console"),
    ("POST", "/ui/{tenant}/change-requests/{request_id}/withdraw"): Entry("console"),
    ("GET", "/ui/{tenant}/skills"): Entry("console"),
    ("GET", "/ui/{tenant}/skills/{name}"): Entry("console"),
    ("GET", "/ui/{tenant}/skills/{name}/diff"): Entry("console"),
    ("POST", "/ui/{tenant}/skills/{name}/label"): Entry("console"),
    ("GET", "/ui/{tenant}/skills/{name}/versions/{version}"): Entry("console"),
    ("POST", "/ui/{tenant}/settings"): Entry("console"),
}

# Every method either era serves, with params a caller of the tenant would send.
MCP: dict[str, dict[str, Any]] = {
    "server/discover": {},
    "ping": {},
    "prompts/list": {},
    "prompts/get": {"name": "bravo-prompt"},
    "completion/complete": {
        "ref": {"type": "ref/prompt", "name": "bravo-prompt"},
        "argument": {"name": "tone", "value": ""},
    },
    "logging/setLevel": {"level": "info"},
    "subscriptions/listen": {"notifications": {"prompts": {"listChanged": True}}},
    "tools/list": {},
    "tools/call": {"name": "render_prompt", "arguments": {"name": "bravo-prompt"}},
    "skills/list": {},
    "skills/get": {"uri": "skill://bravo-prompt/SKILL.md"},
    "resources/list": {},
    "resources/templates/list": {},
    "resources/read": {"uri": "skill://bravo-prompt/SKILL.md"},
    "resources/directory/read": {"uri": "skill://bravo-prompt"},
    "events/list": {},
    "events/poll": {"name": "prompt.changed", "arguments": {}, "cursor": None},
    "events/stream": {"name": "prompt.changed", "arguments": {}, "cursor": None},
    "events/subscribe": {
        "name": "prompt.changed",
        "arguments": {},
        "delivery": {"url": "https://hooks.example/h", "secret": "whsec_" + "A" * 44},
    },
    "events/unsubscribe": {
        "name": "prompt.changed",
        "arguments": {},
        "delivery": {"url": "https://hooks.example/h"},
    },
}

CALLERS = ["reader", "editor", "publisher", "admin", "revoked", "expired", "made-up", "anonymous"]


def route_table() -> set[tuple[str, str]]:
    return {
        (method, route.path)
        for router in ROUTERS
        for route in router.routes
        if isinstance(route, APIRoute)
        for method in (route.methods or set()) - {"HEAD"}
    }


def test_every_route_and_method_has_an_entry() -> None:
    routes = route_table()
    assert routes - REST.keys() == set(), "routes without an isolation entry"
    assert REST.keys() - routes == set(), "entries of routes that no longer exist"
    methods = (set(METHODS) | TRANSPORT_METHODS) - {"initialize"}
    assert methods - MCP.keys() == set(), "MCP methods without an isolation entry"
    assert MCP.keys() - methods == set(), "entries of MCP methods that no longer exist"


@dataclass
class World:
    api: Api
    alpha: dict[str, str]  # caller -> Authorization header value ("" for anonymous)
    bravo: dict[str, str]
    params: dict[str, str]  # path parameters of bravo's things
    alpha_cookie: str


async def _world(api: Api, superuser: asyncpg.Connection) -> World:
    alpha = await api.tenant("alpha")
    bravo = await api.tenant("bravo", title=SECRET)
    prompt = {
        "name": "bravo-prompt", "description": SECRET, "labels": ["production", "staging"],
        "arguments": [{"name": "tone", "enum": [SECRET, "calm"]}],
        "messages": [{"role": "user", "content": {"type": "text", "text": f"{SECRET} {{{{tone}}}}"}}],
    }  # fmt: skip
    made = await api.client.post(
        "/api/v1/tenants/bravo/prompts", json=prompt, headers=auth(bravo["publisher"])
    )
    assert made.status_code == 201, made.text
    skill_md = f"---\nname: bravo-prompt\ndescription: {SECRET}\n---\n{SECRET}\n"
    skill = {"name": "bravo-prompt", "labels": ["production", "staging"],
             "files": [{"path": "SKILL.md", "text": skill_md}]}  # fmt: skip
    made = await api.client.post(
        "/api/v1/tenants/bravo/skills", json=skill, headers=auth(bravo["publisher"])
    )
    assert made.status_code == 201, made.text
    blob = await api.client.post(
        "/api/v1/tenants/bravo/blobs", content=PNG,
        headers={**auth(bravo["editor"]), "Content-Type": "image/png"},
    )  # fmt: skip
    assert blob.status_code in (200, 201), blob.text
    hook = await api.client.post(
        "/api/v1/tenants/bravo/webhooks", json={"url": "https://hooks.example/bravo"},
        headers=auth(bravo["admin"]),
    )  # fmt: skip
    assert hook.status_code == 201, hook.text
    second = {**prompt, "labels": [], "description": f"{SECRET} again"}
    del second["name"]
    made = await api.client.post(
        "/api/v1/tenants/bravo/prompts/bravo-prompt/versions", json=second,
        headers=auth(bravo["editor"]),
    )  # fmt: skip
    skill_two = {"files": [{"path": "SKILL.md", "text": skill_md + "again\n"}]}
    made = await api.client.post("/api/v1/tenants/bravo/skills/bravo-prompt/versions", json=skill_two,
                                 headers=auth(bravo["editor"]))  # fmt: skip
    assert made.status_code == 201, made.text
    for plural in ("prompts", "skills"):  # a rollout of each kind's staging label to version 2
        started = await api.client.put(
            f"/api/v1/tenants/bravo/{plural}/bravo-prompt/labels/staging/rollout",
            json={"version": 2, "steps": [50, 100]}, headers=auth(bravo["publisher"]),
        )  # fmt: skip
        assert started.status_code == 201, started.text
    request = {"description": SECRET,
               "moves": [{"prompt": "bravo-prompt", "label": "production", "version": 2}]}  # fmt: skip
    made = await api.client.post(
        "/api/v1/tenants/bravo/change-requests", json=request, headers=auth(bravo["editor"])
    )
    assert made.status_code == 201, made.text
    charlie = await api.tenant("charlie")  # a library bravo subscribes to; bravo offers to alpha
    for path, body, key in (
        ("charlie/subscribers", {"tenant": "bravo", "label": "production"}, charlie["admin"]),
        ("bravo/libraries", {"library": "charlie", "label": "production"}, bravo["admin"]),
        ("bravo/subscribers", {"tenant": "alpha", "label": "production"}, bravo["admin"]),
    ):
        made = await api.client.post(f"/api/v1/tenants/{path}", json=body, headers=auth(key))
        assert made.status_code == 201, made.text
    keys = (await api.client.get("/api/v1/tenants/bravo/keys", headers=auth(bravo["admin"]))).json()
    # alpha's revoked and expired keys, and its console session
    for name in ("revoked", "expired"):
        created = await api.client.post(
            "/api/v1/tenants/alpha/keys", json={"name": name, "role": "admin"},
            headers=api.operator,
        )  # fmt: skip
        alpha[name] = f"Bearer {created.json()['secret']}"
        if name == "revoked":
            gone = await api.client.delete(
                f"/api/v1/tenants/alpha/keys/{created.json()['id']}", headers=api.operator
            )
            assert gone.status_code == 204
        else:
            await superuser.execute(
                "UPDATE api_keys SET expires_at = now() - interval '1 day' WHERE id = $1",
                uuid.UUID(created.json()["id"]),
            )
    alpha["made-up"] = "Bearer pr_made-up-key-that-no-one-issued"
    alpha["anonymous"] = ""
    signed_in = await api.client.post(
        "/ui/alpha/login", data={"key": alpha["admin"].removeprefix("Bearer ")},
        headers={"Origin": "http://test"},
    )  # fmt: skip
    assert signed_in.status_code == 303, signed_in.text
    cookie = signed_in.cookies.get("registry_console") or ""
    assert cookie
    params = {
        "tenant": "bravo", "name": "bravo-prompt", "version": "1", "label": "staging",
        "key_id": keys[0]["id"], "sha256": blob.json()["sha256"],
        "endpoint_id": hook.json()["id"], "delivery_id": "1", "rest:path": "x",
        "name:path": "console.css", "path:path": "SKILL.md", "request_id": "1", "action": "pause",
        "subscriber": "alpha", "library": "charlie",
    }  # fmt: skip
    return World(api, alpha, bravo, params, cookie)


def _path(template: str, params: dict[str, str]) -> str:
    for name, value in params.items():
        template = template.replace("{" + name + "}", value)
    if "{name}" in template and template.startswith("/ui/static/"):
        template = template.replace("{name}", "console.css")
    assert "{" not in template, template
    return template


async def _send(world: World, method: str, path: str, entry: Entry, credential: str) -> Any:
    headers = {"Origin": "http://test"}
    if credential:
        headers["Authorization"] = credential
    kwargs: dict[str, Any] = {"params": entry.query, "headers": headers}
    if isinstance(entry.body, bytes):
        kwargs["content"] = entry.body
        headers["Content-Type"] = "image/png"
    elif entry.body is not None:
        kwargs["json"] = entry.body
    return await _bounded(world.api.client.request(method, path, **kwargs))


class Streamed:
    """What a cell answered when it opened a stream (in-process, a stream never completes)."""

    status_code = 200
    text = ""
    headers: dict[str, str] = {}


async def _bounded(request: Awaitable[httpx.Response]) -> httpx.Response | Streamed:
    """A refusal comes at once; an answer still going after a while is a stream that was opened
    (the cell failed): bounded, so the matrix reports it instead of hanging."""
    try:
        async with asyncio.timeout(STREAM_SECONDS):
            return await request
    except TimeoutError:
        return Streamed()


def _no_trace_of_bravo(answer: Any) -> None:
    assert SECRET not in answer.text, answer.text[:300]
    assert SECRET not in str(answer.headers)


async def _warm(world: World) -> None:
    """The worker holds both tenants, and alpha's checked credentials (used on alpha's own paths
    and endpoint), before the cells are tried."""
    client = world.api.client
    for caller in ("reader", "editor", "publisher", "admin"):
        assert (
            await client.get("/api/v1/tenants/alpha/prompts", headers=auth(world.alpha[caller]))
        ).status_code == 200
        await _mcp(world, "/mcp/alpha", world.alpha[caller], "prompts/list", {})
    for path in ("/api/v1/tenants/bravo/prompts", "/api/v1/tenants/bravo/served"):
        assert (await client.get(path, headers=auth(world.bravo["reader"]))).status_code == 200
    answer = await _mcp(world, "/mcp/bravo", world.bravo["reader"], "prompts/get",
                        {"name": "bravo-prompt"})  # fmt: skip
    assert answer.status_code == 200 and SECRET in answer.text  # the control: bravo reads bravo


async def _mcp(
    world: World, path: str, credential: str, method: str, params: dict[str, Any]
) -> Any:
    """One 2026-07-28 (stateless) request."""
    headers = {
        "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
    }  # fmt: skip
    if method in ("prompts/get", "tools/call"):
        headers["Mcp-Name"] = params["name"]
    if method == "resources/read":
        headers["Mcp-Name"] = params["uri"]
    if credential:
        headers["Authorization"] = credential
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "matrix", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    # A stream (subscriptions/listen) would never end: its status and first bytes are enough.
    async with world.api.client.stream("POST", path, json=body, headers=headers) as answer:
        if answer.status_code != 200 or "event-stream" not in answer.headers.get(
            "content-type", ""
        ):
            await answer.aread()
        return answer


async def _session_mcp(world: World, credential: str, method: str, params: dict[str, Any]) -> Any:
    """A 2025-11-25 request on a session bravo's reader opened, sent with another credential."""
    headers = {"Accept": "application/json, text/event-stream"}
    opened = await world.api.client.post(
        "/mcp/bravo", headers={**headers, **auth(world.bravo["reader"])},
        json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "matrix", "version": "1"}}},
    )  # fmt: skip
    assert opened.status_code == 200, opened.text
    headers.update({
        "Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25",
    })  # fmt: skip
    if credential:
        headers["Authorization"] = credential
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return await world.api.client.post("/mcp/bravo", json=body, headers=headers)


@pytest.mark.parametrize("caches", ["cold", "warm"])
async def test_no_caller_of_another_tenant_reaches_bravo(
    api: Api, superuser: asyncpg.Connection, caches: str
) -> None:
    world = await _world(api, superuser)
    if caches == "warm":
        await _warm(world)
    failures = []
    for (method, template), entry in sorted(REST.items()):
        if entry.door in ("public", "console-public"):
            continue
        path = _path(template, world.params)
        callers = CALLERS if entry.door != "console" else ["console"]
        for caller in callers:
            if entry.door == "console":
                world.api.client.cookies.set("registry_console", world.alpha_cookie)
                answer = await _send(world, method, path, entry, "")
                world.api.client.cookies.clear()
                allowed = {303, 401, 403}
            else:
                answer = await _send(world, method, path, entry, world.alpha[caller])
                # a valid key of another tenant: 403; no key: 401; a key that is no key: either
                allowed = {403} if caller in ("reader", "editor", "publisher", "admin") else {401}
                if caller in ("revoked", "expired", "made-up"):
                    allowed = {401, 403}
                if entry.door == "operator":
                    allowed = {401, 403}
            if answer.status_code not in allowed:
                failures.append(f"{caller}: {method} {path} answered {answer.status_code}")
            _no_trace_of_bravo(answer)
    for mcp_method, params in MCP.items():
        for caller in CALLERS:
            if mcp_method not in ("ping", "logging/setLevel"):
                answer = await _mcp(world, "/mcp/bravo", world.alpha[caller], mcp_method, params)
                if answer.status_code not in (401, 403):
                    failures.append(
                        f"{caller}: stateless {mcp_method} answered {answer.status_code}"
                    )
                _no_trace_of_bravo(answer)
            if mcp_method not in ("server/discover", "subscriptions/listen"):
                answer = await _session_mcp(world, world.alpha[caller], mcp_method, params)
                if answer.status_code not in (401, 403, 404):
                    failures.append(f"{caller}: session {mcp_method} answered {answer.status_code}")
                _no_trace_of_bravo(answer)
    assert not failures, "\n".join(failures)
    # Nothing was written to bravo by any of them.
    assert (
        await superuser.fetchval(
            "SELECT count(*) FROM prompts p JOIN tenants t ON t.id = p.tenant_id "
            "WHERE t.slug = 'bravo'"
        )
        == 1
    )
    assert await superuser.fetchval("SELECT title FROM tenants WHERE slug = 'bravo'") == SECRET


ADMIN_READS = {
    "/audit", "/keys", "/issuers", "/webhooks", "/webhooks/{endpoint_id}/deliveries",
    "/subscribers", "/libraries",
}  # fmt: skip
# Who a library prompt's change reaches: the publishers who move its labels read it, not below.
PUBLISHER_READS = {"/prompts/{name}/subscribers"}
RANK = {"reader": 0, "editor": 1, "publisher": 2, "admin": 3}


async def test_each_role_of_the_tenant_reads_what_its_role_allows(
    api: Api, superuser: asyncpg.Connection
) -> None:
    """The other side of the matrix: bravo's own keys on bravo's reads, each answered by its role
    (the admin's reads refused to the roles below, every other read answered)."""
    world = await _world(api, superuser)
    failures = []
    for (method, template), entry in sorted(REST.items()):
        if entry.door != "tenant" or method != "GET" or template.endswith("/changes"):
            continue  # the change stream is a stream: its own tests read it
        tail = template.removeprefix(T)
        needed = (
            "admin" if tail in ADMIN_READS else "publisher" if tail in PUBLISHER_READS else "reader"
        )
        path = _path(template, world.params)
        for role in RANK:
            answer = await _send(world, method, path, entry, world.bravo[role])
            expected = 200 if RANK[role] >= RANK[needed] else 403
            if answer.status_code != expected:
                failures.append(f"bravo {role}: GET {path} answered {answer.status_code}")
    for role in RANK:
        answer = await _mcp(world, "/mcp/bravo", world.bravo[role], "prompts/get",
                            {"name": "bravo-prompt"})  # fmt: skip
        if answer.status_code != 200 or SECRET not in answer.text:
            failures.append(f"bravo {role}: prompts/get answered {answer.status_code}")
    assert not failures, "\n".join(failures)


async def test_anonymous_callers_of_a_public_tenant(
    api: Api, superuser: asyncpg.Connection
) -> None:
    """A public tenant's published label is anyone's over MCP; its REST API, its other labels and
    every other tenant are not."""
    world = await _world(api, superuser)
    opened = await api.client.patch(
        "/api/v1/tenants/bravo", json={"public_read": True}, headers=auth(world.bravo["admin"])
    )
    assert opened.status_code == 200, opened.text
    published = await _mcp(world, "/mcp/bravo", "", "prompts/get", {"name": "bravo-prompt"})
    assert published.status_code == 200 and SECRET in published.text  # the control
    draft = await _mcp(world, "/mcp/bravo/staging", "", "prompts/get", {"name": "bravo-prompt"})
    assert draft.status_code == 401 and SECRET not in draft.text
    private = await _mcp(world, "/mcp/alpha", "", "prompts/list", {})
    assert private.status_code == 401
    for (method, template), entry in sorted(REST.items()):
        if entry.door == "tenant" and not template.endswith("/server-card"):
            answer = await _send(world, method, _path(template, world.params), entry, "")
            assert answer.status_code == 401, (method, template, answer.status_code)
            _no_trace_of_bravo(answer)
    # Its endpoint's Server Card is anyone's, as the endpoint is; a draft label's is not.
    card = await api.client.get("/mcp/bravo/server-card")
    assert card.status_code == 200 and card.json()["remotes"][0]["url"].endswith("/mcp/bravo")
    staging = await api.client.get("/mcp/bravo/staging/server-card")
    assert staging.status_code == 401, staging.text
    assert (await api.client.get("/mcp/alpha/server-card")).status_code == 401


@pytest.mark.slow
def test_across_two_workers_warm(pg_server: PgServer, db_name: str) -> None:
    """Two workers, each already holding both tenants and alpha's checked keys (every request below
    is repeated, so both workers see each): alpha's keys still reach nothing of bravo's, over MCP
    (every stateless method) and REST."""
    server = start_server(
        {"REGISTRY_DATABASE_URL": pg_server.plain_url(db_name), "REGISTRY_OPERATOR_TOKEN": OPERATOR_TOKEN},
        workers=2,
    )  # fmt: skip
    prompt = {"name": "bravo-prompt", "description": SECRET,
              "messages": [{"role": "user", "content": {"type": "text", "text": SECRET}}]}  # fmt: skip
    try:
        alpha = server.tenant("alpha", roles=tuple(RANK), prompts=[{**prompt, "name": "a"}])
        bravo = server.tenant("bravo", roles=("reader",), prompts=[prompt])
        with httpx.Client(base_url=server.url, timeout=30) as client:

            def mcp(path: str, key: str, method: str, params: dict[str, Any]) -> httpx.Response:
                headers = {"Accept": "application/json, text/event-stream",
                           "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method,
                           "Authorization": f"Bearer {key}"}  # fmt: skip
                if method in ("prompts/get", "tools/call", "resources/read"):
                    headers["Mcp-Name"] = params.get("name") or params["uri"]
                meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                        "io.modelcontextprotocol/clientInfo": {"name": "matrix", "version": "1"},
                        "io.modelcontextprotocol/clientCapabilities": {}}  # fmt: skip
                body = {"jsonrpc": "2.0", "id": 1, "method": method,
                        "params": {**params, "_meta": meta}}  # fmt: skip
                return client.post(path, json=body, headers=headers)

            for _ in range(8):  # warm: both workers hold both tenants and alpha's keys
                assert mcp("/mcp/bravo", bravo["reader"], "prompts/list", {}).status_code == 200
                for key in alpha.values():
                    assert mcp("/mcp/alpha", key, "prompts/list", {}).status_code == 200
            for _ in range(8):
                for role, key in alpha.items():
                    for method, params in MCP.items():
                        if method in ("ping", "logging/setLevel", "subscriptions/listen"):
                            continue  # session-era methods; a stream (refused, in the test above)
                        answer = mcp("/mcp/bravo", key, method, params)
                        assert answer.status_code == 403, (role, method, answer.text[:200])
                        assert SECRET not in answer.text
                    for path in ("", "/prompts", "/prompts/bravo-prompt", "/served", "/export"):
                        answer = client.get(
                            f"/api/v1/tenants/bravo{path}", headers=auth(f"Bearer {key}")
                        )
                        assert answer.status_code == 403 and SECRET not in answer.text, path
    finally:
        stop_server(server)
