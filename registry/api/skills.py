"""Skills over REST, shaped like the prompts routes: one service call per route. A version's folder
comes as a JSON document of files (``{"files": [{"path", "text" | "base64"}]}``) or as a multipart
upload (each file part named by its path in the folder: ``-F SKILL.md=@SKILL.md -F
references/FORMS.md=@FORMS.md``; ``name``, ``commit_message`` and ``labels`` as plain fields)."""

from __future__ import annotations

import base64
from typing import Annotated, Any, TypeVar
from urllib.parse import quote

from fastapi import APIRouter, Depends, Header, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.datastructures import UploadFile

from registry.api.auth import require_credential, tenant_scope
from registry.api.bulk import bulk_slot
from registry.db.models import Tenant
from registry.errors import InvalidInput
from registry.labels import Terms
from registry.naming import LABEL_PATTERN, MAX_VERSION, ascii_number
from registry.prompts import partials
from registry.skills import provenance
from registry.skills import service as skills
from registry.skills import skill_tests as skill_tests
from registry.skills.folder import MAX_BYTES, MAX_FILES, SKILL_MD
from registry.skills.schemas import (
    SKILL_NAME_PATTERN,
    ArchiveIn,
    ManifestSignature,
    SkillCreate,
    SkillDiff,
    SkillLabelIn,
    SkillLabelOut,
    SkillOut,
    SkillPatch,
    SkillVersionIn,
    SkillVersionOut,
    SkillWrite,
)
from registry.testcases import TestRequest, TestRun

router = APIRouter(
    prefix="/api/v1/tenants/{tenant}", tags=["skills"], dependencies=[Depends(require_credential)]
)
Name = Annotated[str, Path(pattern=SKILL_NAME_PATTERN, max_length=64)]
Version = Annotated[int, Path(ge=1, le=MAX_VERSION, description="a version number")]
IfMatch = Annotated[
    str | None,
    Header(alias="If-Match", description="the version this write is based on; 409 when stale"),
]
FORM_FIELDS = {"name", "commit_message", "labels"}
M = TypeVar("M", bound=BaseModel)
_BODY = {
    "requestBody": {
        "required": True,
        "description": "the folder: a JSON document of files, or a multipart upload whose file "
        "parts are named by their path in the folder",
        "content": {
            "application/json": {"schema": {"type": "object"}},
            "multipart/form-data": {"schema": {"type": "object"}},
        },
    }
}


async def expand_skill_md(
    session: AsyncSession, tenant: Tenant, text: str
) -> tuple[str, list[Any]]:
    """SKILL.md's partial tags resolved by the prompts domain (the skills domain imports none)."""
    return await partials.expand_text(session, tenant, text, where=SKILL_MD)


async def _body(request: Request, model: type[M]) -> M:
    """The version's folder, from JSON or from a multipart upload; 422 naming what is wrong."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    try:
        if kind == "multipart/form-data":
            return model.model_validate(await _multipart(request))
        if kind not in ("application/json", ""):
            raise InvalidInput(
                "send the folder as application/json or multipart/form-data", field="body"
            )
        return model.model_validate_json(await request.body())
    except ValidationError as error:
        raise RequestValidationError(error.errors(include_url=False)) from None


async def _multipart(request: Request) -> dict[str, Any]:
    form = await request.form(
        max_files=MAX_FILES, max_fields=MAX_FILES + 8, max_part_size=MAX_BYTES
    )
    body: dict[str, Any] = {"files": [], "labels": []}
    for key, value in form.multi_items():
        if isinstance(value, UploadFile):
            data = await value.read()
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                body["files"].append(
                    {"path": key, "base64": base64.b64encode(data).decode(), "mime_type": None}
                )
            else:
                body["files"].append({"path": key, "text": text})
        elif key == "labels":
            body["labels"].extend(label.strip() for label in value.split(",") if label.strip())
        elif key in FORM_FIELDS:
            body[key] = value
        else:
            raise InvalidInput(
                f"form field {key!r}: files are file parts named by their path; the other fields "
                "are name, commit_message and labels",
                field=key,
            )
    return body


def _if_match(value: str | None) -> int | None:
    if value is None:
        return None
    number = ascii_number(value.strip().strip('"'))
    if number is None:
        raise InvalidInput(f"If-Match must be a version number, not {value!r}", field="If-Match")
    return number


def _written(response: Response, result: SkillWrite) -> SkillWrite:
    response.status_code = 201 if result.created else 200
    response.headers["ETag"] = f'"{result.version}"'
    return result


@router.get("/skills", response_model=list[SkillOut], summary="List skills by name")
async def list_skills(tenant: str, request: Request) -> list[SkillOut]:
    async with tenant_scope(request, tenant, "reader", read_only=True) as scope:
        return await skills.list_skills(scope.session, scope.tenant)


@router.post(
    "/skills",
    status_code=201,
    response_model=SkillWrite,
    summary="Create a skill",
    openapi_extra=_BODY,
)
async def create_skill(
    tenant: str, request: Request, response: Response, dry_run: bool = False
) -> SkillWrite:
    body = await _body(request, SkillCreate)
    scoped = tenant_scope(request, tenant, "editor", rollback=dry_run)
    async with bulk_slot(request), scoped as scope:
        result = await skills.create_skill(
            scope.session, scope.tenant, scope.principal, body, expand=expand_skill_md
        )
    response.headers["Location"] = f"/api/v1/tenants/{tenant}/skills/{quote(body.name)}"
    return _written(response, result)


@router.get("/skills/{name}", response_model=SkillOut, summary="A skill with its labels")
async def get_skill(tenant: str, name: Name, request: Request) -> SkillOut:
    async with tenant_scope(request, tenant, "reader", read_only=True) as scope:
        return await skills.get_skill(scope.session, scope.tenant, name)


@router.patch("/skills/{name}", response_model=SkillOut, summary="Update a skill's test cases")
async def patch_skill(tenant: str, name: Name, body: SkillPatch, request: Request) -> SkillOut:
    async with tenant_scope(request, tenant, "editor") as scope:
        skill = await skills.find_skill(scope.session, scope.tenant, name, lock=True)
        await skill_tests.set_tests(scope.session, scope.principal, skill, body.tests)
        return await skills.skill_out(scope.session, skill)


@router.post(
    "/skills/{name}/test",
    response_model=TestRun,
    summary="Run a skill's test cases on a version's SKILL.md (or on what a label serves)",
)
async def test_skill(tenant: str, name: Name, body: TestRequest, request: Request) -> TestRun:
    async with tenant_scope(request, tenant, "reader", read_only=True) as scope:
        skill = await skills.find_skill(scope.session, scope.tenant, name)
        return await skill_tests.test_skill(scope.session, skill, body)


@router.delete("/skills/{name}", status_code=204, summary="Delete a skill and its versions")
async def delete_skill(tenant: str, name: Name, request: Request) -> Response:
    async with tenant_scope(request, tenant, "admin") as scope:
        await skills.delete_skill(scope.session, scope.tenant, scope.principal, name)
    return Response(status_code=204)


@router.post("/skills/{name}/archive", response_model=SkillOut, summary="Archive or bring back")
async def archive_skill(tenant: str, name: Name, body: ArchiveIn, request: Request) -> SkillOut:
    async with tenant_scope(request, tenant, "editor") as scope:
        return await skills.set_archived(
            scope.session, scope.tenant, scope.principal, name, body.archived
        )


@router.post(
    "/skills/{name}/versions",
    status_code=201,
    response_model=SkillWrite,
    summary="Write a new version of a skill's folder",
    openapi_extra=_BODY,
)
async def create_version(
    tenant: str,
    name: Name,
    request: Request,
    response: Response,
    if_match: IfMatch = None,
    dry_run: bool = False,
) -> SkillWrite:
    body = await _body(request, SkillVersionIn)
    scoped = tenant_scope(request, tenant, "editor", rollback=dry_run)
    async with bulk_slot(request), scoped as scope:
        result = await skills.create_version(
            scope.session,
            scope.tenant,
            scope.principal,
            name,
            body,
            if_match=_if_match(if_match),
            expand=expand_skill_md,
        )
    return _written(response, result)


@router.get(
    "/skills/{name}/versions",
    response_model=list[SkillVersionOut],
    summary="Versions, newest first",
)
async def list_versions(tenant: str, name: Name, request: Request) -> list[SkillVersionOut]:
    async with tenant_scope(request, tenant, "reader", read_only=True) as scope:
        return await skills.list_versions(scope.session, scope.tenant, name)


@router.get(
    "/skills/{name}/versions/{version}", response_model=SkillVersionOut, summary="A version"
)
async def get_version(
    tenant: str, name: Name, version: Version, request: Request
) -> SkillVersionOut:
    async with tenant_scope(request, tenant, "reader", read_only=True) as scope:
        found = await skills.get_version(scope.session, scope.tenant, name, version)
        slug = scope.tenant.slug
    files = ((f.path, f.sha256, f.size) for f in found.files)
    signed = provenance.signed(
        request.app.state.settings.snapshot_key_file, slug, name, version, files
    )
    return found.model_copy(update={"signature": ManifestSignature(**signed) if signed else None})


@router.get(
    "/skills/{name}/versions/{version}/files/{path:path}",
    response_class=Response,
    responses={200: {"content": {"application/octet-stream": {}}}},
    summary="Download one file of a version",
)
async def get_file(
    tenant: str,
    name: Name,
    version: Version,
    path: str,
    request: Request,
    as_written: Annotated[
        bool, Query(description="SKILL.md as it was written (partial tags kept), not as served")
    ] = False,
) -> Response:
    async with tenant_scope(request, tenant, "reader", read_only=True) as scope:
        mime, data = await skills.file_of_version(
            scope.session, scope.tenant, name, version, path, as_written=as_written
        )
    # Never run or sniffed on the registry's own origin: always a download.
    headers = {
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "default-src 'none'; sandbox",
        "Content-Disposition": "attachment",
    }
    return Response(data, media_type=mime, headers=headers)


@router.get("/skills/{name}/diff", response_model=SkillDiff, summary="Two versions, file by file")
async def diff_versions(
    tenant: str,
    name: Name,
    request: Request,
    before: Annotated[int, Query(alias="from", ge=1, le=MAX_VERSION)],
    after: Annotated[int, Query(alias="to", ge=1, le=MAX_VERSION)],
) -> SkillDiff:
    async with tenant_scope(request, tenant, "reader", read_only=True) as scope:
        return await skills.diff(scope.session, scope.tenant, name, before, after)


@router.put(
    "/skills/{name}/labels/{label}",
    response_model=SkillLabelOut,
    summary="Point a label at a version",
)
async def set_label(
    tenant: str,
    name: Name,
    label: Annotated[str, Path(pattern=LABEL_PATTERN)],
    body: SkillLabelIn,
    request: Request,
) -> SkillLabelOut:
    async with tenant_scope(request, tenant, "editor") as scope:
        return await skills.set_label(
            scope.session,
            scope.tenant,
            scope.principal,
            name,
            label,
            body.version,
            Terms(reason=body.reason),
        )


@router.delete("/skills/{name}/labels/{label}", status_code=204, summary="Remove a label")
async def delete_label(
    tenant: str,
    name: Name,
    label: Annotated[str, Path(pattern=LABEL_PATTERN)],
    request: Request,
    reason: Annotated[str | None, Query(min_length=1, max_length=2000)] = None,
) -> Response:
    async with tenant_scope(request, tenant, "editor") as scope:
        await skills.delete_label(
            scope.session, scope.tenant, scope.principal, name, label, Terms(reason=reason)
        )
    return Response(status_code=204)
