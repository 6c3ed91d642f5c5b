"""Bundles: a tenant's prompts and skills (versions, labels, the blobs they use) as one JSON
document, exported as a stream and imported back (idempotent). Each domain writes its own section
(registry.prompts.bundles, registry.skills.bundles); this door puts them in one document."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import Field

from registry.api.auth import require_credential, tenant_scope
from registry.api.bulk import bulk_slot
from registry.api.skills import expand_skill_md
from registry.config import Settings
from registry.db.engine import Database
from registry.errors import PayloadTooLarge
from registry.prompts import bundles
from registry.prompts.schemas import Bundle, ImportResult
from registry.skills import bundles as skill_bundles
from registry.skills.schemas import BundleSkill, SkillImportResult

router = APIRouter(
    prefix="/api/v1/tenants/{tenant}", tags=["prompts"], dependencies=[Depends(require_credential)]
)
Force = Annotated[
    bool,
    Query(
        description="move protected labels even onto a version whose argument contract breaks "
        "what callers send (the audit log records it)"
    ),
]


class TenantBundle(Bundle):
    """A bundle with the tenant's skills beside its prompts."""

    skills: list[BundleSkill] = Field(default_factory=list)


class TenantImportResult(ImportResult, SkillImportResult):
    """What an import wrote, prompts and skills."""


@router.get(
    "/export",
    response_class=StreamingResponse,
    responses={200: {"model": TenantBundle, "description": "the bundle (streamed)"}},
    summary="Export as a bundle (prompts and skills)",
)
async def export_bundle(
    tenant: str, request: Request, versions: Literal["all", "labelled"] = "all"
) -> StreamingResponse:
    async with tenant_scope(request, tenant, "reader", read_only=True) as scope:
        found = scope.tenant
    db: Database = request.app.state.db
    labelled = versions == "labelled"

    async def body() -> AsyncIterator[bytes]:  # its own transaction: it outlives the route
        async with db.tenant_read_tx(found.id) as session:

            def skills(shas: set[bytes]) -> AsyncIterator[bytes]:
                return skill_bundles.export_section(
                    session, found, only_labelled=labelled, shas=shas
                )

            async for chunk in bundles.export_stream(
                session, found, only_labelled=labelled, more=skills
            ):
                yield chunk

    return StreamingResponse(body(), media_type="application/json")


def _time_budget(seconds: float) -> Callable[[], None]:
    """What one import may spend (REGISTRY_IMPORT_MAX_SECONDS): past it, a 413 that says so, and
    the import's transaction writes nothing."""
    deadline = time.monotonic() + seconds
    units = 0

    def spend() -> None:
        nonlocal units
        units += 1
        if time.monotonic() > deadline:
            raise PayloadTooLarge(
                f"the import did not finish within {seconds:g} s (REGISTRY_IMPORT_MAX_SECONDS; "
                f"{units - 1:,} blobs, prompts and versions done): nothing was written; import "
                "the bundle in parts"
            )

    return spend


@router.post("/import", response_model=TenantImportResult, summary="Import a bundle (idempotent)")
async def import_bundle(
    tenant: str, body: TenantBundle, request: Request, dry_run: bool = False, force: Force = False
) -> TenantImportResult:
    settings: Settings = request.app.state.settings
    spend = _time_budget(settings.import_max_seconds)
    async with (
        bulk_slot(request),
        tenant_scope(request, tenant, "editor", rollback=dry_run) as scope,
    ):
        prompts = await bundles.import_bundle(
            scope.session,
            scope.tenant,
            scope.principal,
            body,
            max_blob_bytes=settings.max_blob_bytes,
            force=force,
            spend=spend,
        )
        skills = await skill_bundles.import_skills(
            scope.session,
            scope.tenant,
            scope.principal,
            body.skills,
            {sha: blob.data for sha, blob in body.blobs.items()},
            expand=expand_skill_md,
            spend=spend,
        )
    return TenantImportResult(**prompts.model_dump(), **skills.model_dump())
