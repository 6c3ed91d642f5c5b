"""The change stream over REST: server-sent events of every change the tenant serves, replayed from
``Last-Event-ID`` (or ``?after=``), then live (``registry.events.changes``). Reads need the reader
role, as every read does; each stream takes one of the worker's stream slots."""

from __future__ import annotations

from functools import partial
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from registry.api.auth import require_credential, tenant_scope
from registry.errors import InvalidInput
from registry.events import changes
from registry.events.streams import EventStream, caller_of, wait_seconds
from registry.naming import LABEL_PATTERN, MAX_SEQUENCE, PROMPT_NAME_PATTERN, ascii_number

router = APIRouter(
    prefix="/api/v1/tenants/{tenant}", tags=["changes"], dependencies=[Depends(require_credential)]
)


def _position(header: str | None, after: int | None) -> int | None:
    if header is not None:
        number = ascii_number(header.strip(), MAX_SEQUENCE)
        if number is None:
            raise InvalidInput(
                f"Last-Event-ID must be a change sequence number, not {header[:40]!r}",
                field="Last-Event-ID",
            )
        return number
    return after


@router.get(
    "/changes",
    summary="Server-sent events: every change of what the tenant serves, replayable",
    response_class=EventStream,
    status_code=200,  # said outright: FastAPI cannot read it from EventStream's constructor
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def change_stream(
    tenant: str,
    request: Request,
    after: Annotated[
        int | None, Query(ge=0, le=MAX_SEQUENCE, description="replay the changes after this one")
    ] = None,
    label: Annotated[str | None, Query(pattern=LABEL_PATTERN)] = None,
    prompt: Annotated[str | None, Query(pattern=PROMPT_NAME_PATTERN)] = None,
) -> EventStream:
    start = _position(request.headers.get("last-event-id"), after)
    async with tenant_scope(request, tenant, "reader", read_only=True) as scope:
        tenant_id, current, principal = scope.tenant.id, scope.tenant.change_seq, scope.principal
    state = request.app.state
    release = state.slots.take(
        tenant_id, caller_of(principal, request.client.host if request.client else None)
    )

    subscription = state.hub.subscribe(tenant_id, None, seen=current, owner=principal)
    events = changes.stream(
        state.db,
        subscription,
        after=current if start is None else start,
        current=current,
        label=label,
        prompt=prompt,
        wait=partial(wait_seconds, keepalive=state.settings.sse_keepalive_seconds),
    )
    return EventStream(events, subscription, release=release)
