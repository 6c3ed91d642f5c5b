"""Change requests as they are shown: one with every move's diff against what its label serves
now, contract breaks, test results, approvals and reviews; a page of summaries; and whether a
caller may review one (what the console offers, by the rules ``service`` enforces)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from registry.artifacts.kinds import ARTIFACT_KINDS
from registry.artifacts.model import MoveAt
from registry.artifacts.ops import ops_of
from registry.change_requests import common
from registry.change_requests import repository as repo
from registry.change_requests.schemas import (
    ChangeRequestOut,
    ChangeRequestSummary,
    Checks,
    MoveOut,
    ReviewOut,
)
from registry.db.models import Tenant
from registry.db.release_models import ChangeRequest, ChangeRequestMove
from registry.labels import (
    role_refusal,
)
from registry.principal import Principal
from registry.rollouts.schemas import RolloutPlan
from registry.tenants import service as tenants


async def show(session: AsyncSession, tenant: Tenant, request_id: int) -> ChangeRequestOut:
    """The request with every move's diff against what its label serves now, contract breaks,
    test results, approvals and reviews (a live request found stale is marked so first)."""
    request = await common.locked_request(session, tenant, request_id)
    moves = await repo.moves_of(session, request)
    request = await common.refresh(session, tenant, request, moves)
    return await out(session, tenant, request, moves, detailed=True)


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


async def out(
    session: AsyncSession,
    tenant: Tenant,
    request: ChangeRequest,
    moves: list[ChangeRequestMove],
    *,
    detailed: bool = False,
) -> ChangeRequestOut:
    reviews = await repo.reviews_of(session, request)
    checks, shown = (None, None)
    if detailed and request.state in common.LIVE:
        checks, shown = await run_checks(session, tenant, request, moves, detailed=True)
    approvers = sorted(common.approvers_of(request, reviews))
    overrider = checks.overridden_by if checks else None
    names = await tenants.display_names(
        session,
        tenant.id,
        {request.author, request.applied_by, overrider, *approvers, *(r.actor for r in reviews)},
    )
    return ChangeRequestOut(
        id=request.id,
        state=request.state,
        author=request.author,
        names=names,
        description=request.description,
        revision=request.revision,
        apply_at=request.apply_at,
        approvals_needed=common.needed(tenant, moves),
        approved_by=approvers,
        stale_reason=request.stale_reason,
        applied_by=request.applied_by,
        applied_at=request.applied_at,
        created_at=request.created_at,
        updated_at=request.updated_at,
        moves=shown or [move_out(m) for m in moves],
        checks=checks,
        reviews=[
            ReviewOut(
                actor=r.actor,
                kind=r.kind,
                body=r.body,
                revision=r.revision,
                created_at=r.created_at,
            )
            for r in reviews
        ]
        if detailed
        else [],
    )


async def run_checks(
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
        out = move_out(move)
        ops = ops_of(move.kind)
        artifact = await ops.find(session, tenant, move.name)
        out.current = await ops.served(session, artifact, move.label)
        review = await ops.review(
            session,
            tenant,
            artifact,
            MoveAt(move.label, move.version, out.current),
            detailed=detailed,
        )
        out.diff, out.tests, out.breaking = review.diff, review.tests, review.breaking
        failed += out.tests.failed if out.tests else 0
        broken += len(out.breaking)
        shown.append(out)
    overridden = request.override_revision == request.revision
    checks = Checks(
        tests_failed=failed,
        breaking=broken,
        overridden_by=request.override_by if overridden else None,
        override_reason=request.override_reason if overridden else None,
    )
    return checks, shown


def move_out(move: ChangeRequestMove) -> MoveOut:
    named = {ARTIFACT_KINDS[move.kind].move_key: move.name}
    plan = RolloutPlan.model_validate(move.rollout) if move.rollout is not None else None
    return MoveOut(
        **named, label=move.label, version=move.version, before=move.before, rollout=plan
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
