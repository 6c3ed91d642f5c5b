"""The questions the serve ledger answers: answers grouped by any of its dimensions and a time
bucket (``usage``), what nobody loaded (``idle``), who a label's move would reach (``reach``), who
still gets an artifact (``recent_callers``) and how fast a label's answers followed its last move
(``adoption``). Each runs in the tenant's transaction and reads what its retention keeps."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.models import Tenant
from registry.db.pagination import PageRequest
from registry.errors import InvalidInput
from registry.usage import repository as repo
from registry.usage.schemas import (
    BUCKETS,
    DIMENSIONS,
    Adoption,
    IdleEntry,
    IdlePage,
    Reach,
    UsagePage,
    UsageRow,
)

REACH_DAYS = 7
TOP = 20
_UNITS = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1)}
_TABLE_OF = {"minute": "minutes", "hour": "hours", "day": "days"}


@dataclass(frozen=True)
class UsageQuery:
    """What ``GET …/usage`` asked: filters (None: any), the window, the grouping."""

    kind: str | None = None
    name: str | None = None
    version: int | None = None
    label: str | None = None
    surface: str | None = None
    caller: str | None = None
    client: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    by: str = ""
    sort: str = "key"


def parse_by(by: str) -> tuple[list[str], str | None]:
    """``by`` (comma-separated) as the dimensions and the time bucket it names."""
    dimensions: list[str] = []
    bucket: str | None = None
    for part in (p.strip() for p in by.split(",")):
        if not part or part in ("kind", "name"):
            continue  # always there
        if part in BUCKETS:
            if bucket is not None and bucket != part:
                raise InvalidInput("by: name at most one of day, hour, minute", field="by")
            bucket = part
        elif part in DIMENSIONS:
            if part not in dimensions:
                dimensions.append(part)
        else:
            known = ", ".join((*DIMENSIONS, *BUCKETS))
            raise InvalidInput(f"by: {part!r} is not one of {known}", field="by")
    return dimensions, bucket


def _aligned(moment: datetime | None, unit: str) -> bool:
    return (
        moment is None or (moment - datetime(2000, 1, 1, tzinfo=UTC)) % _UNITS[unit] == timedelta()
    )


def source_of(bucket: str | None, since: datetime, until: datetime | None) -> str:
    """The coarsest table that answers exactly: no finer than the bucket, and aligned with the
    window's ends."""
    for unit in ("day", "hour", "minute"):
        finer_than_bucket = bucket is not None and _UNITS[unit] > _UNITS[bucket]
        if not finer_than_bucket and _aligned(since, unit) and _aligned(until, unit):
            return _TABLE_OF[unit]
    return "minutes"


def window(tenant: Tenant, since: datetime | None, until: datetime | None) -> datetime:
    """The window's start: what was asked, never before the tenant's retention (whose start is a
    whole UTC day)."""
    now = datetime.now(UTC)
    kept = (now - timedelta(days=tenant.usage_retention_days)).replace(
        hour=0, minute=0, second=0, microsecond=0
    )
    start = kept if since is None else max(since, kept)
    if until is not None and until <= start:
        raise InvalidInput("to: give a time after from (and inside the retention)", field="to")
    return start


def _cursor_types(by_answers: bool, dimensions: Sequence[str], bucket: str | None) -> list[type]:
    types: list[type] = [int] if by_answers else []
    types += [str, str] + [int if d == "version" else str for d in dimensions]
    return types + ([str] if bucket else [])


async def usage(
    session: AsyncSession, tenant: Tenant, asked: UsageQuery, page: PageRequest
) -> UsagePage:
    dimensions, bucket = parse_by(asked.by)
    if asked.sort not in ("key", "answers"):
        raise InvalidInput("sort: give key or answers", field="sort")
    by_answers = asked.sort == "answers"
    since = window(tenant, asked.since, asked.until)
    source = source_of(bucket, since, asked.until)
    filters: dict[str, Any] = {
        "kind": asked.kind,
        "name": asked.name,
        "version": asked.version,
        "label": asked.label,
        "surface": asked.surface,
        "caller": asked.caller,
        "client": asked.client,
        "from": since,
        "to": asked.until,
    }
    listing = [tenant.id, "usage", source, repr(asked)]  # a cursor continues this query only
    after = page.after(listing, *_cursor_types(by_answers, dimensions, bucket))
    if after is not None and bucket is not None:
        after = (*after[:-1], datetime.fromisoformat(after[-1]))
    if after is not None and by_answers:
        after = (-after[0], *after[1:])
    rows = await repo.grouped(
        session,
        repo.TABLES[source],
        tenant.id,
        filters,
        by=dimensions,
        bucket=bucket,
        by_answers=by_answers,
        after=after,
        limit=page.limit,
    )

    def key(row: Any) -> tuple[Any, ...]:
        values = [row.kind, row.name, *(getattr(row, d) for d in dimensions)]
        if bucket is not None:
            values.append(row.at.isoformat())
        return (int(row.answers), *values) if by_answers else tuple(values)

    found, next_cursor = page.cut(listing, rows, key)
    shown = [
        UsageRow(
            kind=row.kind,
            name=row.name,
            answers=int(row.answers),
            first=row.first,
            last=row.last,
            at=row.at if bucket else None,
            **{d: getattr(row, d) for d in dimensions},
        )
        for row in found
    ]
    return UsagePage(rows=shown, next_cursor=next_cursor, source=source)


async def idle(
    session: AsyncSession, tenant: Tenant, kind: str | None, days: int, page: PageRequest
) -> IdlePage:
    """The prompts and skills no answer served in the last ``days`` days."""
    if kind not in (None, "prompt", "skill"):
        raise InvalidInput("kind: give prompt or skill", field="kind")
    since = window(tenant, datetime.now(UTC) - timedelta(days=days), None)
    listing = [tenant.id, "usage-idle", kind or "", days]
    after = page.after(listing, str, str)
    rows = await repo.idle(
        session, tenant.id, kind, since, (after[0], after[1]) if after else None, page.limit
    )
    found, next_cursor = page.cut(listing, rows, lambda row: (row.kind, row.name))
    entries = [IdleEntry(kind=r.kind, name=r.name, last=r.last) for r in found]
    return IdlePage(idle=entries, next_cursor=next_cursor)


async def reach(
    session: AsyncSession, tenant: Tenant, kind: str, name: str, label: str, days: int = REACH_DAYS
) -> Reach:
    """Who got ``label`` of one artifact in the last ``days`` days: what moving it would reach."""
    since = window(tenant, datetime.now(UTC) - timedelta(days=days), None)
    callers, clients = await repo.reach(session, tenant.id, kind, name, label, since)
    return Reach(
        kind=kind,
        name=name,
        label=label,
        days=days,
        answers=sum(int(r.answers) for r in callers),
        callers=len(callers),
        clients=len([c for c in clients if c.client]),
        top_callers=[(r.caller, int(r.answers)) for r in callers[:TOP]],
        top_clients=[(r.client or "(not sent)", int(r.answers)) for r in clients[:TOP]],
    )


async def recent_callers(
    session: AsyncSession, tenant: Tenant, kind: str, name: str
) -> list[tuple[str, int, datetime]]:
    """Who got any version of one artifact inside the retention: (caller, answers, last)."""
    since = window(tenant, None, None)
    rows = await repo.version_callers(session, tenant.id, kind, name, since)
    return [(r.caller, int(r.answers), r.last) for r in rows]


async def adoption(
    session: AsyncSession,
    tenant: Tenant,
    kind: str,
    name: str,
    label: str,
    version: int,
    moved_at: datetime,
) -> Adoption:
    """How fast ``label``'s answers moved to ``version`` after ``moved_at``: the first minute in
    which half, and 99 %, of the label's answers were that version (from the per-minute counts)."""
    rows = await repo.minutes_of_label(session, tenant.id, kind, name, label, moved_at)
    minutes: dict[datetime, list[int]] = {}
    for row in rows:
        share = minutes.setdefault(row.at, [0, 0])
        share[1] += int(row.answers)
        if row.version == version:
            share[0] += int(row.answers)
    half = most = None
    for at in sorted(minutes):
        new, total = minutes[at]
        after = max(0.0, (at + timedelta(minutes=1) - moved_at).total_seconds())
        if half is None and total and new / total >= 0.5:
            half = after
        if most is None and total and new / total >= 0.99:
            most = after
            break
    hour_ago = datetime.now(UTC) - timedelta(hours=1)
    recent = [minutes[at] for at in minutes if at >= hour_ago]
    total = sum(t for _, t in recent)
    share_now = sum(n for n, _ in recent) / total if total else None
    return Adoption(
        label=label,
        version=version,
        moved_at=moved_at,
        share_now=None if share_now is None else math.floor(share_now * 1000) / 1000,
        half_after_seconds=half,
        most_after_seconds=most,
    )
