"""The MCP methods, one dispatch table, and the one place exceptions become JSON-RPC errors.

Handlers are transport-free: the Streamable HTTP endpoint and the stdio transport both build a
``Call`` (a tenant-scoped database session, the served label, the negotiated revision) and dispatch.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from registry.config import Settings
from registry.db.models import McpSession, Tenant
from registry.errors import RegistryError
from registry.mcp import caching, shaping
from registry.mcp import cursor as cursors
from registry.mcp.caching import McpCaches
from registry.mcp.protocol import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    LATEST_SESSION_REVISION,
    METHOD_NOT_FOUND,
    SESSION_REVISIONS,
    McpError,
    Message,
    error_message,
    result_message,
)
from registry.metrics import LATENCY, REQUESTS
from registry.principal import Principal
from registry.prompts import service as prompts
from registry.sessions import service as sessions

logger = logging.getLogger("registry.mcp")

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
# Real clients stop walking after 64 pages, so a large tenant's list must fit in about 50.
PAGES_WANTED = 50


@dataclass
class Call:
    """What a handler may use: never anything of another tenant."""

    db: AsyncSession
    tenant: Tenant
    label: str
    principal: Principal
    revision: str
    settings: Settings
    mac_key: bytes
    caches: McpCaches
    session: McpSession | None = None


class _Params(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class InitializeParams(_Params):
    protocolVersion: str
    capabilities: dict[str, Any] = Field(default_factory=dict)
    clientInfo: dict[str, Any] | None = None


class ListParams(_Params):
    cursor: str | None = None


class GetParams(_Params):
    name: str = Field(min_length=1, max_length=300)
    arguments: dict[str, str] | None = None


class CompletionRef(_Params):
    type: Literal["ref/prompt", "ref/resource"]
    name: str | None = None
    uri: str | None = None


class CompletionArgument(_Params):
    name: str
    value: str


class CompletionContext(_Params):
    arguments: dict[str, str] | None = None


class CompleteParams(_Params):
    ref: CompletionRef
    argument: CompletionArgument
    context: CompletionContext | None = None


class SetLevelParams(_Params):
    level: Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


def negotiate(requested: str) -> str:
    """The requested revision when this server speaks it in the session era, else the newest."""
    return requested if requested in SESSION_REVISIONS else LATEST_SESSION_REVISION


def initialize_result(
    revision: str, tenant: Tenant, label: str, settings: Settings
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "protocolVersion": revision,
        "capabilities": shaping.capabilities(revision),
        "serverInfo": shaping.server_info(revision, tenant, label, settings.public_url),
    }
    if tenant.instructions:
        result["instructions"] = tenant.instructions
    return result


async def ping(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    return {}


def page_size(call: Call, count: int) -> int:
    base = call.tenant.page_size or call.settings.page_size
    return max(1, min(call.settings.page_size_max, max(base, math.ceil(count / PAGES_WANTED))))


async def prompts_list(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    parsed = ListParams.model_validate(params)
    if parsed.cursor is not None:
        after, size = cursors.decode(
            call.mac_key,
            parsed.cursor,
            call.tenant.id,
            call.label,
            max_age_seconds=call.settings.session_idle_seconds,
        )
    else:
        after = None
        size = page_size(
            call, await caching.served_count(call.caches, call.db, call.tenant, call.label)
        )
    page, more = await caching.served_page(
        call.caches, call.db, call.tenant, call.label, after=after, limit=size
    )
    result: dict[str, Any] = {"prompts": [shaping.prompt_entry(call.revision, p) for p in page]}
    if more and page:
        result["nextCursor"] = cursors.encode(
            call.mac_key, call.tenant.id, call.label, page[-1].name, size
        )
    return result


async def prompts_get(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    parsed = GetParams.model_validate(params)
    name, version, label = prompts.parse_prompt_ref(parsed.name)
    rendered = await caching.render(
        call.caches,
        call.db,
        call.tenant,
        name,
        parsed.arguments,
        version=version,
        label=label or call.label,
        max_value_length=call.settings.max_argument_length,
    )
    result: dict[str, Any] = {
        "messages": shaping.messages(call.revision, rendered.messages, call.tenant.slug)
    }
    if rendered.description:
        result["description"] = rendered.description
    return result


async def completion_complete(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    parsed = CompleteParams.model_validate(params)
    if parsed.ref.type != "ref/prompt" or not parsed.ref.name:
        raise McpError(
            INVALID_PARAMS, "this server completes prompt arguments only (ref/prompt with a name)"
        )
    values, total = await prompts.complete_argument(
        call.db,
        call.tenant,
        parsed.ref.name,
        parsed.argument.name,
        parsed.argument.value,
        label=call.label,
    )
    return {"completion": {"values": values, "total": total, "hasMore": total > len(values)}}


async def logging_set_level(call: Call, params: dict[str, Any]) -> dict[str, Any]:
    parsed = SetLevelParams.model_validate(params)
    if call.session is not None:
        await sessions.set_log_level(call.db, call.session, parsed.level)
    return {}


Handler = Callable[[Call, dict[str, Any]], Awaitable[dict[str, Any]]]
HANDLERS: dict[str, Handler] = {
    "ping": ping,
    "prompts/list": prompts_list,
    "prompts/get": prompts_get,
    "completion/complete": completion_complete,
    "logging/setLevel": logging_set_level,
}
# Notifications a client may send; they need no answer and change nothing here.
NOTIFICATIONS = frozenset(
    {
        "notifications/initialized",
        "notifications/cancelled",
        "notifications/progress",
        "notifications/roots/list_changed",
    }
)


def _describe(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "params"
    return f"invalid params: {where}: {first.get('msg', 'invalid')}"


async def dispatch(call: Call, message: Message) -> dict[str, Any] | None:
    """Run one request and return its response message (None for notifications and responses)."""
    if message.kind != "request":
        return None
    assert message.method is not None
    name = message.method if message.method in HANDLERS else "other"
    started = time.perf_counter()
    answer = await _dispatch(call, message)
    LATENCY.labels("mcp", name).observe(time.perf_counter() - started)
    REQUESTS.labels("mcp", name, "error" if "error" in answer else "ok").inc()
    return answer


async def _dispatch(call: Call, message: Message) -> dict[str, Any]:
    assert message.method is not None
    handler = HANDLERS.get(message.method)
    if handler is None:
        return error_message(message.id, METHOD_NOT_FOUND, f"method not found: {message.method}")
    try:
        return result_message(message.id, await handler(call, message.params))
    except McpError as error:
        return error_message(message.id, error.code, error.message, error.data)
    except ValidationError as error:
        return error_message(message.id, INVALID_PARAMS, _describe(error))
    except RegistryError as error:
        data = {k: v for k, v in error.detail.items() if isinstance(v, str | int | list)}
        return error_message(message.id, error.jsonrpc_code, error.message, data or None)
    except Exception:  # the JSON-RPC renderer: nothing internal reaches the client
        request_id = uuid.uuid4().hex
        logger.exception(
            "mcp_internal_error",
            extra={"fields": {"request_id": request_id, "method": message.method}},
        )
        return error_message(
            message.id, INTERNAL_ERROR, "internal error", {"request_id": request_id}
        )
