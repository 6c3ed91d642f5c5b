"""Change requests in the console: the list, and a review page a person can read (each move's diff
against what its label serves now, contract breaks, test results, approvals and reviews) with the
approve and reject buttons for those the releases workflow allows (it decides; the page only
offers)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from pydantic import ValidationError

from registry.change_requests import common, reading
from registry.change_requests import service as releases
from registry.change_requests.schemas import ApproveIn, ChangeRequestIn
from registry.console import usage
from registry.console.pages import (
    ConsoleRoute,
    Form,
    SignedOut,
    as_number,
    people_of,
    posted,
    render,
    scope_of,
)
from registry.console.sessions import ConsoleScope
from registry.errors import InvalidInput
from registry.labels import approvals_needed
from registry.libraries import service as libraries

router = APIRouter(prefix="/ui", route_class=ConsoleRoute, include_in_schema=False)


class ReviewForm(Form):
    comment: str = ""
    override: str = ""


class OpenForm(Form):
    """One move proposed from a prompt's or a skill's page, when its label needs approvals."""

    kind: Literal["prompt", "skill"]
    name: str
    label: str
    version: str
    description: str = ""
    apply_at: str = ""  # ISO 8601; without a zone it is UTC


async def proposal(
    request: Request,
    console: ConsoleScope,
    kind: str,
    name: str,
    label: str,
    version: int,
    reason: str,
) -> Response | None:
    """The page a move of a label that needs approvals leads to (None: the move goes ahead, the
    label needs none or an admin gives a reason): open a change request for it right there (a
    description, an optional time), or, for an admin, move it anyway giving a reason; with who the
    move would reach."""
    needed = approvals_needed(console.tenant, label)
    if not needed or (reason.strip() and console.principal.has("admin")):
        return None
    (reach,) = await usage.reaches(console, [(kind, name, label)])
    return render(
        request,
        "propose.html",
        409,
        scope=console,
        kind=kind,
        name=name,
        label=label,
        version=version,
        needed=needed,
        reach=reach,
        people=await people_of(console),
    )


@router.post("/{tenant}/change-requests")
async def open_request(tenant: str, request: Request) -> Response:
    fields, scope = await posted(request, "editor", OpenForm)
    version = as_number(fields.version)
    if version is None:
        raise InvalidInput("choose the version the label moves to", field="version")
    try:
        body = ChangeRequestIn.model_validate(
            {
                "description": fields.description.strip()
                or f"Move {fields.label} of {fields.name} to version {version}",
                "moves": [{fields.kind: fields.name, "label": fields.label, "version": version}],
                "apply_at": _when(fields.apply_at),
            }
        )
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "form"
        raise InvalidInput(f"{where}: {first['msg']}", field=where) from None
    async with scope as console:
        opened = await releases.open_request(
            console.session, console.tenant, console.principal, body
        )
    return _back(tenant, opened.id, "opened: it applies once approved")


def _when(text: str) -> str | None:
    """``apply_at`` as the form gives it: empty (on the last approval), or a time (UTC unless it
    names its zone)."""
    text = text.strip()
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(
            f"apply at {text[:40]!r}: a time such as 2026-12-01 09:00 (UTC) is expected",
            field="apply_at",
        ) from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).isoformat()


@router.post("/{tenant}/change-requests/{request_id}/withdraw")
async def withdraw(tenant: str, request_id: int, request: Request) -> Response:
    _, scope = await posted(request, "editor", SignedOut)
    async with scope as console:
        await releases.withdraw(console.session, console.tenant, console.principal, request_id)
    return _back(tenant, request_id, "withdrawn")


@router.get("/{tenant}/change-requests", response_class=HTMLResponse)
async def requests_page(tenant: str, request: Request) -> Response:
    async with scope_of(request, "reader") as scope:
        found = await reading.list_requests(scope.session, scope.tenant, limit=100)
        people = await people_of(scope)
    return render(request, "change_requests.html", scope=scope, requests=found, people=people)


@router.get("/{tenant}/change-requests/{request_id}", response_class=HTMLResponse)
async def review_page(tenant: str, request_id: int, request: Request) -> Response:
    async with scope_of(request, "reader") as scope:
        shown = await reading.show(scope.session, scope.tenant, request_id)
        allowed = reading.may_review(scope.tenant, scope.principal, shown)
        people = await people_of(scope)
        reaches = await usage.reaches(
            scope,
            [
                ("prompt" if m.prompt else "skill", m.prompt or m.skill or "", m.label)
                for m in shown.moves
            ],
        )
        publisher = scope.principal.has("publisher")  # who sees a library's subscribers
        subscribers = [
            await libraries.reach(scope.session, scope.tenant, m.prompt, m.label)
            if m.prompt and publisher
            else []
            for m in shown.moves
        ]
    message = request.query_params.get("message")
    may_withdraw = shown.state in common.LIVE and (
        scope.principal.actor == shown.author or scope.principal.has("admin")
    )
    return render(
        request,
        "change_request.html",
        scope=scope,
        cr=shown,
        message=message,
        may_review=allowed,
        people=people,
        may_withdraw=may_withdraw,
        reaches=reaches,
        subscribers=subscribers,
    )


@router.post("/{tenant}/change-requests/{request_id}/approve")
async def approve(tenant: str, request_id: int, request: Request) -> Response:
    fields, scope = await posted(request, "editor", ReviewForm)
    body = ApproveIn(comment=fields.comment or None, override=fields.override.strip() or None)
    async with scope as console:
        done = await releases.approve(
            console.session, console.tenant, console.principal, request_id, body
        )
    if done.state == "approved" and done.apply_at is not None:
        request.app.state.scheduler.poke()
    return _back(tenant, request_id, f"approved: the request is {done.state}")


@router.post("/{tenant}/change-requests/{request_id}/reject")
async def reject(tenant: str, request_id: int, request: Request) -> Response:
    fields, scope = await posted(request, "editor", ReviewForm)
    async with scope as console:
        await releases.reject(
            console.session,
            console.tenant,
            console.principal,
            request_id,
            fields.comment or None,
        )
    return _back(tenant, request_id, "rejected")


def _back(tenant: str, request_id: int, note: str) -> Response:
    return RedirectResponse(
        f"/ui/{quote(tenant)}/change-requests/{request_id}?" + urlencode({"message": note}),
        status_code=303,
    )
