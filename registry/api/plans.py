"""What pushing a folder would do, without writing it: its prompts, then its skills, planned in one
transaction that is rolled back (``registry push --dry-run``), so that each sees what the folder's
earlier ones would write (a skill's SKILL.md may include a prompt the same push creates)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import Field

from registry.api.auth import require_credential, settings_of, tenant_scope
from registry.api.bulk import bulk_slot
from registry.api.skills import expand_skill_md
from registry.errors import InvalidInput, RegistryError
from registry.prompts import pushing
from registry.prompts.schemas import PUSH_PLAN_MAX, PushOutcome, PushPlan
from registry.skills import service as skills
from registry.skills.schemas import SkillCreate
from registry.tenants.access import TenantScope

router = APIRouter(
    prefix="/api/v1/tenants/{tenant}", tags=["prompts"], dependencies=[Depends(require_credential)]
)
Force = Annotated[
    bool,
    Query(description="plan protected label moves that break the argument contract as forced"),
]


class FolderPlan(PushPlan):
    """A folder as a push writes it: its prompts, then its skills (which may include them)."""

    skills: list[SkillCreate] = Field(default_factory=list, max_length=PUSH_PLAN_MAX)


@router.post(
    "/push-plan",
    response_model=list[PushOutcome],
    summary="What pushing these prompts, then these skills, would do (nothing is written)",
)
async def push_plan(
    tenant: str, body: FolderPlan, request: Request, force: Force = False
) -> list[PushOutcome]:
    if not body.prompts and not body.skills:
        raise InvalidInput("a plan needs prompts or skills", field="prompts")
    async with bulk_slot(request), tenant_scope(request, tenant, "editor", rollback=True) as scope:
        outcomes = await pushing.plan(
            scope.session,
            scope.tenant,
            scope.principal,
            body.prompts,
            max_blob_bytes=settings_of(request).max_blob_bytes,
            force=force,
        )
        for skill in body.skills:
            outcomes.append(await _skill_plan(scope, skill))
    return outcomes


async def _skill_plan(scope: TenantScope, body: SkillCreate) -> PushOutcome:
    try:
        created, written = await skills.plan(
            scope.session, scope.tenant, scope.principal, body, expand=expand_skill_md
        )
    except RegistryError as error:
        return PushOutcome(
            name=body.name,
            kind="skill",
            action="error",
            detail=error.message,
            status=error.http_status,
        )
    action: Literal["create", "version", "labels", "unchanged"] = (
        "create"
        if created
        else "version"
        if written.created
        else "labels"
        if written.labels_moved
        else "unchanged"
    )
    return PushOutcome(
        name=body.name,
        kind="skill",
        action=action,
        version=written.version,
        labels_moved=written.labels_moved,
    )
