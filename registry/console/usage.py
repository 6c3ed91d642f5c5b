"""The serve ledger in the console: the tenant's overview (``/ui/T/usage``: answers per prompt and
skill over time, the top ones, clients, callers, and the idle ones) and what the prompt and skill
pages, the label-move review and the change-request page show of it (``panel``, ``reaches``).
The charts are drawn by the vendored Chart.js (``static/chart-*.umd.min.js``, served by the
registry) from data the page carries as JSON (``static/usage.js``): no inline script."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse

from registry.console.pages import ConsoleRoute, people_of, render, scope_of
from registry.console.sessions import ConsoleScope
from registry.db.pagination import PageRequest
from registry.usage import service
from registry.usage.schemas import Adoption, Reach, UsageRow

router = APIRouter(prefix="/ui", route_class=ConsoleRoute, include_in_schema=False)
DAYS = (1, 7, 30, 90)
SERIES_MAX = 12  # stacked series a chart shows; the rest are summed as "other"
ROWS_MAX = 2000  # rows one chart reads


def days_of(request: Request) -> int:
    asked = request.query_params.get("days", "")
    return int(asked) if asked.isdigit() and int(asked) in DAYS else 7


def bucket_of(days: int) -> str:
    return "hour" if days <= 7 else "day"


def start_of(days: int, bucket: str) -> datetime:
    now = datetime.now(UTC)
    if bucket == "hour":
        return now.replace(minute=0, second=0, microsecond=0) - timedelta(days=days)
    return now.replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=days - 1)


async def rows_of(scope: ConsoleScope, tokens: Any, **asked: Any) -> list[UsageRow]:
    """Every row of a question (pages followed up to ROWS_MAX)."""
    rows: list[UsageRow] = []
    cursor = None
    while len(rows) < ROWS_MAX:
        page = PageRequest(limit=500, cursor=cursor, tokens=tokens)
        found = await service.usage(scope.session, scope.tenant, service.UsageQuery(**asked), page)
        rows += found.rows
        cursor = found.next_cursor
        if cursor is None:
            break
    return rows


def chart(rows: Iterable[UsageRow], series: str, start: datetime, bucket: str) -> dict[str, Any]:
    """Stacked series by ``series`` (a row attribute, or "artifact") over every bucket from
    ``start`` to now (empty buckets are zeros): ``{"labels": [...], "series": [{"name", "data"}]}``."""
    step = timedelta(hours=1) if bucket == "hour" else timedelta(days=1)
    buckets: list[datetime] = []
    moment = start
    now = datetime.now(UTC)
    while moment <= now:
        buckets.append(moment)
        moment += step
    index = {b: i for i, b in enumerate(buckets)}
    totals: dict[str, int] = {}
    values: dict[str, list[int]] = {}
    for row in rows:
        if row.at is None or row.at not in index:
            continue
        name = _series_name(row, series)
        values.setdefault(name, [0] * len(buckets))[index[row.at]] += row.answers
        totals[name] = totals.get(name, 0) + row.answers
    kept = sorted(totals, key=lambda n: (-totals[n], n))[:SERIES_MAX]
    shown = [{"name": n, "data": values[n]} for n in sorted(kept, key=_natural)]
    rest = [n for n in totals if n not in kept]
    if rest:
        other = [sum(values[n][i] for n in rest) for i in range(len(buckets))]
        shown.append({"name": f"{len(rest)} more", "data": other})
    fmt = "%m-%d %H:00" if bucket == "hour" else "%Y-%m-%d"
    return {"labels": [b.strftime(fmt) for b in buckets], "series": shown}


def _series_name(row: UsageRow, series: str) -> str:
    if series == "artifact":
        return f"{row.kind} {row.name}"
    if series == "version":
        return f"v{row.version}"
    return str(getattr(row, series) or "(not sent)")


def _natural(name: str) -> tuple[int, str]:
    return (int(name[1:]), "") if name[:1] == "v" and name[1:].isdigit() else (0, name)


def totals(rows: Iterable[UsageRow], field: str) -> list[tuple[str, int, datetime]]:
    """Answers per value of ``field`` (most first), with the last answer's time."""
    found: dict[str, list[Any]] = {}
    for row in rows:
        key = str(getattr(row, field) or "")
        entry = found.setdefault(key, [0, row.last])
        entry[0] += row.answers
        entry[1] = max(entry[1], row.last)
    return sorted(((k, n, last) for k, (n, last) in found.items()), key=lambda t: (-t[1], t[0]))


class Shown(NamedTuple):
    """The prompt or skill a page shows: its labels, and when each was last moved."""

    kind: str
    name: str
    labels: dict[str, int]
    moves: Sequence[tuple[str, int, datetime]]  # (label, version, when), the latest per label


def last_moves(moves: Iterable[tuple[str, int, datetime]]) -> list[tuple[str, int, datetime]]:
    """The latest of each label's moves (``moves``: newest first)."""
    latest: dict[str, tuple[str, int, datetime]] = {}
    for move in moves:
        latest.setdefault(move[0], move)
    return [latest[label] for label in sorted(latest)]


async def panel(scope: ConsoleScope, tokens: Any, shown: Shown, days: int) -> dict[str, Any]:
    """What a prompt's or skill's page shows of the ledger: answers per version over time, per
    client and caller, how fast each label's answers followed its last move, who each label
    reaches, and who archiving it would leave without it."""
    kind, name = shown.kind, shown.name
    bucket = bucket_of(days)
    start = start_of(days, bucket)
    rows = await rows_of(scope, tokens, kind=kind, name=name, since=start, by=f"version,{bucket}")
    who = await rows_of(scope, tokens, kind=kind, name=name, since=start, by="caller,client")
    adoption: list[Adoption] = []
    for label, version, moved_at in shown.moves:
        adoption.append(
            await service.adoption(
                scope.session, scope.tenant, kind, name, label, version, moved_at
            )
        )
    reached = await reaches(scope, [(kind, name, label) for label in sorted(shown.labels)])
    return {
        "days": days,
        "bucket": bucket,
        "chart": chart(rows, "version", start, bucket),
        "clients": totals(who, "client"),
        "callers": totals(who, "caller"),
        "adoption": adoption,
        "answers": sum(r.answers for r in rows),
        "reaches": reached,
        "recent": await service.recent_callers(scope.session, scope.tenant, kind, name),
    }


async def reaches(scope: ConsoleScope, moves: Iterable[tuple[str, str, str]]) -> list[Reach]:
    """Who each (kind, name, label) reached in the last week: what moving it would reach."""
    return [
        await service.reach(scope.session, scope.tenant, kind, name, label)
        for kind, name, label in moves
    ]


@router.get("/{tenant}/usage", response_class=HTMLResponse)
async def usage_page(tenant: str, request: Request) -> Response:
    days = days_of(request)
    bucket = bucket_of(days)
    start = start_of(days, bucket)
    tokens = await request.app.state.db.tokens()
    async with scope_of(request, "reader") as scope:
        over_time = await rows_of(scope, tokens, since=start, by=bucket)
        who = await rows_of(scope, tokens, since=start, by="caller,client")
        idle = await service.idle(
            scope.session, scope.tenant, None, days, PageRequest(100, None, tokens)
        )
        people = await people_of(scope)
    top = totals([r.model_copy(update={"name": f"{r.kind}/{r.name}"}) for r in over_time], "name")
    return render(
        request,
        "usage.html",
        scope=scope,
        days=days,
        choices=DAYS,
        bucket=bucket,
        chart=chart(over_time, "artifact", start, bucket),
        top=top[:50],
        clients=totals(who, "client"),
        callers=totals(who, "caller"),
        idle=idle.idle,
        people=people,
    )
