"""Libraries in the console, for a tenant's admin: the offers made to it and the libraries it reads
(following or pinned, under a prefix or not, and what each serves it now), with the forms that
accept an offer, follow, pin, move a pin and end it; and, as a library, its own offers and who
accepted each. The same service calls as REST (registry.libraries)."""

from __future__ import annotations

from urllib.parse import quote, urlencode

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from pydantic import ValidationError

from registry.console.pages import ConsoleRoute, Form, SignedOut, posted, render, scope_of
from registry.errors import InvalidInput
from registry.libraries import service
from registry.libraries.schemas import OfferIn, SubscriptionIn, SubscriptionPatch

router = APIRouter(prefix="/ui", route_class=ConsoleRoute, include_in_schema=False)


class SubscribeForm(Form):
    library: str = ""
    label: str = ""
    pins: str = ""  # "greet@3, tone@1"; empty: follow the label
    prefix: str = ""


class ChangeForm(Form):
    pins: str = ""  # empty: follow the label
    prefix: str = ""


class OfferForm(Form):
    tenant: str = ""
    label: str = ""


def pins_of(text: str) -> dict[str, int]:
    """``NAME@VERSION`` pins separated by commas or spaces (none: follow the label)."""
    pins: dict[str, int] = {}
    for one in text.replace(",", " ").split():
        name, at, version = one.partition("@")
        if not at or not name or not version.isascii() or not version.isdigit() or len(version) > 9:
            raise InvalidInput(f"pins: {one[:80]!r} is not NAME@VERSION (tone@3)", field="pins")
        pins[name] = int(version)
    return pins


def _back(tenant: str, note: str) -> Response:
    return RedirectResponse(
        f"/ui/{quote(tenant)}/libraries?" + urlencode({"message": note}), status_code=303
    )


def _invalid(error: ValidationError) -> InvalidInput:
    problem = error.errors()[0]
    where = ".".join(str(p) for p in problem["loc"]) or "form"
    return InvalidInput(f"{where}: {problem['msg']}", field=where)


@router.get("/{tenant}/libraries", response_class=HTMLResponse)
async def libraries_page(tenant: str, request: Request) -> Response:
    async with scope_of(request, "admin") as console:
        session, me = console.session, console.tenant
        reading = await service.subscriptions(session, me)
        offered = await service.offered(session, me)
        inherited = await service.inherited(session, me)
        own_offers = await service.subscribers(session, me)
    taken = {s.library for s in reading}
    return render(
        request,
        "libraries.html",
        scope=console,
        reading=reading,
        offered=[o for o in offered if o.library not in taken],
        inherited=inherited,
        own_offers=own_offers,
        message=request.query_params.get("message"),
    )


@router.post("/{tenant}/libraries/subscribe")
async def subscribe(tenant: str, request: Request) -> Response:
    fields, scope = await posted(request, "admin", SubscribeForm)
    pins = pins_of(fields.pins)
    try:
        body = SubscriptionIn(
            library=fields.library.strip(),
            label=fields.label.strip(),
            pins=pins or None,
            follow=None if pins else True,
            prefix=fields.prefix.strip() or None,
        )
    except ValidationError as error:
        raise _invalid(error) from None
    async with scope as console:
        made = await service.subscribe(console.session, console.tenant, console.principal, body)
    how = "following" if made.follow else "pinned"
    return _back(tenant, f"subscribed to {made.library}@{made.label}, {how}")


@router.post("/{tenant}/libraries/{library}/change")
async def change(tenant: str, library: str, request: Request) -> Response:
    fields, scope = await posted(request, "admin", ChangeForm)
    pins = pins_of(fields.pins)
    try:
        body = SubscriptionPatch(
            pins=pins or None,
            follow=None if pins else True,
            prefix=fields.prefix.strip() or None,
        )
    except ValidationError as error:
        raise _invalid(error) from None
    async with scope as console:
        made = await service.change(
            console.session, console.tenant, console.principal, library, body
        )
    return _back(tenant, f"{made.library}: {'following' if made.follow else 'pinned'}")


@router.post("/{tenant}/libraries/{library}/end")
async def end(tenant: str, library: str, request: Request) -> Response:
    _, scope = await posted(request, "admin", SignedOut)
    async with scope as console:
        await service.unsubscribe(console.session, console.tenant, console.principal, library)
    return _back(tenant, f"no longer reads {library}")


@router.post("/{tenant}/libraries/offer")
async def offer(tenant: str, request: Request) -> Response:
    fields, scope = await posted(request, "admin", OfferForm)
    try:
        body = OfferIn(tenant=fields.tenant.strip(), label=fields.label.strip())
    except ValidationError as error:
        raise _invalid(error) from None
    async with scope as console:
        made = await service.offer(console.session, console.tenant, console.principal, body)
    return _back(tenant, f"offered {made.label} to {made.tenant}")


@router.post("/{tenant}/libraries/withdraw/{subscriber}")
async def withdraw(tenant: str, subscriber: str, request: Request) -> Response:
    _, scope = await posted(request, "admin", SignedOut)
    async with scope as console:
        await service.withdraw(console.session, console.tenant, console.principal, subscriber)
    return _back(tenant, f"withdrew the offer to {subscriber}")
