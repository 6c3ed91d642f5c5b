"""SQL of rollouts. Only this module builds their queries. Everything runs in the tenant's
transaction but ``due``, the scheduler's look across tenants (the owner role)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import asyncpg
from sqlalchemy import func, insert, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.models import Tenant
from registry.db.repository import driver
from registry.db.rollout_models import LIVE, Rollout, RolloutFeedback
from registry.db.usage_models import UsageMinute

LIVE_ROLLOUTS = (
    "SELECT id, kind, name, label, from_version, to_version, step, share, salt "
    "FROM registry_live_rollouts_v1($1)"
)


async def live_rows(reads: asyncpg.Pool | AsyncSession, tenant_id: uuid.UUID) -> list[Any]:
    """The tenant's live rollouts as serving needs them, one statement (the hot path's pool, or
    inside a tenant transaction): rows of ``LIVE_ROLLOUTS``'s columns."""
    return list(await (await driver(reads)).fetch(LIVE_ROLLOUTS, tenant_id))


async def latest(
    session: AsyncSession, tenant_id: uuid.UUID, kind: str, name: str, label: str, *, lock: bool
) -> Rollout | None:
    query = (
        select(Rollout)
        .where(
            Rollout.tenant_id == tenant_id,
            Rollout.kind == kind,
            Rollout.name == name,
            Rollout.label == label,
        )
        .order_by(Rollout.id.desc())
        .limit(1)
    )
    if lock:
        query = query.with_for_update()
    return (await session.execute(query)).scalar_one_or_none()


async def by_id(
    session: AsyncSession, tenant_id: uuid.UUID, rollout_id: int, *, lock: bool = True
) -> Rollout | None:
    """The rollout, locked (one worker at a time advances it) and read afresh, or only read."""
    query = select(Rollout).where(Rollout.tenant_id == tenant_id, Rollout.id == rollout_id)
    if lock:
        query = query.with_for_update().execution_options(populate_existing=True)
    return (await session.execute(query)).scalar_one_or_none()


async def insert_rollout(session: AsyncSession, **values: Any) -> Rollout:
    result = await session.execute(insert(Rollout).values(**values).returning(Rollout))
    return result.scalar_one()


async def set_state(session: AsyncSession, rollout: Rollout, **values: Any) -> None:
    await session.execute(
        update(Rollout)
        .where(Rollout.tenant_id == rollout.tenant_id, Rollout.id == rollout.id)
        .values(updated_at=func.now(), **values)
    )
    await session.refresh(rollout)  # as stored (a label move on the way expires what was read)


async def count_live(session: AsyncSession, tenant: Tenant) -> None:
    """The tenant's count of live rollouts, kept on its row (serving reads it)."""
    await session.execute(
        update(Tenant)
        .where(Tenant.id == tenant.id)
        .values(
            rollouts_live=select(func.count())
            .select_from(Rollout)
            .where(Rollout.tenant_id == tenant.id, Rollout.state.in_(LIVE))
            .scalar_subquery()
        )
    )


async def answers_by_version(
    session: AsyncSession, rollout: Rollout, since: datetime
) -> dict[int, tuple[int, int]]:
    """Answers and errors the ledger counted for ``rollout``'s label since ``since``, by
    version."""
    result = await session.execute(
        select(UsageMinute.version, func.sum(UsageMinute.answers), func.sum(UsageMinute.errors))
        .where(
            UsageMinute.tenant_id == rollout.tenant_id,
            UsageMinute.kind == rollout.kind,
            UsageMinute.name == rollout.name,
            UsageMinute.label == rollout.label,
            UsageMinute.at >= func.date_trunc("minute", since),
        )
        .group_by(UsageMinute.version)
    )
    return {int(version): (int(n), int(failed)) for version, n, failed in result.all()}


async def due(session: AsyncSession, limit: int) -> list[tuple[uuid.UUID, int]]:
    """Running rollouts whose step has lasted its least time (every tenant: the owner role)."""
    result = await session.execute(
        text(
            "SELECT tenant_id, id FROM rollouts WHERE state = 'running' "
            "AND step_started_at + make_interval(secs => min_seconds) <= now() "
            "ORDER BY step_started_at LIMIT :limit"
        ),
        {"limit": limit},
    )
    return [(row.tenant_id, row.id) for row in result]


async def reports_of(session: AsyncSession, rollout: Rollout, step: int, caller: str) -> int:
    result = await session.execute(
        select(func.count())
        .select_from(RolloutFeedback)
        .where(
            RolloutFeedback.tenant_id == rollout.tenant_id,
            RolloutFeedback.rollout_id == rollout.id,
            RolloutFeedback.step == step,
            RolloutFeedback.caller == caller,
        )
    )
    return int(result.scalar_one())


async def insert_feedback(session: AsyncSession, **values: Any) -> bool:
    """One report; False when this receipt was reported already."""
    result = await session.execute(
        pg_insert(RolloutFeedback)
        .values(**values)
        .on_conflict_do_nothing()
        .returning(RolloutFeedback.rollout_id)
    )
    return result.first() is not None


async def outcomes(
    session: AsyncSession, rollout: Rollout, step: int
) -> dict[str, tuple[int, int]]:
    """(good, bad) reported per side in ``step``."""
    result = await session.execute(
        select(RolloutFeedback.side, RolloutFeedback.good, func.count())
        .where(
            RolloutFeedback.tenant_id == rollout.tenant_id,
            RolloutFeedback.rollout_id == rollout.id,
            RolloutFeedback.step == step,
        )
        .group_by(RolloutFeedback.side, RolloutFeedback.good)
    )
    found = {"old": [0, 0], "new": [0, 0]}
    for side, good, n in result.all():
        found[side][0 if good else 1] += int(n)
    return {side: (good, bad) for side, (good, bad) in found.items()}
