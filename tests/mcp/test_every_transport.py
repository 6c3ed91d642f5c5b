"""MCP scenarios written once and run over every transport (the ``mcp`` fixture): what a client sees
must not depend on how its bytes travel."""

from __future__ import annotations

import pytest

from tests.mcp.transports import McpClient

pytestmark = pytest.mark.slow


async def test_list_get_complete_and_refuse(mcp: McpClient) -> None:
    await scenario(mcp, "2025-11-25")


@pytest.mark.parametrize(
    "mcp", ["http"], indirect=True
)  # each revision's shapes: tests/mcp/test_http
async def test_the_oldest_revision_in_process(mcp: McpClient) -> None:
    await scenario(mcp, "2024-11-05")


async def scenario(mcp: McpClient, revision: str) -> None:
    initialized = await mcp.initialize(revision)
    assert initialized["protocolVersion"] == revision
    assert initialized["capabilities"]["prompts"] == {"listChanged": True}
    assert ("completions" in initialized["capabilities"]) is (revision != "2024-11-05")

    listed = (await mcp.call("prompts/list"))["result"]["prompts"]
    assert [p["name"] for p in listed] == sorted(p["name"] for p in listed)
    assert len(listed) == 4
    assert all(("title" in p) is False for p in listed)  # none given, and none before 2025-06-18

    got = await mcp.call(
        "prompts/get",
        {"name": "test_prompt_with_arguments", "arguments": {"arg1": "a", "arg2": "b"}},
    )
    assert got["result"]["messages"][0]["content"]["text"] == (
        "Prompt with arguments: arg1='a', arg2='b'"
    )
    image = await mcp.call("prompts/get", {"name": "test_prompt_with_image"})
    assert image["result"]["messages"][0]["content"]["type"] == "image"

    missing = await mcp.call("prompts/get", {"name": "test_prompt_with_arguments"})
    assert missing["error"]["code"] == -32602 and "arg1" in missing["error"]["message"]
    unknown = await mcp.call("prompts/get", {"name": "no-such-prompt"})
    assert unknown["error"]["code"] == -32602
    absent = await mcp.call("tools/list")
    assert absent["error"]["code"] == -32601  # not offered: no tools capability

    if revision != "2024-11-05":
        done = await mcp.call(
            "completion/complete",
            {
                "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
                "argument": {"name": "arg1", "value": "test-t"},
            },
        )
        assert done["result"]["completion"]["values"] == ["test-two"]
