"""A skill as served at one version rather than at what a label points to: what a live rollout's
new side gets (``registry.rollouts``), in the shape ``service.served_skills`` gives."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.models import Tenant
from registry.skills import folder
from registry.skills import repository as repo
from registry.skills.service import ServedFile, ServedSkill


async def served_at(
    session: AsyncSession, tenant: Tenant, name: str, version: int
) -> ServedSkill | None:
    """``name`` at ``version`` (None: no such skill, version, or the skill is archived)."""
    skill = await repo.skill_by_name(session, tenant.id, name)
    if skill is None or skill.archived_at is not None:
        return None
    row = await repo.version_row(session, skill, version)
    if row is None:
        return None
    files = await repo.files_of(session, tenant.id, [(skill.id, version)])
    return ServedSkill(
        name=skill.name,
        skill_id=skill.id,
        version=version,
        description=row.description,
        frontmatter=folder.served_front_matter(row.frontmatter, row.description),
        files=tuple(
            ServedFile(f.path, f.sha256.hex(), f.size, f.mime_type)
            for f in files[(skill.id, version)]
        ),
    )
