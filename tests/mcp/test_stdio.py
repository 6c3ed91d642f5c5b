"""`registry mcp-stdio`: the same methods over stdin/stdout, with the official SDK's stdio client."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

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


def stdio_command(tenant: str = "acme") -> list[str]:
    return ["-m", "registry", "mcp-stdio", "--tenant", tenant]


def stdio_params(env: dict[str, str]) -> StdioServerParameters:
    """How the SDK's clients launch the server."""
    return StdioServerParameters(command=sys.executable, args=stdio_command(), env=env, cwd=ROOT)


def run_lines(
    env: dict[str, str], lines: list[dict[str, object]], *, extra: str = "", tenant: str = "acme"
) -> subprocess.CompletedProcess[str]:
    """`registry mcp-stdio` fed these lines (then ``extra`` as it is) until end of input."""
    text = "".join(json.dumps(line) + "\n" for line in lines) + extra
    return subprocess.run(
        [sys.executable, *stdio_command(tenant)],
        input=text,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )


async def test_sdk_stdio_client(env: dict[str, str]) -> None:
    async with (
        stdio_client(stdio_params(env)) as (read, write),
        ClientSession(read, write) as session,
    ):
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
    lines: list[dict[str, object]] = [
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
    result = run_lines(env, lines, extra="not json\n")
    assert result.returncode == 0, result.stderr
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    assert [a.get("id") for a in answers] == [1, 2, 3, 4, None]
    assert answers[0]["error"]["message"].startswith("send initialize first")
    assert answers[1]["result"]["protocolVersion"] == "2024-11-05"
    check_response("2024-11-05", "initialize", answers[1])
    check_response("2024-11-05", "prompts/get", answers[2])
    assert answers[3]["error"]["code"] == -32602
    assert answers[4]["error"]["code"] == -32700

    unknown = run_lines(env, [], tenant="ghost")
    assert unknown.returncode == 1
    assert "tenant 'ghost' not found" in unknown.stderr


META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def test_stateless_lines(env: dict[str, str]) -> None:
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": META}},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "prompts/get",
            "params": {"_meta": META, "name": "test_simple_prompt"},
        },
        {"jsonrpc": "2.0", "id": 3, "method": "server/discover", "params": {}},
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "prompts/list",
            "params": {"_meta": {**META, "io.modelcontextprotocol/protocolVersion": "1999-01-01"}},
        },
        {"jsonrpc": "2.0", "id": 5, "method": "ping", "params": {"_meta": META}},
    ]
    result = run_lines(env, lines)
    assert result.returncode == 0, result.stderr
    answers = {a["id"]: a for a in map(json.loads, result.stdout.splitlines())}
    check_response("2026-07-28", "server/discover", answers[1])
    assert answers[1]["result"]["resultType"] == "complete"
    check_response("2026-07-28", "prompts/get", answers[2])
    assert answers[3]["error"]["code"] == -32602
    assert answers[4]["error"]["code"] == -32022
    assert "2026-07-28" in answers[4]["error"]["data"]["supported"]
    assert answers[5]["error"]["code"] == -32601


async def test_sdk_client_over_stdio_in_2026_mode_with_a_subscription(
    env: dict[str, str], api: Api
) -> None:
    from mcp.client import Client

    async with Client(stdio_params(env)) as client:
        assert client.session.protocol_version == "2026-07-28"  # found by the server/discover probe
        assert len((await client.list_prompts()).prompts) == 4
        async with client.listen(prompts_list_changed=True) as subscription:
            body = {
                "name": "fresh",
                "labels": ["production"],
                "description": "new",
                "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
            }
            created = await api.client.post(
                "/api/v1/tenants/acme/prompts", json=body, headers=api.operator
            )
            assert created.status_code == 201
            event = await asyncio.wait_for(anext(aiter(subscription)), 15)
            assert event is not None
        assert len((await client.list_prompts()).prompts) == 5


async def test_events_stream_pushes_over_stdio(env: dict[str, str], api: Api) -> None:
    """The Events extension's push delivery on stdio: an unknown type refused at once, else
    ``notifications/events/active``, then each change's ``notifications/events/event`` as it is
    written elsewhere, until the client cancels the request."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, *stdio_command(), env=env, cwd=ROOT,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stdin is not None and process.stdout is not None

    async def send(message: dict[str, object]) -> None:
        assert process.stdin is not None
        process.stdin.write(json.dumps(message).encode() + b"\n")
        await process.stdin.drain()

    async def receive() -> dict[str, Any]:
        assert process.stdout is not None
        return dict(json.loads(await asyncio.wait_for(process.stdout.readline(), 30)))

    try:
        stream = {"_meta": META, "name": "prompt.changed", "arguments": {}, "cursor": None}
        await send({"jsonrpc": "2.0", "id": 1, "method": "events/stream",
                    "params": {**stream, "name": "nope"}})  # fmt: skip
        refused = await receive()
        assert refused["id"] == 1 and refused["error"]["code"] == -32023
        await send({"jsonrpc": "2.0", "id": 2, "method": "events/stream", "params": stream})
        active = await receive()
        assert active["method"] == "notifications/events/active", active
        assert active["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 2
        body = {"name": "fresh", "labels": ["production"],
                "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}]}  # fmt: skip
        created = await api.client.post(
            "/api/v1/tenants/acme/prompts", json=body, headers=api.operator
        )
        assert created.status_code == 201
        event = await receive()
        assert event["method"] == "notifications/events/event", event
        assert event["params"]["data"]["prompt"] == "fresh" and event["params"]["cursor"]
        await send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                    "params": {"requestId": 2}})  # fmt: skip
        await send({"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"_meta": META}})
        while (answer := await receive()).get("id") != 3:  # the stream's last events, if any
            assert answer.get("method", "").startswith("notifications/events/"), answer
    finally:
        process.stdin.close()
        await asyncio.wait_for(process.wait(), 30)


def test_bad_lines_are_answered_and_the_server_reads_on(env: dict[str, str]) -> None:
    ping = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "ping"}).encode()
    lines = [
        b"\xff\xfe not utf-8",
        b"[" * 50_000,
        b'{"jsonrpc":"2.0","id":"\\ud800","method":"ping"}',
        b'{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"x@\\u00b2"}}',
        b"x" * 5_000,  # past the limit below
        ping,
    ]
    result = subprocess.run(
        [sys.executable, *stdio_command()],
        input=b"\n".join(lines) + b"\n",
        env={**env, "REGISTRY_MAX_REQUEST_BYTES": "4096"},
        capture_output=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    answers = [json.loads(line) for line in result.stdout.splitlines()]
    codes = [a["error"]["code"] if "error" in a else None for a in answers]
    assert codes == [-32700, -32600, -32600, -32600, -32600, None], answers
    assert answers[-1] == {"jsonrpc": "2.0", "id": 9, "result": {}}
