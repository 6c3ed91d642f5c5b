"""The prompts as tools, for clients that show no prompts: off by default (no tools capability,
tools/list not found); on, the marked prompts and two general tools, typed by the prompts'
arguments, each answer valid against the negotiated revision's schema."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Api, auth
from tests.mcp.conftest import RawMcp

TOPIC = {"name": "topic", "required": True, "enum": ["billing", "shipping"], "description": "What"}
REPLY = {
    "name": "support.reply", "description": "A support reply", "as_tool": True,
    "labels": ["production"], "arguments": [TOPIC, {"name": "tone", "default": "calm"}],
    "config": {"model": "gpt-5-mini", "temperature": 0.2},
    "messages": [{"role": "user", "content": {"type": "text", "text": "About {{topic}}, {{tone}}."}}],
}  # fmt: skip
PLAIN = {
    "name": "plain", "description": "Not marked", "labels": ["production"],
    "messages": [{"role": "user", "content": {"type": "text", "text": "Plain."}}],
}  # fmt: skip


async def tenant(api: Api, *, tools: bool) -> dict[str, str]:
    keys = await api.tenant("acme")
    for body in (REPLY, PLAIN):
        made = await api.client.post("/api/v1/tenants/acme/prompts", json=body,
                                     headers=auth(keys["publisher"]))  # fmt: skip
        assert made.status_code == 201, made.text
    if tools:
        patched = await api.client.patch(
            "/api/v1/tenants/acme", json={"mcp_tools": True}, headers=auth(keys["admin"])
        )
        assert patched.status_code == 200 and patched.json()["mcp_tools"] is True, patched.text
    return keys


async def test_tools_off_is_as_before(api: Api) -> None:
    keys = await tenant(api, tools=False)
    client = RawMcp(api.client, "/mcp/acme", headers=auth(keys["reader"]))
    initialized = await client.initialize("2025-11-25")
    assert "tools" not in initialized["capabilities"]
    assert (await client.error("tools/list"))["code"] == -32601


@pytest.mark.parametrize("revision", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
async def test_marked_and_general_tools(api: Api, revision: str) -> None:
    keys = await tenant(api, tools=True)
    client = RawMcp(api.client, "/mcp/acme", headers=auth(keys["reader"]))
    initialized = await client.initialize(revision)
    assert initialized["capabilities"]["tools"] == {"listChanged": True}
    listed = {t["name"]: t for t in (await client.result("tools/list"))["tools"]}
    assert set(listed) == {"find_prompts", "render_prompt", "support_reply"}
    reply = listed["support_reply"]
    assert reply["description"] == "A support reply"
    assert reply["inputSchema"]["properties"]["topic"]["enum"] == ["billing", "shipping"]
    assert reply["inputSchema"]["properties"]["tone"]["default"] == "calm"
    assert reply["inputSchema"]["required"] == ["topic"]
    assert ("annotations" in reply) is (revision != "2024-11-05")

    called = await client.result(
        "tools/call", {"name": "support_reply", "arguments": {"topic": "billing"}}
    )
    assert called["content"][0]["text"] == "About billing, calm."
    assert not called.get("isError")
    structured = called.get("structuredContent")
    if revision >= "2025-06-18":
        assert structured is not None and structured["version"] == 1
        assert structured["config"]["model"] == "gpt-5-mini"
    else:
        assert structured is None

    wrong = await client.result(
        "tools/call", {"name": "support_reply", "arguments": {"topic": "refunds"}}
    )
    assert wrong["isError"] is True and "topic" in wrong["content"][0]["text"]
    missing = await client.result("tools/call", {"name": "support_reply", "arguments": {}})
    assert missing["isError"] is True and "topic" in missing["content"][0]["text"]

    rendered = await client.result(
        "tools/call", {"name": "render_prompt", "arguments": {"name": "plain"}}
    )
    assert rendered["content"][0]["text"] == "Plain."
    found = await client.result(
        "tools/call", {"name": "find_prompts", "arguments": {"query": "plain"}}
    )
    assert "plain: Not marked" in found["content"][0]["text"]
    nowhere = await client.result(
        "tools/call", {"name": "render_prompt", "arguments": {"name": "nowhere"}}
    )
    assert nowhere["isError"] is True
    assert (await client.error("tools/call", {"name": "no_such_tool"}))["code"] == -32602
    assert (await client.error("tools/call", {"arguments": {}}))["code"] == -32602


async def test_a_mark_whose_tool_name_is_taken_is_refused(api: Api) -> None:
    keys = await tenant(api, tools=True)
    twin: dict[str, Any] = {**PLAIN, "name": "support:reply", "as_tool": True}
    refused = await api.client.post(
        "/api/v1/tenants/acme/prompts", json=twin, headers=auth(keys["publisher"])
    )
    assert refused.status_code == 409 and "support_reply" in refused.text
    general = await api.client.post(
        "/api/v1/tenants/acme/prompts", json={**PLAIN, "name": "find_prompts", "as_tool": True},
        headers=auth(keys["publisher"]),
    )  # fmt: skip
    assert general.status_code == 409 and "general tool" in general.text
    unmark = await api.client.patch(
        "/api/v1/tenants/acme/prompts/support.reply", json={"as_tool": False},
        headers=auth(keys["editor"]),
    )  # fmt: skip
    assert unmark.status_code == 200 and unmark.json()["as_tool"] is False
