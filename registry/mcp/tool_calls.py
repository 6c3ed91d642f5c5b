"""The team's prompts as MCP tools, for clients that show no prompts (on where the tenant turned
``mcp_tools`` on; elsewhere ``tools/*`` is "method not found", as it always was).

``tools/list`` offers each prompt its author marked (``as_tool``), named after it, described by it,
its ``inputSchema`` the JSON Schema of its typed arguments; and two general tools: ``find_prompts``
(by name prefix, tag or text, paged) and ``render_prompt`` (any served prompt, by name). Calling a
tool renders the prompt under the endpoint's label: the rendered messages as content, and (from
2025-06-18) ``structuredContent`` with the messages, the version and the model config. A bad
argument is a tool result with ``isError`` naming it, so the model can correct itself; an unknown
tool or malformed params are JSON-RPC errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field
from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.models import Tenant
from registry.db.pagination import PageRequest
from registry.errors import NotFound, RegistryError
from registry.mcp import caching, paging, shaping
from registry.mcp.call import Call, Params
from registry.mcp.errors import InvalidParams
from registry.naming import META_CONFIG
from registry.prompts import as_tools as prompt_tools
from registry.prompts import reading
from registry.prompts.as_tools import FIND, RENDER, ServedTool
from registry.receipts import META_KEY as RECEIPT
from registry.templates.arguments import InvalidArgument
from registry.tenants import access
from registry.usage.schemas import Served

PAGE = 100  # marked tools per tools/list page
FOUND_MAX = 50  # prompts one find_prompts call answers
ANNOTATIONS = {
    "readOnlyHint": True,
    "destructiveHint": False,
    "idempotentHint": True,
    "openWorldHint": False,
}
FIND_SCHEMA = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "maxLength": 200,
            "description": "text in name, title or description",
        },
        "tag": {"type": "string", "maxLength": 100, "description": "only prompts with this tag"},
        "prefix": {"type": "string", "maxLength": 128, "description": "only names starting so"},
        "cursor": {"type": "string", "description": "nextCursor of the previous answer"},
    },
}
RENDER_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 300, "description": "the prompt's name"},
        "arguments": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "description": "the prompt's arguments by name (find_prompts lists them)",
        },
    },
    "required": ["name"],
}


class ListParams(Params):
    cursor: str | None = None


class CallParams(Params):
    name: str = Field(min_length=1, max_length=128)
    arguments: dict[str, Any] | None = None


def offered(tenant: Tenant) -> bool:
    """Tools are offered where the tenant turned them on (elsewhere: method not found)."""
    return tenant.mcp_tools


def _entry(
    call: Call, name: str, description: str | None, schema: dict[str, Any], title: str | None = None
) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "inputSchema": schema}
    if description:
        entry["description"] = description
    if title and call.revision.titles:
        entry["title"] = title
    if call.revision.tool_annotations:
        entry["annotations"] = ANNOTATIONS
    return entry


def _general(call: Call) -> list[dict[str, Any]]:
    return [
        _entry(
            call,
            FIND,
            "Find the team's prompts by name prefix, tag or text; each comes with "
            "its description and arguments. Render one with render_prompt.",
            FIND_SCHEMA,
            "Find prompts",
        ),
        _entry(
            call,
            RENDER,
            "Render one of the team's prompts by name with its arguments: the "
            "messages it produces, ready to use.",
            RENDER_SCHEMA,
            "Render a prompt",
        ),
    ]


async def tools_list(call: Call, params: ListParams) -> dict[str, Any]:
    async def fetch(session: AsyncSession, after: str | None, limit: int) -> Sequence[ServedTool]:
        return await prompt_tools.served_tools(
            session, call.tenant, call.label, after=after, limit=limit
        )

    def entries(page: Sequence[ServedTool], after: str | None) -> list[dict[str, Any]]:
        listed = [] if after is not None else _general(call)
        return listed + [_entry(call, t.name, t.description, t.input_schema, t.title) for t in page]

    # An entry carries, besides the tenant's prompts, the fields of the revision.
    return await paging.kept_list(
        call,
        "tools",
        params.cursor,
        size=PAGE,
        fetch=fetch,
        entries=entries,
        position=lambda tool: tool.prompt,
        options=(call.revision.titles, call.revision.tool_annotations),
    )


async def tools_call(call: Call, params: CallParams) -> dict[str, Any]:
    given = dict(params.arguments or {})
    if params.name == FIND:
        return await _find(call, given)
    if params.name == RENDER:
        name = given.get("name")
        if not isinstance(name, str) or not name:
            return _tool_error(
                "name: give the name of the prompt to render (find_prompts lists them)"
            )
        arguments = given.get("arguments") or {}
        if not isinstance(arguments, dict):
            return _tool_error("arguments: an object of the prompt's arguments by name")
        return await _render(call, name, None, arguments)
    target = await caching.tool_target(call.caches, call.db, call.tenant, call.label, params.name)
    if target is None:
        raise InvalidParams(f"unknown tool {params.name!r} (tools/list names the tools)")
    return await _render(call, *target, given)


async def _render(
    call: Call, name: str, version: int | None, given: dict[str, Any]
) -> dict[str, Any]:
    """The prompt ``name`` rendered as a tool's result: at ``version`` (a marked tool's, resolved),
    or at the one the endpoint's label serves (render_prompt: a prompt it does not serve is a tool
    error the model can correct)."""
    arguments: dict[str, str] = {}
    for key, value in given.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, int | float):
            value = str(value)
        if not isinstance(value, str):
            return _tool_error(f"argument {key!r}: give a string (or a number or boolean)")
        arguments[key] = value
    access.check_anonymous(call.tenant, call.principal, call.label)
    routed = call.route("prompt", name, call.label)  # a live rollout of the label's prompt
    if routed is not None and routed.version is not None:
        version = routed.version
    try:
        rendered = await caching.render(
            call.caches,
            call.db,
            call.tx,
            call.tenant,
            name,
            arguments,
            version=version,
            label=call.label,
            max_value_length=call.settings.max_argument_length,
            max_rendered_chars=call.settings.max_rendered_chars,
        )
    except InvalidArgument as error:  # the model reads it and can correct the call
        return _tool_error(error.message)
    except NotFound as error:
        if version is not None:
            raise
        return _tool_error(error.message)
    served_version = rendered.version
    messages = shaping.messages(call.revision, rendered.messages, call.tenant.slug)
    result: dict[str, Any] = {"content": _content(messages)}
    if call.revision.links:  # structuredContent from 2025-06-18
        structured: dict[str, Any] = {
            "prompt": name,
            "version": served_version,
            "messages": messages,
        }
        if rendered.config:
            structured["config"] = rendered.config
        result["structuredContent"] = structured
    meta: dict[str, Any] = {}
    if rendered.config:
        meta[META_CONFIG] = rendered.config
    too_large = call.oversized(result)
    if too_large is not None:  # the model reads it and can correct the call
        return _tool_error(too_large)
    served: dict[str, Any] = {
        "prompt": name,
        "version": served_version,
        "partials": list(rendered.partials),
    }
    if rendered.library is not None:  # a library's prompt (render_prompt): the receipt says so
        served["library"] = rendered.library
    meta[RECEIPT] = call.receipt(served, arguments)
    call.served = Served("prompt", name, served_version or 0, call.label)
    result["_meta"] = meta
    return result


def _content(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each message's content as a tool's content block; a text block says whose it is."""
    blocks = []
    for message in messages:
        block = dict(message["content"])
        if block.get("type") == "text" and message["role"] != "user":
            block["text"] = f"[{message['role']}] {block['text']}"
        blocks.append(block)
    return blocks


async def _find(call: Call, given: dict[str, Any]) -> dict[str, Any]:
    for key in ("query", "tag", "prefix", "cursor"):
        if given.get(key) is not None and not isinstance(given[key], str):
            return _tool_error(f"{key}: give a string")
    session = await call.tx.session()
    page = PageRequest(limit=FOUND_MAX, cursor=given.get("cursor"), tokens=call.tokens)
    try:
        found = await reading.list_prompts(
            session,
            call.tenant,
            page,
            prefix=given.get("prefix"),
            tag=given.get("tag"),
            label=call.label,
            text=given.get("query"),
            archived=False,
        )
    except RegistryError as error:  # a bad cursor is the model's to fix
        return _tool_error(error.message)
    declared_by_name = await prompt_tools.declared_arguments(
        session, call.tenant, call.label, [item.name for item in found.items]
    )
    prompts = []
    for item in found.items:
        declared = declared_by_name.get(item.name, [])
        prompts.append(
            {
                "name": item.name,
                "title": item.title,
                "description": item.description,
                "arguments": [
                    {"name": a.name, "required": a.required, "description": a.description}
                    for a in declared
                ],
            }
        )
    text = (
        "\n".join(
            f"- {p['name']}: {p['description'] or p['title'] or ''}".rstrip(": ") for p in prompts
        )
        or "No prompt matches."
    )
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    if call.revision.links:
        result["structuredContent"] = {"prompts": prompts, "nextCursor": found.next_cursor}
    return result


def _tool_error(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}
