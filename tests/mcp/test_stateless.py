"""Revision 2026-07-28 on the same endpoint: stateless requests, raw HTTP, schema-checked."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from tests.conftest import Api, auth
from tests.mcp.conftest import CONFORMANCE_PROMPTS, RawMcp, add_prompts
from tests.mcp.schema import check_response, validate

REVISION = "2026-07-28"
CLIENT = {"name": "registry-tests", "version": "1"}


def meta(**extra: Any) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": REVISION,
        "io.modelcontextprotocol/clientInfo": CLIENT,
        "io.modelcontextprotocol/clientCapabilities": {},
        **extra,
    }


class Stateless:
    def __init__(self, client: httpx.AsyncClient, path: str, headers: dict[str, str]) -> None:
        self.client, self.path, self.headers = client, path, headers
        self.next_id = 0

    async def post(
        self, method: str, params: dict[str, Any], **headers: str | None
    ) -> httpx.Response:
        self.next_id += 1
        sent: dict[str, str | None] = {
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": REVISION,
            "Mcp-Method": method,
            **self.headers,
        }
        if "name" in params and method == "prompts/get":
            sent["Mcp-Name"] = params["name"]
        sent.update(headers)
        return await self.client.post(
            self.path,
            json={"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params},
            headers={k: v for k, v in sent.items() if v is not None},
        )

    async def result(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        response = await self.post(method, {"_meta": meta(), **(params or {})})
        assert response.status_code == 200, response.text
        body = response.json()
        check_response(REVISION, method, body)
        result = body["result"]
        assert result["resultType"] == "complete"
        assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "prompt-registry"
        return dict(result)


@pytest.fixture
async def client(api: Api) -> Stateless:
    keys = await api.tenant("acme")
    await add_prompts(api, "acme", keys["publisher"], CONFORMANCE_PROMPTS)
    await api.client.patch(
        "/api/v1/tenants/acme",
        json={"instructions": "Use these.", "list_ttl_ms": 5000},
        headers=auth(keys["admin"]),
    )
    return Stateless(api.client, "/mcp/acme", auth(keys["reader"]))


async def test_every_method(client: Stateless) -> None:
    discovered = await client.result("server/discover")
    assert discovered["supportedVersions"] == [
        "2024-11-05",
        "2025-03-26",
        "2025-06-18",
        "2025-11-25",
        REVISION,
    ]
    assert discovered["capabilities"] == {
        "prompts": {"listChanged": True},
        "resources": {"listChanged": True},  # the files of skills (SEP-2640)
        "extensions": {
            "io.modelcontextprotocol/skills": {"directoryRead": True},
            "io.modelcontextprotocol/events": {},  # the Events extension's draft: poll delivery
        },
        "completions": {},
    }
    assert discovered["instructions"] == "Use these."
    assert (discovered["ttlMs"], discovered["cacheScope"]) == (5000, "private")

    listed = await client.result("prompts/list")
    assert len(listed["prompts"]) == 4
    assert (listed["ttlMs"], listed["cacheScope"]) == (5000, "private")
    got = await client.result(
        "prompts/get",
        {"name": "test_prompt_with_arguments", "arguments": {"arg1": "a", "arg2": "b"}},
    )
    assert got["messages"][0]["content"]["text"] == "Prompt with arguments: arg1='a', arg2='b'"
    done = await client.result(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
            "argument": {"name": "arg1", "value": "te"},
        },
    )
    assert done["completion"]["values"] == ["test-one", "test-two"]


async def test_envelope_errors_and_their_http_status(client: Stateless) -> None:
    cases: list[tuple[dict[str, Any], dict[str, str | None], int, int]] = [
        # (params, headers, status, code)
        ({}, {}, 400, -32602),  # no _meta
        ({"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}, {}, 400, -32602),
        ({"_meta": {"io.modelcontextprotocol/protocolVersion": REVISION}}, {}, 400, -32602),
        (
            {"_meta": meta(**{"io.modelcontextprotocol/protocolVersion": "2099-01-01"})},
            {"MCP-Protocol-Version": "2099-01-01"},
            400,
            -32022,
        ),
        (
            {"_meta": meta(**{"io.modelcontextprotocol/protocolVersion": "2099-01-01"})},
            {},
            400,
            -32020,
        ),
        ({"_meta": meta()}, {"Mcp-Method": "prompts/list"}, 400, -32020),
        ({"_meta": meta()}, {"Mcp-Method": None}, 400, -32020),
    ]
    for params, headers, status, code in cases:
        response = await client.post("server/discover", params, **headers)
        assert response.status_code == status, (params, headers, response.text)
        body = response.json()
        assert body["error"]["code"] == code, body
        assert body["id"] == client.next_id  # errors carry the request's id
        if code == -32022:
            validate(REVISION, "UnsupportedProtocolVersionError", body)
            assert body["error"]["data"]["requested"] == "2099-01-01"
            assert REVISION in body["error"]["data"]["supported"]
        elif code == -32020:
            validate(REVISION, "HeaderMismatchError", body)
    # Mcp-Name must mirror params.name (base64 sentinel form accepted).
    mismatch = await client.post(
        "prompts/get", {"_meta": meta(), "name": "test_simple_prompt"}, **{"Mcp-Name": "other"}
    )
    assert (mismatch.status_code, mismatch.json()["error"]["code"]) == (400, -32020)
    encoded = "=?base64?" + base64.b64encode(b"test_simple_prompt").decode() + "?="
    ok = await client.post(
        "prompts/get", {"_meta": meta(), "name": "test_simple_prompt"}, **{"Mcp-Name": encoded}
    )
    assert ok.status_code == 200, ok.text
    # Methods this revision does not have: 404 with -32601.
    for method in ("initialize", "ping", "logging/setLevel", "tools/list", "resources/subscribe"):
        response = await client.post(method, {"_meta": meta()})
        assert (response.status_code, response.json()["error"]["code"]) == (404, -32601), method
    # Handler errors are ordinary JSON-RPC errors of this revision.
    missing = await client.post(
        "prompts/get", {"_meta": meta(), "name": "test_prompt_with_arguments"}
    )
    assert missing.status_code == 200
    check_response(REVISION, "prompts/get", missing.json())
    assert missing.json()["error"]["code"] == -32602


async def test_no_sessions_here(api: Api, client: Stateless) -> None:
    for method in ("GET", "DELETE"):
        response = await api.client.request(
            method, "/mcp/acme", headers={**client.headers, "Accept": "text/event-stream"}
        )
        assert response.status_code == 405
        assert response.headers["allow"] == "POST"
    # A stray Mcp-Session-Id on a stateless request is ignored; none is minted.
    response = await client.post(
        "prompts/list", {"_meta": meta()}, **{"Mcp-Session-Id": "whatever"}
    )
    assert response.status_code == 200
    assert "mcp-session-id" not in response.headers
    # Both eras on one endpoint: an initialize still starts a session.
    legacy = RawMcp(api.client, "/mcp/acme", headers=client.headers)
    assert (await legacy.initialize("2025-11-25"))["protocolVersion"] == "2025-11-25"
    assert len((await legacy.result("prompts/list"))["prompts"]) == 4


async def test_auth_applies_to_stateless_requests(api: Api, client: Stateless) -> None:
    anonymous = Stateless(api.client, "/mcp/acme", {})
    assert (await anonymous.post("prompts/list", {"_meta": meta()})).status_code == 401
    other = await api.tenant("other")
    foreign = Stateless(api.client, "/mcp/acme", auth(other["reader"]))
    assert (await foreign.post("prompts/list", {"_meta": meta()})).status_code == 403


async def test_missing_arguments_are_asked_for_through_elicitation(
    api: Api, client: Stateless
) -> None:
    keys = await api.tenant("forms")
    await add_prompts(
        api,
        "forms",
        keys["publisher"],
        [
            {
                "name": "ticket",
                "description": "Summarise a support ticket",
                "arguments": [
                    {
                        "name": "id",
                        "title": "Ticket",
                        "description": "the ticket id",
                        "required": True,
                        "pattern": "[A-Z]+-[0-9]+",
                        "max_length": 12,
                    },
                    {"name": "tone", "enum": ["formal", "casual"], "default": "formal"},
                    {"name": "lang", "required": True},
                ],
                "messages": [
                    {
                        "role": "user",
                        "content": {"type": "text", "text": "{{id}} in {{lang}}, {{tone}}"},
                    }
                ],
            }
        ],
    )
    forms = Stateless(api.client, "/mcp/forms", auth(keys["reader"]))
    elicit = meta(**{"io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}})
    params = {"_meta": elicit, "name": "ticket", "arguments": {"lang": "en"}}

    first = await forms.post("prompts/get", params)
    assert first.status_code == 200
    body = first.json()
    validate(REVISION, "JSONRPCResultResponse", body)
    validate(REVISION, "InputRequiredResult", body["result"])
    result = body["result"]
    assert result["resultType"] == "input_required"
    request = result["inputRequests"]["arguments"]
    validate(REVISION, "ElicitRequest", {"jsonrpc": "2.0", "id": 1, **request})
    form = request["params"]
    assert form["message"] == "Summarise a support ticket"
    assert form["requestedSchema"]["required"] == ["id"]  # lang was given
    assert form["requestedSchema"]["properties"] == {
        "id": {
            "type": "string",
            "title": "Ticket",
            "description": "the ticket id",
            "maxLength": 12,
            "pattern": "[A-Z]+-[0-9]+",
        },
        "tone": {"type": "string", "enum": ["formal", "casual"], "default": "formal"},
    }
    state = result["requestState"]

    accepted = await forms.post(
        "prompts/get",
        {
            **params,
            "requestState": state,
            "inputResponses": {
                "arguments": {"action": "accept", "content": {"id": "AB-7", "tone": "casual"}}
            },
        },
    )
    done = accepted.json()["result"]
    assert done["resultType"] == "complete"
    assert done["messages"][0]["content"]["text"] == "AB-7 in en, casual"
    check_response(REVISION, "prompts/get", accepted.json())

    for action in ("decline", "cancel"):
        refused = await forms.post(
            "prompts/get",
            {**params, "requestState": state, "inputResponses": {"arguments": {"action": action}}},
        )
        assert refused.json()["error"]["code"] == -32602
        assert "missing required arguments" in refused.json()["error"]["message"]
    # Answers still have to satisfy the declarations.
    invalid = await forms.post(
        "prompts/get",
        {
            **params,
            "requestState": state,
            "inputResponses": {"arguments": {"action": "accept", "content": {"id": "nope"}}},
        },
    )
    assert "does not match the pattern" in invalid.json()["error"]["message"]
    # requestState is bound to the request, the caller and the server's key.
    tampered = state[:-3] + ("AAA" if not state.endswith("AAA") else "BBB")
    for bad in (
        {**params, "requestState": tampered},
        {**params, "arguments": {"lang": "fr"}, "requestState": state},
        {**params, "name": "ticket@1", "requestState": state},
    ):
        answer = await forms.post(
            "prompts/get",
            {
                **bad,
                "inputResponses": {"arguments": {"action": "accept", "content": {"id": "AB-1"}}},
            },
        )
        assert answer.json()["error"]["code"] == -32602, bad
    other_key = await api.client.post(
        "/api/v1/tenants/forms/keys", json={"role": "reader"}, headers=auth(keys["admin"])
    )
    someone_else = Stateless(
        api.client, "/mcp/forms", {"Authorization": f"Bearer {other_key.json()['secret']}"}
    )
    stolen = await someone_else.post(
        "prompts/get",
        {
            **params,
            "requestState": state,
            "inputResponses": {"arguments": {"action": "accept", "content": {"id": "AB-1"}}},
        },
    )
    assert "invalid requestState" in stolen.json()["error"]["message"]

    # A client that did not declare elicitation gets the plain error.
    plain = await forms.post(
        "prompts/get", {"_meta": meta(), "name": "ticket", "arguments": {"lang": "en"}}
    )
    assert plain.json()["error"]["code"] == -32602
    assert "missing required argument 'id'" in plain.json()["error"]["message"]


async def test_a_list_ttl_of_zero_is_every_lists_ttl(api: Api) -> None:
    """A tenant's ``list_ttl_ms`` of 0 (keep nothing) is the ``ttlMs`` of every list and of the
    discovery, not the server's default."""
    keys = await api.tenant("acme")
    await add_prompts(api, "acme", keys["publisher"], CONFORMANCE_PROMPTS)
    changed = await api.client.patch(
        "/api/v1/tenants/acme", json={"list_ttl_ms": 0, "mcp_tools": True},
        headers=auth(keys["admin"]),
    )  # fmt: skip
    assert changed.status_code == 200, changed.text
    client = Stateless(api.client, "/mcp/acme", auth(keys["reader"]))
    for method in (
        "server/discover",
        "prompts/list",
        "tools/list",
        "skills/list",
        "resources/list",
    ):
        response = await client.post(method, {"_meta": meta()})
        assert response.status_code == 200, response.text
        result = response.json()["result"]
        assert (method, result["ttlMs"], result["cacheScope"]) == (method, 0, "private")
