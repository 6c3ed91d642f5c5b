"""Tools from a live server, as clients without prompts use them: the official Python SDK lists and
calls them (an enum violation answers a tool error naming the argument), the 2026-07-28 envelope
checks Mcp-Name against the tool's name, and marking a prompt reaches an open listen stream as
notifications/tools/list_changed (the time it took is printed)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import types

from tests import agent_env
from tests.conftest import OPERATOR_TOKEN, ROOT, LiveServer, PgServer, module_server, unavailable
from tests.mcp.test_sdk import sdk_client
from tests.mcp.test_stateless_live import META, REVISION, listen
from tests.mcp.test_tools import PLAIN, REPLY

pytestmark = pytest.mark.slow
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}


@pytest.fixture(scope="module")
async def tools_on(pg_server: PgServer, template_db: str) -> AsyncIterator[tuple[LiveServer, str]]:
    async with module_server(pg_server, template_db) as live_server:
        keys = live_server.tenant("acme", roles=("reader",), prompts=[REPLY, PLAIN], tools=True)
        yield live_server, keys["reader"]


async def test_the_sdk_lists_and_calls_tools(
    tools_on: tuple[LiveServer, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, key = tools_on
    async with sdk_client(f"{server.url}/mcp/acme", key, "2025-11-25", monkeypatch) as session:
        await session.initialize()
        listed = await session.list_tools()
        names = sorted(t.name for t in listed.tools)
        assert names == ["find_prompts", "render_prompt", "support_reply"]
        reply = next(t for t in listed.tools if t.name == "support_reply")
        assert reply.input_schema["properties"]["topic"]["enum"] == ["billing", "shipping"]
        assert reply.annotations is not None and reply.annotations.read_only_hint is True
        done = await session.call_tool("support_reply", {"topic": "shipping"})
        assert not done.is_error
        assert isinstance(done.content[0], types.TextContent)
        assert done.content[0].text == "About shipping, calm."
        assert done.structured_content is not None and done.structured_content["version"] == 1
        refused = await session.call_tool("support_reply", {"topic": "refunds"})
        assert refused.is_error
        assert isinstance(refused.content[0], types.TextContent)
        assert "topic" in refused.content[0].text


def stateless_call(http: httpx.Client, name_header: str, params: dict[str, Any]) -> httpx.Response:
    return http.post(
        "/mcp/acme",
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"_meta": META, **params},
        },
        headers={
            "MCP-Protocol-Version": REVISION,
            "Mcp-Method": "tools/call",
            "Mcp-Name": name_header,
        },
    )


def test_2026_07_28_lists_with_cache_hints_and_checks_the_name_header(
    tools_on: tuple[LiveServer, str],
) -> None:
    server, key = tools_on
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}) as http:
        listed = http.post(
            "/mcp/acme",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}},
            headers={"MCP-Protocol-Version": REVISION, "Mcp-Method": "tools/list"},
        )
        assert listed.status_code == 200, listed.text
        assert listed.json()["result"]["cacheScope"] == "private"
        assert "ttlMs" in listed.json()["result"]
        params = {"name": "support_reply", "arguments": {"topic": "billing"}}
        assert stateless_call(http, "support_reply", params).json()["result"]["content"]
        mismatch = stateless_call(http, "render_prompt", params)
        assert mismatch.status_code == 400 and mismatch.json()["error"]["code"] == -32020


async def test_marking_a_prompt_reaches_an_open_stream(tools_on: tuple[LiveServer, str]) -> None:
    server, key = tools_on
    async with httpx.AsyncClient(
        base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=30
    ) as client:
        stream = listen(client, 1, {"toolsListChanged": True})
        ack = await asyncio.wait_for(anext(stream), 10)
        assert ack["params"]["notifications"] == {"toolsListChanged": True}
        started = time.monotonic()
        marked = await client.patch(
            "/api/v1/tenants/acme/prompts/plain", json={"as_tool": True}, headers=OPERATOR
        )
        assert marked.status_code == 200, marked.text
        changed = await asyncio.wait_for(anext(stream), 10)
        print(f"tools list_changed {time.monotonic() - started:.3f} s after the mark began")
        assert changed["method"] == "notifications/tools/list_changed"
        await stream.aclose()
        unmarked = await client.patch(  # as the module's other tests found it
            "/api/v1/tenants/acme/prompts/plain", json={"as_tool": False}, headers=OPERATOR
        )
        assert unmarked.status_code == 200, unmarked.text


# --- agent frameworks that show no prompts ------------------------------------------------------


def agent_python() -> Path:
    try:
        return agent_env.agent_python()
    except agent_env.Unavailable as error:
        unavailable(str(error))


def test_agent_frameworks_list_convert_and_call_the_tools(tools_on: tuple[LiveServer, str]) -> None:
    server, key = tools_on
    done = subprocess.run(
        [str(agent_python()), str(ROOT / "tests" / "mcp" / "agent_clients.py"),
         f"{server.url}/mcp/acme", key],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    seen = json.loads(done.stdout)
    agents, chain = seen["agents"], seen["langchain"]
    names = ["find_prompts", "render_prompt", "support_reply"]
    assert agents["names"] == names and chain["names"] == names
    # The Agents SDK hands a model a strict function schema: the typed arguments survive it.
    assert agents["strict"] is True, agents["schema"]
    assert agents["schema"]["properties"]["topic"]["enum"] == ["billing", "shipping"]
    assert "About shipping, calm." in agents["called"]
    assert "About billing, calm." in agents["rendered"]
    assert agents["refused"]["is_error"] is True and "topic" in agents["refused"]["text"]
    assert chain["args"]["topic"]["enum"] == ["billing", "shipping"]
    assert "About shipping, calm." in chain["called"]
    assert "topic" in chain["refused"]  # the tool error names the argument, for the model
