"""The Events extension (``io.modelcontextprotocol/events``, SEP-3415, a draft of October 2026) on
revision 2026-07-28: ``events/list`` names the event types, and ``events/poll`` delivers a tenant's
change log to a caller who polls with a cursor. Push (``events/stream``) and webhook
(``events/subscribe``) delivery are not offered yet: each type advertises ``"poll"`` alone.

Every event is one row of the tenant's change log, so a poll resumes exactly where its cursor says,
across workers, instances and restarts (no event lost or repeated), and ``truncated`` says when the
log no longer holds the position asked for (or ``maxAgeMs`` skipped older ones). The cursor is a
token of the one codec, bound to the tenant, the event type and its arguments: it opens nowhere
else. What this server chose where the draft leaves room is in docs/events.md."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import orjson
from pydantic import Field

from registry import tokens
from registry.artifacts.kinds import of_event
from registry.db import repository as repo
from registry.events.changes import Change
from registry.mcp.call import Call, Params
from registry.mcp.errors import EventForbidden, EventNotFound, InvalidParams
from registry.skills.provenance import document, manifest_digest
from registry.skills.service import served_skills

NEXT_POLL_MS = 5_000  # what a poll tells the client to wait when it has nothing more
DEFAULT_EVENTS = 100  # a poll's batch when the client names no maxEvents
MAX_EVENTS = 1_000
SCAN_ROWS = 2_000  # the most change-log rows one poll reads (a rare type's poll moves on, bounded)
PAGE = 500
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
            "delivery": ["poll"],
            "inputSchema": _FILTER,
            "payloadSchema": _PAYLOAD,
        }
        for name, text in TYPES.items()
    ]


class ListParams(Params):
    cursor: str | None = None


class PollParams(Params):
    name: str = Field(min_length=1, max_length=100)
    arguments: dict[str, Any] | None = None
    cursor: str | None = Field(default=None, max_length=tokens.MAX_TOKEN_LENGTH)
    maxAgeMs: int | None = Field(default=None, ge=0, le=CURSOR_AGE_SECONDS * 1000)
    maxEvents: int | None = Field(default=None, ge=1, le=MAX_EVENTS)


async def events_list(call: Call, parsed: ListParams) -> dict[str, Any]:
    del parsed  # one page holds every type
    _check_caller(call)
    return {"events": descriptors()}


def _check_caller(call: Call) -> None:
    if call.principal.anonymous:  # drafts and reviews would show: a tenant's key or token only
        raise EventForbidden(
            "events need a key or a token of the tenant (an anonymous caller reads the published "
            "label only)",
            data={"reason": "anonymous"},
        )


def _filters(parsed: PollParams) -> tuple[str | None, str | None]:
    arguments = parsed.arguments or {}
    unknown = sorted(set(arguments) - {"name", "label"})
    if unknown:
        raise InvalidParams(f"invalid params: arguments: {unknown[0]!r} is not one of name, label")
    for key, value in arguments.items():
        if not isinstance(value, str) or not value:
            raise InvalidParams(f"invalid params: arguments.{key}: a non-empty string")
    return arguments.get("name"), arguments.get("label")


def _context(call: Call, parsed: PollParams) -> list[Any]:
    filters = orjson.dumps(parsed.arguments or {}, option=orjson.OPT_SORT_KEYS).decode()
    return [str(call.tenant.id), parsed.name, filters]


def _position(call: Call, parsed: PollParams) -> int | None:
    """The change sequence the client's cursor holds (None: start from now)."""
    if parsed.cursor is None:
        return None
    try:
        (seq,) = call.tokens.open(
            "events-cursor", _context(call, parsed), parsed.cursor, max_age=CURSOR_AGE_SECONDS
        )
    except (tokens.InvalidToken, ValueError):
        raise InvalidParams(
            "invalid params: cursor: not one this server gave for this event type and arguments"
        ) from None
    if not isinstance(seq, int) or seq < 0:
        raise InvalidParams("invalid params: cursor: not one this server gave")
    return seq


def _cursor(call: Call, parsed: PollParams, seq: int) -> str:
    return call.tokens.issue("events-cursor", _context(call, parsed), [seq])


async def events_poll(call: Call, parsed: PollParams) -> dict[str, Any]:
    """The events of one subscription after its cursor, oldest first (at most ``maxEvents``, from at
    most SCAN_ROWS rows of the log), and the cursor after the last row read."""
    _check_caller(call)
    if parsed.name not in TYPES:
        raise EventNotFound(f"no event type {parsed.name!r}", data={"kind": "event"})
    name, label = _filters(parsed)
    after = _position(call, parsed)
    session = await call.tx.session()
    if after is None:  # start from now: no events, a cursor at the log's end
        return _result(call, parsed, [], call.tenant.change_seq, truncated=False, more=False)
    truncated = False
    oldest = await repo.oldest_change(session, call.tenant.id)
    if after > call.tenant.change_seq:  # ahead of the log (a restored database)
        return _result(call, parsed, [], call.tenant.change_seq, truncated=True, more=False)
    if oldest is not None and oldest > after + 1:  # the log no longer holds what came after it
        after, truncated = oldest - 1, True
    floor = None
    if parsed.maxAgeMs is not None:
        floor = datetime.now(UTC) - timedelta(milliseconds=parsed.maxAgeMs)
    wanted = parsed.maxEvents or DEFAULT_EVENTS
    found: list[dict[str, Any]] = []
    read, more = 0, False
    while len(found) < wanted:
        rows = await repo.changes_after(session, call.tenant.id, after, PAGE)
        for row in rows:
            change = Change(
                row["seq"],
                row["kind"],
                row["prompt"],
                row["label"],
                row["created_at"],
                row["skill"],
                row["detail"],
            )
            after, read = change.seq, read + 1
            if floor is not None and change.at < floor:
                truncated = True  # older than the client wants: skipped, and said so
            elif event_type(change) == parsed.name and _concerns(change, name, label):
                found.append(_occurrence(change, parsed.name))
            if len(found) >= wanted or read >= SCAN_ROWS:
                break
        if len(rows) < PAGE or read >= SCAN_ROWS or len(found) >= wanted:
            more = after < call.tenant.change_seq
            break
    if parsed.name == "skill.changed" and found:
        await _with_manifests(call, found, label)
    return _result(call, parsed, found, after, truncated=truncated, more=more)


async def _with_manifests(call: Call, found: list[dict[str, Any]], label: str | None) -> None:
    """Each skill event with what its label (the subscription's, else the event's) serves of the
    skill now: version and manifest digest (None: nothing, archived or deleted), so a host that
    loaded the skill from that label refreshes exactly when the digest it holds differs."""
    session = await call.tx.session()
    known: dict[tuple[str, str], dict[str, Any] | None] = {}
    for event in found:
        data = event["data"]
        name, served_label = data.get("skill"), label or data.get("label")
        if not name or not served_label:
            continue
        key = (name, served_label)
        if key not in known:
            skills = await served_skills(session, call.tenant, served_label, name=name, limit=1)
            known[key] = None
            if skills:
                skill = skills[0]
                files = ((f.path, f.sha256, f.size) for f in skill.files)
                signed = document(call.tenant.slug, skill.name, skill.version, files)
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


def _occurrence(change: Change, name: str) -> dict[str, Any]:
    return {
        "eventId": f"seq-{change.seq}",
        "name": name,
        "timestamp": change.at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "data": change.data() | {"at": change.at.isoformat()},
    }


def _result(
    call: Call,
    parsed: PollParams,
    found: list[dict[str, Any]],
    seq: int,
    *,
    truncated: bool,
    more: bool,
) -> dict[str, Any]:
    delivered: Literal["complete"] = "complete"
    return {
        "resultType": delivered,
        "events": found,
        "cursor": _cursor(call, parsed, seq),
        "truncated": truncated,
        "hasMore": more,
        "nextPollMs": NEXT_POLL_MS,  # ignored by the client while hasMore
    }
