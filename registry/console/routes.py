"""The console's pages: thin handlers over the prompts and tenants services, as the REST routes are.

Every page runs in one ``console_scope`` (the session and role checked again); every POST carries
the session's CSRF token and, when the browser sends one, an Origin equal to the registry's own.
Errors are pages (with the status the REST API would give); a missing session is a redirect to the
sign-in page. Templates escape everything they show (Jinja2 autoescaping); no page has inline script.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import uuid
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import jinja2
from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.routing import APIRoute
from pydantic import ValidationError

from registry import outbound
from registry.config import Settings
from registry.console import clients, documents
from registry.console.sessions import (
    COOKIE,
    SIGN_IN_REASONS,
    ConsoleScope,
    close_session,
    console_scope,
    open_session,
)
from registry.db.engine import Database
from registry.db.pagination import PageRequest
from registry.errors import (
    BadCsrf,
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    NotSignedIn,
    PreconditionFailed,
    RegistryError,
)
from registry.naming import SLUG_RE
from registry.prompts import blobs, diff, policy, reading, rendering, writing
from registry.prompts.schemas import PromptCreate, VersionIn
from registry.tenants import access, oauth
from registry.tenants import service as tenants
from registry.tenants.oauth import TokenVerifier
from registry.tenants.schemas import TenantPatch

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


def _who(actor: str | None, people: dict[str, str]) -> str:
    """Who acted, as a person reads it: a key by its name (its id's start beside it, since names
    may repeat); a token's subject and issuer as recorded; anything else as it is."""
    if not actor:
        return "—"
    if actor.startswith("key:"):
        short = actor[4:12]
        name = people.get(actor)
        return f"{name} (key {short}…)" if name else f"a deleted key ({short}…)"
    if actor.startswith("token:"):
        return actor[6:]
    return actor


environment.filters["who"] = _who


async def _people(scope: ConsoleScope) -> dict[str, str]:
    """The tenant's keys by the actor string that records them, for ``who``."""
    keys = await tenants.list_keys(scope.session, scope.tenant.id)
    return {f"key:{key.id}": key.name or "an unnamed key" for key in keys}


def _settings(request: Request) -> Settings:
    return request.app.state.settings  # type: ignore[no-any-return]


def _db(request: Request) -> Database:
    return request.app.state.db  # type: ignore[no-any-return]


def _secure(request: Request) -> bool:
    public = _settings(request).public_url or ""
    return request.url.scheme == "https" or public.startswith("https://")


def _same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    if origin is None or (origin == "null" and request.method == "GET"):
        return True
    own = {f"{request.url.scheme}://{request.url.netloc}"}
    public = _settings(request).public_url
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
            if request.method == "POST" and not _same_origin(request):
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
                        {"error": error.message, **_where(error)}, status_code=error.http_status
                    )
                return render(request, "error.html", error.http_status, message=error.message)

        return run


router = APIRouter(prefix="/ui", route_class=ConsoleRoute, include_in_schema=False)


async def _form(request: Request) -> dict[str, str]:
    form = await request.form()
    return {k: v for k, v in form.items() if isinstance(v, str)}


def _scope(request: Request, role: str, csrf: str | None = None) -> Any:
    return console_scope(
        _db(request), request.path_params["tenant"], request.cookies.get(COOKIE), role, csrf=csrf
    )


async def _posted(request: Request, role: str) -> tuple[dict[str, str], Any]:
    """A form POST's fields and its scope (the CSRF token checked)."""
    fields = await _form(request)
    token = fields.get("csrf") or request.headers.get("x-csrf-token")
    if not token:
        raise BadCsrf("the form carries no CSRF token: reload the page")
    return fields, _scope(request, role, csrf=token)


def _number(value: str | None) -> int | None:
    """A version number from a form or query (ASCII digits, within what a version can be)."""
    if value is None or not value.isascii() or not value.isdigit() or len(value) > 9:
        return None
    return int(value) or None


def _where(error: RegistryError) -> dict[str, Any]:
    return {k: error.detail[k] for k in ("field", "line", "column") if k in error.detail}


async def _page(request: Request, *, paged: bool = True) -> PageRequest:
    """The page asked for (``?cursor=``), or the first one where a page has no paging links."""
    cursor = request.query_params.get("cursor") if paged else None
    return PageRequest(limit=PAGE, cursor=cursor, tokens=await _db(request).tokens())


# --- signing in ---------------------------------------------------------------------------------


@router.get("", response_class=HTMLResponse)
async def home(request: Request) -> Response:
    slug = request.query_params.get("tenant")
    if slug:
        if not SLUG_RE.fullmatch(slug):
            return render(
                request, "home.html", 422, error="a tenant is lowercase letters, digits, hyphens"
            )
        return RedirectResponse(f"/ui/{slug}/prompts", status_code=303)
    return render(request, "home.html", error=None)


@router.get("/static/{name}")
async def static(name: str) -> Response:
    path = STATIC / name
    if "/" in name or not path.is_file():
        return Response(status_code=404)
    kind = {".css": "text/css", ".js": "text/javascript", ".svg": "image/svg+xml"}.get(
        path.suffix, "application/octet-stream"
    )
    return Response(path.read_bytes(), media_type=kind, headers={"Cache-Control": "max-age=300"})


# Outside /ui: where browsers look for a site's icon whatever the page says.
root = APIRouter(include_in_schema=False)


@root.get("/favicon.ico")
async def favicon() -> Response:
    icon = (STATIC / "icon.svg").read_bytes()
    return Response(icon, media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})


@router.get("/{tenant}/login", response_class=HTMLResponse)
async def login_page(tenant: str, request: Request) -> Response:
    async with _db(request).app_tx() as session:
        _, issuers = await tenants.trusted_issuers(session, tenant)
    query = request.query_params
    return render(
        request, "login.html", issuers=issuers if _settings(request).public_url else [],
        why=SIGN_IN_REASONS.get(query.get("why", "")),  # words the server chose, by their code
        next=_next(query.get("next"), tenant), error=None,
    )  # fmt: skip


def _next(wanted: str | None, slug: str) -> str:
    """Where to go after signing in: a console path of this tenant, nothing else."""
    return wanted if wanted and wanted.startswith(f"/ui/{slug}/") else f"/ui/{slug}/prompts"


def _signed_in(request: Request, slug: str, cookie: str, target: str) -> Response:
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        COOKIE, cookie, httponly=True, samesite="lax", secure=_secure(request),
        path=f"/ui/{slug}", max_age=8 * 3600,
    )  # fmt: skip
    return response


@router.post("/{tenant}/login")
async def login_with_key(tenant: str, request: Request) -> Response:
    fields = await _form(request)
    key = fields.get("key", "").strip()
    target = _next(fields.get("next"), tenant)
    if not key:
        return render(request, "login.html", 422, issuers=[], why=None, next=target,
                      error="paste an API key of this tenant")  # fmt: skip
    try:
        async with access.tenant_scope(_db(request), None, tenant, key, "reader") as scope:
            cookie, _ = await open_session(scope.session, scope.tenant, scope.principal)
    except RegistryError as refused:
        return render(request, "login.html", refused.http_status, issuers=[], why=None,
                      next=target, error=refused.message)  # fmt: skip
    return _signed_in(request, tenant, cookie, target)


@router.post("/{tenant}/logout")
async def logout(tenant: str, request: Request) -> Response:
    fields, scope = await _posted(request, "reader")
    del fields
    async with scope as console:
        await close_session(console.session, console.tenant, request.cookies.get(COOKIE, ""))
    response = RedirectResponse(f"/ui/{tenant}/login", status_code=303)
    response.delete_cookie(COOKIE, path=f"/ui/{tenant}")
    return response


# --- signing in at the tenant's identity provider (authorization code with PKCE) ----------------


@router.get("/{tenant}/login/oidc")
async def login_oidc(tenant: str, request: Request) -> Response:
    settings = _settings(request)
    verifier: TokenVerifier = request.app.state.tokens
    public = settings.public_url
    if public is None:
        raise InvalidInput("sign-in with an identity provider needs REGISTRY_PUBLIC_URL")
    issuer = request.query_params.get("issuer", "")
    async with _db(request).app_tx() as session:
        _, trusted = await tenants.trusted_issuers(session, tenant)
    if issuer not in trusted:
        raise Forbidden(f"tenant {tenant!r} does not trust the issuer {issuer!r}")
    metadata = await verifier.metadata(issuer)
    endpoint = metadata.get("authorization_endpoint")
    if not isinstance(endpoint, str):
        raise InvalidInput(f"the issuer {issuer} has no authorization endpoint")
    code_verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(code_verifier.encode()).digest())
    state = secrets.token_urlsafe(24)
    redirect_uri = f"{public.rstrip('/')}/ui/callback"
    query = urlencode({
        "response_type": "code", "client_id": settings.console_client_id,
        "redirect_uri": redirect_uri, "scope": "prompts:read prompts:write",
        "code_challenge": challenge.rstrip(b"=").decode(), "code_challenge_method": "S256",
        "state": state, "resource": oauth.resources(public, tenant)[1],
    })  # fmt: skip
    codec = await _db(request).tokens()
    pending = codec.issue(
        "console-login",
        [],
        [tenant, issuer, state, code_verifier, _next(request.query_params.get("next"), tenant)],
    )
    response = RedirectResponse(f"{endpoint}?{query}", status_code=303)
    response.set_cookie(
        LOGIN_COOKIE, pending, httponly=True, samesite="lax", secure=_secure(request),
        path="/ui/callback", max_age=600,
    )  # fmt: skip
    return response


@router.get("/callback")
async def login_callback(request: Request) -> Response:
    settings = _settings(request)
    verifier: TokenVerifier = request.app.state.tokens
    codec = await _db(request).tokens()
    try:
        tenant, issuer, state, code_verifier, target = codec.open(
            "console-login", [], request.cookies.get(LOGIN_COOKIE, ""), max_age=600
        )
    except Exception:  # noqa: BLE001 - any unreadable or expired cookie: start again
        return render(
            request,
            "error.html",
            400,
            message="the sign-in expired or was not started here: start again",
        )
    query = request.query_params
    if query.get("state") != state:
        return render(
            request, "error.html", 400, message="the sign-in answer does not match its request"
        )
    if "error" in query:
        return render(
            request,
            "error.html",
            401,
            message=f"the identity provider said: {query.get('error_description') or query['error']}",
        )
    if query.get("iss") not in (None, issuer):
        return render(request, "error.html", 400, message="the answer came from another issuer")
    metadata = await verifier.metadata(issuer)
    token_endpoint = str(metadata.get("token_endpoint", ""))
    public = str(settings.public_url)
    try:
        answer = await outbound.fetch_json(
            "POST", token_endpoint, seconds=10, allow_private=settings.oauth_allow_private_issuers,
            form={"grant_type": "authorization_code", "code": query.get("code", ""),
                  "redirect_uri": f"{public.rstrip('/')}/ui/callback",
                  "client_id": settings.console_client_id, "code_verifier": code_verifier,
                  "resource": oauth.resources(public, tenant)[1]},
        )  # fmt: skip
    except outbound.Refused as refused:
        return render(request, "error.html", 401, message=f"the token request failed: {refused}")
    token = answer.get("access_token") if isinstance(answer, dict) else None
    if not isinstance(token, str):
        return render(
            request, "error.html", 401, message="the identity provider sent no access token"
        )
    async with access.tenant_scope(
        _db(request), None, tenant, token, "reader", tokens=verifier
    ) as scope:
        cookie, _ = await open_session(scope.session, scope.tenant, scope.principal)
    response = _signed_in(request, tenant, cookie, target)
    response.delete_cookie(LOGIN_COOKIE, path="/ui/callback")
    return response


# --- prompts ------------------------------------------------------------------------------------


def _flag(value: str | None) -> bool | None:
    return {"only": True, "all": None}.get(value or "", False)


@router.get("/{tenant}/prompts", response_class=HTMLResponse)
async def prompts_page(tenant: str, request: Request) -> Response:
    q = request.query_params
    filters = {k: q.get(k) or None for k in ("text", "tag", "label")}
    archived = q.get("archived") or ""
    page = await _page(request)
    async with _scope(request, "reader") as scope:
        found = await reading.list_prompts(
            scope.session, scope.tenant, page, archived=_flag(archived), **filters
        )
    more = None
    if found.next_cursor:
        more = "?" + urlencode({**{k: v for k, v in filters.items() if v}, "archived": archived,
                                "cursor": found.next_cursor})  # fmt: skip
    return render(request, "prompts.html", scope=scope, page=found, filters=filters,
                  archived=archived, more=more)  # fmt: skip


@router.get("/{tenant}/prompts/{name}", response_class=HTMLResponse)
async def prompt_page(tenant: str, name: str, request: Request) -> Response:
    first = await _page(request, paged=False)  # the newest versions and label moves
    async with _scope(request, "reader") as scope:
        prompt = await reading.get_prompt(scope.session, scope.tenant, name)
        versions = await reading.list_versions(scope.session, scope.tenant, name, first)
        history = await reading.label_history(scope.session, scope.tenant, name, first, label=None)
        people = await _people(scope)
    return render(request, "prompt.html", scope=scope, prompt=prompt, versions=versions.items,
                  history=history.items, message=request.query_params.get("message"),
                  people=people)  # fmt: skip


@router.get("/{tenant}/prompts/{name}/versions/{version}", response_class=HTMLResponse)
async def version_page(tenant: str, name: str, version: str, request: Request) -> Response:
    number = _number(version)
    if number is None:
        raise NotFound(f"prompt {name!r} has no version {version!r}", field="version")
    async with _scope(request, "reader") as scope:
        found = await reading.get_version(scope.session, scope.tenant, name, number)
        people = await _people(scope)
    return render(request, "version.html", scope=scope, name=name, version=found, people=people)


# --- editing, with the server's validation as the person types ---------------------------------


@router.get("/{tenant}/new", response_class=HTMLResponse)
async def new_page(tenant: str, request: Request) -> Response:
    async with _scope(request, "editor") as scope:
        pass
    return render(request, "edit.html", scope=scope, name=None, base=0, text=documents.TEMPLATE,
                  message="", error=None, conflict=None)  # fmt: skip


@router.get("/{tenant}/prompts/{name}/edit", response_class=HTMLResponse)
async def edit_page(tenant: str, name: str, request: Request) -> Response:
    async with _scope(request, "editor") as scope:
        prompt = await reading.get_prompt(scope.session, scope.tenant, name)
    assert prompt.latest is not None
    return render(request, "edit.html", scope=scope, name=name, base=prompt.latest.version,
                  text=documents.dump(prompt.latest), message="", error=None, conflict=None)  # fmt: skip


def _version_in(text: str, message: str) -> VersionIn:
    return documents.parse(text, commit_message=message or None)


class _DryRun(Exception):
    """Ends a check's transaction without committing it."""


@router.post("/{tenant}/check")
async def check(tenant: str, request: Request) -> Response:
    """The editor's live validation: every problem of the document itself (its YAML, its fields,
    each message's template) at the editor's lines; then the whole write path, dry, in a
    transaction that is rolled back, for what only the registry can tell (partials, blobs)."""
    fields, scope = await _posted(request, "editor")
    name = fields.get("name") or "new-prompt"
    text = fields.get("text", "")
    found = documents.problems(text)
    if found:
        async with scope:
            pass  # the caller checked (role, CSRF) before anything is told
        return JSONResponse({"ok": False, "errors": [p.shown() for p in found]})
    try:
        body = _version_in(text, fields.get("message", ""))
        async with scope as console:
            await _write(console, name, body, base=None, request=request, dry_run=True)
            raise _DryRun  # nothing of the check is kept
    except _DryRun:
        pass
    except RegistryError as error:
        if isinstance(error, (BadCsrf, NotSignedIn)):
            raise
        where = _where(error)
        placed = documents.as_written(
            text, str(where.get("field", "")), where.get("line"), where.get("column")
        )
        if placed is not None:  # a template's place, moved to the editor's
            said = error.message.rsplit(" at line ", 1)[0].split(": ", 1)[-1]
            where = {**placed.shown(), "message": f"{placed.field}: {said}"}
        else:
            where = {**where, "message": error.message}
        return JSONResponse({"ok": False, "errors": [where]})
    return JSONResponse({"ok": True})


async def _write(
    console: ConsoleScope, name: str, body: VersionIn, *, base: int | None, request: Request,
    dry_run: bool = False,
) -> Any:  # fmt: skip
    exists = await _exists(console, name)
    limit = _settings(request).max_blob_bytes
    if not exists:
        create = PromptCreate.model_validate({**body.model_dump(exclude_none=True), "name": name})
        return await writing.create_prompt(
            console.session, console.tenant, console.principal, create,
            max_blob_bytes=limit, dry_run=dry_run,
        )  # fmt: skip
    return await writing.create_version(
        console.session, console.tenant, console.principal, name, body,
        if_match=base, max_blob_bytes=limit, dry_run=dry_run,
    )  # fmt: skip


async def _exists(console: ConsoleScope, name: str) -> bool:
    try:
        await reading.find_prompt(console.session, console.tenant, name)
    except RegistryError:
        return False
    return True


@router.post("/{tenant}/save")
async def save(tenant: str, request: Request) -> Response:
    fields, scope = await _posted(request, "editor")
    name = fields.get("name", "").strip()
    text, message = fields.get("text", ""), fields.get("message", "")
    base = _number(fields.get("base")) or 0
    try:
        body = _version_in(text, message)
        async with scope as console:
            result = await _write(console, name, body, base=base or None, request=request)
    except (Conflict, PreconditionFailed) as conflict:
        async with _scope(request, "editor") as console:
            latest = await reading.get_prompt(console.session, console.tenant, name)
            changes = None
            if base and latest.latest is not None:
                changes = await diff.diff_versions(
                    console.session, console.tenant, name, base, latest.latest.version
                )
        # Someone wrote meanwhile: the section says what they changed and what to do (the REST
        # words, "reload it and write again", would contradict it); a label's refusal is told.
        told = None if isinstance(conflict, PreconditionFailed) and changes else conflict.message
        return render(request, "edit.html", 409, scope=console, name=name, base=base, text=text,
                      message=message, error=told, conflict=changes)  # fmt: skip
    except RegistryError as error:
        if isinstance(error, (BadCsrf, NotSignedIn)):
            raise
        async with _scope(request, "editor") as console:
            pass
        return render(request, "edit.html", error.http_status, scope=console, name=name or None,
                      base=base, text=text, message=message, error=error.message, conflict=None)  # fmt: skip
    note = f"version {result.version} written" if result.created else result.detail
    return RedirectResponse(
        f"/ui/{tenant}/prompts/{quote(name)}?" + urlencode({"message": note}), status_code=303
    )


@router.post("/{tenant}/blobs")
async def upload(tenant: str, request: Request) -> Response:
    """An image or audio file for the editor: stored as a blob, answered with its reference."""
    form = await request.form()
    token = form.get("csrf") or request.headers.get("x-csrf-token")
    upload = form.get("file")
    if not isinstance(token, str) or not token:
        raise BadCsrf("the upload carries no CSRF token: reload the page")
    if upload is None or isinstance(upload, str):
        raise InvalidInput("choose a file to upload", field="file")
    data = await upload.read()
    kind = upload.content_type or "application/octet-stream"
    async with _scope(request, "editor", csrf=token) as console:
        sha, _ = await blobs.upload_blob(
            console.session, console.tenant, console.principal, data, kind
        )
    return JSONResponse(
        {"sha256": sha, "mimeType": kind, "snippet": documents.blob_snippet(sha, kind)}
    )


@router.get("/{tenant}/blobs/{sha256}")
async def blob(tenant: str, sha256: str, request: Request) -> Response:
    async with _scope(request, "reader") as console:
        data, kind = await blobs.get_blob(console.session, console.tenant, sha256)
    if not kind.startswith(("image/", "audio/")):
        return Response(data, media_type="application/octet-stream",
                        headers={"Content-Disposition": "attachment"})  # fmt: skip
    return Response(
        data, media_type=kind, headers={"Content-Security-Policy": "default-src 'none'"}
    )


# --- preview: the form MCP clients would fill, rendered as prompts/get renders it ---------------


@router.get("/{tenant}/prompts/{name}/preview", response_class=HTMLResponse)
async def preview_page(tenant: str, name: str, request: Request) -> Response:
    return await _preview(request, tenant, name, None, _scope(request, "reader"))


@router.post("/{tenant}/prompts/{name}/preview", response_class=HTMLResponse)
async def preview(tenant: str, name: str, request: Request) -> Response:
    fields, scope = await _posted(request, "reader")
    values = {
        k.removeprefix("arg:"): v for k, v in fields.items() if k.startswith("arg:") and v != ""
    }
    return await _preview(request, tenant, name, values, scope)


async def _preview(
    request: Request, tenant: str, name: str, values: dict[str, str] | None, scope: Any
) -> Response:
    """The form, and with ``values`` what it renders, in the one transaction of ``scope`` (a
    POST's scope has checked its CSRF token)."""
    # The latest version by default (what was just saved), else the version or label picked.
    selector = request.query_params.get("label") or None
    version = _number(request.query_params.get("version"))
    result, error = None, None
    async with scope as console:
        prompt = await reading.get_prompt(console.session, console.tenant, name)
        label = None if version else selector
        if label is not None and label not in prompt.labels:
            raise NotFound(f"no version of {name!r} is labelled {label!r}", field="label")
        number = version or (prompt.labels[label] if label else prompt.latest_version)
        shown = await reading.get_version(console.session, console.tenant, name, number)
        if values is not None:
            try:
                result = await rendering.render(
                    console.session, console.tenant, name, values, version=number,
                    max_value_length=_settings(request).max_argument_length,
                    max_rendered_chars=_settings(request).max_rendered_chars,
                )  # fmt: skip
            except RegistryError as refused:
                error = refused.message
    return render(request, "preview.html", 422 if error else 200, scope=console, name=name,
                  version=shown, label=label, values=values or {}, result=result, error=error,
                  versions=range(prompt.latest_version, 0, -1), labels=prompt.labels)  # fmt: skip


# --- diff ----------------------------------------------------------------------------------------


@router.get("/{tenant}/prompts/{name}/diff", response_class=HTMLResponse)
async def diff_page(tenant: str, name: str, request: Request) -> Response:
    q = request.query_params
    async with _scope(request, "reader") as console:
        prompt = await reading.get_prompt(console.session, console.tenant, name)
        b = _number(q.get("b")) or prompt.latest_version
        a = _number(q.get("a")) or max(1, b - 1)
        changes = await diff.diff_versions(console.session, console.tenant, name, a, b)
        old = await reading.get_version(console.session, console.tenant, name, a)
        new = await reading.get_version(console.session, console.tenant, name, b)
    return render(request, "diff.html", scope=console, name=name, prompt=prompt, changes=changes,
                  old=documents.dump(old), new=documents.dump(new), a=a, b=b)  # fmt: skip


# --- publishing: labels, restore, archive ------------------------------------------------------


@router.post("/{tenant}/prompts/{name}/label", response_class=HTMLResponse)
async def move_label(tenant: str, name: str, request: Request) -> Response:
    """A first POST shows what the move changes (the diff against what the label serves now and
    the contract's breaks); the confirmed one moves it."""
    fields, scope = await _posted(request, "editor")
    label = fields.get("label", "").strip()
    version = _number(fields.get("version")) or 0
    async with scope as console:
        if fields.get("confirm") != "yes":
            return await _review_move(request, console, name, label, version)
        try:
            await writing.set_label(
                console.session, console.tenant, console.principal, name, label, version,
                force=fields.get("force") == "yes",
            )  # fmt: skip
        except Conflict as refused:
            if refused.detail.get("overridable_by") != "force":
                raise
            # Back on the review, in the console's words: the box to tick is on this page.
            why = f"{refused.message}. Tick “Move it anyway” to move it."
            return await _review_move(request, console, name, label, version, error=why)
    note = f"{label} now serves version {version}"
    return RedirectResponse(
        f"/ui/{tenant}/prompts/{quote(name)}?" + urlencode({"message": note}), status_code=303
    )


async def _review_move(
    request: Request,
    console: ConsoleScope,
    name: str,
    label: str,
    version: int,
    error: str | None = None,
) -> Response:
    """What moving ``label`` to ``version`` changes: the diff against what it serves now and the
    contract's breaks, with the form that confirms it (and why it was not done, when it was not)."""
    writing.check_label_name(label)
    prompt = await reading.get_prompt(console.session, console.tenant, name)
    refused = policy.role_refusal(console.tenant, console.principal, label)
    if refused is not None:  # said before the review: the move could never be confirmed
        raise refused
    current = prompt.labels.get(label)
    changes = None
    if current and current != version:
        changes = await diff.diff_versions(console.session, console.tenant, name, current, version)
    return render(request, "confirm.html", 409 if error else 200, scope=console, name=name,
                  label=label, version=version, current=current, changes=changes, error=error)  # fmt: skip


@router.post("/{tenant}/prompts/{name}/restore")
async def restore(tenant: str, name: str, request: Request) -> Response:
    fields, scope = await _posted(request, "editor")
    version = _number(fields.get("version")) or 0
    async with scope as console:
        result = await writing.restore_version(
            console.session, console.tenant, console.principal, name, version, if_match=None,
            max_blob_bytes=_settings(request).max_blob_bytes,
        )  # fmt: skip
    note = (
        f"version {version} restored as version {result.version}"
        if result.created
        else result.detail
    )
    return RedirectResponse(
        f"/ui/{tenant}/prompts/{quote(name)}?" + urlencode({"message": note}), status_code=303
    )


@router.post("/{tenant}/prompts/{name}/archive")
async def archive(tenant: str, name: str, request: Request) -> Response:
    fields, scope = await _posted(request, "editor")
    hide = fields.get("archived") == "yes"
    async with scope as console:
        await writing.set_archived(console.session, console.tenant, console.principal, name, hide)
    note = "archived: MCP clients no longer see it" if hide else "restored from the archive"
    return RedirectResponse(
        f"/ui/{tenant}/prompts/{quote(name)}?" + urlencode({"message": note}), status_code=303
    )


# --- administration ------------------------------------------------------------------------------


@router.get("/{tenant}/keys", response_class=HTMLResponse)
async def keys_page(tenant: str, request: Request) -> Response:
    async with _scope(request, "admin") as console:
        keys = await tenants.list_keys(console.session, console.tenant.id)
    return render(request, "keys.html", scope=console, keys=keys, secret=None)


@router.post("/{tenant}/keys", response_class=HTMLResponse)
async def create_key(tenant: str, request: Request) -> Response:
    fields, scope = await _posted(request, "admin")
    role = fields.get("role", "")
    if role not in ("reader", "editor", "publisher", "admin"):
        raise InvalidInput(f"no such role {role!r}", field="role")
    async with scope as console:
        made, secret = await tenants.create_key(
            console.session, tenant=console.tenant, role=role,
            name=fields.get("name") or None, actor=console.principal.actor,
        )  # fmt: skip
        keys = await tenants.list_keys(console.session, console.tenant.id)
    return render(request, "keys.html", scope=console, keys=keys, secret=secret, made=made)


@router.post("/{tenant}/keys/{key_id}/revoke")
async def revoke_key(tenant: str, key_id: str, request: Request) -> Response:
    fields, scope = await _posted(request, "admin")
    del fields
    try:
        which = uuid.UUID(key_id)
    except ValueError:
        raise InvalidInput(f"not a key id: {key_id!r}", field="key_id") from None
    async with scope as console:
        await tenants.revoke_key(console.session, tenant_id=console.tenant.id, key_id=which,
                                 actor=console.principal.actor)  # fmt: skip
    return RedirectResponse(f"/ui/{tenant}/keys", status_code=303)


@router.get("/{tenant}/settings", response_class=HTMLResponse)
async def settings_page(tenant: str, request: Request) -> Response:
    async with _scope(request, "admin") as console:
        pass
    return render(request, "settings.html", scope=console, tenant=console.tenant, saved=False)


@router.post("/{tenant}/settings", response_class=HTMLResponse)
async def save_settings(tenant: str, request: Request) -> Response:
    fields, scope = await _posted(request, "admin")
    protected = [p.strip() for p in fields.get("protected_labels", "").split(",") if p.strip()]
    try:
        patch = TenantPatch.model_validate({
            "title": fields.get("title") or None,
            "public_read": fields.get("public_read") == "yes",
            "default_label": fields.get("default_label") or None,
            "protected_labels": protected,
            "instructions": fields.get("instructions") or None,
        })  # fmt: skip
    except ValidationError as error:
        first = error.errors()[0]
        raise InvalidInput(f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None
    async with scope as console:
        updated = await tenants.update_tenant(
            console.session, console.tenant, patch, actor=console.principal.actor
        )
    return render(request, "settings.html", scope=console, tenant=updated, saved=True)


@router.get("/{tenant}/audit", response_class=HTMLResponse)
async def audit_page(tenant: str, request: Request) -> Response:
    q = request.query_params
    filters = {"action": q.get("action") or None, "target": q.get("target") or None}
    page = await _page(request)
    async with _scope(request, "admin") as console:
        found = await tenants.list_audit(console.session, console.tenant, page, **filters)
        people = await _people(console)
    more = None
    if found.next_cursor:
        more = "?" + urlencode(
            {**{k: v for k, v in filters.items() if v}, "cursor": found.next_cursor}
        )
    return render(request, "audit.html", scope=console, page=found, filters=filters, more=more,
                  people=people)  # fmt: skip


@router.get("/{tenant}/connect", response_class=HTMLResponse)
async def connect_page(tenant: str, request: Request) -> Response:
    async with _scope(request, "reader") as console:
        trusted = await tenants.issuers(console.session, console.tenant.id)
    label = request.query_params.get("label") or ""
    settings = _settings(request)
    base = (settings.public_url or str(request.base_url)).rstrip("/")
    shown = clients.configs(settings, base, tenant, label, oauth=bool(trusted))
    return render(request, "connect.html", scope=console, label=label, **shown)
