"""What callers report of answers a rollout decided (``POST /feedback``): each report is of one
answer, proved by its signed receipt (checked by the route: the receipt names the rollout, the
step, the side and the served caller's digest), counted once (a receipt reported again is refused),
in the step it was served in, and at most ``PER_CALLER_PER_STEP`` times for one served caller, so
that one caller cannot outvote the others."""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.models import Tenant
from registry.db.rollout_models import LIVE
from registry.errors import Conflict, InvalidInput, NotFound
from registry.principal import Principal
from registry.rollouts import repository as repo
from registry.rollouts.schemas import FeedbackIn, FeedbackOut

PER_CALLER_PER_STEP = 5


def _named(document: dict[str, Any], tenant: Tenant) -> dict[str, Any]:
    if document.get("tenant") != tenant.slug:
        raise InvalidInput("receipt: it is of another tenant's answer", field="receipt")
    rollout = document.get("rollout")
    if not isinstance(rollout, dict) or not {"id", "step", "side", "caller"} <= rollout.keys():
        raise InvalidInput(
            "receipt: the answer it covers was not decided by a rollout (nothing to compare)",
            field="receipt",
        )
    return rollout


async def report(
    session: AsyncSession,
    tenant: Tenant,
    reporter: Principal,
    document: dict[str, Any],
    signature: str,
    body: FeedbackIn,
) -> FeedbackOut:
    named = _named(document, tenant)
    rollout = await repo.by_id(session, tenant.id, int(named["id"]))
    if rollout is None:
        raise NotFound(f"rollout {named['id']} is not this tenant's", field="receipt")
    if rollout.state not in LIVE:
        raise Conflict(
            f"rollout {rollout.id} is {rollout.state}: it takes no more outcomes", field="receipt"
        )
    step = int(named["step"]) - 1
    if step != rollout.step:
        raise Conflict(
            f"the answer was served in step {step + 1}; rollout {rollout.id} is at step "
            f"{rollout.step + 1}, and each step counts its own answers' outcomes",
            field="receipt",
        )
    caller = str(named["caller"])
    if await repo.reports_of(session, rollout, step, caller) >= PER_CALLER_PER_STEP:
        raise Conflict(
            f"this caller's answers were reported {PER_CALLER_PER_STEP} times in this step: a "
            "caller counts at most that often",
            field="receipt",
        )
    receipt = hashlib.sha256(signature.encode()).digest()
    counted = await repo.insert_feedback(
        session,
        tenant_id=tenant.id,
        rollout_id=rollout.id,
        receipt=receipt,
        caller=caller,
        step=step,
        side=str(named["side"]),
        good=body.outcome == "good",
        score=body.score,
        reported_by=reporter.actor,
    )
    if not counted:
        raise Conflict("this answer's outcome was reported already", field="receipt")
    return FeedbackOut(rollout=rollout.id, step=step + 1, side=str(named["side"]), counted=True)
