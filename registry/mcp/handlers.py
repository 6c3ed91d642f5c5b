"""The MCP methods and their dispatch table.

Handlers are transport-free: the protocol core (registry.mcp.core) builds a ``Call`` (a tenant-scoped
database session, the served label, the negotiated revision) and dispatches; what a handler raises
becomes a JSON-RPC error through the one table in registry.mcp.errors. ``METHODS`` is the table: one
row per method (its name, its params model, its handler); a method is answered when the negotiated
revision has it (registry.revisions) and it has a row. A new method is one row and one handler.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from registry.config import Settings
from registry.db.models import Tenant
from registry.errors import NotFound
from registry.mcp import (
    caching,
    errors,
    event_webhooks,
    events,
    request_state,
    shaping,
    skills,
    tool_calls,
)
from registry.mcp.call import Call, Params
from registry.mcp.errors import InvalidParams, MethodNotFound
from registry.mcp.protocol import Message, error_message, result_message
from registry.metrics import REQUESTS, tally, timings
from registry.naming import META_CONFIG, find_nul
from registry.prompts import completion, listing, reading, rendering
from registry.receipts import META_KEY as RECEIPT
from registry.revisions import (
    ALL_REVISIONS,
    LATEST_SESSION_REVISION,
    SESSION_REVISIONS,
    Revision,
)
from registry.sessions import service as sessions
from registry.templates.arguments import InvalidArgument
from registry.tenants import access
from registry.usage.schemas import Served

ELICITATION_KEY = "arguments"  # the inputRequests key of the argument form
# Real clients stop walking after 64 pages, so a large tenant's list must fit in about 50.
PAGES_WANTED = 50


class InitializeParams(Params):
    protocolVersion: str
    capabilities: dict[str, Any] = Field(default_factory=dict)
    clientInfo: dict[str, Any] | None = None


class ListParams(Params):
    cursor: str | None = None


class GetParams(Params):
    name: str = Field(min_length=1, max_length=300)
    arguments: dict[str, str] | None = None
    # 2026-07-28: the retry of an InputRequiredResult.
    inputResponses: dict[str, Any] | None = None
    requestState: str | None = None


class CompletionRef(Params):
    type: Literal["ref/prompt", "ref/resource"]
    name: str | None = None
    uri: str | None = None


class CompletionArgument(Params):
    name: str
    value: str


class CompletionContext(Params):
    arguments: dict[str, str] | None = None


class CompleteParams(Params):
    ref: CompletionRef
    argument: CompletionArgument
    context: CompletionContext | None = None


class SetLevelParams(Params):
    level: Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


def negotiate(requested: str) -> str:
    """The requested revision when this server speaks it in the session era, else the newest."""
    return requested if requested in SESSION_REVISIONS else LATEST_SESSION_REVISION


def initialize_result(
    revision: Revision, tenant: Tenant, label: str, settings: Settings
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "protocolVersion": revision.name,
        "capabilities": shaping.capabilities(revision, tenant),
        "serverInfo": shaping.server_info(revision, tenant, label, settings.public_url),
    }
    if tenant.instructions:
        result["instructions"] = tenant.instructions
    return result


async def server_discover(call: Call, params: Params) -> dict[str, Any]:
    await reading.check_label(await call.tx.session(), call.tenant, call.label)
    result: dict[str, Any] = call.cacheable(
        {
            "supportedVersions": list(ALL_REVISIONS),
            "capabilities": shaping.capabilities(call.revision, call.tenant),
        }
    )
    if call.tenant.instructions:
        result["instructions"] = call.tenant.instructions
    return result


async def ping(call: Call, params: Params) -> dict[str, Any]:
    return {}


def page_size(call: Call, count: int) -> int:
    """Many clients read only the first page: unless the tenant chose its page size, the whole list
    is one page up to the cap; past it, pages of the cap, raised so the list fits in about
    PAGES_WANTED pages (clients stop walking after 64)."""
    cap = call.settings.page_size_max
    if call.tenant.page_size:
        return max(1, min(cap, call.tenant.page_size))
    if count <= cap:
        return max(1, call.settings.page_size, count)
    return max(cap, math.ceil(count / PAGES_WANTED))


async def prompts_list(call: Call, parsed: ListParams) -> dict[str, Any]:
    if parsed.cursor is not None:
        after, size, _ = call.open_cursor(parsed.cursor)
    else:
        after = None
        count = await caching.served_count(call.caches, call.db, call.tenant, call.label)
        if count == 0:
            await reading.check_label(await call.tx.session(), call.tenant, call.label)
        size = page_size(call, count)
    listed = await caching.listing(
        call.caches,
        call.db,
        call.tenant,
        call.label,
        after=after,
        limit=size,
        revision=call.revision,
    )
    result: dict[str, Any] = call.cacheable({"prompts": listed.entries})
    if listed.more and listed.last_name is not None:
        result["nextCursor"] = call.next_cursor(listed.last_name, size)
    return result


async def prompts_get(call: Call, parsed: GetParams) -> dict[str, Any]:
    name, version, label = rendering.parse_prompt_ref(parsed.name)
    access.check_anonymous(call.tenant, call.principal, label, version=version)
    arguments = dict(parsed.arguments or {})
    stateless = call.revision.stateless
    if stateless and parsed.requestState is not None:
        arguments = _answered(call, parsed, arguments)
    served_version = version
    if version is None:  # a label's answer: a live rollout of it may send the new version
        routed = call.route("prompt", name, label or call.label)
        served_version = routed.version if routed is not None else None
    try:
        rendered = await caching.render(
            call.caches,
            call.db,
            call.tx,
            call.tenant,
            name,
            arguments,
            version=served_version,
            label=label or call.label,
            max_value_length=call.settings.max_argument_length,
            max_rendered_chars=call.settings.max_rendered_chars,
        )
    except InvalidArgument as error:
        missing = error.detail.get("missing")
        if stateless and missing and "elicitation" in call.client_capabilities:
            return await _ask_for_arguments(call, parsed, name, version, label, arguments)
        raise
    result: dict[str, Any] = {
        "messages": shaping.messages(call.revision, rendered.messages, call.tenant.slug)
    }
    if rendered.description:
        result["description"] = rendered.description
    meta: dict[str, Any] = {}
    if rendered.config:  # the prompt's own model settings, for agents that use them
        meta[META_CONFIG] = rendered.config
    too_large = call.oversized(result)
    if too_large is not None:
        raise InvalidParams(f"invalid params: {too_large}")
    served: dict[str, Any] = {
        "prompt": name,
        "version": rendered.version,
        "partials": list(rendered.partials),
    }
    if rendered.library is not None:  # a library's prompt: the receipt names the library
        served["library"] = rendered.library
    meta[RECEIPT] = call.receipt(served, arguments, label=label)
    by_label = "" if version is not None else label or call.label
    call.served = Served("prompt", name, rendered.version or 0, by_label)
    result["_meta"] = meta
    return result


def _principal_tag(call: Call) -> str:
    return call.principal.actor


async def _ask_for_arguments(
    call: Call,
    parsed: GetParams,
    name: str,
    version: int | None,
    label: str | None,
    given: dict[str, str],
) -> dict[str, Any]:
    """InputRequiredResult: a form for the arguments not given, built from their declarations."""
    specs, description = await reading.argument_declarations(
        await call.tx.session(), call.tenant, name, version=version, label=label or call.label
    )
    schema = listing.argument_schema(specs, leave_out=given)
    required = schema["required"]
    message = description or f"The prompt {name!r} needs: {', '.join(required)}"
    state = request_state.issue(
        call.tokens,
        call.tenant.id,
        call.label,
        parsed.name,
        _principal_tag(call),
        parsed.arguments,
    )
    return {
        "resultType": "input_required",
        "inputRequests": {
            ELICITATION_KEY: {
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": message,
                    "requestedSchema": schema,
                },
            }
        },
        "requestState": state,
    }


def _answered(call: Call, parsed: GetParams, arguments: dict[str, str]) -> dict[str, str]:
    """The arguments of a retry: the original ones plus what the user filled in the form."""
    assert parsed.requestState is not None
    request_state.verify(
        call.tokens,
        parsed.requestState,
        call.tenant.id,
        call.label,
        parsed.name,
        _principal_tag(call),
        parsed.arguments,
    )
    response = (parsed.inputResponses or {}).get(ELICITATION_KEY)
    if not isinstance(response, dict):
        return arguments  # not answered: rendering asks again
    action = response.get("action")
    if action in ("decline", "cancel"):
        raise InvalidParams(
            f"the user {action}d to provide the prompt's arguments (missing required arguments)"
        )
    content = response.get("content") if action == "accept" else None
    if not isinstance(content, dict):
        raise InvalidParams("inputResponses.arguments: an accepted form needs its content")
    for key, value in content.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, int | float):
            value = str(value)
        if not isinstance(value, str):
            raise InvalidParams(f"inputResponses.arguments: {key!r} must be a single value")
        arguments.setdefault(key, value)
    return arguments


async def completion_complete(call: Call, parsed: CompleteParams) -> dict[str, Any]:
    if parsed.ref.type != "ref/prompt" or not parsed.ref.name:
        raise InvalidParams("this server completes prompt arguments only (ref/prompt with a name)")
    name, version, label = rendering.parse_prompt_ref(parsed.ref.name)
    access.check_anonymous(call.tenant, call.principal, label, version=version)
    argument, value = parsed.argument.name, parsed.argument.value
    try:
        values, total = await completion.complete_argument(
            await call.tx.session(), call.tenant, parsed.ref.name, argument, value, label=call.label
        )
    except NotFound as missing:  # not the tenant's own: a library's it reads, by its enums
        if version is not None or missing.detail.get("field") not in ("name", "label"):
            raise
        specs = await caching.library_specs(call.caches, call.db, call.tenant, name)
        if specs is None:
            raise
        spec = next((s for s in specs if s.name == argument), None)
        if spec is None:
            raise completion.unknown_argument(name, argument, [s.name for s in specs]) from None
        values, total = completion.matching(list(spec.enum or ()), value)
    return {"completion": {"values": values, "total": total, "hasMore": total > len(values)}}


async def logging_set_level(call: Call, parsed: SetLevelParams) -> dict[str, Any]:
    if call.session is not None:
        await sessions.set_log_level(await call.tx.session(write=True), call.session, parsed.level)
    return {}


@dataclass(frozen=True, slots=True)
class Method:
    """One row of the dispatch table: the params are validated with ``params`` (a -32602 names
    what is wrong) before ``handler`` sees them."""

    name: str
    params: type[Params]
    handler: Callable[[Call, Any], Awaitable[dict[str, Any]]]
    # Whether a tenant offers the method at all (tools: where it turned mcp_tools on).
    offered: Callable[[Tenant], bool] = lambda tenant: True


METHODS: dict[str, Method] = {
    row.name: row
    for row in (
        Method("server/discover", Params, server_discover),
        Method("ping", Params, ping),
        Method("prompts/list", ListParams, prompts_list),
        Method("prompts/get", GetParams, prompts_get),
        Method("completion/complete", CompleteParams, completion_complete),
        Method("logging/setLevel", SetLevelParams, logging_set_level),
        Method("tools/list", tool_calls.ListParams, tool_calls.tools_list, tool_calls.offered),
        Method("tools/call", tool_calls.CallParams, tool_calls.tools_call, tool_calls.offered),
        Method("skills/list", skills.ListParams, skills.skills_list),
        Method("skills/get", skills.UriParams, skills.skills_get),
        Method("resources/list", skills.ListParams, skills.resources_list),
        Method("resources/templates/list", skills.ListParams, skills.resources_templates_list),
        Method("resources/read", skills.UriParams, skills.resources_read),
        Method("resources/directory/read", skills.DirectoryParams, skills.directory_read),
        Method("events/list", events.ListParams, events.events_list),
        Method("events/poll", events.PollParams, events.events_poll),
        Method("events/subscribe", event_webhooks.SubscribeParams, event_webhooks.events_subscribe),
        Method(
            "events/unsubscribe",
            event_webhooks.UnsubscribeParams,
            event_webhooks.events_unsubscribe,
        ),
    )
}
# Methods a transport answers itself (the session handshake, a stream of notifications).
TRANSPORT_METHODS = frozenset({"initialize", "subscriptions/listen", "events/stream"})


def offered(tenant: Tenant, method: str | None) -> bool:
    """Whether ``tenant`` offers ``method`` (a method the revision has; else -32601)."""
    row = METHODS.get(method or "")
    return row is None or row.offered(tenant)


def answers(revision: Revision, method: str | None) -> bool:
    """Whether a request for ``method`` in ``revision`` is answered (else -32601)."""
    return (
        method is not None
        and (method in METHODS or method in TRANSPORT_METHODS)
        and revision.serves(method)
    )


async def dispatch(call: Call, message: Message, started: float) -> dict[str, Any] | None:
    """Run one request and return its response message (None for notifications and responses);
    ``started`` is the ``time.perf_counter()`` reading taken when the message arrived."""
    if message.kind != "request":
        return None
    answer = await _dispatch(call, message)
    count(message, started, "error" if "error" in answer else "ok")
    return answer


def count(message: Message, started: float, outcome: Literal["ok", "error"]) -> None:
    """Count one answered request: its time since ``started`` and its outcome, under its method's
    name (``other`` for a method the server does not have)."""
    assert message.method is not None
    count_method(message.method, started, outcome)


def count_method(method: str, started: float, outcome: Literal["ok", "error"]) -> None:
    name = method if method in METHODS else "other"
    timings("mcp", name).observe(time.perf_counter() - started)
    tally(REQUESTS, "mcp", name, outcome).inc()


async def _dispatch(call: Call, message: Message) -> dict[str, Any]:
    assert message.method is not None
    row = METHODS.get(message.method)
    try:
        if row is None or not call.revision.serves(row.name) or not row.offered(call.tenant):
            raise MethodNotFound(f"method not found: {message.method}")
        where = find_nul(message.params)
        if where:  # PostgreSQL text holds none, and no name, argument or query needs one
            raise InvalidParams(f"invalid params: {where}: text may not contain NUL (\\u0000)")
        params = row.params.model_validate(message.params)
        return result_message(message.id, await row.handler(call, params))
    except Exception as error:
        down = errors.unavailable(error)
        if down is not None:
            raise down from error
        answer = errors.in_result(error, message.method)
        return error_message(message.id, answer.code, answer.message, answer.data)
