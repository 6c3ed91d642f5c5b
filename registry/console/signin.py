"""The console's front door: the home page, its static files and icon, signing in with a key or at
the tenant's identity provider (authorization code with PKCE), signing out."""

from __future__ import annotations

import base64
import hashlib
import secrets
from urllib.parse import urlencode

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from registry import outbound
from registry.console.pages import (
    LOGIN_COOKIE,
    STATIC,
    ConsoleRoute,
    Form,
    SignedOut,
    db_of,
    posted,
    read_form,
    render,
    secure,
    settings_of,
)
from registry.console.sessions import (
    COOKIE,
    SIGN_IN_REASONS,
    close_session,
    open_session,
)
from registry.errors import (
    Forbidden,
    InvalidInput,
    RegistryError,
)
from registry.naming import SLUG_RE
from registry.tenants import access, oauth
from registry.tenants import service as tenants
from registry.tenants.oauth import TokenVerifier

router = APIRouter(prefix="/ui", route_class=ConsoleRoute, include_in_schema=False)


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
    async with db_of(request).app_tx() as session:
        _, issuers = await tenants.trusted_issuers(session, tenant)
    query = request.query_params
    return render(
        request,
        "login.html",
        issuers=issuers if settings_of(request).public_url else [],
        why=SIGN_IN_REASONS.get(query.get("why", "")),  # words the server chose, by their code
        next=_next(query.get("next"), tenant),
        error=None,
    )


def _next(wanted: str | None, slug: str) -> str:
    """Where to go after signing in: a console path of this tenant, nothing else."""
    return wanted if wanted and wanted.startswith(f"/ui/{slug}/") else f"/ui/{slug}/prompts"


def _signed_in(request: Request, slug: str, cookie: str, target: str) -> Response:
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        COOKIE,
        cookie,
        httponly=True,
        samesite="lax",
        secure=secure(request),
        path=f"/ui/{slug}",
        max_age=8 * 3600,
    )
    return response


class KeyLogin(Form):
    key: str = ""
    next: str | None = None


@router.post("/{tenant}/login")
async def login_with_key(tenant: str, request: Request) -> Response:
    fields = await read_form(request, KeyLogin)
    key = fields.key.strip()
    target = _next(fields.next, tenant)
    if not key:
        return render(
            request,
            "login.html",
            422,
            issuers=[],
            why=None,
            next=target,
            error="paste an API key of this tenant",
        )
    try:
        async with access.tenant_scope(db_of(request), None, tenant, key, "reader") as scope:
            cookie, _ = await open_session(scope.session, scope.tenant, scope.principal)
    except RegistryError as refused:
        return render(
            request,
            "login.html",
            refused.http_status,
            issuers=[],
            why=None,
            next=target,
            error=refused.message,
        )
    return _signed_in(request, tenant, cookie, target)


@router.post("/{tenant}/logout")
async def logout(tenant: str, request: Request) -> Response:
    _, scope = await posted(request, "reader", SignedOut)
    async with scope as console:
        await close_session(console.session, console.tenant, request.cookies.get(COOKIE, ""))
    response = RedirectResponse(f"/ui/{tenant}/login", status_code=303)
    response.delete_cookie(COOKIE, path=f"/ui/{tenant}")
    return response


# --- signing in at the tenant's identity provider (authorization code with PKCE) ----------------


@router.get("/{tenant}/login/oidc")
async def login_oidc(tenant: str, request: Request) -> Response:
    settings = settings_of(request)
    verifier: TokenVerifier = request.app.state.tokens
    public = settings.public_url
    if public is None:
        raise InvalidInput("sign-in with an identity provider needs REGISTRY_PUBLIC_URL")
    issuer = request.query_params.get("issuer", "")
    async with db_of(request).app_tx() as session:
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
    query = urlencode(
        {
            "response_type": "code",
            "client_id": settings.console_client_id,
            "redirect_uri": redirect_uri,
            "scope": "prompts:read prompts:write",
            "code_challenge": challenge.rstrip(b"=").decode(),
            "code_challenge_method": "S256",
            "state": state,
            "resource": oauth.resources(public, tenant)[1],
        }
    )
    codec = await db_of(request).tokens()
    pending = codec.issue(
        "console-login",
        [],
        [tenant, issuer, state, code_verifier, _next(request.query_params.get("next"), tenant)],
    )
    response = RedirectResponse(f"{endpoint}?{query}", status_code=303)
    response.set_cookie(
        LOGIN_COOKIE,
        pending,
        httponly=True,
        samesite="lax",
        secure=secure(request),
        path="/ui/callback",
        max_age=600,
    )
    return response


@router.get("/callback")
async def login_callback(request: Request) -> Response:
    settings = settings_of(request)
    verifier: TokenVerifier = request.app.state.tokens
    codec = await db_of(request).tokens()
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
            "POST",
            token_endpoint,
            seconds=10,
            allow_private=settings.oauth_allow_private_issuers,
            form={
                "grant_type": "authorization_code",
                "code": query.get("code", ""),
                "redirect_uri": f"{public.rstrip('/')}/ui/callback",
                "client_id": settings.console_client_id,
                "code_verifier": code_verifier,
                "resource": oauth.resources(public, tenant)[1],
            },
        )
    except outbound.Refused as refused:
        return render(request, "error.html", 401, message=f"the token request failed: {refused}")
    token = answer.get("access_token") if isinstance(answer, dict) else None
    if not isinstance(token, str):
        return render(
            request, "error.html", 401, message="the identity provider sent no access token"
        )
    async with access.tenant_scope(
        db_of(request), None, tenant, token, "reader", tokens=verifier
    ) as scope:
        cookie, _ = await open_session(scope.session, scope.tenant, scope.principal)
    response = _signed_in(request, tenant, cookie, target)
    response.delete_cookie(LOGIN_COOKIE, path="/ui/callback")
    return response
