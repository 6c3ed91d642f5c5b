"""Server Cards (the MCP Server Card extension, SEP-2127; ``modelcontextprotocol/
experimental-ext-server-card``): each tenant's endpoint describes itself before a client connects,
where the extension reserves it, ``GET <streamable-http-url>/server-card`` (``/mcp/T/server-card``,
and ``/mcp/T/LABEL/server-card`` for a label's endpoint), as ``application/mcp-server-card+json``;
and the deployment lists its public tenants' cards in an AI Catalog at
``/.well-known/ai-catalog.json`` (also at ``/.well-known/mcp/server-card.json``).

A card says the server's name (the host reversed, then the tenant), title, description, version,
its remote (streamable HTTP, the revisions served, the Authorization header it needs unless the
tenant serves anyone) and, in ``_meta``, the extensions its endpoint declares. A public tenant's
card is anyone's; another tenant's needs a credential of that tenant, as its endpoint does. Cards
carry no secret and no internal address beyond the one clients connect to."""

from __future__ import annotations

import hashlib
import ipaddress
import re
from typing import Any
from urllib.parse import urlsplit

import orjson
from fastapi import APIRouter, Request, Response

import registry
from registry.api.auth import bearer
from registry.db.models import Tenant
from registry.errors import NotFound
from registry.naming import LABEL_PATTERN, SERVER_CARD
from registry.revisions import ALL_REVISIONS, EVENTS_EXTENSION, SKILLS_EXTENSION
from registry.tenants import access
from registry.tenants import service as tenants

router = APIRouter(tags=["server cards"])

CARD_TYPE = "application/mcp-server-card+json"
CATALOG_TYPE = "application/ai-catalog+json"
SCHEMA = "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json"
CATALOG_MOST = 1000  # public tenants listed in the catalog (by name)
CORS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET",
    "Access-Control-Allow-Headers": "Content-Type, If-None-Match",
    "Access-Control-Expose-Headers": "ETag",
}


async def _tenant(request: Request, slug: str, label: str | None = None) -> Tenant:
    """The tenant whose card is asked for, as its endpoint lets the caller read it: anyone where
    it serves anyone (a published label's endpoint, as over MCP), else a credential of the
    tenant."""
    state = request.app.state
    async with access.tenant_scope(
        state.db,
        state.settings.operator_token,
        slug,
        bearer(request),
        "reader",
        allow_anonymous=True,
        tokens=state.tokens,
    ) as scope:
        access.check_anonymous(scope.tenant, scope.principal, label)
        return scope.tenant


def _base(request: Request) -> str:
    return str(request.app.state.settings.public_url or request.base_url).rstrip("/")


def server_name(base: str, slug: str) -> str:
    """``com.example.prompts/acme`` for ``https://prompts.example.com``: the host reversed (an
    address as it is), then the tenant, as the card's name pattern wants."""
    host = urlsplit(base).hostname or "localhost"
    try:
        ipaddress.ip_address(host)
        namespace = host
    except ValueError:
        namespace = ".".join(reversed(host.split(".")))
    return f"{namespace}/{slug}"


def card(base: str, tenant: Tenant, label: str | None) -> dict[str, Any]:
    """The Server Card of the tenant's endpoint (of ``label``'s endpoint, when given)."""
    url = f"{base}/mcp/{tenant.slug}" + (f"/{label}" if label else "")
    title = (tenant.title or tenant.slug)[:100]
    remote: dict[str, Any] = {
        "type": "streamable-http",
        "url": url,
        "supportedProtocolVersions": list(ALL_REVISIONS),
    }
    if not tenant.public_read:
        remote["headers"] = [
            {
                "name": "Authorization",
                "description": "An API key of the tenant, or an OAuth access token its issuer gave",
                "isRequired": True,
                "isSecret": True,
                "value": "Bearer {token}",
                "variables": {"token": {"isRequired": True, "isSecret": True}},
            }
        ]
    served = f"label {label}" if label else f"label {tenant.default_label}"
    return {
        "$schema": SCHEMA,
        "name": server_name(base, tenant.slug),
        "version": registry.__version__,
        "title": title,
        "description": f"Prompts and skills of {tenant.slug} ({served})"[:100],
        "websiteUrl": f"{base}/ui/{tenant.slug}",
        "remotes": [remote],
        "_meta": {"dev.prompt-registry/extensions": [SKILLS_EXTENSION, EVENTS_EXTENSION]},
    }


def _answer(request: Request, document: dict[str, Any], media: str) -> Response:
    body = orjson.dumps(document)
    tag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    headers = {**CORS, "ETag": tag, "Cache-Control": "public, max-age=300", "Vary": "Authorization"}
    if request.headers.get("if-none-match") == tag:
        return Response(status_code=304, headers=headers)
    return Response(body, media_type=media, headers=headers)


@router.get(
    "/mcp/{tenant}/" + SERVER_CARD,
    response_class=Response,
    responses={200: {"content": {CARD_TYPE: {}}}},
    summary="The tenant endpoint's Server Card",
)
async def tenant_card(tenant: str, request: Request) -> Response:
    found = await _tenant(request, tenant)
    return _answer(request, card(_base(request), found, None), CARD_TYPE)


@router.get(
    "/mcp/{tenant}/{label}/" + SERVER_CARD,
    response_class=Response,
    responses={200: {"content": {CARD_TYPE: {}}}},
    summary="A label endpoint's Server Card",
)
async def label_card(tenant: str, label: str, request: Request) -> Response:
    if not re.fullmatch(LABEL_PATTERN, label):
        raise NotFound(f"invalid label {label[:64]!r} in the path")
    found = await _tenant(request, tenant, label)
    return _answer(request, card(_base(request), found, label), CARD_TYPE)


async def _catalog(request: Request) -> Response:
    base = _base(request)
    async with request.app.state.db.app_tx() as session:
        public = await tenants.public_tenants(session, CATALOG_MOST)
    host = urlsplit(base).hostname or "localhost"
    entries = [
        {
            "identifier": f"urn:air:{host}:mcp:{t.slug}",
            "type": CARD_TYPE,
            "url": f"{base}/mcp/{t.slug}/{SERVER_CARD}",
        }
        for t in public
    ]
    return _answer(request, {"specVersion": "1.0", "entries": entries}, CATALOG_TYPE)


@router.get(
    "/.well-known/ai-catalog.json",
    response_class=Response,
    responses={200: {"content": {CATALOG_TYPE: {}}}},
    summary="The public tenants' Server Cards (an AI Catalog)",
)
async def ai_catalog(request: Request) -> Response:
    return await _catalog(request)


@router.get(
    "/.well-known/mcp/server-card.json",
    response_class=Response,
    responses={200: {"content": {CATALOG_TYPE: {}}}},
    summary="The same catalog, where earlier drafts of the extension looked",
)
async def server_cards(request: Request) -> Response:
    return await _catalog(request)
