"""What users would run instead, serving the same 10,000 prompts: the official MCP Python SDK's
low-level server and its high-level server (FastMCP's lineage), plus a bare ASGI JSON endpoint that
marks the HTTP ceiling. Each is a factory for uvicorn (`--factory`), run like the registry."""

from __future__ import annotations

import json
import os
from typing import Any

# How many prompts the peers serve (and the workloads ask for): 10,000, or fewer for a quick run
# (bench/run --peer-prompts sets it for the servers it starts; the registry's tenant keeps 10,000).
PEER_PROMPTS = int(os.environ.get("BENCH_PEER_PROMPTS", "10000"))
PEER_TENANT = "bench-peer"
TONES = ["formal", "casual", "friendly", "terse"]


def peer_prompt(index: int) -> dict[str, Any]:
    """Prompt ``index`` as the registry stores it (a Mustache template with two typed arguments)."""
    return {
        "name": f"peer-{index:05d}",
        "description": f"Peer prompt {index}",
        "arguments": [
            {"name": "topic", "description": "what to write about", "required": True},
            {"name": "tone", "description": "how to sound", "enum": TONES, "default": "formal"},
        ],
        "text": f"Write about {{{{topic}}}} in a {{{{tone}}}} tone. (prompt {index})",
    }


def _render(index: int, topic: str, tone: str) -> str:
    return f"Write about {topic} in a {tone} tone. (prompt {index})"


def lowlevel_app() -> Any:
    from mcp import types
    from mcp.server.lowlevel.server import Server

    prompts = [
        types.Prompt(
            name=f"peer-{i:05d}",
            description=f"Peer prompt {i}",
            arguments=[
                types.PromptArgument(
                    name="topic", description="what to write about", required=True
                ),
                types.PromptArgument(name="tone", description="how to sound", required=False),
            ],
        )
        for i in range(PEER_PROMPTS)
    ]
    index = {p.name: i for i, p in enumerate(prompts)}

    async def list_prompts(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        start = int(params.cursor) if params and params.cursor else 0
        page = prompts[start : start + 100]
        more = start + 100 < len(prompts)
        return types.ListPromptsResult(prompts=page, next_cursor=str(start + 100) if more else None)

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        i = index[params.name]
        arguments = params.arguments or {}
        text = _render(i, arguments.get("topic", ""), arguments.get("tone", "formal"))
        return types.GetPromptResult(
            description=f"Peer prompt {i}",
            messages=[
                types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))
            ],
        )

    server = Server("bench-lowlevel", on_list_prompts=list_prompts, on_get_prompt=get_prompt)
    return server.streamable_http_app(
        streamable_http_path="/mcp", json_response=True, stateless_http=True
    )


def highlevel_app() -> Any:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.prompts.base import Prompt

    server = MCPServer("bench-highlevel")
    for i in range(PEER_PROMPTS):

        def make(i: int = i) -> Any:
            def prompt(topic: str, tone: str = "formal") -> str:
                return _render(i, topic, tone)

            return prompt

        server.add_prompt(
            Prompt.from_function(make(), name=f"peer-{i:05d}", description=f"Peer prompt {i}")
        )
    return server.streamable_http_app(
        streamable_http_path="/mcp", json_response=True, stateless_http=True
    )


def bare_app() -> Any:
    """The HTTP ceiling: an ASGI app answering a fixed JSON-RPC result, nothing else."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {
                "resultType": "complete",
                "messages": [
                    {
                        "role": "user",
                        "content": {"type": "text", "text": "Write about x in a formal tone."},
                    }
                ],
            },
        }
    ).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app
