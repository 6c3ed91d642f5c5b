"""OAuth discovery as a protected resource sees it (RFC 9728), and the honest answer to clients
that look for an authorization server here.

Each tenant's MCP endpoint (``/mcp/{tenant}``, and its label paths) and its REST base
(``/api/v1/tenants/{tenant}``) publish their metadata at the well-known prefix inserted before the
path. The registry issues no tokens: the paths where clients look for an authorization server on the
resource's own origin (the 2025-03-26 fallback) answer 404 with a problem that says where tokens come
from and that a tenant trusting no issuer takes API keys, so an OAuth-aware client that falls back
shows that sentence instead of a bare "client registration 404".
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from registry.api.problems import problem
from registry.db.engine import Database
from registry.tenants import oauth
from registry.tenants import service as tenants

router = APIRouter(tags=["oauth"])
PREFIX = "/.well-known/oauth-protected-resource"
# Browser-based clients read the metadata from another origin; it holds nothing private.
HEADERS = {"Access-Control-Allow-Origin": "*", "Cache-Control": "public, max-age=60"}


async def _metadata(request: Request, slug: str, resource_path: str) -> JSONResponse:
    settings = request.app.state.settings
    base = (settings.public_url or str(request.base_url)).rstrip("/")
    db: Database = request.app.state.db
    async with db.app_tx() as session:
        found = await tenants.resource_metadata(
            session, slug, f"{base}{resource_path}", scopes=oauth.SCOPES
        )
    return JSONResponse(found.model_dump(by_alias=True), headers=HEADERS)


@router.get(PREFIX + "/mcp/{tenant}", summary="Protected resource metadata of an MCP endpoint")
async def mcp_metadata(tenant: str, request: Request) -> JSONResponse:
    return await _metadata(request, tenant, f"/mcp/{tenant}")


@router.get(PREFIX + "/mcp/{tenant}/{label}", include_in_schema=False)
async def mcp_label_metadata(tenant: str, label: str, request: Request) -> JSONResponse:
    # A label's path is part of the tenant's resource: tokens are minted for the tenant's endpoint.
    del label
    return await _metadata(request, tenant, f"/mcp/{tenant}")


@router.get(
    PREFIX + "/api/v1/tenants/{tenant}",
    summary="Protected resource metadata of a tenant's REST API",
)
async def rest_metadata(tenant: str, request: Request) -> JSONResponse:
    return await _metadata(request, tenant, f"/api/v1/tenants/{tenant}")


NOT_AN_AUTHORIZATION_SERVER = (
    "Prompt Registry is a protected resource, not an OAuth authorization server: it issues no "
    "tokens and registers no clients. Each tenant's metadata at "
    f"{PREFIX}/mcp/{{tenant}} names the issuers it trusts; a tenant that names none takes API keys "
    "only, so configure the header 'Authorization: Bearer <api key>' for it (a refused key is "
    "answered 403 with the reason)."
)


def _not_here() -> JSONResponse:
    response = problem(404, "not_an_authorization_server", "Not found", NOT_AN_AUTHORIZATION_SERVER)
    response.headers["Access-Control-Allow-Origin"] = "*"
    return response


for path, method in (
    ("/.well-known/oauth-authorization-server", "GET"),
    ("/.well-known/oauth-authorization-server/{rest:path}", "GET"),
    ("/.well-known/openid-configuration", "GET"),
    ("/.well-known/openid-configuration/{rest:path}", "GET"),
    ("/register", "POST"),
    ("/authorize", "GET"),
    ("/token", "POST"),
):
    router.add_api_route(path, _not_here, methods=[method], include_in_schema=False)
