"""A tenant's administration in the console: API keys, settings, the audit log."""

from __future__ import annotations

import uuid
from typing import Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from pydantic import Field, ValidationError

from registry.console.pages import (
    ConsoleRoute,
    Form,
    SignedOut,
    page_of,
    people_of,
    posted,
    render,
    scope_of,
)
from registry.errors import (
    InvalidInput,
)
from registry.tenants import service as tenants
from registry.tenants.schemas import TenantPatch

router = APIRouter(prefix="/ui", route_class=ConsoleRoute, include_in_schema=False)


# --- administration ------------------------------------------------------------------------------


@router.get("/{tenant}/keys", response_class=HTMLResponse)
async def keys_page(tenant: str, request: Request) -> Response:
    async with scope_of(request, "admin") as console:
        keys = await tenants.list_keys(console.session, console.tenant.id)
    return render(request, "keys.html", scope=console, keys=keys, secret=None)


class KeyForm(Form):
    role: Literal["reader", "editor", "publisher", "admin"]
    name: str = ""
    owner: str = Field(default="", max_length=200)


class SettingsForm(Form):
    title: str = ""
    public_read: str = ""  # "yes" when ticked
    mcp_tools: str = ""  # "yes" when ticked
    default_label: str = ""
    protected_labels: str = ""  # comma-separated
    instructions: str = ""


@router.post("/{tenant}/keys", response_class=HTMLResponse)
async def create_key(tenant: str, request: Request) -> Response:
    fields, scope = await posted(request, "admin", KeyForm)
    async with scope as console:
        made, secret = await tenants.create_key(
            console.session,
            tenant=console.tenant,
            role=fields.role,
            name=fields.name or None,
            actor=console.principal.actor,
            owner=fields.owner or None,
        )
        keys = await tenants.list_keys(console.session, console.tenant.id)
    return render(request, "keys.html", scope=console, keys=keys, secret=secret, made=made)


@router.post("/{tenant}/keys/{key_id}/revoke")
async def revoke_key(tenant: str, key_id: str, request: Request) -> Response:
    _, scope = await posted(request, "admin", SignedOut)
    try:
        which = uuid.UUID(key_id)
    except ValueError:
        raise InvalidInput(f"not a key id: {key_id!r}", field="key_id") from None
    async with scope as console:
        await tenants.revoke_key(
            console.session,
            tenant_id=console.tenant.id,
            key_id=which,
            actor=console.principal.actor,
        )
    return RedirectResponse(f"/ui/{tenant}/keys", status_code=303)


@router.get("/{tenant}/settings", response_class=HTMLResponse)
async def settings_page(tenant: str, request: Request) -> Response:
    async with scope_of(request, "admin") as console:
        pass
    return render(request, "settings.html", scope=console, tenant=console.tenant, saved=False)


@router.post("/{tenant}/settings", response_class=HTMLResponse)
async def save_settings(tenant: str, request: Request) -> Response:
    fields, scope = await posted(request, "admin", SettingsForm)
    protected = [p.strip() for p in fields.protected_labels.split(",") if p.strip()]
    try:
        patch = TenantPatch.model_validate(
            {
                "title": fields.title or None,
                "public_read": fields.public_read == "yes",
                "mcp_tools": fields.mcp_tools == "yes",
                "default_label": fields.default_label or None,
                "protected_labels": protected,
                "instructions": fields.instructions or None,
            }
        )
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
    page = await page_of(request)
    async with scope_of(request, "admin") as console:
        found = await tenants.list_audit(console.session, console.tenant, page, **filters)
        people = await people_of(console)
    more = None
    if found.next_cursor:
        more = "?" + urlencode(
            {**{k: v for k, v in filters.items() if v}, "cursor": found.next_cursor}
        )
    return render(
        request, "audit.html", scope=console, page=found, filters=filters, more=more, people=people
    )
