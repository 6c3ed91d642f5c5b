"""What applications read at run time over REST, beside the admin routes of registry.api.prompts:
a prompt rendered as prompts/get would render it (with its signed receipt), what a label serves as
records an application renders locally (``registry.client``, snapshots), and blobs. Each route is a
few lines; the logic is in registry.prompts."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response

from registry import receipts, signing
from registry.api import conditional
from registry.api.auth import require_credential, settings_of, tenant_scope
from registry.api.rollouts import route
from registry.api.usage import count_rest
from registry.content.media import inline_disposition
from registry.errors import InvalidInput, NotFound
from registry.libraries import serving as library_serving
from registry.naming import LABEL_PATTERN, MIME_RE, PROMPT_NAME_PATTERN
from registry.prompts import blobs, rendering, snapshots
from registry.prompts.schemas import BlobOut, RenderedPrompt, RenderRequest, ServedOne, ServedPage
from registry.rollouts.assign import Routed
from registry.tenants.access import TenantScope
from registry.usage.schemas import Served

router = APIRouter(
    prefix="/api/v1/tenants/{tenant}", tags=["prompts"], dependencies=[Depends(require_credential)]
)


async def _routed(
    request: Request, scope: TenantScope, records: list[dict[str, Any]], label: str
) -> list[dict[str, Any]]:
    """The records as this caller is served them: a prompt whose label has a live rollout that
    sends this caller the new version is that version's record."""
    routes = await route(request, scope, "prompt", [r["name"] for r in records], label)
    if not routes:
        return records
    shown = []
    for record in records:
        routed = routes.get(record["name"])
        if routed is not None and routed.version is not None:
            at = await snapshots.served_record_at(
                scope.session, scope.tenant, record["name"], routed.version
            )
            record = at or record
        if routed is not None:  # what the caller reports an outcome with (POST /feedback)
            record = {**record, "receipt": _record_receipt(request, scope, record, label, routed)}
        shown.append(record)
    return shown


def _record_receipt(
    request: Request, scope: TenantScope, record: dict[str, Any], label: str, routed: Routed
) -> dict[str, Any]:
    """A signed receipt of one record a rollout decided (its version and side): it covers the
    record as sent, and is what ``PromptClient.report`` sends back with an outcome."""
    served = {"prompt": record["name"], "version": record["version"], "rollout": routed.receipt()}
    pending = receipts.pending(tenant=scope.tenant.slug, served=served, label=label, arguments={})
    covered: dict[str, Any] = {"record": record, "_meta": {receipts.META_KEY: pending}}
    key_file = settings_of(request).snapshot_key_file
    key, key_id = signing.key_file(key_file).current() if key_file else (None, None)
    receipts.seal(covered, key, key_id)
    return dict(covered["_meta"][receipts.META_KEY])


def _served(records: list[dict[str, Any]], label: str) -> list[Served]:
    return [Served("prompt", r["name"], r["version"], label) for r in records]


@router.post(
    "/prompts/{name}/render",
    response_model=RenderedPrompt,
    response_model_exclude_none=True,
    summary="Render a version exactly as MCP prompts/get would",
)
async def render_prompt(tenant: str, name: str, body: RenderRequest, request: Request) -> Response:
    async with tenant_scope(request, tenant, "reader", read_only=True) as scope:
        asked = body.label or scope.tenant.default_label
        routed = (
            None
            if body.version
            else (await route(request, scope, "prompt", [name], asked)).get(name)
        )
        try:
            rendered = await rendering.render(
                scope.session,
                scope.tenant,
                name,
                body.arguments,
                version=body.version or (routed.version if routed else None),
                label=body.label,
                max_value_length=settings_of(request).max_argument_length,
                max_rendered_chars=settings_of(request).max_rendered_chars,
            )
        except InvalidInput:  # an argument error on one side of a rollout: the sides compared
            if routed is not None:
                side = Served(*routed.served)
                count_rest(
                    request, scope.tenant, scope.principal, [side], "rest/render", failed=True
                )
            raise
        label = None if body.version else body.label or scope.tenant.default_label
        served = Served("prompt", name, rendered.version or 0, label or "")
        count_rest(request, scope.tenant, scope.principal, [served], "rest/render")
        served_now: dict[str, Any] = {
            "prompt": name,
            "version": rendered.version,
            "partials": list(rendered.partials),
        }
        if routed is not None:
            served_now["rollout"] = routed.receipt()
        pending = receipts.pending(
            tenant=scope.tenant.slug, label=label, arguments=body.arguments or {}, served=served_now
        )
    answer = rendered.model_copy(update={"meta": {receipts.META_KEY: pending}})
    result = answer.model_dump(mode="json", exclude_none=True, by_alias=True)
    key_file = settings_of(request).snapshot_key_file
    key, key_id = signing.key_file(key_file).current() if key_file else (None, None)
    receipts.seal(result, key, key_id)  # the whole answer as it is sent
    rendered = answer.model_copy(update={"meta": result["_meta"]})
    return conditional.answer(request, rendered, exclude_none=True, by_alias=True)


@router.get(
    "/served",
    response_model=ServedPage,
    summary="What a label serves, as records an application renders locally (registry.client)",
)
async def served(
    tenant: str,
    request: Request,
    label: Annotated[str | None, Query(pattern=LABEL_PATTERN)] = None,
    after: Annotated[str | None, Query(pattern=PROMPT_NAME_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=snapshots.PAGE)] = snapshots.PAGE,
) -> ServedPage:
    async with tenant_scope(request, tenant, "reader", read_only=True) as scope:
        served_label = label or scope.tenant.default_label
        libs = await library_serving.reads(scope.session, scope.tenant)
        records, more = await library_serving.view_page(
            scope.session, scope.tenant, served_label, libs, after=after, limit=limit
        )
        records = await _routed(request, scope, records, served_label)
        count_rest(
            request, scope.tenant, scope.principal, _served(records, served_label), "rest/served"
        )
        return ServedPage(
            tenant=scope.tenant.slug,
            label=served_label,
            seq=scope.tenant.change_seq,
            prompts=records,
            blobs=await library_serving.view_blobs(scope.session, scope.tenant, libs, records),
            next=records[-1]["name"] if more and records else None,
        )


@router.get(
    "/served/{name}",
    response_model=ServedOne,
    summary="One prompt as a label serves it, as a record an application renders locally",
)
async def served_one(
    tenant: str,
    name: str,
    request: Request,
    label: Annotated[str | None, Query(pattern=LABEL_PATTERN)] = None,
) -> ServedOne:
    async with tenant_scope(request, tenant, "reader", read_only=True) as scope:
        served_label = label or scope.tenant.default_label
        libs = await library_serving.reads(scope.session, scope.tenant)
        record = await library_serving.served_record(
            scope.session, scope.tenant, served_label, libs, name
        )
        if record is None:
            raise NotFound(f"label {served_label!r} serves no prompt {name!r}", field="name")
        (record,) = await _routed(request, scope, [record], served_label)
        count_rest(
            request, scope.tenant, scope.principal, _served([record], served_label), "rest/served"
        )
        blobs = await library_serving.view_blobs(scope.session, scope.tenant, libs, [record])
        return ServedOne(prompt=record, blobs=blobs)


@router.post("/blobs", status_code=201, response_model=BlobOut, summary="Upload bytes (raw body)")
async def upload_blob(tenant: str, request: Request, response: Response) -> BlobOut:
    mime = (request.headers.get("content-type") or "application/octet-stream").split(";")[0].strip()
    if not MIME_RE.fullmatch(mime):
        raise InvalidInput(f"Content-Type {mime!r} is not a media type", field="Content-Type")
    data = await request.body()  # read whole (and bounded) before any connection is taken
    if not data:
        raise InvalidInput("the request body is empty: send the blob's bytes", field="body")
    async with tenant_scope(request, tenant, "editor") as scope:
        sha, created = await blobs.upload_blob(
            scope.session, scope.tenant, scope.principal, data, mime
        )
    if not created:
        response.status_code = 200
    return BlobOut(sha256=sha, size=len(data), mime_type=mime, created=created)


@router.get(
    "/blobs/{sha256}",
    response_class=Response,
    responses={200: {"content": {"application/octet-stream": {}}}},
    summary="Download a blob",
)
async def get_blob(tenant: str, sha256: str, request: Request) -> Response:
    async with tenant_scope(request, tenant, "reader", read_only=True) as scope:
        data, mime = await blobs.get_blob(scope.session, scope.tenant, sha256)
    # On the registry's own origin: never sniffed, never run (a sandbox with no sources), and
    # downloaded rather than shown unless it is an image or audio.
    disposition = "inline" if inline_disposition(mime) else f'attachment; filename="{sha256}"'
    headers = {
        "ETag": f'"{sha256}"',
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; sandbox",
        "Content-Disposition": disposition,
    }
    return Response(data, media_type=mime, headers=headers)
