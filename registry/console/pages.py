"""What every console page shares: the templates and how a page is answered (``render``; errors as
pages, a missing session as a redirect to the sign-in page, a POST from another origin refused:
``ConsoleRoute``), the scope of one page (``scope_of``, ``posted``: the session and role checked
again, a POST's CSRF token), and how forms, pages and who acted are read and shown. The pages
themselves are by concern: ``signin``, ``browse``, ``editor``, ``admin``.

Every page runs in one ``console_scope``; every POST carries the session's CSRF token and, when the
browser sends one, an Origin equal to the registry's own. Templates escape everything they show
(Jinja2 autoescaping); no page has inline script.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlencode, urlsplit

import jinja2
from fastapi import Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, ValidationError

from registry.config import Settings
from registry.console.sessions import (
    COOKIE,
    ConsoleScope,
    console_scope,
)
from registry.db.engine import Database
from registry.db.pagination import PageRequest
from registry.errors import (
    BadCsrf,
    InvalidInput,
    NotSignedIn,
    RegistryError,
)
from registry.tenants import service as tenants

HERE = Path(__file__).parent
STATIC = HERE / "static"
LOGIN_COOKIE = "registry_console_login"
PAGE = 50

environment = jinja2.Environment(
    loader=jinja2.FileSystemLoader(HERE / "templates"),
    autoescape=True,  # everything shown is escaped: a prompt whose text is <script> shows as text
    undefined=jinja2.StrictUndefined,
)
environment.filters["pretty"] = lambda value: json.dumps(value, indent=2, ensure_ascii=False)


def who(actor: str | None, people: dict[str, str]) -> str:
    """Who acted, as ``tenants.shown_actor`` shows it (``people``: the tenant's keys, shown)."""
    if not actor:
        return "—"
    return people.get(actor) or tenants.shown_actor(actor)


environment.filters["who"] = who


async def people_of(scope: ConsoleScope) -> dict[str, str]:
    """The tenant's keys (revoked ones too) by the actor string that records them, shown."""
    keys = await tenants.list_keys(scope.session, scope.tenant.id)
    return {
        f"key:{key.id}": tenants.shown_actor(f"key:{key.id}", (key.owner, key.name)) for key in keys
    }


def settings_of(request: Request) -> Settings:
    return request.app.state.settings  # type: ignore[no-any-return]


def db_of(request: Request) -> Database:
    return request.app.state.db  # type: ignore[no-any-return]


def secure(request: Request) -> bool:
    public = settings_of(request).public_url or ""
    return request.url.scheme == "https" or public.startswith("https://")


def same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    if origin is None or (origin == "null" and request.method == "GET"):
        return True
    own = {f"{request.url.scheme}://{request.url.netloc}"}
    public = settings_of(request).public_url
    if public:
        parts = urlsplit(public)
        own.add(f"{parts.scheme}://{parts.netloc}")
    return origin in own


def render(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    context.setdefault("scope", None)
    context.setdefault("slug", request.path_params.get("tenant"))
    body = environment.get_template(template).render(request=request, status=status, **context)
    return HTMLResponse(body, status_code=status, headers={"Cache-Control": "no-store"})


class ConsoleRoute(APIRoute):
    """Console handlers answer with pages: a missing session redirects to the sign-in page, a
    registry error is an error page with the error's status, and a POST from another origin or
    without the session's CSRF token is refused before the handler runs."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def run(request: Request) -> Response:
            if request.method == "POST" and not same_origin(request):
                return render(request, "error.html", 403, message="cross-origin form refused")
            try:
                return await handler(request)
            except NotSignedIn as missing:
                slug = request.path_params.get("tenant")
                if slug is None:
                    return render(request, "error.html", 401, message=missing.message)
                target = f"/ui/{quote(slug)}/login?" + urlencode(
                    {"next": request.url.path, "why": missing.detail.get("reason", "first")}
                )
                return RedirectResponse(target, status_code=303)
            except RegistryError as error:
                if request.headers.get("accept") == "application/json":
                    return JSONResponse(
                        {"error": error.message, **where_of(error)}, status_code=error.http_status
                    )
                return render(request, "error.html", error.http_status, message=error.message)

        return run


class Form(BaseModel):
    """A console form's fields, typed: what a page reads of a POST. Fields it does not know are
    ignored (a browser sends its buttons too); a field that is not what the form says is a 422
    naming it. A check box is ``yes`` when ticked."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=False)

    csrf: str | None = None


class SignedOut(Form):
    """A form with nothing but its CSRF token (sign out, revoke)."""


F = TypeVar("F", bound=Form)


async def read_form(request: Request, form: type[F]) -> F:
    return typed(await _fields(request), form)


async def _fields(request: Request) -> dict[str, str]:
    return {k: v for k, v in (await request.form()).items() if isinstance(v, str)}


def typed(fields: dict[str, str], form: type[F]) -> F:
    try:
        return form.model_validate(fields)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InvalidInput(f"{where}: {first['msg']}", field=where) from None


def scope_of(request: Request, role: str, csrf: str | None = None) -> Any:
    return console_scope(
        db_of(request), request.path_params["tenant"], request.cookies.get(COOKIE), role, csrf=csrf
    )


async def posted(request: Request, role: str, form: type[F]) -> tuple[F, Any]:
    """A form POST's fields, typed by ``form``, and its scope (the CSRF token checked first: a
    form without one is refused before its fields are judged)."""
    fields = await _fields(request)
    token = fields.get("csrf") or request.headers.get("x-csrf-token")
    if not token:
        raise BadCsrf("the form carries no CSRF token: reload the page")
    return typed(fields, form), scope_of(request, role, csrf=token)


def as_number(value: str | None) -> int | None:
    """A version number from a form or query (ASCII digits, within what a version can be)."""
    if value is None or not value.isascii() or not value.isdigit() or len(value) > 9:
        return None
    return int(value) or None


def where_of(error: RegistryError) -> dict[str, Any]:
    return {k: error.detail[k] for k in ("field", "line", "column") if k in error.detail}


async def page_of(request: Request, *, paged: bool = True) -> PageRequest:
    """The page asked for (``?cursor=``), or the first one where a page has no paging links."""
    cursor = request.query_params.get("cursor") if paged else None
    return PageRequest(limit=PAGE, cursor=cursor, tokens=await db_of(request).tokens())
