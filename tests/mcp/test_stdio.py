"""`registry mcp-stdio`: the same methods over stdin/stdout, with the official SDK's stdio client."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.api.conftest import Api
from tests.conftest import ROOT, PgServer
from tests.mcp.conftest import CONFORMANCE_PROMPTS, add_prompts
from tests.mcp.schema import check_response

pytestmark = pytest.mark.slow


@pytest.fixture
async def env(api: Api, pg_server: PgServer, db_name: str) -> dict[str, str]:
    keys = await api.tenant("acme")
    await add_prompts(api, "acme", keys["publisher"], CONFORMANCE_PROMPTS)
    return {"REGISTRY_DATABASE_URL": pg_server.plain_url(db_name)}


async def test_sdk_stdio_client(env: dict[str, str]) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "registry", "mcp-stdio", "--tenant", "acme"],
        env=env,
        cwd=ROOT,
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        assert init.protocol_version == "2025-11-25"
        assert len((await session.list_prompts()).prompts) == 4
        got = await session.get_prompt("test_prompt_with_arguments", {"arg1": "x", "arg2": "y"})
        assert isinstance(got.messages[0].content, types.TextContent)
        assert "arg1='x'" in got.messages[0].content.text
        done = await session.complete(
            types.PromptReference(type="ref/prompt", name="test_prompt_with_arguments"),
            {"name": "arg1", "value": "test-t"},
        )
        assert done.completion.values == ["test-two"]


def test_raw_lines_and_errors(env: dict[str, str]) -> None:
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "prompts/list"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "initialize",
            "params": {
                "protocolVersion": "2024-11-05",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "prompts/get",
            "params": {"name": "test_prompt_with_image"},
        },
        {"jsonrpc": "2.0", "id": 4, "method": "prompts/get", "params": {"name": "missing"}},
    ]
    text = "\n".join(json.dumps(line) for line in lines) + "\nnot json\n"
    result = subprocess.run(
        [sys.executable, "-m", "registry", "mcp-stdio", "--tenant", "acme"],
        input=text,
        env={**env},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert [a.get("id") for a in answers] == [1, 2, 3, 4, None]
    assert answers[0]["error"]["message"] == "send initialize first"
    assert answers[1]["result"]["protocolVersion"] == "2024-11-05"
    check_response("2024-11-05", "initialize", answers[1])
    check_response("2024-11-05", "prompts/get", answers[2])
    assert answers[3]["error"]["code"] == -32602
    assert answers[4]["error"]["code"] == -32700

    unknown = subprocess.run(
        [sys.executable, "-m", "registry", "mcp-stdio", "--tenant", "ghost"],
        input="",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert unknown.returncode == 1
    assert "tenant 'ghost' not found" in unknown.stderr
