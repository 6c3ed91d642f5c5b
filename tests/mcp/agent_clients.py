"""Run inside the agent frameworks' own environment (tests/agent_clients.txt; see
tests/mcp/test_tools_live.py): the OpenAI Agents SDK and LangChain's MCP adapters against a live
registry, each as an agent would use it, printing what each saw as one JSON document.

    python agent_clients.py URL KEY

No model is called: a tool call here is the one a model would make, through the framework's own
conversion of the registry's tools (the Agents SDK's strict function schemas, LangChain's tools)."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any


async def agents_sdk(url: str, key: str) -> dict[str, Any]:
    from agents import RunContextWrapper
    from agents.mcp import MCPServerStreamableHttp, MCPUtil

    params = {"url": url, "headers": {"Authorization": f"Bearer {key}"}}
    async with MCPServerStreamableHttp(params=params, name="registry") as server:
        tools = await server.list_tools()
        reply = next(t for t in tools if t.name == "support_reply")
        render = next(t for t in tools if t.name == "render_prompt")
        made = MCPUtil.to_function_tool(reply, server, convert_schemas_to_strict=True)
        context = RunContextWrapper(context=None)
        called = await MCPUtil.invoke_mcp_tool(
            server, reply, context, json.dumps({"topic": "shipping"})
        )
        rendered = await MCPUtil.invoke_mcp_tool(
            server, render, context,
            json.dumps({"name": "support.reply", "arguments": {"topic": "billing"}}),
        )  # fmt: skip
        refused = await server.call_tool("support_reply", {"topic": "refunds"})
        return {
            "refused": {
                "is_error": refused.isError,
                "text": " ".join(getattr(c, "text", "") for c in refused.content),
            },
            "names": sorted(t.name for t in tools),
            "strict": made.strict_json_schema,
            "schema": made.params_json_schema,
            "called": str(called),
            "rendered": str(rendered),
        }


async def langchain(url: str, key: str) -> dict[str, Any]:
    from langchain_mcp_adapters.client import MultiServerMCPClient

    client = MultiServerMCPClient(
        {"registry": {"url": url, "transport": "streamable_http",
                      "headers": {"Authorization": f"Bearer {key}"}}}
    )  # fmt: skip
    tools = await client.get_tools()
    reply = next(t for t in tools if t.name == "support_reply")
    called = await reply.ainvoke({"topic": "shipping"})
    refused = await reply.ainvoke({"topic": "refunds"})
    return {
        "names": sorted(t.name for t in tools),
        "args": reply.args,
        "called": json.dumps(called, default=str),
        "refused": json.dumps(refused, default=str),
    }


def main() -> None:
    url, key = sys.argv[1], sys.argv[2]
    seen = {
        "agents": asyncio.run(agents_sdk(url, key)),
        "langchain": asyncio.run(langchain(url, key)),
    }
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
