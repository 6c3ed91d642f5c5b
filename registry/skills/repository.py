"""SQL for skills, their versions, files and labels. Only this module builds their queries (blobs are
the database layer's, ``registry.db.blobs``). Every query runs in a tenant-scoped transaction: row-level
security limits it to one tenant; the explicit tenant filters are for the planner."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, func, select, tuple_, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.models import Blob
from registry.db.skill_models import Skill, SkillFile, SkillLabel, SkillVersion

LIST_MAX = 1000  # skills in one REST listing


async def skill_by_name(
    session: AsyncSession, tenant_id: uuid.UUID, name: str, *, lock: bool = False
) -> Skill | None:
    query = select(Skill).where(Skill.tenant_id == tenant_id, Skill.name == name)
    if lock:
        query = query.with_for_update()
    return (await session.execute(query)).scalar_one_or_none()


async def insert_skill(session: AsyncSession, tenant_id: uuid.UUID, name: str) -> Skill | None:
    """A new skill row, locked; None when the name is taken."""
    result = await session.execute(
        pg_insert(Skill)
        .values(tenant_id=tenant_id, name=name)
        .on_conflict_do_nothing(index_elements=[Skill.tenant_id, Skill.name])
        .returning(Skill.id)
    )
    if result.scalar_one_or_none() is None:
        return None
    return await skill_by_name(session, tenant_id, name, lock=True)


async def list_skills(session: AsyncSession, tenant_id: uuid.UUID) -> Sequence[Skill]:
    result = await session.execute(
        select(Skill).where(Skill.tenant_id == tenant_id).order_by(Skill.name).limit(LIST_MAX)
    )
    return result.scalars().all()


async def insert_version(
    session: AsyncSession, skill: Skill, row: dict[str, Any], files: list[dict[str, Any]]
) -> int:
    """The next version of ``skill`` (locked) with its files; returns its number."""
    number = skill.latest_version + 1
    session.add(SkillVersion(tenant_id=skill.tenant_id, skill_id=skill.id, version=number, **row))
    await session.flush()
    if files:
        await session.execute(
            pg_insert(SkillFile).values(
                [
                    {"tenant_id": skill.tenant_id, "skill_id": skill.id, "version": number, **f}
                    for f in files
                ]
            )
        )
    skill.latest_version = number
    skill.updated_at = func.now()
    await session.flush()
    await session.refresh(skill, ["updated_at"])
    return number


async def version_row(session: AsyncSession, skill: Skill, version: int) -> SkillVersion | None:
    result = await session.execute(
        select(SkillVersion).where(
            SkillVersion.tenant_id == skill.tenant_id,
            SkillVersion.skill_id == skill.id,
            SkillVersion.version == version,
        )
    )
    return result.scalar_one_or_none()


async def version_rows(session: AsyncSession, skill: Skill) -> Sequence[SkillVersion]:
    result = await session.execute(
        select(SkillVersion)
        .where(SkillVersion.tenant_id == skill.tenant_id, SkillVersion.skill_id == skill.id)
        .order_by(SkillVersion.version.desc())
    )
    return result.scalars().all()


async def files_of(
    session: AsyncSession, tenant_id: uuid.UUID, versions: Sequence[tuple[uuid.UUID, int]]
) -> dict[tuple[uuid.UUID, int], list[SkillFile]]:
    """The files of each (skill id, version), in path order."""
    found: dict[tuple[uuid.UUID, int], list[SkillFile]] = {key: [] for key in versions}
    if not versions:
        return found
    result = await session.execute(
        select(SkillFile)
        .where(
            SkillFile.tenant_id == tenant_id,
            tuple_(SkillFile.skill_id, SkillFile.version).in_(list(versions)),
        )
        .order_by(SkillFile.skill_id, SkillFile.version, SkillFile.path)
    )
    for row in result.scalars().all():
        found[(row.skill_id, row.version)].append(row)
    return found


async def file_bytes(
    session: AsyncSession, tenant_id: uuid.UUID, skill_id: uuid.UUID, version: int, path: str
) -> tuple[str, bytes] | None:
    """A file's type and bytes; None when the version has no such file."""
    result = await session.execute(
        select(SkillFile.mime_type, Blob.data)
        .join(Blob, (Blob.tenant_id == SkillFile.tenant_id) & (Blob.sha256 == SkillFile.sha256))
        .where(
            SkillFile.tenant_id == tenant_id,
            SkillFile.skill_id == skill_id,
            SkillFile.version == version,
            SkillFile.path == path,
        )
    )
    row = result.one_or_none()
    return None if row is None else (row[0], row[1])


# --- labels -----------------------------------------------------------------------------------


async def labels_of(
    session: AsyncSession, tenant_id: uuid.UUID, skill_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, dict[str, int]]:
    found: dict[uuid.UUID, dict[str, int]] = {skill_id: {} for skill_id in skill_ids}
    if not skill_ids:
        return found
    result = await session.execute(
        select(SkillLabel.skill_id, SkillLabel.label, SkillLabel.version)
        .where(SkillLabel.tenant_id == tenant_id, SkillLabel.skill_id.in_(list(skill_ids)))
        .order_by(SkillLabel.label)
    )
    for skill_id, label, version in result.all():
        found[skill_id][label] = version
    return found


async def label_row(
    session: AsyncSession, skill: Skill, label: str, *, lock: bool = False
) -> SkillLabel | None:
    query = select(SkillLabel).where(
        SkillLabel.tenant_id == skill.tenant_id,
        SkillLabel.skill_id == skill.id,
        SkillLabel.label == label,
    )
    if lock:
        query = query.with_for_update()
    return (await session.execute(query)).scalar_one_or_none()


async def move_label(
    session: AsyncSession, skill: Skill, label: str, version: int, actor: str
) -> SkillLabel:
    result = await session.execute(
        pg_insert(SkillLabel)
        .values(
            tenant_id=skill.tenant_id,
            skill_id=skill.id,
            label=label,
            skill_name=skill.name,
            version=version,
            updated_by=actor,
        )
        .on_conflict_do_update(
            index_elements=[SkillLabel.tenant_id, SkillLabel.skill_id, SkillLabel.label],
            set_={"version": version, "updated_by": actor, "updated_at": func.now()},
        )
        .returning(SkillLabel)
    )
    return result.scalar_one()


async def delete_label(session: AsyncSession, skill: Skill, label: str) -> None:
    await session.execute(
        delete(SkillLabel).where(
            SkillLabel.tenant_id == skill.tenant_id,
            SkillLabel.skill_id == skill.id,
            SkillLabel.label == label,
        )
    )


async def set_tests(session: AsyncSession, skill: Skill, tests: list[dict[str, Any]]) -> None:
    """Stored, and ``skill`` kept current: no attribute left expired for a lazy load to fetch
    outside the session's greenlet (a 500 once)."""
    changed = await session.execute(
        update(Skill)
        .where(Skill.tenant_id == skill.tenant_id, Skill.id == skill.id)
        .values(tests=tests, updated_at=func.now())
        .returning(Skill.updated_at)
        .execution_options(synchronize_session=False)
    )
    skill.tests, skill.updated_at = tests, changed.scalar_one()


async def set_archived(session: AsyncSession, skill: Skill, archived: bool) -> None:
    await session.execute(
        update(Skill)
        .where(Skill.tenant_id == skill.tenant_id, Skill.id == skill.id)
        .values(archived_at=func.now() if archived else None, updated_at=func.now())
    )


async def delete_skill(session: AsyncSession, skill: Skill) -> None:
    await session.execute(
        delete(Skill).where(Skill.tenant_id == skill.tenant_id, Skill.id == skill.id)
    )


# --- what a label serves ----------------------------------------------------------------------


async def served(
    session: AsyncSession,
    tenant_id: uuid.UUID,
    label: str,
    *,
    after: str | None = None,
    name: str | None = None,
    limit: int,
) -> list[tuple[Skill, SkillVersion]]:
    """The skills ``label`` serves (not archived), in name order, after ``after`` (or the one
    named ``name``), with the version the label points at."""
    query = (
        select(Skill, SkillVersion)
        .join(
            SkillLabel,
            (SkillLabel.tenant_id == Skill.tenant_id) & (SkillLabel.skill_id == Skill.id),
        )
        .join(
            SkillVersion,
            (SkillVersion.tenant_id == SkillLabel.tenant_id)
            & (SkillVersion.skill_id == SkillLabel.skill_id)
            & (SkillVersion.version == SkillLabel.version),
        )
        .where(
            SkillLabel.tenant_id == tenant_id,
            SkillLabel.label == label,
            Skill.archived_at.is_(None),
        )
        .order_by(SkillLabel.skill_name)
        .limit(limit)
    )
    if after is not None:
        query = query.where(SkillLabel.skill_name > after)
    if name is not None:
        query = query.where(SkillLabel.skill_name == name)
    result = await session.execute(query)
    return [(skill, version) for skill, version in result.all()]


async def label_moves(
    session: AsyncSession, tenant_id: uuid.UUID, skill_id: uuid.UUID
) -> Sequence[SkillLabel]:
    """The skill's labels with when each was last moved, by label."""
    result = await session.execute(
        select(SkillLabel)
        .where(SkillLabel.tenant_id == tenant_id, SkillLabel.skill_id == skill_id)
        .order_by(SkillLabel.label)
    )
    return result.scalars().all()
