"""Skills: writing versions (the one write path, ``write_version``), labels, archive, reading, the
diff of two versions file by file, and what a label serves (for MCP).

Callers own the transaction (scoped to one tenant); these functions flush only. Every write records
an audit row and a change-log row (kinds ``skill.*``, the skill's id in the row's artifact column), in
the same transaction, so the change stream, webhooks, list_changed and clients see skill changes as
they see prompt changes. ``SKILL.md`` may include a prompt's text with a partial tag (``{{> name}}``):
the door hands in the prompts domain's resolver (``expand``), so the text is resolved and locked when
the version is written, and the served ``SKILL.md`` never changes afterwards.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from registry import textdiff
from registry.db import blobs
from registry.db.audit import record_audit, record_change
from registry.db.models import Tenant
from registry.db.skill_models import Skill, SkillFile, SkillVersion
from registry.errors import Conflict, InvalidInput, NotFound
from registry.labels import (
    DIRECT,
    Terms,
    approval_refusal,
    archive_refusal,
    archived_refusal,
    check_label_name,
    delete_refusal,
    role_refusal,
)
from registry.naming import LATEST
from registry.principal import Principal
from registry.skills import folder, skill_tests
from registry.skills import repository as repo
from registry.skills.schemas import (
    FileChange,
    PartialLockOut,
    SkillCreate,
    SkillDiff,
    SkillFileOut,
    SkillLabelOut,
    SkillOut,
    SkillVersionIn,
    SkillVersionOut,
    SkillWrite,
)
from registry.testcases import loaded

# The prompts domain's partial resolver, handed in by the door: SKILL.md's text with its partial
# tags resolved, and what each resolved to ({ref, prompt, version}).
Expand = Callable[[AsyncSession, Tenant, str], Awaitable[tuple[str, list[dict[str, Any]]]]]


@dataclass(frozen=True)
class ServedFile:
    path: str
    sha256: str
    size: int
    mime_type: str


@dataclass(frozen=True)
class ServedSkill:
    """A skill as a label serves it: the version, its front matter and its files."""

    name: str
    skill_id: Any
    version: int
    description: str
    frontmatter: dict[str, Any]
    files: tuple[ServedFile, ...]
    library: str | None = None  # the library that serves it (registry.libraries), else None


# --- writing ----------------------------------------------------------------------------------


async def create_skill(
    session: AsyncSession, tenant: Tenant, caller: Principal, body: SkillCreate, *, expand: Expand
) -> SkillWrite:
    folder.check_name(body.name)
    for label in body.labels:
        check_label_name(label)
        _check_role(tenant, caller, label)
    skill = await repo.insert_skill(session, tenant.id, body.name)
    if skill is None:
        raise Conflict(
            f"skill {body.name!r} already exists: write a new version of it", field="name"
        )
    await record_audit(
        session, tenant_id=tenant.id, actor=caller.actor, action="skill.create",
        target=f"skill:{body.name}",
    )  # fmt: skip
    if body.tests:
        await skill_tests.set_tests(session, caller, skill, body.tests)
    return await write_version(session, tenant, caller, skill, body, if_match=None, expand=expand)


async def create_version(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    name: str,
    body: SkillVersionIn,
    *,
    if_match: int | None,
    expand: Expand,
) -> SkillWrite:
    skill = await find_skill(session, tenant, name, lock=True)
    return await write_version(
        session, tenant, caller, skill, body, if_match=if_match, expand=expand
    )


async def write_version(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    skill: Skill,
    body: SkillVersionIn,
    *,
    if_match: int | None,
    expand: Expand,
) -> SkillWrite:
    """The one path every skill version takes: the folder checked, ``SKILL.md``'s partial tags
    resolved, the files stored once as blobs, the version (unless the latest has this content
    already), ``latest`` moved to it, then the requested labels. ``skill`` must be locked."""
    if if_match is not None and if_match != skill.latest_version:
        raise Conflict(
            f"skill {skill.name!r} is at version {skill.latest_version}, not {if_match}: reload it",
            field="If-Match",
        )
    for label in body.labels:
        check_label_name(label)
    files = folder.check_folder(f.as_file() for f in body.files)
    source_file = next(f for f in files if f.path == folder.SKILL_MD)
    try:
        source = source_file.data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"{folder.SKILL_MD} must be UTF-8 text", field="files") from None
    expanded, locks = await expand(session, tenant, source)
    frontmatter = folder.front_matter(expanded, skill.name)
    served = folder.File(folder.SKILL_MD, expanded.encode("utf-8"), "text/markdown")
    files = folder.check_folder([served, *(f for f in files if f.path != folder.SKILL_MD)])
    manifest = folder.manifest((f.path, f.sha256, len(f.data)) for f in files)
    digest = folder.manifest_sha256({"files": manifest, "source": _sha(source), "locks": locks})
    latest = (
        await repo.version_row(session, skill, skill.latest_version)
        if skill.latest_version
        else None
    )
    created = latest is None or latest.manifest_sha256 != digest
    number = skill.latest_version
    if created:
        for f in files:
            await blobs.store_blob(
                session, skill.tenant_id, bytes.fromhex(f.sha256), f.mime_type, f.data
            )
        number = await repo.insert_version(
            session,
            skill,
            {
                "description": str(frontmatter["description"]),
                "frontmatter": frontmatter,
                "source": source,
                "locks": locks,
                "manifest_sha256": digest,
                "commit_message": body.commit_message,
                "author": caller.actor,
            },
            [
                {"path": f.path, "sha256": bytes.fromhex(f.sha256), "size": len(f.data),
                 "mime_type": f.mime_type}
                for f in files
            ],
        )  # fmt: skip
        await record_audit(
            session, tenant_id=skill.tenant_id, actor=caller.actor, action="skill.version.create",
            target=f"skill:{skill.name}@{number}",
            after={"version": number, "manifest_sha256": digest.hex(), "files": len(files),
                   "commit_message": body.commit_message},
        )  # fmt: skip
        await _move(session, skill, LATEST, number, caller)
    moved = [
        label
        for label in body.labels
        if await move_checked(session, tenant, skill, label, number, caller)
    ]
    said = (
        f"version {number} written" if created else f"unchanged: version {number} has this content"
    )
    return SkillWrite(
        created=created,
        version=number,
        labels_moved=moved,
        detail=said,
        tests=await skill_tests.run_tests(session, skill, number) if skill.tests else None,
        skill=await skill_out(session, skill),
    )


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _check_role(tenant: Tenant, caller: Principal, label: str) -> None:
    refused = role_refusal(tenant, caller, label)
    if refused is not None:
        raise refused


async def move_checked(
    session: AsyncSession,
    tenant: Tenant,
    skill: Skill,
    label: str,
    version: int,
    caller: Principal,
    terms: Terms = DIRECT,
) -> bool:
    """Move ``label`` to ``version`` if it is not there; the role a protected label needs, and the
    change request a label with approvals needs (registry.labels), are checked only for a move that
    happens. True when it moved. ``skill`` must be locked."""
    current = await repo.label_row(session, skill, label, lock=True)
    if current is not None and current.version == version:
        return False
    if terms.release is None:
        _check_role(tenant, caller, label)
    refused = approval_refusal(tenant, caller, label, terms)
    if refused is not None:
        raise refused
    await _move(
        session, skill, label, version, caller,
        before=current.version if current else None,
        terms=terms, break_glass=terms.break_glass(tenant, label),
    )  # fmt: skip
    return True


async def _move(
    session: AsyncSession,
    skill: Skill,
    label: str,
    version: int,
    caller: Principal,
    *,
    before: int | None = None,
    terms: Terms = DIRECT,
    break_glass: bool = False,
) -> None:
    await repo.move_label(session, skill, label, version, caller.actor)
    kind = "skill.label.break_glass" if break_glass else "skill.label.move"
    if terms.release is None:  # a change request writes one change-log row for all its moves
        record_change(
            session, tenant_id=skill.tenant_id, kind=kind, prompt_id=skill.id, label=label
        )
    if label != LATEST:
        after: dict[str, object] = {"version": version}
        if break_glass:
            after["reason"] = terms.reason
        if terms.release is not None:
            after["change_request"] = terms.release
        await record_audit(
            session, tenant_id=skill.tenant_id, actor=caller.actor,
            action="skill.label.break_glass" if break_glass else "skill.label.move",
            target=f"skill:{skill.name}@{label}",
            before={"version": before} if before else None, after=after,
        )  # fmt: skip


async def set_label(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    name: str,
    label: str,
    version: int,
    terms: Terms = DIRECT,
) -> SkillLabelOut:
    check_label_name(label)
    _check_role(tenant, caller, label)
    skill = await find_skill(session, tenant, name, lock=True)
    if not 1 <= version <= skill.latest_version:
        raise NotFound(f"skill {name!r} has no version {version}", field="version")
    archived = archived_refusal("skill", name, skill.archived_at is not None)
    if archived is not None:
        raise archived
    await move_checked(session, tenant, skill, label, version, caller, terms)
    row = await repo.label_row(session, skill, label)
    assert row is not None
    return SkillLabelOut.model_validate(row, from_attributes=True)


async def delete_label(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    name: str,
    label: str,
    terms: Terms = DIRECT,
) -> None:
    check_label_name(label)
    _check_role(tenant, caller, label)
    refused = approval_refusal(tenant, caller, label, terms)  # removing it is a move too
    if refused is not None:
        raise refused
    skill = await find_skill(session, tenant, name, lock=True)
    current = await repo.label_row(session, skill, label, lock=True)
    if current is None:
        raise NotFound(f"skill {name!r} has no label {label!r}", field="label")
    await repo.delete_label(session, skill, label)
    record_change(
        session,
        tenant_id=skill.tenant_id,
        kind="skill.label.delete",
        prompt_id=skill.id,
        label=label,
    )
    await record_audit(
        session, tenant_id=skill.tenant_id, actor=caller.actor, action="skill.label.delete",
        target=f"skill:{name}@{label}", before={"version": current.version},
    )  # fmt: skip


async def set_archived(
    session: AsyncSession, tenant: Tenant, caller: Principal, name: str, archived: bool
) -> SkillOut:
    """Archive (no label serves it any more) or bring back; a skill holding a protected label
    needs the publisher role for either."""
    skill = await find_skill(session, tenant, name, lock=True)
    labels = (await repo.labels_of(session, tenant.id, [skill.id]))[skill.id]
    for label in labels:
        _check_role(tenant, caller, label)
    refused = archive_refusal(tenant, caller, "skill", name, labels)
    if refused is not None:
        raise refused
    await repo.set_archived(session, skill, archived)
    record_change(session, tenant_id=tenant.id, kind="skill.archive", prompt_id=skill.id)
    await record_audit(
        session, tenant_id=tenant.id, actor=caller.actor,
        action="skill.archive" if archived else "skill.unarchive", target=f"skill:{name}",
    )  # fmt: skip
    await session.refresh(skill)
    return await skill_out(session, skill)


async def delete_skill(session: AsyncSession, tenant: Tenant, caller: Principal, name: str) -> None:
    skill = await find_skill(session, tenant, name, lock=True)
    refused = delete_refusal("skill", name, skill.archived_at is not None)
    if refused is not None:
        raise refused
    labels = (await repo.labels_of(session, tenant.id, [skill.id]))[skill.id]
    for label in labels:
        _check_role(tenant, caller, label)
    await repo.delete_skill(session, skill)
    record_change(session, tenant_id=tenant.id, kind="skill.delete", prompt_id=None)
    await record_audit(
        session, tenant_id=tenant.id, actor=caller.actor, action="skill.delete",
        target=f"skill:{name}", before={"labels": labels},
    )  # fmt: skip


async def plan(
    session: AsyncSession, tenant: Tenant, caller: Principal, body: SkillCreate, *, expand: Expand
) -> tuple[bool, SkillWrite]:
    """What pushing ``body`` would do: (whether it creates the skill, the write), in a savepoint
    of the caller's transaction, which the caller rolls back."""
    async with session.begin_nested():
        if await repo.skill_by_name(session, tenant.id, body.name) is None:
            return True, await create_skill(session, tenant, caller, body, expand=expand)
        version = SkillVersionIn.model_validate(body.model_dump(exclude={"name", "tests"}))
        if "tests" in body.model_fields_set:
            skill = await find_skill(session, tenant, body.name, lock=True)
            await skill_tests.set_tests(session, caller, skill, body.tests)
        return False, await create_version(
            session, tenant, caller, body.name, version, if_match=None, expand=expand
        )


# --- reading ----------------------------------------------------------------------------------


async def label_version(session: AsyncSession, skill: Skill, label: str) -> int | None:
    """The version ``label`` of ``skill`` serves (None: the skill has no such label)."""
    row = await repo.label_row(session, skill, label)
    return row.version if row is not None else None


async def find_skill(
    session: AsyncSession, tenant: Tenant, name: str, *, lock: bool = False
) -> Skill:
    skill = await repo.skill_by_name(session, tenant.id, name, lock=lock)
    if skill is None:
        raise NotFound(f"skill {name!r} not found", field="name")
    return skill


def version_out(row: SkillVersion, files: list[SkillFile]) -> SkillVersionOut:
    return SkillVersionOut(
        version=row.version,
        description=row.description,
        frontmatter=folder.served_front_matter(row.frontmatter, row.description),
        files=[
            SkillFileOut(path=f.path, sha256=f.sha256.hex(), size=f.size, mime_type=f.mime_type)
            for f in files
        ],
        partials=[PartialLockOut.model_validate(lock) for lock in row.locks],
        manifest_sha256=row.manifest_sha256.hex(),
        author=row.author,
        commit_message=row.commit_message,
        created_at=row.created_at,
    )


async def skill_out(session: AsyncSession, skill: Skill, *, latest: bool = True) -> SkillOut:
    labels = (await repo.labels_of(session, skill.tenant_id, [skill.id]))[skill.id]
    shown = None
    if latest and skill.latest_version:
        shown = await get_version_of(session, skill, skill.latest_version)
    return SkillOut(
        name=skill.name,
        latest_version=skill.latest_version,
        labels=labels,
        archived=skill.archived_at is not None,
        created_at=skill.created_at,
        updated_at=skill.updated_at,
        latest=shown,
        tests=loaded(skill.tests),
    )


async def get_skill(session: AsyncSession, tenant: Tenant, name: str) -> SkillOut:
    return await skill_out(session, await find_skill(session, tenant, name))


async def label_moves(session: AsyncSession, tenant: Tenant, name: str) -> list[SkillLabelOut]:
    """The skill's labels, each with its version and when and by whom it was last moved."""
    rows = await repo.label_moves(session, tenant.id, (await find_skill(session, tenant, name)).id)
    return [SkillLabelOut.model_validate(r, from_attributes=True) for r in rows]


async def list_skills(session: AsyncSession, tenant: Tenant) -> list[SkillOut]:
    skills = await repo.list_skills(session, tenant.id)
    labels = await repo.labels_of(session, tenant.id, [s.id for s in skills])
    return [
        SkillOut(
            name=s.name,
            latest_version=s.latest_version,
            labels=labels[s.id],
            archived=s.archived_at is not None,
            created_at=s.created_at,
            updated_at=s.updated_at,
        )
        for s in skills
    ]


async def get_version_of(session: AsyncSession, skill: Skill, version: int) -> SkillVersionOut:
    row = await repo.version_row(session, skill, version)
    if row is None:
        raise NotFound(f"skill {skill.name!r} has no version {version}", field="version")
    files = await repo.files_of(session, skill.tenant_id, [(skill.id, version)])
    return version_out(row, files[(skill.id, version)])


async def get_version(
    session: AsyncSession, tenant: Tenant, name: str, version: int
) -> SkillVersionOut:
    return await get_version_of(session, await find_skill(session, tenant, name), version)


async def list_versions(session: AsyncSession, tenant: Tenant, name: str) -> list[SkillVersionOut]:
    skill = await find_skill(session, tenant, name)
    rows = await repo.version_rows(session, skill)
    files = await repo.files_of(session, tenant.id, [(skill.id, r.version) for r in rows])
    return [version_out(r, files[(skill.id, r.version)]) for r in rows]


async def file_of_version(
    session: AsyncSession,
    tenant: Tenant,
    name: str,
    version: int,
    path: str,
    *,
    as_written: bool = False,
) -> tuple[str, bytes]:
    """A file's type and bytes; ``as_written``: SKILL.md with its partial tags, as it was written."""
    skill = await find_skill(session, tenant, name)
    if as_written and path == folder.SKILL_MD:
        row = await repo.version_row(session, skill, version)
        if row is None:
            raise NotFound(f"skill {name!r} has no version {version}", field="version")
        return "text/markdown", row.source.encode("utf-8")
    found = await repo.file_bytes(session, tenant.id, skill.id, version, path)
    if found is None:
        raise NotFound(f"skill {name!r} version {version} has no file {path!r}", field="path")
    return found


async def diff(
    session: AsyncSession, tenant: Tenant, name: str, before: int, after: int
) -> SkillDiff:
    """Two versions compared file by file; a changed text file with its unified diff."""
    skill = await find_skill(session, tenant, name)
    for number in (before, after):
        if not 1 <= number <= skill.latest_version:
            raise NotFound(f"skill {name!r} has no version {number}", field="version")
    files = await repo.files_of(session, tenant.id, [(skill.id, before), (skill.id, after)])
    old = {f.path: f for f in files[(skill.id, before)]}
    new = {f.path: f for f in files[(skill.id, after)]}
    changes = []
    budget = textdiff.Budget()  # lines one request compares, whatever the files
    for path in sorted(old.keys() | new.keys()):
        a, b = old.get(path), new.get(path)
        if a is None or b is None:
            change = "added" if a is None else "removed"
            changes.append(FileChange(path=path, change=change,
                                      before_sha256=a.sha256.hex() if a else None,
                                      after_sha256=b.sha256.hex() if b else None))  # fmt: skip
            continue
        if a.sha256 == b.sha256:
            changes.append(FileChange(path=path, change="unchanged", before_sha256=a.sha256.hex(),
                                      after_sha256=b.sha256.hex()))  # fmt: skip
            continue
        lines, note = await _text_diff(
            session, tenant, skill, path, (before, a), (after, b), budget
        )
        changes.append(FileChange(path=path, change="changed", before_sha256=a.sha256.hex(),
                                  after_sha256=b.sha256.hex(), diff=lines, note=note))  # fmt: skip
    return SkillDiff(name=name, from_version=before, to_version=after, files=changes)


async def _text_diff(
    session: AsyncSession,
    tenant: Tenant,
    skill: Skill,
    path: str,
    old: tuple[int, SkillFile],
    new: tuple[int, SkillFile],
    budget: textdiff.Budget,
) -> tuple[list[str] | None, str | None]:
    """A changed text file's bounded diff (textdiff), computed in a worker thread; (None, None)
    for a file that is not text."""
    texts = []
    for version, row in (old, new):
        found = await repo.file_bytes(session, tenant.id, skill.id, version, path)
        if found is None or not folder.is_text(row.mime_type, found[1]):
            return None, None
        texts.append(found[1].decode("utf-8").splitlines())
    return await asyncio.to_thread(
        textdiff.unified, texts[0], texts[1], f"{path}@{old[0]}", f"{path}@{new[0]}", budget
    )


# --- what a label serves ----------------------------------------------------------------------


async def served_skills(
    session: AsyncSession,
    tenant: Tenant,
    label: str,
    *,
    after: str | None = None,
    name: str | None = None,
    limit: int,
) -> list[ServedSkill]:
    rows = await repo.served(session, tenant.id, label, after=after, name=name, limit=limit)
    files = await repo.files_of(session, tenant.id, [(s.id, v.version) for s, v in rows])
    return [
        ServedSkill(
            name=skill.name,
            skill_id=skill.id,
            version=version.version,
            description=version.description,
            frontmatter=folder.served_front_matter(version.frontmatter, version.description),
            files=tuple(
                ServedFile(f.path, f.sha256.hex(), f.size, f.mime_type)
                for f in files[(skill.id, version.version)]
            ),
        )
        for skill, version in rows
    ]


async def served_file(
    session: AsyncSession, tenant: Tenant, skill: ServedSkill, path: str
) -> tuple[str, bytes] | None:
    return await repo.file_bytes(session, tenant.id, skill.skill_id, skill.version, path)
