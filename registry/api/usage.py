"""The serve ledger over REST: answers grouped as asked (``/usage``), what nobody loaded
(``/usage/idle``) and who a label's move would reach (``/usage/reach``). A tenant's readers only;
callers are named as everywhere (``names``). One service call per route (registry.usage), and
``count_rest``, which the REST reads call to count what they served."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request

from registry.api.auth import require_credential, tenant_scope
from registry.api.paging import pages
from registry.db.models import Tenant
from registry.db.pagination import PageRequest
from registry.errors import InvalidInput
from registry.naming import LABEL_PATTERN
from registry.principal import Principal
from registry.tenants import service as tenants
from registry.usage import service
from registry.usage.ledger import Ledger, client_of
from registry.usage.schemas import IdlePage, Reach, Served, UsagePage

router = APIRouter(
    prefix="/api/v1/tenants/{tenant}/usage",
    tags=["usage"],
    dependencies=[Depends(require_credential)],
)
Kind = Literal["prompt", "skill"]
Text = Annotated[str | None, Query(min_length=1, max_length=200)]


def count_rest(
    request: Request,
    tenant: Tenant,
    principal: Principal,
    served: Iterable[Served],
    surface: str,
    *,
    failed: bool = False,
) -> None:
    """Count what a REST read served (``failed``: a request a rollout routed that ended in an
    error): the client is the User-Agent the caller sent."""
    ledger: Ledger | None = getattr(request.app.state, "ledger", None)
    if ledger is None or not ledger.enabled:
        return
    agent = request.headers.get("user-agent")
    client = client_of({"name": agent}) if agent else ""
    for one in served:
        ledger.served(tenant.id, one, surface, principal, client, failed=failed)


def _aware(moment: datetime | None, field: str) -> datetime | None:
    if moment is not None and moment.tzinfo is None:
        raise InvalidInput(f"{field}: give a time with its offset (e.g. Z)", field=field)
    return moment


@router.get("", response_model=UsagePage, summary="Answers served, grouped as asked")
async def usage(
    tenant: str,
    request: Request,
    page: Annotated[PageRequest, Depends(pages(100))],
    kind: Kind | None = None,
    name: Text = None,
    version: Annotated[int | None, Query(ge=1, le=2**31 - 1)] = None,
    label: Annotated[str | None, Query(pattern=LABEL_PATTERN)] = None,
    surface: Text = None,
    client: Text = None,
    caller: Text = None,
    since: Annotated[datetime | None, Query(alias="from")] = None,
    until: Annotated[datetime | None, Query(alias="to")] = None,
    by: Annotated[
        str,
        Query(
            max_length=200,
            description="version,client,caller,label,surface and one of day|hour|minute",
        ),
    ] = "",
    sort: Annotated[str, Query(description="key (the default) or answers, most first")] = "key",
) -> UsagePage:
    asked = service.UsageQuery(
        kind=kind,
        name=name,
        version=version,
        label=label,
        surface=surface,
        caller=caller,
        client=client,
        since=_aware(since, "from"),
        until=_aware(until, "to"),
        by=by,
        sort=sort,
    )
    async with tenant_scope(request, tenant, "reader", read_only=True) as scope:
        answer = await service.usage(scope.session, scope.tenant, asked, page)
        callers = {row.caller for row in answer.rows if row.caller}
        answer.names = await tenants.display_names(scope.session, scope.tenant.id, callers)
        return answer


@router.get("/idle", response_model=IdlePage, summary="Prompts and skills nobody loaded")
async def idle(
    tenant: str,
    request: Request,
    page: Annotated[PageRequest, Depends(pages(100))],
    kind: Kind | None = None,
    days: Annotated[int, Query(ge=1, le=3650)] = 30,
) -> IdlePage:
    async with tenant_scope(request, tenant, "reader", read_only=True) as scope:
        return await service.idle(scope.session, scope.tenant, kind, days, page)


@router.get("/reach", response_model=Reach, summary="Who a label of one prompt or skill reaches")
async def reach(
    tenant: str,
    request: Request,
    kind: Kind,
    name: Annotated[str, Query(min_length=1, max_length=200)],
    label: Annotated[str, Query(pattern=LABEL_PATTERN)],
    days: Annotated[int, Query(ge=1, le=3650)] = service.REACH_DAYS,
) -> Reach:
    async with tenant_scope(request, tenant, "reader", read_only=True) as scope:
        found = await service.reach(scope.session, scope.tenant, kind, name, label, days)
        callers = [caller for caller, _ in found.top_callers]
        found.names = await tenants.display_names(scope.session, scope.tenant.id, callers)
        return found
