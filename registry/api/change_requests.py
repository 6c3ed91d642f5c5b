"""Change requests: label moves of prompts and skills reviewed and applied as one release. One
service call per route (registry.change_requests)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import Field

from registry.api.auth import require_credential, tenant_scope
from registry.change_requests import reading, service
from registry.change_requests.schemas import (
    ApproveIn,
    ChangeRequestIn,
    ChangeRequestOut,
    ChangeRequestPatch,
    ChangeRequestSummary,
    CommentIn,
    ReasonIn,
    State,
)
from registry.errors import Conflict
from registry.libraries import service as libraries
from registry.libraries.schemas import ReachOut

router = APIRouter(
    prefix="/api/v1/tenants/{tenant}/change-requests",
    tags=["change requests"],
    dependencies=[Depends(require_credential)],
)
RequestId = Annotated[int, Path(ge=1, le=2**62, description="the request's number")]


def _applied_or_refused(out: ChangeRequestOut) -> ChangeRequestOut:
    """The answer, after the transaction that may have found the request stale has committed that
    finding: a stale request is a conflict, saying why."""
    if out.state == "stale":
        raise Conflict(
            f"change request {out.id} is stale: {out.stale_reason}", state="stale", id=out.id
        )
    return out


@router.post("", status_code=201, response_model=ChangeRequestOut, summary="Open a change request")
async def open_request(tenant: str, body: ChangeRequestIn, request: Request) -> ChangeRequestOut:
    async with tenant_scope(request, tenant, "editor") as scope:
        return await service.open_request(scope.session, scope.tenant, scope.principal, body)


@router.get("", response_model=list[ChangeRequestSummary], summary="Change requests, newest first")
async def list_requests(
    tenant: str,
    request: Request,
    state: Annotated[list[State] | None, Query(description="only these states")] = None,
    author: Annotated[str | None, Query(max_length=300)] = None,
    before: Annotated[int | None, Query(ge=1, le=2**62, description="ids below this")] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
) -> list[ChangeRequestSummary]:
    async with tenant_scope(request, tenant, "reader") as scope:
        return await reading.list_requests(
            scope.session,
            scope.tenant,
            states=state or (),
            author=author,
            before=before,
            limit=limit,
        )


class ChangeRequestShown(ChangeRequestOut):
    """A change request as one is shown: with, when its tenant is a library, whom each move
    reaches."""

    library_reach: list[list[ReachOut]] = Field(
        default_factory=list,
        description="per move, when this tenant is a library and the caller a publisher or "
        "admin: the tenants that read the move's label, following it (the move reaches them) or "
        "pinned (they keep their version); empty lists otherwise",
    )


@router.get(
    "/{request_id}",
    response_model=ChangeRequestShown,
    summary="A change request: each move's diff, contract breaks, test results, approvals, and "
    "for a library whom each move reaches",
)
async def show(tenant: str, request_id: RequestId, request: Request) -> ChangeRequestShown:
    async with tenant_scope(request, tenant, "reader") as scope:
        shown = await reading.show(scope.session, scope.tenant, request_id)
        publisher = scope.principal.has("publisher")  # who sees a library's subscribers
        reach = [
            await libraries.reach(scope.session, scope.tenant, m.prompt, m.label)
            if m.prompt and publisher
            else []
            for m in shown.moves
        ]
    return ChangeRequestShown(**dict(shown), library_reach=reach)


@router.patch(
    "/{request_id}",
    response_model=ChangeRequestOut,
    summary="Change an open request (new moves or a new time reset its approvals)",
)
async def edit(
    tenant: str, request_id: RequestId, body: ChangeRequestPatch, request: Request
) -> ChangeRequestOut:
    async with tenant_scope(request, tenant, "editor") as scope:
        return await service.edit_request(
            scope.session, scope.tenant, scope.principal, request_id, body
        )


@router.post(
    "/{request_id}/approve",
    response_model=ChangeRequestOut,
    summary="Approve (the last approval needed applies it, unless it has a time)",
)
async def approve(
    tenant: str, request_id: RequestId, body: ApproveIn, request: Request
) -> ChangeRequestOut:
    async with tenant_scope(request, tenant, "editor") as scope:
        out = await service.approve(scope.session, scope.tenant, scope.principal, request_id, body)
    if out.state == "approved" and out.apply_at is not None:
        request.app.state.scheduler.poke()  # this worker applies it on time, without polling
    return _applied_or_refused(out)


@router.post("/{request_id}/reject", response_model=ChangeRequestOut, summary="Reject")
async def reject(
    tenant: str, request_id: RequestId, body: ReasonIn, request: Request
) -> ChangeRequestOut:
    async with tenant_scope(request, tenant, "editor") as scope:
        return await service.reject(
            scope.session, scope.tenant, scope.principal, request_id, body.reason
        )


@router.post("/{request_id}/comment", response_model=ChangeRequestOut, summary="Comment")
async def comment(
    tenant: str, request_id: RequestId, body: CommentIn, request: Request
) -> ChangeRequestOut:
    async with tenant_scope(request, tenant, "editor") as scope:
        return await service.comment(
            scope.session, scope.tenant, scope.principal, request_id, body.comment
        )


@router.post(
    "/{request_id}/withdraw", response_model=ChangeRequestOut, summary="Withdraw (the author)"
)
async def withdraw(tenant: str, request_id: RequestId, request: Request) -> ChangeRequestOut:
    async with tenant_scope(request, tenant, "editor") as scope:
        return await service.withdraw(scope.session, scope.tenant, scope.principal, request_id)


@router.post(
    "/{request_id}/apply",
    response_model=ChangeRequestOut,
    summary="Apply an approved request now (also one scheduled for later)",
)
async def apply(tenant: str, request_id: RequestId, request: Request) -> ChangeRequestOut:
    async with tenant_scope(request, tenant, "editor") as scope:
        out = await service.apply(scope.session, scope.tenant, scope.principal, request_id)
    return _applied_or_refused(out)
