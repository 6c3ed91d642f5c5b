"""Hostile input on the MCP endpoint: nothing kept, nothing stalled, never a 500."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from registry.errors import TooManyStreams
from registry.events.streams import StreamSlots, last_event_id
from tests.conftest import Api, auth
from tests.mcp.conftest import ACCEPT, CONFORMANCE_PROMPTS, RawMcp, add_prompts
from tests.mcp.test_stateless import Stateless, meta


async def test_refusals_are_cached_without_the_exception_or_its_request(api: Api) -> None:
    """A cached "unknown prompt" must not keep the exception: its traceback pins the frames, and so
    the params, of every request that raised it."""
    await api.tenant("pub", public_read=True)
    anonymous = Stateless(api.client, "/mcp/pub", {})
    padding = "x" * 100_000
    for _ in range(3):
        answer = await anonymous.post(
            "prompts/get", {"_meta": meta(), "name": "nope", "padding": padding}
        )
        assert answer.status_code == 200
        assert answer.json()["error"]["code"] == -32602
        assert "unknown prompt 'nope'" in answer.json()["error"]["message"]
    cached = [value for value, _ in api.app.mcp.caches.resolved.lru._items.values()]
    assert cached, "the refusal was not cached at all"
    for value in cached:
        assert not isinstance(value, BaseException)
        assert not any(isinstance(v, BaseException) for v in vars(value).values())


async def test_hostile_bodies_get_json_rpc_errors_before_authentication(api: Api) -> None:
    await api.tenant("acme")  # private: these never get as far as the credential check
    headers = {"Accept": ACCEPT, "Content-Type": "application/json"}
    for body in [
        b"[" * 100_000,
        b'{"a":' * 5_000 + b"1" + b"}" * 5_000,
        b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}',
        b'{"jsonrpc":"2.0","id":1,"method":"pi\\udfffng"}',
        b'{"jsonrpc":"2.0","id":18446744073709551616,"method":"ping"}',
    ]:
        answer = await api.client.post("/mcp/acme", content=body, headers=headers)
        assert answer.status_code == 400, (body[:40], answer.status_code, answer.text)
        assert answer.json()["error"]["code"] == -32600, answer.text


async def test_bad_names_and_numbers_in_a_session(api: Api) -> None:
    keys = await api.tenant("acme")
    await add_prompts(api, "acme", keys["publisher"], CONFORMANCE_PROMPTS)
    client = RawMcp(api.client, "/mcp/acme", headers=auth(keys["reader"]))
    await client.initialize("2025-03-26")
    for name in ["test_simple_prompt@99999999999", "test_simple_prompt@²"]:
        answer = await client.call("prompts/get", {"name": name})
        assert answer["error"]["code"] == -32602, answer
    surrogate = json.dumps(  # escaped, as a client would send it
        {"jsonrpc": "2.0", "id": 5, "method": "prompts/get", "params": {"name": "x\ud800"}}
    ).encode()
    refused = await api.client.post("/mcp/acme", content=surrogate, headers=client._headers())
    assert refused.status_code == 400 and refused.json()["error"]["code"] == -32600
    batch = [
        {"jsonrpc": "2.0", "id": 2**64, "method": "ping"},
        {"jsonrpc": "2.0", "id": 7, "method": "ping"},
    ]
    answered = await api.client.post("/mcp/acme", json=batch, headers=client._headers())
    assert answered.status_code == 200, answered.text
    first, second = answered.json()
    assert first["error"]["code"] == -32600 and first["id"] is None
    assert second == {"jsonrpc": "2.0", "id": 7, "result": {}}


def test_an_unreadable_last_event_id_means_up_to_date() -> None:
    for header in ["\xb2", "²", "1_0", "-3", "99999999999999999999999", ""]:
        assert last_event_id(header, 5) == 5
    assert last_event_id(" 3 ", 5) == 3
    assert last_event_id("9", 5) == 5


async def test_anonymous_readers_see_published_labels_only(api: Api) -> None:
    keys = await api.tenant("pub", public_read=True)
    await add_prompts(api, "pub", keys["publisher"], CONFORMANCE_PROMPTS)  # production
    draft = {"messages": [{"role": "user", "content": {"type": "text", "text": "draft"}}]}
    written = await api.client.post(
        "/api/v1/tenants/pub/prompts/test_simple_prompt/versions",
        json=draft,
        headers=auth(keys["editor"]),
    )
    assert written.status_code == 201, written.text  # version 2, labelled latest only
    anonymous = Stateless(api.client, "/mcp/pub", {})
    got = await anonymous.result("prompts/get", {"name": "test_simple_prompt"})
    assert got["messages"][0]["content"]["text"] != "draft"
    for name in ("test_simple_prompt@latest", "test_simple_prompt@2"):
        refused = await anonymous.post("prompts/get", {"_meta": meta(), "name": name})
        assert refused.json()["error"]["code"] == -32602, refused.text
        assert "published labels" in refused.json()["error"]["message"]
    drafts = Stateless(api.client, "/mcp/pub/latest", {})
    assert (await drafts.post("prompts/list", {"_meta": meta()})).status_code == 401
    reader = Stateless(api.client, "/mcp/pub/latest", auth(keys["reader"]))
    assert (await reader.post("prompts/list", {"_meta": meta()})).status_code == 200

    opened = await api.client.patch(
        "/api/v1/tenants/pub", json={"public_drafts": True}, headers=auth(keys["admin"])
    )
    assert opened.status_code == 200 and opened.json()["public_drafts"] is True

    async def served() -> bool:
        return (await drafts.post("prompts/list", {"_meta": meta()})).status_code == 200

    deadline = asyncio.get_running_loop().time() + 10  # the tenant change reaches the cache
    while not await served():
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.02)


async def test_a_label_never_used_is_named_not_served_empty(api: Api) -> None:
    keys = await api.tenant("acme")
    await add_prompts(api, "acme", keys["publisher"], CONFORMANCE_PROMPTS)
    for path in ("/mcp/acme/mcp", "/mcp/acme/stagign"):
        client = RawMcp(api.client, path, headers=auth(keys["reader"]))
        answer = await client.client.post(
            path,
            json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}},
            headers=client._headers(),
        )  # fmt: skip
        assert answer.status_code == 404, answer.text
        assert "labels in use: latest, production" in answer.json()["error"]["message"]
        stateless = Stateless(api.client, path, auth(keys["reader"]))
        listed = await stateless.post("prompts/list", {"_meta": meta()})
        assert "labels in use: latest, production" in listed.json()["error"]["message"]
    empty = Stateless(api.client, "/mcp/acme/staging", auth(keys["reader"]))
    assert (await empty.post("prompts/list", {"_meta": meta()})).json()["error"]["code"] == -32602


async def test_browser_preflights_from_allowed_origins(api: Api) -> None:
    keys = await api.tenant("acme")
    await add_prompts(api, "acme", keys["publisher"], CONFORMANCE_PROMPTS)
    asked = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version",
    }
    allowed = await api.client.options(
        "/mcp/acme", headers={"Origin": "http://localhost:5173", **asked}
    )
    assert allowed.status_code == 204, allowed.text
    assert allowed.headers["access-control-allow-origin"] == "http://localhost:5173"
    assert "POST" in allowed.headers["access-control-allow-methods"]
    assert "Mcp-Session-Id" in allowed.headers["access-control-allow-headers"]
    refused = await api.client.options(
        "/mcp/acme", headers={"Origin": "https://evil.example", **asked}
    )
    assert refused.status_code == 403
    assert "access-control-allow-origin" not in refused.headers
    stateless = Stateless(
        api.client, "/mcp/acme", {**auth(keys["reader"]), "Origin": "http://127.0.0.1:3000"}
    )
    listed = await stateless.post("prompts/list", {"_meta": meta()})
    assert listed.status_code == 200
    assert listed.headers["access-control-allow-origin"] == "http://127.0.0.1:3000"
    assert "Mcp-Session-Id" in listed.headers["access-control-expose-headers"]


def test_stream_slots_bound_each_caller_and_tenant() -> None:
    slots = StreamSlots(per_caller=2, per_tenant=3)
    acme, other = uuid.uuid4(), uuid.uuid4()
    first = slots.take(acme, "key-a")
    slots.take(acme, "key-a")
    with pytest.raises(TooManyStreams) as refused:
        slots.take(acme, "key-a")
    assert refused.value.http_status == 429 and refused.value.retry_after_seconds
    slots.take(acme, "key-b")
    with pytest.raises(TooManyStreams):  # the tenant is full
        slots.take(acme, "key-c")
    slots.take(other, "key-c")  # another tenant is not
    first()
    first()  # releasing twice frees one slot only
    slots.take(acme, "key-a")
    with pytest.raises(TooManyStreams):
        slots.take(acme, "key-a")
