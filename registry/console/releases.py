"""Change requests in the console: the list, and a review page a person can read (each move's diff
against what its label serves now, contract breaks, test results, approvals and reviews) with the
approve and reject buttons for those the releases workflow allows (it decides; the page only
offers)."""

from __future__ import annotations

from urllib.parse import quote, urlencode

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from registry.console.pages import ConsoleRoute, Form, people_of, posted, render, scope_of
from registry.releases import service as releases
from registry.releases.schemas import ApproveIn

router = APIRouter(prefix="/ui", route_class=ConsoleRoute, include_in_schema=False)


class ReviewForm(Form):
    comment: str = ""
    override: str = ""


@router.get("/{tenant}/change-requests", response_class=HTMLResponse)
async def requests_page(tenant: str, request: Request) -> Response:
    async with scope_of(request, "reader") as scope:
        found = await releases.list_requests(scope.session, scope.tenant, limit=100)
        people = await people_of(scope)
    return render(request, "change_requests.html", scope=scope, requests=found, people=people)


@router.get("/{tenant}/change-requests/{request_id}", response_class=HTMLResponse)
async def review_page(tenant: str, request_id: int, request: Request) -> Response:
    async with scope_of(request, "reader") as scope:
        shown = await releases.show(scope.session, scope.tenant, request_id)
        allowed = releases.may_review(scope.tenant, scope.principal, shown)
        people = await people_of(scope)
    message = request.query_params.get("message")
    return render(request, "change_request.html", scope=scope, cr=shown, message=message,
                  may_review=allowed, people=people)  # fmt: skip


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
            console.session, console.tenant, console.principal, request_id,
            fields.comment or None,
        )  # fmt: skip
    return _back(tenant, request_id, "rejected")


def _back(tenant: str, request_id: int, note: str) -> Response:
    return RedirectResponse(
        f"/ui/{quote(tenant)}/change-requests/{request_id}?" + urlencode({"message": note}),
        status_code=303,
    )
