"""SQL of the serve ledger. Only this module builds its queries.

``record`` and ``keep_partitions`` run on the primary's plain pool as the owner role (a flush holds
counts of many tenants); every question runs in the tenant's transaction, under row-level security.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg
from sqlalchemy import and_, func, literal, or_, select, tuple_, union_all
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.elements import ColumnElement

from registry.db.models import Prompt
from registry.db.skill_models import Skill
from registry.db.usage_models import UsageDay, UsageHour, UsageMinute

TABLES: dict[str, type[UsageMinute] | type[UsageHour] | type[UsageDay]] = {
    "minutes": UsageMinute,
    "hours": UsageHour,
    "days": UsageDay,
}
Table = type[UsageMinute] | type[UsageHour] | type[UsageDay]

# One statement per flush: the counters added to the minute rows, and, grouped, to the hour and
# day rows. Counters of a tenant deleted meanwhile are left out (its rows would have nowhere to go).
_COLUMNS = "tenant_id, kind, name, version, label, surface, caller, client"
_KEY = f"{_COLUMNS}, at"
_ADD = """ON CONFLICT (tenant_id, kind, name, at, version, label, surface, caller, client)
    DO UPDATE SET answers = u.answers + EXCLUDED.answers,
                  errors = u.errors + EXCLUDED.errors,
                  first_at = least(u.first_at, EXCLUDED.first_at),
                  last_at = greatest(u.last_at, EXCLUDED.last_at)"""
_RECORD = f"""
WITH given AS (
    SELECT g.* FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int[], $5::text[], $6::text[],
                           $7::text[], $8::text[], $9::timestamptz[], $10::bigint[],
                           $11::timestamptz[], $12::timestamptz[], $13::bigint[])
        AS g(tenant_id, kind, name, version, label, surface, caller, client, at, answers,
             first_at, last_at, errors)
     WHERE EXISTS (SELECT 1 FROM tenants t WHERE t.id = g.tenant_id)
), minutes AS (
    INSERT INTO usage_minutes AS u ({_KEY}, answers, first_at, last_at, errors)
    SELECT {_KEY}, answers, first_at, last_at, errors FROM given
    {_ADD}
), hours AS (
    INSERT INTO usage_hours AS u ({_KEY}, answers, first_at, last_at, errors)
    SELECT {_COLUMNS}, date_trunc('hour', at, 'UTC'), sum(answers), min(first_at), max(last_at),
           sum(errors)
      FROM given GROUP BY {_COLUMNS}, date_trunc('hour', at, 'UTC')
    {_ADD}
)
INSERT INTO usage_days AS u ({_KEY}, answers, first_at, last_at, errors)
SELECT {_COLUMNS}, date_trunc('day', at, 'UTC'), sum(answers), min(first_at), max(last_at),
       sum(errors)
  FROM given GROUP BY {_COLUMNS}, date_trunc('day', at, 'UTC')
{_ADD}
"""


async def record(conn: asyncpg.Connection, columns: Sequence[Sequence[Any]]) -> None:
    """Add a flush's counters (``columns``: the arrays of ``_RECORD``'s parameters)."""
    await conn.execute(_RECORD, *columns)


async def keep_partitions(conn: asyncpg.Connection, minute_days: int, hour_days: int) -> int:
    """Make the coming partitions, drop the expired ones; how many were dropped."""
    dropped = await conn.fetchval(
        "SELECT registry_usage_partitions_v1(now(), $1, $2)", minute_days, hour_days
    )
    return int(dropped or 0)


def _filters(
    table: Table, tenant_id: uuid.UUID, given: dict[str, Any]
) -> list[ColumnElement[bool]]:
    where: list[ColumnElement[bool]] = [table.tenant_id == tenant_id]
    for field, value in given.items():
        if value is None:
            continue
        if field == "from":
            where.append(table.at >= value)
        elif field == "to":
            where.append(table.at < value)
        else:
            where.append(getattr(table, field) == value)
    return where


async def grouped(
    session: AsyncSession,
    table: Table,
    tenant_id: uuid.UUID,
    given: dict[str, Any],
    *,
    by: Sequence[str],
    bucket: str | None,
    by_answers: bool,
    after: tuple[Any, ...] | None,
    limit: int,
) -> Sequence[Any]:
    """Answers grouped by kind, name, ``by`` and the ``bucket`` (a time unit), in key order (or by
    answers, most first), ``limit`` rows after the key ``after``."""
    keys: list[Any] = [table.kind, table.name]
    keys += [getattr(table, column) for column in by]
    names = ["kind", "name", *by]
    if bucket is not None:
        keys.append(func.date_trunc(bucket, table.at, "UTC").label("at"))
        names.append("at")
    inner = (
        select(
            *keys,
            func.sum(table.answers).label("answers"),
            func.min(table.first_at).label("first"),
            func.max(table.last_at).label("last"),
        )
        .where(*_filters(table, tenant_id, given))
        .group_by(*keys)
        .subquery()
    )
    columns = [inner.c[n] for n in names]
    order = ([-inner.c.answers] if by_answers else []) + columns
    query = select(inner)
    if after is not None:
        query = query.where(tuple_(*order) > tuple_(*[literal(v) for v in after]))
    query = query.order_by(*order).limit(limit + 1)
    return (await session.execute(query)).all()


async def idle(
    session: AsyncSession,
    tenant_id: uuid.UUID,
    kind: str | None,
    since: datetime,
    after: tuple[str, str] | None,
    limit: int,
) -> Sequence[Any]:
    """The prompts and skills (not archived) no answer served since ``since``, with the last answer
    the ledger holds of each, in (kind, name) order."""
    served = (
        select(UsageDay.kind, UsageDay.name, func.max(UsageDay.last_at).label("last"))
        .where(UsageDay.tenant_id == tenant_id)
        .group_by(UsageDay.kind, UsageDay.name)
        .subquery()
    )
    parts = []
    if kind in (None, "prompt"):
        parts.append(
            select(literal("prompt").label("kind"), Prompt.name.label("name")).where(
                Prompt.tenant_id == tenant_id, Prompt.archived_at.is_(None)
            )
        )
    if kind in (None, "skill"):
        parts.append(
            select(literal("skill").label("kind"), Skill.name.label("name")).where(
                Skill.tenant_id == tenant_id, Skill.archived_at.is_(None)
            )
        )
    artifacts = union_all(*parts).subquery()
    query = (
        select(artifacts.c.kind, artifacts.c.name, served.c.last)
        .outerjoin(
            served, and_(served.c.kind == artifacts.c.kind, served.c.name == artifacts.c.name)
        )
        .where(or_(served.c.last.is_(None), served.c.last < since))
    )
    if after is not None:
        query = query.where(tuple_(artifacts.c.kind, artifacts.c.name) > tuple_(*after))
    query = query.order_by(artifacts.c.kind, artifacts.c.name).limit(limit + 1)
    return (await session.execute(query)).all()


async def reach(
    session: AsyncSession, tenant_id: uuid.UUID, kind: str, name: str, label: str, since: datetime
) -> tuple[Sequence[Any], Sequence[Any]]:
    """Answers of ``label`` of one artifact since ``since``, per caller and per client."""
    where = (
        UsageHour.tenant_id == tenant_id,
        UsageHour.kind == kind,
        UsageHour.name == name,
        UsageHour.label == label,
        UsageHour.at >= since,
    )
    answers = func.sum(UsageHour.answers).label("answers")
    callers = await session.execute(
        select(UsageHour.caller, answers)
        .where(*where)
        .group_by(UsageHour.caller)
        .order_by(answers.desc(), UsageHour.caller)
    )
    clients = await session.execute(
        select(UsageHour.client, answers)
        .where(*where)
        .group_by(UsageHour.client)
        .order_by(answers.desc(), UsageHour.client)
    )
    return callers.all(), clients.all()


async def version_callers(
    session: AsyncSession, tenant_id: uuid.UUID, kind: str, name: str, since: datetime
) -> Sequence[Any]:
    """Who got any version of one artifact since ``since``: (caller, answers, last), most first."""
    answers = func.sum(UsageDay.answers).label("answers")
    query = (
        select(UsageDay.caller, answers, func.max(UsageDay.last_at).label("last"))
        .where(
            UsageDay.tenant_id == tenant_id,
            UsageDay.kind == kind,
            UsageDay.name == name,
            UsageDay.at >= since,
        )
        .group_by(UsageDay.caller)
        .order_by(answers.desc(), UsageDay.caller)
    )
    return (await session.execute(query)).all()


async def minutes_of_label(
    session: AsyncSession, tenant_id: uuid.UUID, kind: str, name: str, label: str, since: datetime
) -> Sequence[Any]:
    """Per minute since ``since``: (minute, version, answers) of ``label`` of one artifact."""
    query = (
        select(UsageMinute.at, UsageMinute.version, func.sum(UsageMinute.answers).label("answers"))
        .where(
            UsageMinute.tenant_id == tenant_id,
            UsageMinute.kind == kind,
            UsageMinute.name == name,
            UsageMinute.label == label,
            UsageMinute.at >= since,
        )
        .group_by(UsageMinute.at, UsageMinute.version)
        .order_by(UsageMinute.at)
    )
    return (await session.execute(query)).all()


async def slugs(conn: asyncpg.Connection, tenant_ids: Sequence[uuid.UUID]) -> list[Any]:
    """(id, slug) of the tenants among ``tenant_ids`` (the directory: no tenant's rows)."""
    return list(
        await conn.fetch("SELECT id, slug FROM tenants WHERE id = ANY($1::uuid[])", tenant_ids)
    )
