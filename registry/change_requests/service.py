"""Change requests: one or more label moves (prompts and skills, any labels) that apply together as
one release, in one transaction, with one change-log entry (so one list_changed), after review.

States: ``open`` -> ``approved`` -> ``applied``, or ``rejected``, ``withdrawn``, ``stale`` (a label
it moves was moved by someone else meanwhile, or a prompt or skill it names was archived or
deleted). An author never approves their own request; an approval counts for the revision it saw
(editing the moves or the time resets approvals); approving needs the role the labels need; a
request whose tests fail or whose moves break an argument contract is approved only with an admin's
override, whose reason the audit log keeps. The last approval applies the request at once, unless it
has a time (``apply_at``): then the workers' scheduler applies it then, exactly once (the request's
row is locked and its state checked in the transaction that applies it).

What changes a request is here (opening, editing, reviewing, applying); ``reading`` shows them,
``common`` holds the rules every step shares (locking, staleness, who may review, the change-log
event and the audit entry). Callers own the transaction (scoped to one tenant); these functions
flush only.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from registry.artifacts.model import MoveAt
from registry.artifacts.ops import ops_of
from registry.change_requests import common, reading
from registry.change_requests import repository as repo
from registry.change_requests.schemas import (
    ApproveIn,
    ChangeRequestIn,
    ChangeRequestOut,
    ChangeRequestPatch,
    Checks,
    MoveIn,
)
from registry.db.models import Tenant
from registry.db.release_models import ChangeRequest, ChangeRequestMove
from registry.errors import Conflict, Forbidden, InvalidInput, NotFound
from registry.labels import (
    Terms,
    archived_refusal,
    check_label_name,
)
from registry.principal import Principal
from registry.rollouts import service as rollouts
from registry.rollouts.schemas import RolloutPlan
from registry.rollouts.service import Start

# --- opening and editing ------------------------------------------------------------------------


async def open_request(
    session: AsyncSession, tenant: Tenant, caller: Principal, body: ChangeRequestIn
) -> ChangeRequestOut:
    moves = await _written_moves(session, tenant, body.moves)
    request = await repo.insert_request(
        session,
        tenant.id,
        author=caller.actor,
        description=body.description,
        apply_at=body.apply_at,
    )
    await repo.replace_moves(session, request, moves)
    rows = await repo.moves_of(session, request)
    common.event(session, request, "opened", rows)
    await common.audit(session, request, caller, "change_request.open", moves=len(rows))
    return await reading.out(session, tenant, request, rows)


async def edit_request(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    request_id: int,
    body: ChangeRequestPatch,
) -> ChangeRequestOut:
    """New moves or a new time reset the approvals (the request is open again, at a new revision);
    a new description alone does not."""
    request = await common.locked_request(session, tenant, request_id)
    common.check_author(request, caller, "change")
    common.check_live(request, "changed")
    values: dict[str, Any] = {}
    if body.description is not None:
        values["description"] = body.description
    given = body.model_fields_set
    if body.moves is not None or "apply_at" in given:
        values |= {
            "revision": request.revision + 1,
            "state": "open",
            "override_by": None,
            "override_reason": None,
            "override_revision": None,
        }
        if "apply_at" in given:
            values["apply_at"] = body.apply_at
    if body.moves is not None:
        await repo.replace_moves(
            session, request, await _written_moves(session, tenant, body.moves)
        )
    if values:
        request = await repo.update_request(session, request, **values)
        await repo.add_review(session, request, caller.actor, "edit", None)
        await common.audit(session, request, caller, "change_request.edit", fields=sorted(values))
    return await reading.out(session, tenant, request, await repo.moves_of(session, request))


async def _written_moves(
    session: AsyncSession, tenant: Tenant, moves: Sequence[MoveIn]
) -> list[dict[str, Any]]:
    """The moves as stored: each checked (the prompt or skill and its version exist, it is not
    archived, the label is one a caller may move and not there already), with the version its
    label serves now (``before``), so a move someone else makes meanwhile makes the request
    stale."""
    written = []
    for move in moves:
        check_label_name(move.label)
        artifact = await ops_of(move.kind).find(session, tenant, move.name)
        archived = archived_refusal(move.kind, move.name, artifact.archived_at is not None, "moves")
        if archived is not None:
            raise archived
        if move.version > artifact.latest_version:
            raise NotFound(
                f"{move.kind} {move.name!r} has no version {move.version}", field="moves"
            )
        before = await common.served_now(session, move.kind, artifact, move.label)
        if before == move.version:
            raise InvalidInput(
                f"label {move.label!r} of {move.kind} {move.name!r} is at version {before} "
                "already: nothing to move",
                field="moves",
            )
        if move.rollout is not None and before is None:
            raise Conflict(
                f"label {move.label!r} of {move.kind} {move.name!r} serves nothing: a rollout "
                "starts from what a label serves (move it first)",
                field="moves",
            )
        plan = move.rollout.model_dump() if move.rollout is not None else None
        written.append(
            {
                "kind": move.kind,
                "name": move.name,
                "label": move.label,
                "version": move.version,
                "before": before,
                "rollout": plan,
            }
        )
    return written


# --- reviewing ----------------------------------------------------------------------------------


async def approve(
    session: AsyncSession, tenant: Tenant, caller: Principal, request_id: int, body: ApproveIn
) -> ChangeRequestOut:
    """One approval (the author's never counts, nor a second one by the same person); the last one
    needed applies the request, unless it has a time. A request whose tests fail or whose moves
    break an argument contract needs an admin's override, with a reason."""
    request = await common.locked_request(session, tenant, request_id)
    if request.state != "open":
        raise Conflict(
            f"change request {request_id} is {request.state}: only an open one is approved"
        )
    if caller.actor == request.author:
        raise Forbidden("the author of a change request cannot approve it", field="author")
    moves = await repo.moves_of(session, request)
    common.check_reviewer(tenant, caller, moves, "approve")
    reviews = await repo.reviews_of(session, request)
    approvers = await common.approving_people(session, tenant, request, reviews, caller)
    request = await common.refresh(session, tenant, request, moves)
    if request.state == "stale":  # the route answers 409 once this is committed
        return await reading.out(session, tenant, request, moves)
    checks, _ = await reading.run_checks(session, tenant, request, moves, detailed=False)
    if checks.blocking:
        request = await _override(session, request, caller, checks, body.override)
    await repo.add_review(session, request, caller.actor, "approve", body.comment)
    await common.audit(session, request, caller, "change_request.approve")
    if len(approvers) + 1 >= common.needed(tenant, moves):
        request = await repo.update_request(session, request, state="approved")
        common.event(session, request, "approved", moves)
        if request.apply_at is None or request.apply_at <= datetime.now(UTC):
            request = await _apply(session, tenant, caller, request, moves)
    return await reading.out(session, tenant, request, moves)


async def _override(
    session: AsyncSession,
    request: ChangeRequest,
    caller: Principal,
    checks: Checks,
    reason: str | None,
) -> ChangeRequest:
    said = (
        f"{checks.tests_failed} failing test(s) and {checks.breaking} breaking contract change(s)"
    )
    if reason is None:
        raise Conflict(
            f"change request {request.id} has {said}: it cannot be approved; an admin may approve "
            "it giving a reason (`override` in the request, `registry release approve --override "
            "REASON`, or the console's override field)",
            field="override",
            tests_failed=checks.tests_failed,
            breaking=checks.breaking,
        )
    if not caller.has("admin"):
        raise Forbidden(
            f"approving change request {request.id} despite {said} needs the admin role "
            f"(the caller is {caller.role})",
            field="override",
        )
    request = await repo.update_request(
        session,
        request,
        override_by=caller.actor,
        override_reason=reason,
        override_revision=request.revision,
    )
    await repo.add_review(session, request, caller.actor, "override", reason)
    await common.audit(
        session, request, caller, "change_request.override", reason=reason, what=said
    )
    return request


async def reject(
    session: AsyncSession, tenant: Tenant, caller: Principal, request_id: int, reason: str | None
) -> ChangeRequestOut:
    request = await common.locked_request(session, tenant, request_id)
    common.check_live(request, "rejected")
    moves = await repo.moves_of(session, request)
    common.check_reviewer(tenant, caller, moves, "reject")
    request = await repo.update_request(session, request, state="rejected")
    await repo.add_review(session, request, caller.actor, "reject", reason)
    common.event(session, request, "rejected", moves)
    await common.audit(session, request, caller, "change_request.reject", reason=reason)
    return await reading.out(session, tenant, request, moves)


async def withdraw(
    session: AsyncSession, tenant: Tenant, caller: Principal, request_id: int
) -> ChangeRequestOut:
    request = await common.locked_request(session, tenant, request_id)
    common.check_author(request, caller, "withdraw")
    common.check_live(request, "withdrawn")
    moves = await repo.moves_of(session, request)
    request = await repo.update_request(session, request, state="withdrawn")
    await repo.add_review(session, request, caller.actor, "withdraw", None)
    common.event(session, request, "withdrawn", moves)
    await common.audit(session, request, caller, "change_request.withdraw")
    return await reading.out(session, tenant, request, moves)


async def comment(
    session: AsyncSession, tenant: Tenant, caller: Principal, request_id: int, text: str
) -> ChangeRequestOut:
    request = await common.locked_request(session, tenant, request_id)
    await repo.add_review(session, request, caller.actor, "comment", text)
    return await reading.out(session, tenant, request, await repo.moves_of(session, request))


# --- applying -----------------------------------------------------------------------------------


async def apply(
    session: AsyncSession, tenant: Tenant, caller: Principal, request_id: int
) -> ChangeRequestOut:
    """An approved request applied now (also one scheduled for later)."""
    request = await common.locked_request(session, tenant, request_id)
    if request.state != "approved":
        raise Conflict(
            f"change request {request_id} is {request.state}: only an approved one is applied"
        )
    moves = await repo.moves_of(session, request)
    common.check_reviewer(tenant, caller, moves, "apply")
    request = await _apply(session, tenant, caller, request, moves)
    return await reading.out(session, tenant, request, moves)


async def apply_scheduled(
    session: AsyncSession, tenant: Tenant, request_id: int
) -> ChangeRequestOut | None:
    """The scheduler's turn: the request applied if it is still approved and due (another worker
    may have applied it first: then nothing happens, and None is returned)."""
    request = await repo.request_by_id(session, tenant.id, request_id, lock=True)
    due = request is not None and request.apply_at is not None
    if request is None or request.state != "approved" or not due:
        return None
    assert request.apply_at is not None
    if request.apply_at > datetime.now(UTC):
        return None
    scheduler = Principal(role="admin", tenant_id=tenant.id, system="scheduler")
    moves = await repo.moves_of(session, request)
    request = await _apply(session, tenant, scheduler, request, moves)
    return await reading.out(session, tenant, request, moves)


async def fail_scheduled(
    session: AsyncSession, tenant_id: uuid.UUID, request_id: int, reason: str
) -> None:
    """A scheduled request that could not be applied: stale, saying why (never tried again)."""
    request = await repo.request_by_id(session, tenant_id, request_id, lock=True)
    if request is not None and request.state == "approved":
        await common.go_stale(session, request, await repo.moves_of(session, request), reason)


async def _apply(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    request: ChangeRequest,
    moves: list[ChangeRequestMove],
) -> ChangeRequest:
    """Every move, in one transaction: the prompts and skills locked (in name order, so two
    releases never wait on each other in a circle), checked to be as the request saw them, moved,
    and one change-log row for them all. A request that no longer applies turns stale instead."""
    locked = {}
    for move in sorted(moves, key=lambda m: (m.kind, m.name)):
        key = (move.kind, move.name)
        if key not in locked:
            locked[key] = await common.existing(session, tenant, move.kind, move.name, lock=True)
    if (stale := await common.stale_reason(session, tenant, moves, locked)) is not None:
        return await common.go_stale(session, request, moves, stale)
    terms = Terms(release=request.id)
    for move in moves:
        artifact = locked[(move.kind, move.name)]
        assert artifact is not None  # else the request went stale above
        if move.rollout is not None:  # a rollout instead of a move: its steps need no approval
            plan = RolloutPlan.model_validate(move.rollout)
            begun = Start(move.kind, move.name, move.label, move.version, plan, None, request.id)
            await rollouts.begin(session, tenant, caller, begun)
            continue
        at = MoveAt(move.label, move.version, move.before)
        await ops_of(move.kind).move(session, tenant, artifact, at, caller, terms)
    request = await repo.update_request(
        session, request, state="applied", applied_by=caller.actor, applied_at=datetime.now(UTC)
    )
    await repo.add_review(session, request, caller.actor, "apply", None)
    common.event(session, request, "applied", moves)
    await common.audit(session, request, caller, "change_request.apply", moves=len(moves))
    return request
