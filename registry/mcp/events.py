"""The Events extension (``io.modelcontextprotocol/events``, SEP-3415, a draft of October 2026) on
revision 2026-07-28: ``events/list`` names the event types, ``events/poll`` delivers a tenant's
change log to a caller who polls with a cursor, and ``events/stream`` pushes it on an SSE stream
(``pushed``, which the HTTP transport answers with). Webhook delivery (``events/subscribe``) is
``registry.mcp.event_webhooks``, which reads the log with ``read`` below.

Every event is one row of the tenant's change log, so a poll resumes exactly where its cursor says,
across workers, instances and restarts (no event lost or repeated), and ``truncated`` says when the
log no longer holds the position asked for (or ``maxAgeMs`` skipped older ones). The cursor is a
token of the one codec, bound to the tenant, the event type and its arguments: it opens nowhere
else. What this server chose where the draft leaves room is in docs/events.md."""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from pydantic import Field
from sqlalchemy.ext.asyncio import AsyncSession

from registry import tokens
from registry.artifacts.kinds import of_event
from registry.db.engine import Database
from registry.db.models import Tenant
from registry.errors import RegistryError
from registry.events import streams
from registry.events.changes import PAGE, Change, changes_after, replay_from
from registry.events.hub import Subscription
from registry.events.streams import frame
from registry.mcp.call import Call, Params
from registry.mcp.errors import (
    EVENT_FORBIDDEN,
    EventForbidden,
    EventNotFound,
    InvalidParams,
    Unsupported,
)
from registry.mcp.protocol import META_SUBSCRIPTION
from registry.principal import Principal
from registry.skills.provenance import document, manifest_digest
from registry.skills.service import served_skills
from registry.tenants import access
from registry.tenants import service as tenant_service

NEXT_POLL_MS = 5_000  # what a poll tells the client to wait when it has nothing more
DEFAULT_EVENTS = 100  # a poll's batch when the client names no maxEvents
MAX_EVENTS = 1_000
SCAN_ROWS = 2_000  # the most change-log rows one poll reads (a rare type's poll moves on, bounded)
CURSOR_AGE_SECONDS = 10 * 366 * 86_400  # a cursor a client persisted stays good; the log decides

_FILTER = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "only this prompt's or skill's events"},
        "label": {"type": "string", "description": "only events of this label (or of every label)"},
    },
    "additionalProperties": False,
}
_PAYLOAD = {
    "type": "object",
    "properties": {
        "seq": {"type": "integer", "description": "the tenant's change sequence"},
        "kind": {"type": "string", "description": "what happened, e.g. label.move, skill.version"},
        "artifact": {"type": ["string", "null"], "enum": ["prompt", "skill", None]},
        "prompt": {"type": ["string", "null"]},
        "skill": {"type": ["string", "null"]},
        "label": {"type": ["string", "null"], "description": "null: every label"},
        "at": {"type": "string", "format": "date-time"},
        "served": {
            "type": ["object", "null"],
            "description": "skill.changed: what the label serves of the skill now (version, "
            "manifest digest); null when it serves nothing",
        },
    },
    "required": ["seq", "kind", "at"],
}
TYPES: dict[str, str] = {
    "prompt.changed": "A prompt's version was published, one of its labels moved, or it was "
    "archived, brought back or deleted",
    "skill.changed": "A skill's version was published, one of its labels moved, or it was "
    "archived, brought back or deleted",
    "rollout.changed": "A rollout of a prompt's or skill's label started, stepped, paused, resumed, "
    "was promoted or rolled back",
    "change_request.changed": "A change request was opened, approved, rejected, withdrawn, went "
    "stale or was applied",
    "tenant.changed": "Something of the whole tenant changed (its settings, or many prompts at once)",
    "library.changed": "A library this tenant follows published: what it serves from that library "
    "changed (push only: the tenant's own change log does not hold a library's changes)",
}
# Types with no replay (the draft's emit-only types): pushed on a stream as they happen, with a null
# cursor; not polled, not sent to webhooks.
PUSH_ONLY = frozenset({"library.changed"})
_LIBRARY_FILTER = {
    "type": "object",
    "properties": {"name": {"type": "string", "description": "only this library's (its slug)"}},
    "additionalProperties": False,
}
_LIBRARY_PAYLOAD = {
    "type": "object",
    "properties": {
        "library": {"type": "string", "description": "the library's slug"},
        "at": {"type": "string", "format": "date-time"},
    },
    "required": ["library", "at"],
}


def event_type(change: Change) -> str:
    """The event type a change-log row is delivered as."""
    if change.kind.startswith("change_request."):
        return "change_request.changed"
    if ".rollout." in change.kind or change.kind.startswith("label.rollout"):
        return "rollout.changed"
    artifact = of_event(change.kind)
    if artifact is not None and (change.prompt or change.skill):
        return f"{artifact.name}.changed"
    return "tenant.changed"


def descriptors() -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "description": text,
            "delivery": ["push"] if name in PUSH_ONLY else ["poll", "push", "webhook"],
            "inputSchema": _LIBRARY_FILTER if name in PUSH_ONLY else _FILTER,
            "payloadSchema": _LIBRARY_PAYLOAD if name in PUSH_ONLY else _PAYLOAD,
        }
        for name, text in TYPES.items()
    ]


def replayed(name: str, delivery: str) -> None:
    """Unsupported (the draft's -32026) when ``name`` is a type with no replay, asked for by
    ``delivery`` (poll or webhook)."""
    if name in PUSH_ONLY:
        raise Unsupported(
            f"{name} is pushed on events/stream only (it has no replay)",
            data={"feature": "deliveryMode", "value": delivery},
        )


class ListParams(Params):
    cursor: str | None = None


class PollParams(Params):
    name: str = Field(min_length=1, max_length=100)
    arguments: dict[str, Any] | None = None
    cursor: str | None = Field(default=None, max_length=tokens.MAX_TOKEN_LENGTH)
    maxAgeMs: int | None = Field(default=None, ge=0, le=CURSOR_AGE_SECONDS * 1000)
    maxEvents: int | None = Field(default=None, ge=1, le=MAX_EVENTS)


PUBLIC_TYPES = ("prompt.changed", "skill.changed")  # what an anonymous caller may follow


async def events_list(call: Call, parsed: ListParams) -> dict[str, Any]:
    del parsed  # one page holds every type
    listed = descriptors()
    if call.principal.anonymous:
        listed = [d for d in listed if d["name"] in PUBLIC_TYPES]
    return {"events": listed}


def check_caller(tenant: Tenant, principal: Principal, name: str, label: str | None) -> None:
    """An anonymous caller of a public tenant follows prompts and skills on a label it may read,
    given as ``arguments.label`` (never change requests, rollouts or the tenant's settings, whose
    events show drafts and reviews); a caller with a key or token follows anything."""
    if not principal.anonymous:
        return
    if name not in PUBLIC_TYPES or label is None:
        raise EventForbidden(
            "an anonymous caller follows prompt.changed or skill.changed on a published label "
            "(arguments.label); send a key or token of the tenant for the rest",
            data={"reason": "anonymous"},
        )
    try:
        access.check_anonymous(tenant, principal, label)
    except RegistryError as refused:
        raise EventForbidden(refused.message, data={"reason": "anonymous"}) from None


@dataclass(frozen=True)
class Position:
    """One subscription, checked: its type, its filters (name, label), where its cursor is (None:
    start from now), the ``maxAgeMs`` floor, and what its cursors are bound to."""

    name: str
    filters: tuple[str | None, str | None]
    after: int | None
    floor: datetime | None
    context: tuple[str, str, str]


def checked(
    codec: tokens.TokenCodec, tenant: Tenant, principal: Principal, parsed: PollParams
) -> Position:
    """The subscription a poll or a stream asks for, or the draft's error naming what is wrong."""
    if parsed.name not in TYPES:
        raise EventNotFound(f"no event type {parsed.name!r}", data={"kind": "event"})
    arguments = parsed.arguments or {}
    unknown = sorted(set(arguments) - {"name", "label"})
    if unknown:
        raise InvalidParams(f"invalid params: arguments: {unknown[0]!r} is not one of name, label")
    for key, value in arguments.items():
        if not isinstance(value, str) or not value:
            raise InvalidParams(f"invalid params: arguments.{key}: a non-empty string")
    if parsed.name in PUSH_ONLY and "label" in arguments:
        raise InvalidParams(f"invalid params: arguments: {parsed.name} takes only name")
    check_caller(tenant, principal, parsed.name, arguments.get("label"))
    filters = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS).decode()
    context = (str(tenant.id), parsed.name, filters)
    after = None
    if parsed.cursor is not None and parsed.name not in PUSH_ONLY:  # no replay: from now on
        try:
            (after,) = codec.open(
                "events-cursor", context, parsed.cursor, max_age=CURSOR_AGE_SECONDS
            )
        except (tokens.InvalidToken, ValueError):
            raise InvalidParams(
                "invalid params: cursor: not one this server gave for this event type and arguments"
            ) from None
        if not isinstance(after, int) or after < 0:
            raise InvalidParams("invalid params: cursor: not one this server gave")
    floor = None
    if parsed.maxAgeMs is not None and after is not None:  # ignored with a null cursor
        floor = datetime.now(UTC) - timedelta(milliseconds=parsed.maxAgeMs)
    return Position(
        parsed.name, (arguments.get("name"), arguments.get("label")), after, floor, context
    )


def cursor(codec: tokens.TokenCodec, position: Position, seq: int) -> str:
    return codec.issue("events-cursor", position.context, [seq])


@dataclass
class Batch:
    events: list[dict[str, Any]]
    after: int  # the last row read
    truncated: bool
    more: bool  # rows may follow the last one read


async def read(
    session: AsyncSession, tenant: Tenant, position: Position, after: int, wanted: int
) -> Batch:
    """The subscription's events after ``after``, oldest first: at most ``wanted``, from at most
    SCAN_ROWS rows of the log; a skill's events with what their label serves now."""
    name, label = position.filters
    found: list[dict[str, Any]] = []
    truncated, scanned, more = False, 0, True
    while more and len(found) < wanted and scanned < SCAN_ROWS:
        rows = await changes_after(session, tenant.id, after)
        taken = 0
        for change in rows:
            after, scanned, taken = change.seq, scanned + 1, taken + 1
            if position.floor is not None and change.at < position.floor:
                truncated = True  # older than the client wants: skipped, and said so
            elif event_type(change) == position.name and _concerns(change, name, label):
                found.append(_occurrence(change, position.name))
            if len(found) >= wanted or scanned >= SCAN_ROWS:
                break
        more = len(rows) == PAGE or taken < len(rows)
    if position.name == "skill.changed" and found:
        await _with_manifests(session, tenant, found, label)
    return Batch(found, after, truncated, more)


async def events_poll(call: Call, parsed: PollParams) -> dict[str, Any]:
    """The events of one subscription after its cursor (``maxEvents`` at most), and the cursor
    after the last row read."""
    replayed(parsed.name, "poll")
    position = checked(call.tokens, call.tenant, call.principal, parsed)
    if position.after is None:  # start from now: no events, a cursor at the log's end
        return _result(call.tokens, position, Batch([], call.tenant.change_seq, False, False))
    session = await call.tx.session()
    after, truncated = await replay_from(
        session, call.tenant.id, position.after, call.tenant.change_seq
    )
    batch = await read(session, call.tenant, position, after, parsed.maxEvents or DEFAULT_EVENTS)
    batch.truncated = batch.truncated or truncated
    return _result(call.tokens, position, batch)


async def _with_manifests(
    session: AsyncSession, tenant: Tenant, found: list[dict[str, Any]], label: str | None
) -> None:
    """Each skill event with what its label (the subscription's, else the event's) serves of the
    skill now: version and manifest digest (None: nothing, archived or deleted), so a host that
    loaded the skill from that label refreshes exactly when the digest it holds differs."""
    known: dict[tuple[str, str], dict[str, Any] | None] = {}
    for event in found:
        data = event["data"]
        name, served_label = data.get("skill"), label or data.get("label")
        if not name or not served_label:
            continue
        key = (name, served_label)
        if key not in known:
            skills = await served_skills(session, tenant, served_label, name=name, limit=1)
            known[key] = None
            if skills:
                skill = skills[0]
                files = ((f.path, f.sha256, f.size) for f in skill.files)
                signed = document(tenant.slug, skill.name, skill.version, files)
                known[key] = {
                    "label": served_label,
                    "version": skill.version,
                    "digest": manifest_digest(signed),
                }
        data["served"] = known[key]


def _concerns(change: Change, name: str | None, label: str | None) -> bool:
    named = change.prompt or change.skill
    return (name is None or named is None or named == name) and (
        label is None or change.label is None or change.label == label
    )


def zulu(at: datetime) -> str:
    """A time as the draft writes one: ISO 8601 in UTC, with Z."""
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _occurrence(change: Change, name: str) -> dict[str, Any]:
    return {
        "eventId": f"seq-{change.seq}",
        "name": name,
        "timestamp": zulu(change.at),
        "data": change.data() | {"at": change.at.isoformat()},
    }


def _result(codec: tokens.TokenCodec, position: Position, batch: Batch) -> dict[str, Any]:
    return {
        "resultType": "complete",
        "events": batch.events,
        "cursor": cursor(codec, position, batch.after),
        "truncated": batch.truncated,
        "hasMore": batch.more,
        "nextPollMs": NEXT_POLL_MS,  # ignored by the client while hasMore
    }


# --- push: events/stream ------------------------------------------------------------------------


def _notice(method: str, params: dict[str, Any], request_id: str | int | None) -> dict[str, Any]:
    params["_meta"] = {META_SUBSCRIPTION: request_id}
    return {"jsonrpc": "2.0", "method": method, "params": params}


async def framed(messages: AsyncGenerator[dict[str, Any]]) -> AsyncGenerator[bytes]:
    """The messages of ``pushed`` as the SSE frames of the HTTP transport; closed with it (so its
    subscription leaves the hub at once, not when the collector finalizes it)."""
    try:
        async for message in messages:
            yield frame(message)
    finally:
        await messages.aclose()


async def pushed(
    db: Database,
    codec: tokens.TokenCodec,
    tenant: Tenant,
    position: Position,
    subscription: Subscription,
    request_id: str | int | None,
    keepalive: float,
) -> AsyncGenerator[dict[str, Any]]:
    """An ``events/stream``'s messages (each transport frames them its own way):
    ``notifications/events/active`` with the cursor it starts from, the events after it as the
    tenant's changes are heard (each with the cursor after it), a heartbeat with the cursor at each
    keep-alive interval, and the final result (or ``notifications/events/terminated`` when the
    caller may no longer read)."""
    if position.name in PUSH_ONLY:
        async for message in _pushed_libraries(db, position, subscription, request_id, keepalive):
            yield message
        return
    with subscription:
        after, truncated = tenant.change_seq, False
        if position.after is not None:
            async with db.tenant_tx(tenant.id) as session:
                after, truncated = await replay_from(
                    session, tenant.id, position.after, tenant.change_seq
                )
        active = {"cursor": cursor(codec, position, after), "truncated": truncated}
        yield _notice("notifications/events/active", active, request_id)
        caught_up = position.after is None  # a cursor given: its backlog first
        while True:
            if not caught_up:
                more = True
                while more:
                    async with db.tenant_tx(tenant.id) as session:
                        batch = await read(session, tenant, position, after, DEFAULT_EVENTS)
                    for event in batch.events:
                        event["cursor"] = cursor(codec, position, event["data"]["seq"])
                        yield _notice("notifications/events/event", event, request_id)
                    after, more = batch.after, batch.more
                caught_up = True
            seq = await subscription.next(streams.wait_seconds(subscription, keepalive))
            if subscription.closed:
                break
            if seq is None:  # nothing heard in the interval: the client's cursor moves on anyway
                beat = {"cursor": cursor(codec, position, after)}
                yield _notice("notifications/events/heartbeat", beat, request_id)
            else:
                caught_up = False
        yield _ended(subscription, request_id)


def _ended(subscription: Subscription, request_id: str | int | None) -> dict[str, Any]:
    """A stream's last message: ``terminated`` when the caller may no longer read, else the
    empty final result (the server shutting down)."""
    if subscription.reason is not None:
        error = {
            "code": EVENT_FORBIDDEN,
            "message": "Forbidden",
            "data": {"reason": subscription.reason},
        }
        return _notice("notifications/events/terminated", {"error": error}, request_id)
    final = {"resultType": "complete", "_meta": {META_SUBSCRIPTION: request_id}}
    return {"jsonrpc": "2.0", "id": request_id, "result": final}


async def _pushed_libraries(
    db: Database,
    position: Position,
    subscription: Subscription,
    request_id: str | int | None,
    keepalive: float,
) -> AsyncGenerator[dict[str, Any]]:
    """A ``library.changed`` stream: an event each time a library the tenant follows publishes
    (as the worker's fan-out tells the tenant's streams), with no cursor (no replay)."""
    wanted = position.filters[0]  # a library's slug, or every library
    slugs: dict[uuid.UUID, str | None] = {}
    with subscription:
        started = {"cursor": None, "truncated": False}
        yield _notice("notifications/events/active", started, request_id)
        while True:
            seq = await subscription.next(streams.wait_seconds(subscription, keepalive))
            if subscription.closed:
                break
            libraries, subscription.libraries = subscription.libraries or set(), None
            subscription.poked = False
            if seq is None and not libraries:
                yield _notice("notifications/events/heartbeat", {"cursor": None}, request_id)
            for library in sorted(libraries):
                if library not in slugs:
                    async with db.app_tx() as session:
                        found = await tenant_service.find_tenant_by_id(session, library)
                    slugs[library] = found.slug if found is not None else None
                slug = slugs[library]
                if slug is None or wanted not in (None, slug):
                    continue
                at = datetime.now(UTC)
                event = {
                    "eventId": f"library-{slug}-{uuid.uuid4().hex}",
                    "name": position.name,
                    "timestamp": zulu(at),
                    "data": {"library": slug, "at": at.isoformat()},
                    "cursor": None,
                }
                yield _notice("notifications/events/event", event, request_id)
        yield _ended(subscription, request_id)
