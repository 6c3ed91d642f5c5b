"""What the server sends on its streams, built in one place: a ``list_changed`` notification per list
kind (prompts now; a new list kind is one row of ``LIST_KINDS``), and the messages that open and
close a 2026-07-28 ``subscriptions/listen`` stream."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from registry.db.models import Tenant
from registry.mcp.protocol import META_SUBSCRIPTION, Message


@dataclass(frozen=True, slots=True)
class ListKind:
    """A list a client may be told has changed."""

    name: str  # as in the capability: prompts, resources, tools
    method: str  # the notification
    listen_key: str  # what a listen request asks for in its ``notifications``


LIST_KINDS: dict[str, ListKind] = {
    kind.name: kind
    for kind in (
        ListKind("prompts", "notifications/prompts/list_changed", "promptsListChanged"),
        ListKind("resources", "notifications/resources/list_changed", "resourcesListChanged"),
        ListKind("tools", "notifications/tools/list_changed", "toolsListChanged"),
    )
}
# The lists this server says change (the capability ``listChanged`` of each): prompts, and the
# resources skills are read through. A change of what a label serves is told for both (the change
# notification names the label, not the kind of artifact: a list re-read for nothing, never a
# change missed).
SERVED_KINDS = ("prompts", "resources")


def served_kinds(tenant: Tenant) -> tuple[str, ...]:
    """The lists a tenant's clients are told change: tools too where it serves tools."""
    return (*SERVED_KINDS, "tools") if tenant.mcp_tools else SERVED_KINDS


def list_changed(kind: str, subscription_id: str | int | None = None) -> dict[str, Any]:
    """``notifications/<kind>/list_changed``; on a listen stream it names its subscription."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": LIST_KINDS[kind].method}
    if subscription_id is not None:
        message["params"] = {"_meta": {META_SUBSCRIPTION: subscription_id}}
    return message


def honored(message: Message, tenant: Tenant) -> dict[str, bool]:
    """The notification types of a listen request that this server offers the tenant's clients
    and the client asked for (``{"promptsListChanged": True}``, ...)."""
    wanted = message.params.get("notifications")
    if not isinstance(wanted, dict):
        return {}
    keys = (LIST_KINDS[name].listen_key for name in served_kinds(tenant))
    return {key: True for key in keys if wanted.get(key) is True}


def honored_kinds(honored_types: dict[str, bool]) -> list[str]:
    """The list kinds a listen stream reports, from what ``honored`` granted."""
    return [name for name, kind in LIST_KINDS.items() if honored_types.get(kind.listen_key)]


def acknowledged(subscription_id: str | int | None, granted: dict[str, bool]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {"_meta": {META_SUBSCRIPTION: subscription_id}, "notifications": granted},
    }


def closed(subscription_id: str | int | None) -> dict[str, Any]:
    """The graceful end of a listen stream (the server shuts down)."""
    return {
        "jsonrpc": "2.0",
        "id": subscription_id,
        "result": {"resultType": "complete", "_meta": {META_SUBSCRIPTION: subscription_id}},
    }
