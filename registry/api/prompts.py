"""Prompts, versions, labels, rendering, diff, blobs, export and import: one service call per route.

Longer than 500 lines because it is the whole route table of one resource (about thirty thin routes,
each a few lines); its logic is in registry.prompts."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Header, Path, Query, Request, Response

from registry.api import conditional, plain
from registry.api.auth import bearer, callers, require_credential, settings_of, tenant_scope
from registry.api.paging import pages
from registry.db.pagination import Page, PageRequest
from registry.errors import InvalidInput
from registry.labels import Terms
from registry.naming import (
    MAX_VERSION,
    ascii_number,
)
from registry.prompts import (
    at_once,
    diff,
    lifecycle,
    partials,
    prompt_tests,
    reading,
    writing,
)
from registry.prompts.schemas import (
    ImpactEntry,
    LabelHistoryOut,
    LabelMove,
    LabelOut,
    PromptCreate,
    PromptOut,
    PromptPatch,
    PromptSummary,
    RefreshRequest,
    VersionDiff,
    VersionIn,
    VersionOut,
    VersionSummary,
    WriteResult,
)
from registry.tenants import access
from registry.tenants import service as tenants
from registry.testcases import TestRequest, TestRun

router = APIRouter(
    prefix="/api/v1/tenants/{tenant}", tags=["prompts"], dependencies=[Depends(require_credential)]
)
Pages = Annotated[PageRequest, Depends(pages(50))]
Version = Annotated[int, Path(ge=1, le=MAX_VERSION, description="a version number")]
Force = Annotated[
    bool,
    Query(
        description="move protected labels even onto a version whose argument contract breaks "
        "what callers send (the audit log records it)"
    ),
]
BreakGlass = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=2000,
        description="break-glass: an admin removes a label that needs approvals directly, saying why",
    ),
]
IfMatch = Annotated[
    str | None,
    Header(
        alias="If-Match", description="the version this write is based on; 412 when it is stale"
    ),
]


def _if_match(value: str | None) -> int | None:
    if value is None:
        return None
    # "3", or the ETag of GET /prompts/{name} ("3.<digest>"): the version number is what counts.
    number = ascii_number(value.strip().removeprefix("W/").strip('"').split(".", 1)[0])
    if number is None:
        raise InvalidInput(
            f'If-Match must be a version number such as "3", not {value!r}', field="If-Match"
        )
    return number


def _etag(response: Response, version: int) -> None:
    response.headers["ETag"] = f'"{version}"'


def _written(response: Response, result: WriteResult) -> WriteResult:
    """A version write's answer: 201 when it wrote a version, 200 when it found one identical."""
    if not result.created:
        response.status_code = 200
    _etag(response, result.version)
    return result


@router.get("/prompts", response_model=Page[PromptSummary], summary="List prompts by name")
async def list_prompts(
    tenant: str,
    request: Request,
    page: Pages,
    prefix: str | None = None,
    tag: str | None = None,
    label: str | None = None,
    q: Annotated[
        str | None, Query(max_length=200, description="text in name, title, description")
    ] = None,
    archived: Literal["false", "true", "all"] = "false",
) -> Page[PromptSummary]:
    async with tenant_scope(request, tenant, "reader", read_only=True) as scope:
        return await reading.list_prompts(
            scope.session,
            scope.tenant,
            page,
            prefix=prefix,
            tag=tag,
            label=label,
            text=q,
            archived={"false": False, "true": True, "all": None}[archived],
        )


@router.post("/prompts", status_code=201, response_model=WriteResult, summary="Create a prompt")
async def create_prompt(
    tenant: str, body: PromptCreate, request: Request, response: Response, dry_run: bool = False
) -> WriteResult:
    async with tenant_scope(request, tenant, "editor", rollback=dry_run) as scope:
        result = await writing.create_prompt(
            scope.session,
            scope.tenant,
            scope.principal,
            body,
            max_blob_bytes=settings_of(request).max_blob_bytes,
            dry_run=dry_run,
        )
    _etag(response, result.version)
    return result


@router.get(
    "/prompts/{name}",
    response_model=PromptOut,
    summary="A prompt with its labels and latest version",
)
async def get_prompt(tenant: str, name: str, request: Request) -> Response:
    async with tenant_scope(request, tenant, "reader", read_only=True) as scope:
        found = await reading.get_prompt(scope.session, scope.tenant, name)
    return conditional.answer(request, found, prefix=f"{found.latest_version}.")


async def plain_get_prompt(request: Request, body: bytes) -> Response | None:
    """``get_prompt`` for the ordinary read (no query, a credential), without FastAPI's routing and
    dependencies (registry.api.plain); None for any other request, which the route above answers.
    What an application's client asks all day; its answer is the route's, the same Response."""
    if not plain.ordinary(request):
        return None
    params = request.path_params
    return await get_prompt(params["tenant"], params["name"], request)


@router.patch(
    "/prompts/{name}",
    response_model=PromptOut,
    summary="Update a prompt's tags, tool mark and test cases",
)
async def patch_prompt(tenant: str, name: str, body: PromptPatch, request: Request) -> PromptOut:
    async with tenant_scope(request, tenant, "editor") as scope:
        return await lifecycle.patch_prompt(
            scope.session,
            scope.tenant,
            scope.principal,
            name,
            tags=body.tags,
            as_tool=body.as_tool,
            tests=body.tests,
        )


@router.delete(
    "/prompts/{name}", status_code=204, summary="Delete an archived prompt and its history"
)
async def delete_prompt(tenant: str, name: str, request: Request) -> Response:
    async with tenant_scope(request, tenant, "admin") as scope:
        await lifecycle.delete_prompt(scope.session, scope.tenant, scope.principal, name)
    return Response(status_code=204)


@router.post("/prompts/{name}/archive", response_model=PromptOut, summary="Hide a prompt from MCP")
async def archive_prompt(tenant: str, name: str, request: Request) -> PromptOut:
    async with tenant_scope(request, tenant, "editor") as scope:
        return await lifecycle.set_archived(
            scope.session, scope.tenant, scope.principal, name, True
        )


@router.post(
    "/prompts/{name}/unarchive", response_model=PromptOut, summary="Serve an archived prompt again"
)
async def unarchive_prompt(tenant: str, name: str, request: Request) -> PromptOut:
    async with tenant_scope(request, tenant, "editor") as scope:
        return await lifecycle.set_archived(
            scope.session, scope.tenant, scope.principal, name, False
        )


@router.get(
    "/prompts/{name}/versions",
    response_model=Page[VersionSummary],
    summary="Versions, newest first",
)
async def list_versions(
    tenant: str, name: str, request: Request, page: Pages
) -> Page[VersionSummary]:
    async with tenant_scope(request, tenant, "reader", read_only=True) as scope:
        return await reading.list_versions(scope.session, scope.tenant, name, page)


_VERSIONS = "/prompts/{name}/versions"


@router.post(
    _VERSIONS,
    status_code=201,
    response_model=WriteResult,
    summary="Write a new version (200 and created=false when identical to the latest)",
)
async def create_version(
    tenant: str,
    name: str,
    body: VersionIn,
    request: Request,
    response: Response,
    if_match: IfMatch = None,
    dry_run: bool = False,
    force: Force = False,
) -> WriteResult:
    return await _create_version(
        request, response, tenant, name, body, if_match, dry_run=dry_run, force=force
    )


async def plain_create_version(request: Request, body: bytes) -> Response | None:
    """``create_version`` for the ordinary write (no query: not a dry run, not forced; a JSON
    version the model accepts; one If-Match at most), without FastAPI's routing and dependencies
    (registry.api.plain); None for any other request, which the route above answers."""
    version = plain.parsed(request, body, VersionIn, headers=("if-match",))
    if version is None:
        return None
    params = request.path_params
    answer = Response(status_code=201)
    if_match = request.headers.get("if-match")
    result = await _at_once(request, params["tenant"], params["name"], version, if_match)
    if result is None:  # not the ordinary write: the whole transaction
        result = await _create_version(
            request,
            answer,
            params["tenant"],
            params["name"],
            version,
            if_match,
            dry_run=False,
            force=False,
            remember=True,
        )
    else:
        _written(answer, result)
    return plain.json_answer(result, answer)


async def _at_once(
    request: Request, tenant: str, name: str, body: VersionIn, if_match: str | None
) -> WriteResult | None:
    """The ordinary write in one database call (registry.prompts.at_once), for a caller this
    worker settled a moment ago; None when it is not that (nothing written)."""
    credential = bearer(request)
    settings = settings_of(request)
    found = access.remembered_writer(
        callers(request), settings.operator_token, tenant, credential, "editor"
    )
    if found is None or credential is None:
        return None
    try:
        expected = _if_match(if_match)
    except InvalidInput:
        return None
    tenant_id, caller = found
    return await at_once.create_version(
        request.app.state.db,
        tenant_id,
        caller,
        None if caller.key_id is None else tenants.hash_secret(credential),
        "editor",
        name,
        body,
        if_match=expected,
        max_blob_bytes=settings.max_blob_bytes,
    )


async def _create_version(
    request: Request,
    response: Response,
    tenant: str,
    name: str,
    body: VersionIn,
    if_match: str | None,
    *,
    dry_run: bool,
    force: bool,
    remember: bool = False,
) -> WriteResult:
    expected = _if_match(if_match)
    async with tenant_scope(
        request, tenant, "editor", rollback=dry_run, remember=remember
    ) as scope:
        result = await writing.create_version(
            scope.session,
            scope.tenant,
            scope.principal,
            name,
            body,
            if_match=expected,
            max_blob_bytes=settings_of(request).max_blob_bytes,
            dry_run=dry_run,
            force=force,
        )
    return _written(response, result)


@router.get("/prompts/{name}/versions/{version}", response_model=VersionOut, summary="One version")
async def get_version(tenant: str, name: str, version: Version, request: Request) -> Response:
    async with tenant_scope(request, tenant, "reader", read_only=True) as scope:
        found = await reading.get_version(scope.session, scope.tenant, name, version)
    return conditional.answer(request, found)


@router.post(
    "/prompts/{name}/versions/{version}/restore",
    status_code=201,
    response_model=WriteResult,
    summary="Write a new version with an old version's content",
)
async def restore_version(
    tenant: str,
    name: str,
    version: Version,
    request: Request,
    response: Response,
    if_match: IfMatch = None,
) -> WriteResult:
    expected = _if_match(if_match)
    async with tenant_scope(request, tenant, "editor") as scope:
        result = await writing.restore_version(
            scope.session,
            scope.tenant,
            scope.principal,
            name,
            version,
            if_match=expected,
            max_blob_bytes=settings_of(request).max_blob_bytes,
        )
    return _written(response, result)


@router.post(
    "/prompts/{name}/refresh",
    status_code=201,
    response_model=WriteResult,
    summary="Write a new version whose partials are resolved anew (200, created=false: no lock moved)",
)
async def refresh_partials(
    tenant: str,
    name: str,
    body: RefreshRequest,
    request: Request,
    response: Response,
    if_match: IfMatch = None,
    dry_run: bool = False,
    force: Force = False,
) -> WriteResult:
    expected = _if_match(if_match)
    async with tenant_scope(request, tenant, "editor", rollback=dry_run) as scope:
        result = await writing.refresh_partials(
            scope.session,
            scope.tenant,
            scope.principal,
            name,
            body.labels,
            if_match=expected,
            max_blob_bytes=settings_of(request).max_blob_bytes,
            dry_run=dry_run,
            force=force,
        )
    return _written(response, result)


@router.get(
    "/prompts/{name}/impact",
    response_model=list[ImpactEntry],
    summary="Which labelled prompt versions include this one as a partial, and which are stale",
)
async def impact(tenant: str, name: str, request: Request) -> list[ImpactEntry]:
    async with tenant_scope(request, tenant, "reader", read_only=True) as scope:
        return await partials.impact(scope.session, scope.tenant, name)


@router.get(
    "/prompts/{name}/diff", response_model=VersionDiff, summary="What changed between two versions"
)
async def diff_versions(
    tenant: str,
    name: str,
    request: Request,
    from_version: Annotated[int, Query(alias="from", ge=1, le=MAX_VERSION)],
    to_version: Annotated[int, Query(alias="to", ge=1, le=MAX_VERSION)],
) -> VersionDiff:
    async with tenant_scope(request, tenant, "reader", read_only=True) as scope:
        return await diff.diff_versions(scope.session, scope.tenant, name, from_version, to_version)


@router.get(
    "/prompts/{name}/labels", response_model=dict[str, int], summary="Labels and their versions"
)
async def list_labels(tenant: str, name: str, request: Request) -> dict[str, int]:
    async with tenant_scope(request, tenant, "reader", read_only=True) as scope:
        return (await reading.get_prompt(scope.session, scope.tenant, name)).labels


_LABEL = "/prompts/{name}/labels/{label}"


@router.put(_LABEL, response_model=LabelOut, summary="Set or move a label")
async def set_label(
    tenant: str, name: str, label: str, body: LabelMove, request: Request, force: Force = False
) -> LabelOut:
    return await _set_label(request, tenant, name, label, body, force=force)


async def plain_set_label(request: Request, body: bytes) -> Response | None:
    """``set_label`` for the ordinary move (no query: not forced; a JSON move the model accepts),
    without FastAPI's routing and dependencies (registry.api.plain); None for any other request."""
    move = plain.parsed(request, body, LabelMove)
    if move is None:
        return None
    params = request.path_params
    result = await _set_label(
        request, params["tenant"], params["name"], params["label"], move, force=False
    )
    return plain.json_answer(result, Response())


async def _set_label(
    request: Request, tenant: str, name: str, label: str, body: LabelMove, *, force: bool
) -> LabelOut:
    async with tenant_scope(request, tenant, "editor") as scope:
        return await writing.set_label(
            scope.session,
            scope.tenant,
            scope.principal,
            name,
            label,
            body.version,
            force=force,
            terms=Terms(reason=body.reason),
        )


@router.delete("/prompts/{name}/labels/{label}", status_code=204, summary="Remove a label")
async def delete_label(
    tenant: str, name: str, label: str, request: Request, reason: BreakGlass = None
) -> Response:
    async with tenant_scope(request, tenant, "editor") as scope:
        await writing.delete_label(
            scope.session, scope.tenant, scope.principal, name, label, Terms(reason=reason)
        )
    return Response(status_code=204)


@router.post(
    "/prompts/{name}/test",
    response_model=TestRun,
    response_model_by_alias=True,
    summary="Run a prompt's test cases on a version (or on what a label serves)",
)
async def test_prompt(tenant: str, name: str, body: TestRequest, request: Request) -> TestRun:
    async with tenant_scope(request, tenant, "reader", read_only=True) as scope:
        return await prompt_tests.test_prompt(scope.session, scope.tenant, name, body)


@router.get(
    "/prompts/{name}/labels/{label}/history",
    response_model=Page[LabelHistoryOut],
    summary="Every move of one label, newest first",
)
async def label_history(
    tenant: str,
    name: str,
    label: str,
    request: Request,
    page: Pages,
) -> Page[LabelHistoryOut]:
    async with tenant_scope(request, tenant, "reader", read_only=True) as scope:
        return await reading.label_history(scope.session, scope.tenant, name, page, label=label)


@router.get(
    "/prompts/{name}/history",
    response_model=Page[LabelHistoryOut],
    summary="Every label move of a prompt",
)
async def prompt_label_history(
    tenant: str, name: str, request: Request, page: Pages
) -> Page[LabelHistoryOut]:
    async with tenant_scope(request, tenant, "reader", read_only=True) as scope:
        return await reading.label_history(scope.session, scope.tenant, name, page, label=None)


# The routes that a plain endpoint answers first in their ordinary case (registry.api.plain): a
# new version and a label move, what a publisher sends, and a prompt read, what an application
# sends. The plain endpoint does what the route's dependencies do (the router's credential check):
# tests/api/test_plain.py fails when they grow.
PLAIN = (
    ("GET", router.prefix + "/prompts/{name}", plain_get_prompt),
    ("POST", router.prefix + _VERSIONS, plain_create_version),
    ("PUT", router.prefix + _LABEL, plain_set_label),
)
