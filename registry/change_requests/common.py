"""What every step of a change request shares: the states it can still move from, the request
locked, staleness (a label moved meanwhile, an artifact archived or deleted), who may review it,
and the change-log event and audit entry each step writes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from registry.artifacts.model import Artifact
from registry.artifacts.ops import ops_of
from registry.change_requests import repository as repo
from registry.db.audit import record_audit, record_change
from registry.db.models import Tenant
from registry.db.release_models import ChangeRequest, ChangeRequestMove
from registry.errors import Conflict, Forbidden, NotFound
from registry.labels import (
    approvals_needed,
    role_refusal,
)
from registry.principal import Principal
from registry.tenants import service as tenants

LIVE = ("open", "approved")  # states a request can still move from

# --- staleness ----------------------------------------------------------------------------------


async def refresh(
    session: AsyncSession, tenant: Tenant, request: ChangeRequest, moves: list[ChangeRequestMove]
) -> ChangeRequest:
    """The request, marked stale first if it is live and no longer applies."""
    if request.state not in LIVE:
        return request
    reason = await stale_reason(session, tenant, moves, {})
    return request if reason is None else await go_stale(session, request, moves, reason)


async def stale_reason(
    session: AsyncSession,
    tenant: Tenant,
    moves: list[ChangeRequestMove],
    locked: dict[tuple[str, str], Artifact | None],
) -> str | None:
    for move in moves:
        key = (move.kind, move.name)
        artifact = locked[key] if key in locked else await existing(session, tenant, *key)
        if artifact is None:
            return f"{move.kind} {move.name!r} was deleted"
        if artifact.archived_at is not None:
            return f"{move.kind} {move.name!r} was archived"
        current = await served_now(session, move.kind, artifact, move.label)
        if current != move.before:
            return (
                f"label {move.label!r} of {move.kind} {move.name!r} was moved (from "
                f"{version_text(move.before)} to {version_text(current)}) since the request was written"
            )
    return None


async def go_stale(
    session: AsyncSession, request: ChangeRequest, moves: list[ChangeRequestMove], reason: str
) -> ChangeRequest:
    request = await repo.update_request(session, request, state="stale", stale_reason=reason)
    await repo.add_review(session, request, "registry", "stale", reason)
    event(session, request, "stale", moves)
    return request


def version_text(number: int | None) -> str:
    return f"version {number}" if number is not None else "nothing"


# --- shared -------------------------------------------------------------------------------------


async def locked_request(session: AsyncSession, tenant: Tenant, request_id: int) -> ChangeRequest:
    request = await repo.request_by_id(session, tenant.id, request_id, lock=True)
    if request is None:
        raise NotFound(f"change request {request_id} not found", field="id")
    return request


async def existing(
    session: AsyncSession, tenant: Tenant, kind: str, name: str, *, lock: bool = False
) -> Artifact | None:
    """The prompt or skill ``name``, None when there is none (any more)."""
    try:
        return await ops_of(kind).find(session, tenant, name, lock=lock)
    except NotFound:
        return None


async def served_now(
    session: AsyncSession, kind: str, artifact: Artifact, label: str
) -> int | None:
    return await ops_of(kind).served(session, artifact, label)


def needed(tenant: Tenant, moves: Sequence[ChangeRequestMove]) -> int:
    """Approvals the request needs: the most any of its labels needs, and at least one."""
    return max([1, *(approvals_needed(tenant, m.label) for m in moves)])


def approvers_of(request: ChangeRequest, reviews: Sequence[Any]) -> set[str]:
    return {r.actor for r in reviews if r.kind == "approve" and r.revision == request.revision}


async def approving_people(
    session: AsyncSession,
    tenant: Tenant,
    request: ChangeRequest,
    reviews: Sequence[Any],
    caller: Principal,
) -> set[str]:
    """The people who approved the request's revision, once the caller may add theirs: approvals
    count people (a key's owner, a token's subject), so the author's other key and a second key of
    someone who approved already are refused."""
    approvers = approvers_of(request, reviews)
    people = await tenants.people(session, tenant.id, {caller.actor, request.author, *approvers})
    me = people[caller.actor]
    if me == people[request.author]:
        raise Forbidden(
            f"the author of a change request cannot approve it: this key's owner "
            f"({me.removeprefix('owner:')}) wrote it",
            field="author",
        )
    approving = {people[actor] for actor in approvers}
    if me in approving:
        who = me.removeprefix("owner:")
        raise Conflict(
            f"{who} approved revision {request.revision} already (with another key)"
            if me.startswith("owner:")
            else f"{caller.actor} approved revision {request.revision} already"
        )
    return approving


def check_author(request: ChangeRequest, caller: Principal, what: str) -> None:
    if caller.actor != request.author and not caller.has("admin"):
        raise Forbidden(
            f"only the author of change request {request.id} (or an admin) may {what} it",
            field="author",
        )


def check_live(request: ChangeRequest, what: str) -> None:
    if request.state not in LIVE:
        raise Conflict(f"change request {request.id} is {request.state}: it cannot be {what}")


def check_reviewer(
    tenant: Tenant, caller: Principal, moves: Sequence[ChangeRequestMove], what: str
) -> None:
    """Reviewing needs the role each moved label needs (a protected one: publisher)."""
    for move in moves:
        refused = role_refusal(tenant, caller, move.label)
        if refused is not None:
            raise Forbidden(
                f"to {what} a change request that moves {move.label!r}: {refused.message}",
                field="label",
            )


def event(
    session: AsyncSession, request: ChangeRequest, what: str, moves: Sequence[ChangeRequestMove]
) -> None:
    """One change-log row (and so one webhook event and one change-stream event): review events
    change nothing served; ``applied`` names the label when every move is of one label."""
    labels = {m.label for m in moves}
    record_change(
        session,
        tenant_id=request.tenant_id,
        kind=f"change_request.{what}",
        label=labels.pop() if what == "applied" and len(labels) == 1 else None,
        detail={
            "change_request": {
                "id": request.id,
                "state": request.state,
                "author": request.author,
                "description": request.description,
                "moves": [{m.kind: m.name, "label": m.label, "version": m.version} for m in moves],
            }
        },
    )


async def audit(
    session: AsyncSession, request: ChangeRequest, caller: Principal, action: str, **after: Any
) -> None:
    await record_audit(
        session,
        tenant_id=request.tenant_id,
        actor=caller.actor,
        action=action,
        target=f"change_request:{request.id}",
        after={"state": request.state, "revision": request.revision, **after},
    )
