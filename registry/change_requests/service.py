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

Callers own the transaction (scoped to one tenant); these functions flush only.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from registry.artifacts.kinds import ARTIFACT_KINDS
from registry.artifacts.model import Artifact, MoveAt
from registry.artifacts.ops import ops_of
from registry.change_requests import repository as repo
from registry.change_requests.schemas import (
    ApproveIn,
    ChangeRequestIn,
    ChangeRequestOut,
    ChangeRequestPatch,
    ChangeRequestSummary,
    Checks,
    MoveIn,
    MoveOut,
    ReviewOut,
)
from registry.db.audit import record_audit, record_change
from registry.db.models import Tenant
from registry.db.release_models import ChangeRequest, ChangeRequestMove
from registry.errors import Conflict, Forbidden, InvalidInput, NotFound
from registry.labels import (
    Terms,
    approvals_needed,
    archived_refusal,
    check_label_name,
    role_refusal,
)
from registry.principal import Principal
from registry.rollouts import service as rollouts
from registry.rollouts.schemas import RolloutPlan
from registry.rollouts.service import Start
from registry.tenants import service as tenants

LIVE = ("open", "approved")  # states a request can still move from


# --- opening and editing ------------------------------------------------------------------------


async def open_request(
    session: AsyncSession, tenant: Tenant, caller: Principal, body: ChangeRequestIn
) -> ChangeRequestOut:
    moves = await _written_moves(session, tenant, body.moves)
    request = await repo.insert_request(
        session, tenant.id, author=caller.actor, description=body.description,
        apply_at=body.apply_at,
    )  # fmt: skip
    await repo.replace_moves(session, request, moves)
    rows = await repo.moves_of(session, request)
    _event(session, request, "opened", rows)
    await _audit(session, request, caller, "change_request.open", moves=len(rows))
    return await _out(session, tenant, request, rows)


async def edit_request(
    session: AsyncSession, tenant: Tenant, caller: Principal, request_id: int,
    body: ChangeRequestPatch,
) -> ChangeRequestOut:  # fmt: skip
    """New moves or a new time reset the approvals (the request is open again, at a new revision);
    a new description alone does not."""
    request = await _locked(session, tenant, request_id)
    _check_author(request, caller, "change")
    _check_live(request, "changed")
    values: dict[str, Any] = {}
    if body.description is not None:
        values["description"] = body.description
    given = body.model_fields_set
    if body.moves is not None or "apply_at" in given:
        values |= {"revision": request.revision + 1, "state": "open", "override_by": None,
                   "override_reason": None, "override_revision": None}  # fmt: skip
        if "apply_at" in given:
            values["apply_at"] = body.apply_at
    if body.moves is not None:
        await repo.replace_moves(
            session, request, await _written_moves(session, tenant, body.moves)
        )
    if values:
        request = await repo.update_request(session, request, **values)
        await repo.add_review(session, request, caller.actor, "edit", None)
        await _audit(session, request, caller, "change_request.edit", fields=sorted(values))
    return await _out(session, tenant, request, await repo.moves_of(session, request))


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
        before = await _served(session, move.kind, artifact, move.label)
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
        written.append({"kind": move.kind, "name": move.name, "label": move.label,
                        "version": move.version, "before": before, "rollout": plan})  # fmt: skip
    return written


# --- reviewing ----------------------------------------------------------------------------------


async def approve(
    session: AsyncSession, tenant: Tenant, caller: Principal, request_id: int, body: ApproveIn
) -> ChangeRequestOut:
    """One approval (the author's never counts, nor a second one by the same person); the last one
    needed applies the request, unless it has a time. A request whose tests fail or whose moves
    break an argument contract needs an admin's override, with a reason."""
    request = await _locked(session, tenant, request_id)
    if request.state != "open":
        raise Conflict(
            f"change request {request_id} is {request.state}: only an open one is approved"
        )
    if caller.actor == request.author:
        raise Forbidden("the author of a change request cannot approve it", field="author")
    moves = await repo.moves_of(session, request)
    _check_reviewer(tenant, caller, moves, "approve")
    reviews = await repo.reviews_of(session, request)
    approvers = await _approving_people(session, tenant, request, reviews, caller)
    request = await _refresh(session, tenant, request, moves)
    if request.state == "stale":  # the route answers 409 once this is committed
        return await _out(session, tenant, request, moves)
    checks, _ = await _checks(session, tenant, request, moves, detailed=False)
    if checks.blocking:
        request = await _override(session, request, caller, checks, body.override)
    await repo.add_review(session, request, caller.actor, "approve", body.comment)
    await _audit(session, request, caller, "change_request.approve")
    if len(approvers) + 1 >= _needed(tenant, moves):
        request = await repo.update_request(session, request, state="approved")
        _event(session, request, "approved", moves)
        if request.apply_at is None or request.apply_at <= datetime.now(UTC):
            request = await _apply(session, tenant, caller, request, moves)
    return await _out(session, tenant, request, moves)


async def _override(
    session: AsyncSession, request: ChangeRequest, caller: Principal, checks: Checks,
    reason: str | None,
) -> ChangeRequest:  # fmt: skip
    said = (
        f"{checks.tests_failed} failing test(s) and {checks.breaking} breaking contract change(s)"
    )
    if reason is None:
        raise Conflict(
            f"change request {request.id} has {said}: it cannot be approved; an admin may approve "
            "it giving a reason (`override` in the request, `registry release approve --override "
            "REASON`, or the console's override field)",
            field="override", tests_failed=checks.tests_failed, breaking=checks.breaking,
        )  # fmt: skip
    if not caller.has("admin"):
        raise Forbidden(
            f"approving change request {request.id} despite {said} needs the admin role "
            f"(the caller is {caller.role})",
            field="override",
        )
    request = await repo.update_request(
        session, request, override_by=caller.actor, override_reason=reason,
        override_revision=request.revision,
    )  # fmt: skip
    await repo.add_review(session, request, caller.actor, "override", reason)
    await _audit(session, request, caller, "change_request.override", reason=reason, what=said)
    return request


async def reject(
    session: AsyncSession, tenant: Tenant, caller: Principal, request_id: int, reason: str | None
) -> ChangeRequestOut:
    request = await _locked(session, tenant, request_id)
    _check_live(request, "rejected")
    moves = await repo.moves_of(session, request)
    _check_reviewer(tenant, caller, moves, "reject")
    request = await repo.update_request(session, request, state="rejected")
    await repo.add_review(session, request, caller.actor, "reject", reason)
    _event(session, request, "rejected", moves)
    await _audit(session, request, caller, "change_request.reject", reason=reason)
    return await _out(session, tenant, request, moves)


async def withdraw(
    session: AsyncSession, tenant: Tenant, caller: Principal, request_id: int
) -> ChangeRequestOut:
    request = await _locked(session, tenant, request_id)
    _check_author(request, caller, "withdraw")
    _check_live(request, "withdrawn")
    moves = await repo.moves_of(session, request)
    request = await repo.update_request(session, request, state="withdrawn")
    await repo.add_review(session, request, caller.actor, "withdraw", None)
    _event(session, request, "withdrawn", moves)
    await _audit(session, request, caller, "change_request.withdraw")
    return await _out(session, tenant, request, moves)


async def comment(
    session: AsyncSession, tenant: Tenant, caller: Principal, request_id: int, text: str
) -> ChangeRequestOut:
    request = await _locked(session, tenant, request_id)
    await repo.add_review(session, request, caller.actor, "comment", text)
    return await _out(session, tenant, request, await repo.moves_of(session, request))


# --- applying -----------------------------------------------------------------------------------


async def apply(
    session: AsyncSession, tenant: Tenant, caller: Principal, request_id: int
) -> ChangeRequestOut:
    """An approved request applied now (also one scheduled for later)."""
    request = await _locked(session, tenant, request_id)
    if request.state != "approved":
        raise Conflict(
            f"change request {request_id} is {request.state}: only an approved one is applied"
        )
    moves = await repo.moves_of(session, request)
    _check_reviewer(tenant, caller, moves, "apply")
    request = await _apply(session, tenant, caller, request, moves)
    return await _out(session, tenant, request, moves)


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
    return await _out(session, tenant, request, moves)


async def fail_scheduled(
    session: AsyncSession, tenant_id: uuid.UUID, request_id: int, reason: str
) -> None:
    """A scheduled request that could not be applied: stale, saying why (never tried again)."""
    request = await repo.request_by_id(session, tenant_id, request_id, lock=True)
    if request is not None and request.state == "approved":
        await _go_stale(session, request, await repo.moves_of(session, request), reason)


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
            locked[key] = await _existing(session, tenant, move.kind, move.name, lock=True)
    if (stale := await _stale_reason(session, tenant, moves, locked)) is not None:
        return await _go_stale(session, request, moves, stale)
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
    _event(session, request, "applied", moves)
    await _audit(session, request, caller, "change_request.apply", moves=len(moves))
    return request


# --- reading ------------------------------------------------------------------------------------


async def show(session: AsyncSession, tenant: Tenant, request_id: int) -> ChangeRequestOut:
    """The request with every move's diff against what its label serves now, contract breaks,
    test results, approvals and reviews (a live request found stale is marked so first)."""
    request = await _locked(session, tenant, request_id)
    moves = await repo.moves_of(session, request)
    request = await _refresh(session, tenant, request, moves)
    return await _out(session, tenant, request, moves, detailed=True)


async def list_requests(
    session: AsyncSession,
    tenant: Tenant,
    *,
    states: Sequence[str] = (),
    author: str | None = None,
    before: int | None = None,
    limit: int = 50,
) -> list[ChangeRequestSummary]:
    rows = await repo.requests_page(
        session, tenant.id, states=states, author=author, before=before, limit=limit
    )
    names = await tenants.display_names(session, tenant.id, {r.author for r, _ in rows})
    return [
        ChangeRequestSummary(
            id=r.id,
            state=r.state,
            author=r.author,
            description=r.description,
            apply_at=r.apply_at,
            moves=count,
            created_at=r.created_at,
            updated_at=r.updated_at,
            names={r.author: names[r.author]},
        )
        for r, count in rows
    ]


async def _out(
    session: AsyncSession,
    tenant: Tenant,
    request: ChangeRequest,
    moves: list[ChangeRequestMove],
    *,
    detailed: bool = False,
) -> ChangeRequestOut:
    reviews = await repo.reviews_of(session, request)
    checks, shown = (None, None)
    if detailed and request.state in LIVE:
        checks, shown = await _checks(session, tenant, request, moves, detailed=True)
    approvers = sorted(_approvers(request, reviews))
    overrider = checks.overridden_by if checks else None
    names = await tenants.display_names(
        session, tenant.id,
        {request.author, request.applied_by, overrider, *approvers, *(r.actor for r in reviews)},
    )  # fmt: skip
    return ChangeRequestOut(
        id=request.id, state=request.state, author=request.author, names=names,
        description=request.description, revision=request.revision, apply_at=request.apply_at,
        approvals_needed=_needed(tenant, moves), approved_by=approvers,
        stale_reason=request.stale_reason, applied_by=request.applied_by,
        applied_at=request.applied_at, created_at=request.created_at,
        updated_at=request.updated_at,
        moves=shown or [_move_out(m) for m in moves], checks=checks,
        reviews=[
            ReviewOut(actor=r.actor, kind=r.kind, body=r.body, revision=r.revision,
                      created_at=r.created_at)
            for r in reviews
        ] if detailed else [],
    )  # fmt: skip


async def _checks(
    session: AsyncSession,
    tenant: Tenant,
    request: ChangeRequest,
    moves: list[ChangeRequestMove],
    *,
    detailed: bool,
) -> tuple[Checks, list[MoveOut]]:
    """Each move's tests (run on the version it moves to) and contract breaks (against what a
    protected label serves now), as its kind reviews a move; with ``detailed``, its diff too."""
    shown, failed, broken = [], 0, 0
    for move in moves:
        out = _move_out(move)
        ops = ops_of(move.kind)
        artifact = await ops.find(session, tenant, move.name)
        out.current = await ops.served(session, artifact, move.label)
        review = await ops.review(
            session, tenant, artifact, MoveAt(move.label, move.version, out.current),
            detailed=detailed,
        )  # fmt: skip
        out.diff, out.tests, out.breaking = review.diff, review.tests, review.breaking
        failed += out.tests.failed if out.tests else 0
        broken += len(out.breaking)
        shown.append(out)
    overridden = request.override_revision == request.revision
    checks = Checks(
        tests_failed=failed, breaking=broken,
        overridden_by=request.override_by if overridden else None,
        override_reason=request.override_reason if overridden else None,
    )  # fmt: skip
    return checks, shown


def _move_out(move: ChangeRequestMove) -> MoveOut:
    named = {ARTIFACT_KINDS[move.kind].move_key: move.name}
    plan = RolloutPlan.model_validate(move.rollout) if move.rollout is not None else None
    return MoveOut(
        **named, label=move.label, version=move.version, before=move.before, rollout=plan
    )


# --- staleness ----------------------------------------------------------------------------------


async def _refresh(
    session: AsyncSession, tenant: Tenant, request: ChangeRequest, moves: list[ChangeRequestMove]
) -> ChangeRequest:
    """The request, marked stale first if it is live and no longer applies."""
    if request.state not in LIVE:
        return request
    reason = await _stale_reason(session, tenant, moves, {})
    return request if reason is None else await _go_stale(session, request, moves, reason)


async def _stale_reason(
    session: AsyncSession,
    tenant: Tenant,
    moves: list[ChangeRequestMove],
    locked: dict[tuple[str, str], Artifact | None],
) -> str | None:
    for move in moves:
        key = (move.kind, move.name)
        artifact = locked[key] if key in locked else await _existing(session, tenant, *key)
        if artifact is None:
            return f"{move.kind} {move.name!r} was deleted"
        if artifact.archived_at is not None:
            return f"{move.kind} {move.name!r} was archived"
        current = await _served(session, move.kind, artifact, move.label)
        if current != move.before:
            return (
                f"label {move.label!r} of {move.kind} {move.name!r} was moved (from "
                f"{_version(move.before)} to {_version(current)}) since the request was written"
            )
    return None


async def _go_stale(
    session: AsyncSession, request: ChangeRequest, moves: list[ChangeRequestMove], reason: str
) -> ChangeRequest:
    request = await repo.update_request(session, request, state="stale", stale_reason=reason)
    await repo.add_review(session, request, "registry", "stale", reason)
    _event(session, request, "stale", moves)
    return request


def _version(number: int | None) -> str:
    return f"version {number}" if number is not None else "nothing"


# --- shared -------------------------------------------------------------------------------------


async def _locked(session: AsyncSession, tenant: Tenant, request_id: int) -> ChangeRequest:
    request = await repo.request_by_id(session, tenant.id, request_id, lock=True)
    if request is None:
        raise NotFound(f"change request {request_id} not found", field="id")
    return request


async def _existing(
    session: AsyncSession, tenant: Tenant, kind: str, name: str, *, lock: bool = False
) -> Artifact | None:
    """The prompt or skill ``name``, None when there is none (any more)."""
    try:
        return await ops_of(kind).find(session, tenant, name, lock=lock)
    except NotFound:
        return None


async def _served(session: AsyncSession, kind: str, artifact: Artifact, label: str) -> int | None:
    return await ops_of(kind).served(session, artifact, label)


def _needed(tenant: Tenant, moves: Sequence[ChangeRequestMove]) -> int:
    """Approvals the request needs: the most any of its labels needs, and at least one."""
    return max([1, *(approvals_needed(tenant, m.label) for m in moves)])


def _approvers(request: ChangeRequest, reviews: Sequence[Any]) -> set[str]:
    return {r.actor for r in reviews if r.kind == "approve" and r.revision == request.revision}


async def _approving_people(
    session: AsyncSession, tenant: Tenant, request: ChangeRequest, reviews: Sequence[Any],
    caller: Principal,
) -> set[str]:  # fmt: skip
    """The people who approved the request's revision, once the caller may add theirs: approvals
    count people (a key's owner, a token's subject), so the author's other key and a second key of
    someone who approved already are refused."""
    approvers = _approvers(request, reviews)
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
        raise Conflict(f"{who} approved revision {request.revision} already (with another key)"
                       if me.startswith("owner:") else
                       f"{caller.actor} approved revision {request.revision} already")  # fmt: skip
    return approving


def _check_author(request: ChangeRequest, caller: Principal, what: str) -> None:
    if caller.actor != request.author and not caller.has("admin"):
        raise Forbidden(
            f"only the author of change request {request.id} (or an admin) may {what} it",
            field="author",
        )


def _check_live(request: ChangeRequest, what: str) -> None:
    if request.state not in LIVE:
        raise Conflict(f"change request {request.id} is {request.state}: it cannot be {what}")


def _check_reviewer(
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


def may_review(tenant: Tenant, caller: Principal, shown: ChangeRequestOut) -> bool:
    """Whether ``caller`` may approve or reject ``shown`` (an open request, not its author's, with
    the role its labels need): what the console offers, by the rules the service enforces."""
    return (
        shown.state == "open"
        and caller.has("editor")
        and caller.actor != shown.author
        and all(role_refusal(tenant, caller, move.label) is None for move in shown.moves)
    )


def _event(
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


async def _audit(
    session: AsyncSession, request: ChangeRequest, caller: Principal, action: str, **after: Any
) -> None:
    await record_audit(
        session, tenant_id=request.tenant_id, actor=caller.actor, action=action,
        target=f"change_request:{request.id}",
        after={"state": request.state, "revision": request.revision, **after},
    )  # fmt: skip
