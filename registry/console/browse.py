"""Reading the tenant's prompts in the console: the list, a prompt, a version, the preview (the
form MCP clients fill, rendered as prompts/get renders it), the diff, and how to connect a client."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse
from pydantic import ConfigDict

from registry.console import clients, documents, usage
from registry.console import rollouts as console_rollouts
from registry.console.pages import (
    ConsoleRoute,
    Form,
    as_number,
    page_of,
    people_of,
    posted,
    render,
    scope_of,
    settings_of,
)
from registry.errors import (
    NotFound,
    RegistryError,
)
from registry.prompts import diff, reading, rendering
from registry.tenants import service as tenants

router = APIRouter(prefix="/ui", route_class=ConsoleRoute, include_in_schema=False)


# --- prompts ------------------------------------------------------------------------------------


def _flag(value: str | None) -> bool | None:
    return {"only": True, "all": None}.get(value or "", False)


@router.get("/{tenant}/prompts", response_class=HTMLResponse)
async def prompts_page(tenant: str, request: Request) -> Response:
    q = request.query_params
    filters = {k: q.get(k) or None for k in ("text", "tag", "label")}
    archived = q.get("archived") or ""
    page = await page_of(request)
    async with scope_of(request, "reader") as scope:
        found = await reading.list_prompts(
            scope.session, scope.tenant, page, archived=_flag(archived), **filters
        )
    more = None
    if found.next_cursor:
        more = "?" + urlencode(
            {
                **{k: v for k, v in filters.items() if v},
                "archived": archived,
                "cursor": found.next_cursor,
            }
        )
    return render(
        request,
        "prompts.html",
        scope=scope,
        page=found,
        filters=filters,
        archived=archived,
        more=more,
    )


@router.get("/{tenant}/prompts/{name}", response_class=HTMLResponse)
async def prompt_page(tenant: str, name: str, request: Request) -> Response:
    first = await page_of(request, paged=False)  # the newest versions and label moves
    async with scope_of(request, "reader") as scope:
        prompt = await reading.get_prompt(scope.session, scope.tenant, name)
        versions = await reading.list_versions(scope.session, scope.tenant, name, first)
        history = await reading.label_history(scope.session, scope.tenant, name, first, label=None)
        people = await people_of(scope)
        moves = usage.last_moves(
            (h.label, h.to_version, h.moved_at) for h in history.items if h.to_version
        )
        shown = usage.Shown("prompt", name, prompt.labels, moves)
        ledger = await usage.panel(scope, first.tokens, shown, usage.days_of(request))
        live = await console_rollouts.shown(scope, "prompt", name, sorted(prompt.labels))
    return render(
        request,
        "prompt.html",
        scope=scope,
        prompt=prompt,
        versions=versions.items,
        history=history.items,
        message=request.query_params.get("message"),
        people=people,
        usage=ledger,
        rollouts=live,
        kind="prompt",
        plural="prompts",
        artifact=name,
    )


@router.get("/{tenant}/prompts/{name}/versions/{version}", response_class=HTMLResponse)
async def version_page(tenant: str, name: str, version: str, request: Request) -> Response:
    number = as_number(version)
    if number is None:
        raise NotFound(f"prompt {name!r} has no version {version!r}", field="version")
    async with scope_of(request, "reader") as scope:
        found = await reading.get_version(scope.session, scope.tenant, name, number)
        people = await people_of(scope)
    return render(request, "version.html", scope=scope, name=name, version=found, people=people)


# --- preview: the form MCP clients would fill, rendered as prompts/get renders it ---------------


@router.get("/{tenant}/prompts/{name}/preview", response_class=HTMLResponse)
async def preview_page(tenant: str, name: str, request: Request) -> Response:
    return await _preview(request, tenant, name, None, scope_of(request, "reader"))


class PreviewForm(Form):
    """The preview's argument values, one field ``arg:NAME`` each (its own names are the prompt's)."""

    model_config = ConfigDict(extra="allow")

    def arguments(self) -> dict[str, str]:
        extra = self.model_extra or {}
        return {
            k.removeprefix("arg:"): str(v)
            for k, v in extra.items()
            if k.startswith("arg:") and v != ""
        }


@router.post("/{tenant}/prompts/{name}/preview", response_class=HTMLResponse)
async def preview(tenant: str, name: str, request: Request) -> Response:
    fields, scope = await posted(request, "reader", PreviewForm)
    values = fields.arguments()
    return await _preview(request, tenant, name, values, scope)


async def _preview(
    request: Request, tenant: str, name: str, values: dict[str, str] | None, scope: Any
) -> Response:
    """The form, and with ``values`` what it renders, in the one transaction of ``scope`` (a
    POST's scope has checked its CSRF token)."""
    # The latest version by default (what was just saved), else the version or label picked.
    selector = request.query_params.get("label") or None
    version = as_number(request.query_params.get("version"))
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
                    console.session,
                    console.tenant,
                    name,
                    values,
                    version=number,
                    max_value_length=settings_of(request).max_argument_length,
                    max_rendered_chars=settings_of(request).max_rendered_chars,
                )
            except RegistryError as refused:
                error = refused.message
    return render(
        request,
        "preview.html",
        422 if error else 200,
        scope=console,
        name=name,
        version=shown,
        label=label,
        values=values or {},
        result=result,
        error=error,
        versions=range(prompt.latest_version, 0, -1),
        labels=prompt.labels,
    )


# --- diff ----------------------------------------------------------------------------------------


@router.get("/{tenant}/prompts/{name}/diff", response_class=HTMLResponse)
async def diff_page(tenant: str, name: str, request: Request) -> Response:
    q = request.query_params
    async with scope_of(request, "reader") as console:
        prompt = await reading.get_prompt(console.session, console.tenant, name)
        b = as_number(q.get("b")) or prompt.latest_version
        a = as_number(q.get("a")) or max(1, b - 1)
        changes = await diff.diff_versions(console.session, console.tenant, name, a, b)
        old = await reading.get_version(console.session, console.tenant, name, a)
        new = await reading.get_version(console.session, console.tenant, name, b)
    return render(
        request,
        "diff.html",
        scope=console,
        name=name,
        prompt=prompt,
        changes=changes,
        old=documents.dump(old),
        new=documents.dump(new),
        a=a,
        b=b,
    )


@router.get("/{tenant}/connect", response_class=HTMLResponse)
async def connect_page(tenant: str, request: Request) -> Response:
    async with scope_of(request, "reader") as console:
        trusted = await tenants.issuers(console.session, console.tenant.id)
    label = request.query_params.get("label") or ""
    settings = settings_of(request)
    base = (settings.public_url or str(request.base_url)).rstrip("/")
    shown = clients.configs(settings, base, tenant, label, oauth=bool(trusted))
    return render(request, "connect.html", scope=console, label=label, **shown)
