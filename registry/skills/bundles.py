"""Skills in a bundle (the tenant's export and import): each skill with its versions (SKILL.md as
written, every file by its digest, the bytes in the bundle's blobs) and labels. The prompts domain
writes the rest of the bundle; the door puts the two together, so neither imports the other."""

from __future__ import annotations

import base64
import binascii
from collections.abc import AsyncIterator, Callable, Mapping

from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.models import Tenant
from registry.errors import InvalidInput
from registry.naming import LATEST
from registry.principal import Principal
from registry.skills import repository as repo
from registry.skills import service
from registry.skills.folder import SKILL_MD
from registry.skills.schemas import (
    BundleSkill,
    BundleSkillFile,
    BundleSkillVersion,
    SkillFileIn,
    SkillImportResult,
    SkillVersionIn,
)


async def exported(
    session: AsyncSession, tenant: Tenant, *, only_labelled: bool, shas: set[bytes]
) -> AsyncIterator[BundleSkill]:
    """The tenant's skills one at a time, by name; the blobs their files use go into ``shas``."""
    skills = await repo.list_skills(session, tenant.id)
    labels = await repo.labels_of(session, tenant.id, [s.id for s in skills])
    for skill in skills:
        wanted = sorted(set(labels[skill.id].values())) if only_labelled else None
        rows = [
            r
            for r in await repo.version_rows(session, skill)
            if wanted is None or r.version in wanted
        ]
        files = await repo.files_of(session, tenant.id, [(skill.id, r.version) for r in rows])
        versions = []
        for row in sorted(rows, key=lambda r: r.version):
            listed = files[(skill.id, row.version)]
            shas.update(f.sha256 for f in listed)
            versions.append(
                BundleSkillVersion(
                    version=row.version,
                    commit_message=row.commit_message,
                    source=row.source,
                    files=[
                        BundleSkillFile(path=f.path, sha256=f.sha256.hex(), mime_type=f.mime_type)
                        for f in listed
                    ],
                )
            )
        if versions:
            yield BundleSkill(
                name=skill.name,
                archived=skill.archived_at is not None,
                versions=versions,
                labels={k: v for k, v in labels[skill.id].items() if k != LATEST},
            )


async def export_section(
    session: AsyncSession, tenant: Tenant, *, only_labelled: bool, shas: set[bytes]
) -> AsyncIterator[bytes]:
    """``,"skills":[...]`` of the bundle's JSON, one skill at a time."""
    yield b',"skills":['
    first = True
    async for skill in exported(session, tenant, only_labelled=only_labelled, shas=shas):
        yield (b"" if first else b",") + skill.model_dump_json().encode()
        first = False
    yield b"]"


async def import_skills(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    skills: list[BundleSkill],
    blobs: Mapping[str, str],
    *,
    expand: service.Expand,
    spend: Callable[[], None] = lambda: None,
) -> SkillImportResult:
    """Write each skill's versions in order (a version the skill has already writes nothing), then
    its labels and archive state. ``blobs``: sha256 -> base64, the bundle's blobs; ``spend``, the
    caller's bound, is called before each version."""
    result = SkillImportResult()
    for index, item in enumerate(skills):
        skill = await repo.skill_by_name(session, tenant.id, item.name, lock=True)
        if skill is None:
            skill = await repo.insert_skill(session, tenant.id, item.name)
            assert skill is not None  # the name was free under the lock a moment ago
            result.skills_created += 1
        mapping: dict[int, int] = {}
        for version in sorted(item.versions, key=lambda v: v.version):
            spend()
            body = SkillVersionIn(
                files=[_file(index, f, version.source, blobs) for f in version.files],
                commit_message=version.commit_message,
            )
            written = await service.write_version(
                session, tenant, caller, skill, body, if_match=None, expand=expand
            )
            mapping[version.version] = written.version
            result.skill_versions_created += written.created
        for label, number in sorted(item.labels.items()):
            if number not in mapping:
                raise InvalidInput(
                    f"skills[{index}] ({item.name}): label {label!r} points at version {number}, "
                    "which is not in the bundle",
                    field="skills",
                )
            current = await repo.label_row(session, skill, label)
            if current is None or current.version != mapping[number]:
                await service.set_label(session, tenant, caller, item.name, label, mapping[number])
                result.skill_labels_moved += 1
        if item.archived != (skill.archived_at is not None):
            await service.set_archived(session, tenant, caller, item.name, item.archived)
    return result


def _file(index: int, file: BundleSkillFile, source: str, blobs: Mapping[str, str]) -> SkillFileIn:
    if file.path == SKILL_MD:  # as written: its partial tags resolve in this tenant
        return SkillFileIn(path=file.path, text=source)
    encoded = blobs.get(file.sha256)
    if encoded is None:
        raise InvalidInput(
            f"skills[{index}]: file {file.path!r} names blob {file.sha256}, which the bundle lacks",
            field="skills",
        )
    try:
        base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(
            f"blobs[{file.sha256}].data is not valid base64", field="blobs"
        ) from None
    return SkillFileIn(path=file.path, base64=encoded, mime_type=file.mime_type)
