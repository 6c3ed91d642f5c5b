"""What the ``mcp`` fixture (tests/mcp/conftest.py) needs to write one MCP scenario for every
transport: the client interface they share, and ``registry mcp-stdio`` as such a client."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from typing import Any, Protocol

from tests.conftest import ROOT
from tests.mcp.schema import check_response

TRANSPORTS = ("http", "stdio", "live")
CHECKED = {"initialize", "ping", "prompts/list", "prompts/get", "completion/complete"}


class McpClient(Protocol):
    revision: str

    async def initialize(self, revision: str = "2025-11-25") -> dict[str, Any]: ...
    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]: ...


class StdioMcp:
    """``registry mcp-stdio`` in a child process: one JSON line out, the line answering it back
    (notifications in between are skipped)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.revision = "2025-11-25"
        self.next_id = 0

    async def send(self, message: dict[str, Any]) -> dict[str, Any] | None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        await self.process.stdin.drain()
        if "id" not in message:
            return None
        while True:
            line = await asyncio.wait_for(self.process.stdout.readline(), 30)
            assert line, "mcp-stdio ended"
            answer: dict[str, Any] = json.loads(line)
            if answer.get("id") == message["id"]:
                return answer

    async def initialize(self, revision: str = "2025-11-25") -> dict[str, Any]:
        answer = await self.send(
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": revision, "capabilities": {},
                "clientInfo": {"name": "registry-tests", "version": "1"}}}
        )  # fmt: skip
        assert answer is not None and "result" in answer, answer
        self.revision = answer["result"]["protocolVersion"]
        check_response(self.revision, "initialize", answer)
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return dict(answer["result"])

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        answer = await self.send(message)
        assert answer is not None
        if method in CHECKED:
            check_response(self.revision, method, answer)
        return answer


async def stdio(env: dict[str, str]) -> AsyncIterator[McpClient]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "registry", "mcp-stdio", "--tenant", "acme",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL, env=env, cwd=ROOT,
    )  # fmt: skip
    try:
        yield StdioMcp(process)
    finally:
        assert process.stdin is not None
        process.stdin.close()
        await asyncio.wait_for(process.wait(), 30)
