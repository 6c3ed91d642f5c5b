"""A folder of prompt files as one plan: each prompt created, or given a new version (and its tags),
in the order given (the CLI puts included prompts before the prompts that include them), each in a
savepoint of one transaction. A dry run (the transaction rolled back) so sees what the folder's own
earlier files would have written, which is exactly what a push of the files one by one does: a new
child is there when its parent's partial tag is resolved, a child's new version is what the parent
locks. A prompt that fails is rolled back to its savepoint and reported; the others go on."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.models import Tenant
from registry.errors import RegistryError
from registry.principal import Principal
from registry.prompts import lifecycle, writing
from registry.prompts import repository as repo
from registry.prompts.schemas import PromptCreate, PushOutcome, VersionIn


async def plan(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    prompts: list[PromptCreate],
    *,
    max_blob_bytes: int,
    force: bool,
) -> list[PushOutcome]:
    outcomes = []
    for body in prompts:
        try:
            async with session.begin_nested():
                outcomes.append(
                    await _one(
                        session, tenant, caller, body, max_blob_bytes=max_blob_bytes, force=force
                    )
                )
        except RegistryError as error:
            outcomes.append(
                PushOutcome(
                    name=body.name, action="error", detail=error.message, status=error.http_status
                )
            )
    return outcomes


async def _one(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    body: PromptCreate,
    *,
    max_blob_bytes: int,
    force: bool,
) -> PushOutcome:
    if await repo.prompt_by_name(session, tenant.id, body.name) is None:
        created = await writing.create_prompt(
            session, tenant, caller, body, max_blob_bytes=max_blob_bytes, dry_run=True
        )
        return PushOutcome(name=body.name, action="create", version=created.version)
    version = VersionIn.model_validate(
        body.model_dump(exclude={"name", "tags", "as_tool", "tests"}, exclude_unset=True)
    )
    written = await writing.create_version(
        session,
        tenant,
        caller,
        body.name,
        version,
        if_match=None,
        max_blob_bytes=max_blob_bytes,
        dry_run=True,
        force=force,
    )
    given = body.model_fields_set
    if given & {"tags", "as_tool", "tests"}:
        await lifecycle.patch_prompt(
            session,
            tenant,
            caller,
            body.name,
            tags=body.tags if "tags" in given else None,
            as_tool=body.as_tool if "as_tool" in given else None,
            tests=body.tests if "tests" in given else None,
        )
    moved = "labels" if written.labels_moved else "unchanged"
    return PushOutcome(
        name=body.name,
        action="version" if written.created else moved,
        version=written.version,
        labels_moved=written.labels_moved,
    )
