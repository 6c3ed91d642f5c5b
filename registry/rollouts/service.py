"""Rollouts of a label, for every kind of artifact (``registry.artifacts``): started (the version's
stored tests pass, its argument contract breaks nothing, the label policy allows the move), shown
with each side's answers from the serve ledger, paused and resumed, advanced a step when the step has
lasted ``min_seconds`` and the new side served ``min_answers`` (``advance``, which the scheduler
calls), promoted (the label moves, through the one label policy) or rolled back. Every change is
audited and is a change of the tenant (its caches drop, its streams and webhooks hear it)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg
from sqlalchemy.ext.asyncio import AsyncSession

from registry.artifacts.kinds import ARTIFACT_KINDS
from registry.artifacts.model import Artifact, MoveAt
from registry.artifacts.ops import ops_of
from registry.db.audit import record_audit, record_change
from registry.db.models import Tenant
from registry.db.rollout_models import LIVE, Rollout
from registry.errors import Conflict, InvalidInput, NotFound
from registry.labels import Terms, approval_refusal, approvals_needed, role_refusal
from registry.principal import Principal
from registry.rollouts import gate
from registry.rollouts import repository as repo
from registry.rollouts.assign import Live
from registry.rollouts.schemas import RolloutIn, RolloutOut, RolloutPlan, Side


async def live(reads: asyncpg.Pool | AsyncSession, tenant: Tenant) -> tuple[Live, ...]:
    """The tenant's live rollouts as serving needs them (none read unless it has some), in one
    statement on the hot path's pool or in the caller's transaction."""
    if not tenant.rollouts_live:
        return ()
    return tuple(Live(*row) for row in await repo.live_rows(reads, tenant.id))


def _allowed(tenant: Tenant, caller: Principal, label: str, reason: str | None) -> None:
    """The caller may move ``label`` directly (its role; where it needs approvals, an admin's
    reason as a break-glass move: else the rollout starts through a change request)."""
    refused = role_refusal(tenant, caller, label) or approval_refusal(
        tenant, caller, label, Terms(reason=reason)
    )
    if isinstance(refused, Conflict):  # the label needs approvals: say how a rollout gets them
        route = f"/api/v1/tenants/{tenant.slug}/change-requests"
        raise Conflict(
            f"label {label!r} needs {approvals_needed(tenant, label)} approval(s): a rollout of it "
            f"starts through a change request (POST {route} with a move that carries "
            '"rollout": {"steps": [...]}; registry rollout start --release DESCRIPTION); an admin '
            "may start it directly with a reason (break-glass)",
            field="label",
            change_requests=route,
        )
    if refused is not None:
        raise refused


async def start(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    kind: str,
    name: str,
    label: str,
    body: RolloutIn,
) -> RolloutOut:
    """A rollout started directly, by a caller who may move the label."""
    _allowed(tenant, caller, label, body.reason)
    rollout = await begin(
        session, tenant, caller, Start(kind, name, label, body.version, body.plan, body.reason)
    )
    return await show_one(session, tenant, rollout)


@dataclass(frozen=True)
class Start:
    """What starts a rollout: the label of one artifact, the new version, the plan; the reason of
    a break-glass start, or the change request whose approval started it (whose review ran the
    tests and contract checks, and may hold an admin's override of them)."""

    kind: str
    name: str
    label: str
    version: int
    plan: RolloutPlan
    reason: str | None = None
    change_request: int | None = None


async def begin(session: AsyncSession, tenant: Tenant, caller: Principal, start: Start) -> Rollout:
    """The rollout of ``start``, begun: the label serves a version that is not the new one, no
    other rollout of it is live, and (started directly) the new version passes its stored tests
    and breaks no argument contract."""
    kind, name, label, version = start.kind, start.name, start.label, start.version
    ops = ops_of(kind)
    artifact = await ops.find(session, tenant, name, lock=True)
    current = await ops.served(session, artifact, label)
    what = f"{kind} {name!r}"
    if current is None:
        raise Conflict(
            f"label {label!r} of {what} serves nothing: a rollout starts from what a "
            "label serves (move it first)",
            field="label",
        )
    if version == current:
        raise InvalidInput(
            f"label {label!r} of {what} serves version {current} already", field="version"
        )
    if version > artifact.latest_version:
        raise NotFound(f"{what} has no version {version}", field="version")
    existing = await repo.latest(session, tenant.id, kind, name, label, lock=True)
    if existing is not None and existing.state in LIVE:
        raise Conflict(
            f"rollout {existing.id} of label {label!r} of {what} is {existing.state}: promote or "
            "roll it back first",
            field="label",
            rollout=existing.id,
        )
    if start.change_request is None:
        await _checked(session, tenant, kind, artifact, MoveAt(label, version, current))
    plan = start.plan
    rollout = await repo.insert_rollout(
        session,
        tenant_id=tenant.id,
        kind=kind,
        name=name,
        label=label,
        from_version=current,
        to_version=version,
        steps=plan.steps,
        min_answers=plan.min_answers,
        min_seconds=plan.min_seconds,
        min_outcomes=plan.min_outcomes,
        salt=os.urandom(16),
        started_by=caller.actor,
        reason=start.reason,
        change_request_id=start.change_request,
    )
    await _changed(session, tenant, caller, rollout, artifact, "start")
    return rollout


async def _checked(
    session: AsyncSession, tenant: Tenant, kind: str, artifact: Artifact, at: MoveAt
) -> None:
    """The new version passes its stored tests and breaks no argument contract, or Conflict."""
    review = await ops_of(kind).review(session, tenant, artifact, at, detailed=False)
    if review.tests is not None and review.tests.failed:
        failing = [c.name for c in review.tests.cases if not c.passed]
        raise Conflict(
            f"version {at.version} fails its stored tests: {', '.join(failing)}",
            field="version",
            failing=failing,
        )
    if review.breaking:
        raise Conflict(
            f"version {at.version} breaks what callers send: "
            + "; ".join(c.detail for c in review.breaking),
            field="version",
        )


async def _changed(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    rollout: Rollout,
    artifact: Artifact,
    what: str,
) -> None:
    """The tenant's live count kept, the change logged (its caches drop everywhere), audited."""
    await repo.count_live(session, tenant)
    detail = {
        "rollout": rollout.id,
        "name": rollout.name,
        "state": rollout.state,
        "step": rollout.step + 1,
        "share": rollout.steps[rollout.step],
        "from": rollout.from_version,
        "to": rollout.to_version,
    }
    record_change(
        session,
        tenant_id=tenant.id,
        kind=ARTIFACT_KINDS[rollout.kind].event(f"label.rollout.{what}"),
        prompt_id=artifact.id,
        label=rollout.label,
        detail=detail,
    )
    await record_audit(
        session,
        tenant_id=tenant.id,
        actor=caller.actor,
        action=f"rollout.{what}",
        target=f"{rollout.kind}:{rollout.name}@{rollout.label}",
        after=detail,
    )


async def show(
    session: AsyncSession, tenant: Tenant, kind: str, name: str, label: str
) -> RolloutOut:
    await ops_of(kind).find(session, tenant, name)
    rollout = await repo.latest(session, tenant.id, kind, name, label, lock=False)
    if rollout is None:
        raise NotFound(f"label {label!r} of {kind} {name!r} has had no rollout", field="label")
    return await show_one(session, tenant, rollout)


async def show_one(session: AsyncSession, tenant: Tenant, rollout: Rollout) -> RolloutOut:
    del tenant
    counted = await repo.answers_by_version(session, rollout, rollout.created_at)
    reported = await repo.outcomes(session, rollout, rollout.step)

    def side(version: int, name: str) -> Side:
        good, bad = reported[name]
        answers, errors = counted.get(version, (0, 0))
        return Side(version=version, answers=answers, errors=errors, good=good, bad=bad)

    return RolloutOut(
        id=rollout.id,
        kind=rollout.kind,
        name=rollout.name,
        label=rollout.label,
        state=rollout.state,
        step=rollout.step + 1,
        steps=list(rollout.steps),
        share=rollout.steps[rollout.step],
        min_answers=rollout.min_answers,
        min_seconds=rollout.min_seconds,
        min_outcomes=rollout.min_outcomes,
        step_started_at=rollout.step_started_at,
        old=side(rollout.from_version, "old"),
        new=side(rollout.to_version, "new"),
        reason=rollout.reason,
        started_by=rollout.started_by,
        change_request=rollout.change_request_id,
        created_at=rollout.created_at,
        updated_at=rollout.updated_at,
    )


async def _live_one(
    session: AsyncSession, tenant: Tenant, kind: str, name: str, label: str
) -> tuple[Rollout, Artifact]:
    artifact = await ops_of(kind).find(session, tenant, name, lock=True)
    rollout = await repo.latest(session, tenant.id, kind, name, label, lock=True)
    if rollout is None or rollout.state not in LIVE:
        raise Conflict(f"label {label!r} of {kind} {name!r} has no live rollout", field="label")
    return rollout, artifact


async def act(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    kind: str,
    name: str,
    label: str,
    action: str,
    reason: str | None = None,
) -> RolloutOut:
    """pause, resume, promote or rollback, by a caller who may move the label."""
    rollout, artifact = await _live_one(session, tenant, kind, name, label)
    _may_act(tenant, caller, rollout, action, reason)
    if action == "pause":
        if rollout.state == "paused":
            raise Conflict(f"rollout {rollout.id} is paused already", field="state")
        await repo.set_state(session, rollout, state="paused", reason=reason)
    elif action == "resume":
        if rollout.state == "running":
            raise Conflict(f"rollout {rollout.id} is running already", field="state")
        await repo.set_state(
            session, rollout, state="running", reason=reason, step_started_at=datetime.now(UTC)
        )
    elif action == "promote":
        await _promote(session, tenant, caller, rollout, artifact, reason or "promoted by hand")
        return await show_one(session, tenant, rollout)
    else:
        await repo.set_state(
            session, rollout, state="rolled_back", reason=reason or "rolled back by hand"
        )
    await _changed(session, tenant, caller, rollout, artifact, action)
    return await show_one(session, tenant, rollout)


def _may_act(
    tenant: Tenant, caller: Principal, rollout: Rollout, action: str, reason: str | None
) -> None:
    """Who may pause, resume, promote or roll back: whoever may move the label. Where it needs
    approvals, pausing and rolling back need none (every caller goes back to, or stays on, what
    the label serves: approved already), nor does resuming a rollout a change request started
    (its plan was approved); promoting ahead of the plan, or going on with one started by
    break-glass, is a break-glass move (an admin's reason)."""
    refused = role_refusal(tenant, caller, rollout.label)
    if refused is not None:
        raise refused
    if action in ("pause", "rollback"):
        return
    if action == "resume" and rollout.change_request_id is not None:
        return
    _allowed(tenant, caller, rollout.label, reason or rollout.reason)


async def _promote(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    rollout: Rollout,
    artifact: Artifact,
    reason: str,
) -> None:
    """The label moves to the new version (the one label policy, on the terms the rollout started
    on) and the rollout ends."""
    ops = ops_of(rollout.kind)
    current = await ops.served(session, artifact, rollout.label)
    if current != rollout.to_version:
        move = MoveAt(rollout.label, rollout.to_version, current)
        terms = Terms(reason=rollout.reason, release=rollout.change_request_id)
        await ops.move(session, tenant, artifact, move, caller, terms)
    await repo.set_state(
        session, rollout, state="promoted", reason=reason, step=len(rollout.steps) - 1
    )
    await _changed(session, tenant, caller, rollout, artifact, "promote")


async def advance(session: AsyncSession, tenant: Tenant, rollout_id: int) -> str | None:
    """A running rollout whose step has lasted its least time: the next step when the new side
    served its least answers in this step, promoted after the last; what was done (None: not yet)."""
    # Locks in the order every rollout action takes them (the artifact, then its rollout), so an
    # advance and a pause at the same moment queue instead of deadlocking.
    seen = await repo.by_id(session, tenant.id, rollout_id, lock=False)
    if seen is None or seen.state != "running":
        return None
    artifact = await ops_of(seen.kind).find(session, tenant, seen.name, lock=True)
    rollout = await repo.by_id(session, tenant.id, rollout_id)  # locked, then read afresh
    if rollout is None or rollout.state != "running":
        return None
    elapsed = (datetime.now(UTC) - rollout.step_started_at).total_seconds()
    if elapsed < rollout.min_seconds:
        return None
    counted = await repo.answers_by_version(session, rollout, rollout.step_started_at)
    old, new = (counted.get(v, (0, 0)) for v in (rollout.from_version, rollout.to_version))
    if new[0] < rollout.min_answers:
        return None
    reported = await repo.outcomes(session, rollout, rollout.step)
    verdict = gate.judge_errors(gate.Outcomes(*old), gate.Outcomes(*new))
    if verdict.decision != "worse":
        verdict = gate.judge(
            gate.Outcomes(*reported["old"]), gate.Outcomes(*reported["new"]), rollout.min_outcomes
        )
    if rollout.steps[rollout.step] >= 100:  # no old side left to compare with: the steps before did
        verdict = gate.Verdict("fine", "every caller is on the new side")
    if verdict.decision == "wait":
        return None
    system = Principal(role="admin", tenant_id=tenant.id, system=f"rollout:{rollout.id}")
    if verdict.decision == "worse":  # rolled back by itself, saying why
        await repo.set_state(session, rollout, state="rolled_back", reason=verdict.reason)
        await _changed(session, tenant, system, rollout, artifact, "rollback")
        return "rolled back"
    if rollout.step + 1 >= len(rollout.steps):
        await _promote(session, tenant, system, rollout, artifact, "every step passed")
        return "promoted"
    await repo.set_state(session, rollout, step=rollout.step + 1, step_started_at=datetime.now(UTC))
    await _changed(session, tenant, system, rollout, artifact, "step")
    return f"step {rollout.step + 1}"
