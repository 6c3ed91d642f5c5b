"""What users would run instead, serving the same 10,000 prompts (as prompts, and as tools of the
same names and arguments) and the same 1,000 skills' SKILL.md files (as resources): the official MCP
Python SDK's low-level server and its high-level server (FastMCP's lineage), plus a bare ASGI JSON
endpoint that marks the HTTP ceiling. Each is a factory for uvicorn (`--factory`), run like the
registry."""

from __future__ import annotations

import json
import os
from typing import Any, TypeVar

# How many prompts the peers serve (and the workloads ask for): 10,000, or fewer for a quick run
# (bench/run --peer-prompts sets it for the servers it starts; the registry's tenant keeps 10,000).
PEER_PROMPTS = int(os.environ.get("BENCH_PEER_PROMPTS", "10000"))
PEER_TENANT = "bench-peer"
# How many skills the registry's peer tenant and the peers serve alike (bench/run --peer-skills).
PEER_SKILLS = int(os.environ.get("BENCH_PEER_SKILLS", "1000"))
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


def peer_skill_name(index: int) -> str:
    return f"peer-skill-{index:04d}"


def peer_skill(index: int) -> str:
    """The SKILL.md of skill ``index``: front matter, then about a kilobyte of instructions."""
    name = peer_skill_name(index)
    steps = "\n".join(
        f"{n}. Check item {n} of the {name} checklist and note it." for n in range(20)
    )
    return f"---\nname: {name}\ndescription: Peer skill {index}\n---\n# {name}\n\n{steps}\n"


def skill_uri(index: int) -> str:
    return f"skill://{peer_skill_name(index)}/SKILL.md"


TOOL_SCHEMA = {
    "type": "object",
    "properties": {
        "topic": {"type": "string", "description": "what to write about"},
        "tone": {
            "type": "string",
            "description": "how to sound",
            "enum": TONES,
            "default": "formal",
        },
    },
    "required": ["topic"],
}


T = TypeVar("T")


def _page(items: list[T], params: Any) -> tuple[list[T], str | None]:
    """The page of 100 that a list request's cursor (an offset) points to, and the next one's."""
    start = int(params.cursor) if params and params.cursor else 0
    more = start + 100 < len(items)
    return items[start : start + 100], str(start + 100) if more else None


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
        page, following = _page(prompts, params)
        return types.ListPromptsResult(prompts=page, next_cursor=following)

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

    tools = [
        types.Tool(name=p.name, description=p.description, input_schema=TOOL_SCHEMA)
        for p in prompts
    ]

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
        page, following = _page(tools, params)
        return types.ListToolsResult(tools=page, next_cursor=following)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
        i = index.get(params.name)
        arguments = params.arguments or {}
        if i is None or not isinstance(arguments.get("topic"), str):
            return types.CallToolResult(
                content=[types.TextContent(type="text", text="unknown tool or no topic")],
                is_error=True,
            )
        text = _render(i, arguments["topic"], arguments.get("tone", "formal"))
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    skills = {skill_uri(i): peer_skill(i) for i in range(PEER_SKILLS)}
    # The SKILL.md files as the registry lists them: name, description, type and size, by 100.
    resources = [
        types.Resource(
            uri=skill_uri(i), name=peer_skill_name(i), description=f"Peer skill {i}",
            mime_type="text/markdown", size=len(skills[skill_uri(i)].encode()),
        )
        for i in range(PEER_SKILLS)
    ]  # fmt: skip

    async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
        page, following = _page(resources, params)
        return types.ListResourcesResult(resources=page, next_cursor=following)

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> Any:
        text = skills[str(params.uri)]  # an unknown URI: the SDK answers its error
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(uri=params.uri, mime_type="text/markdown", text=text)
            ]
        )

    def input_schema(name: str) -> dict[str, Any] | None:
        """What the SDK checks a call's Mcp-Param headers against: without it, it runs the
        tools/list handler through every page for each call (81 ms of CPU a call here)."""
        return TOOL_SCHEMA if name in index else None

    server = Server(
        "bench-lowlevel",
        get_tool_input_schema=input_schema,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )
    return server.streamable_http_app(
        streamable_http_path="/mcp", json_response=True, stateless_http=True
    )


def highlevel_app() -> Any:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.prompts.base import Prompt
    from mcp.server.mcpserver.resources import TextResource

    server = MCPServer("bench-highlevel")
    for i in range(PEER_PROMPTS):

        def make(i: int = i) -> Any:
            def prompt(topic: str, tone: str = "formal") -> str:
                return _render(i, topic, tone)

            return prompt

        server.add_prompt(
            Prompt.from_function(make(), name=f"peer-{i:05d}", description=f"Peer prompt {i}")
        )
        server.add_tool(make(), name=f"peer-{i:05d}", description=f"Peer prompt {i}")
    for i in range(PEER_SKILLS):
        server.add_resource(
            TextResource(uri=skill_uri(i), name=peer_skill_name(i), text=peer_skill(i),
                         mime_type="text/markdown")
        )  # fmt: skip
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
