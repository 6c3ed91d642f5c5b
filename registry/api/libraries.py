"""Libraries over REST: the library's admin offers a label to a tenant (or to every tenant) and
withdraws it (``/subscribers``); the subscriber's admin accepts, changes and ends its subscription
(``/libraries``). One service call per route (registry.libraries)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request, Response

from registry.api.auth import require_credential, tenant_scope
from registry.libraries import service
from registry.libraries.schemas import (
    SLUG,
    ImpactOut,
    OfferIn,
    SubscriberOut,
    SubscriptionIn,
    SubscriptionOut,
    SubscriptionPatch,
)

router = APIRouter(
    prefix="/api/v1/tenants/{tenant}",
    tags=["libraries"],
    dependencies=[Depends(require_credential)],
)
Named = Annotated[str, Path(pattern=r"^(\*|[a-z0-9][a-z0-9-]{0,62})$")]
Library = Annotated[str, Path(pattern=SLUG)]


@router.post(
    "/subscribers",
    response_model=SubscriberOut,
    status_code=201,
    summary="Offer what one of this library's labels serves to a tenant (or to every tenant)",
)
async def offer(tenant: str, body: OfferIn, request: Request) -> SubscriberOut:
    async with tenant_scope(request, tenant, "admin") as scope:
        return await service.offer(scope.session, scope.tenant, scope.principal, body)


@router.get(
    "/subscribers",
    response_model=list[SubscriberOut],
    summary="This library's offers, and the tenants that accepted each",
)
async def subscribers(tenant: str, request: Request) -> list[SubscriberOut]:
    async with tenant_scope(request, tenant, "admin", read_only=True) as scope:
        return await service.subscribers(scope.session, scope.tenant)


@router.get(
    "/prompts/{name}/subscribers",
    response_model=ImpactOut,
    summary="Who a change of this library's prompt reaches: each tenant reading the library, "
    "following or pinned, and the version it is served",
)
async def prompt_subscribers(tenant: str, name: str, request: Request) -> ImpactOut:
    async with tenant_scope(request, tenant, "publisher", read_only=True) as scope:
        return await service.impact(scope.session, scope.tenant, name)


@router.delete("/subscribers/{subscriber}", status_code=204, summary="Withdraw an offer")
async def withdraw(tenant: str, subscriber: Named, request: Request) -> Response:
    async with tenant_scope(request, tenant, "admin") as scope:
        await service.withdraw(scope.session, scope.tenant, scope.principal, subscriber)
    return Response(status_code=204)


@router.post(
    "/libraries",
    response_model=SubscriptionOut,
    status_code=201,
    summary="Accept a library's offer: follow its label, or pin versions",
)
async def subscribe(tenant: str, body: SubscriptionIn, request: Request) -> SubscriptionOut:
    async with tenant_scope(request, tenant, "admin") as scope:
        return await service.subscribe(scope.session, scope.tenant, scope.principal, body)


@router.get(
    "/libraries",
    response_model=list[SubscriptionOut],
    summary="The libraries this tenant subscribes to, and whether each still offers",
)
async def libraries(tenant: str, request: Request) -> list[SubscriptionOut]:
    async with tenant_scope(request, tenant, "admin", read_only=True) as scope:
        return await service.subscriptions(scope.session, scope.tenant)


@router.patch(
    "/libraries/{library}",
    response_model=SubscriptionOut,
    summary="Change a subscription: its label, following, pins (a pin moved), prefix",
)
async def change(
    tenant: str, library: Library, body: SubscriptionPatch, request: Request
) -> SubscriptionOut:
    async with tenant_scope(request, tenant, "admin") as scope:
        return await service.change(scope.session, scope.tenant, scope.principal, library, body)


@router.delete("/libraries/{library}", status_code=204, summary="End a subscription")
async def unsubscribe(tenant: str, library: Library, request: Request) -> Response:
    async with tenant_scope(request, tenant, "admin") as scope:
        await service.unsubscribe(scope.session, scope.tenant, scope.principal, library)
    return Response(status_code=204)
