"""Writing prompts: new prompts and versions, and labels (archive, settings and deletion are
registry.prompts.lifecycle).

Callers own the transaction (scoped to one tenant); these functions flush only. Every write records
an audit row, and every write that changes what the tenant serves appends to the change log, in the
same transaction.

Longer than 500 lines because it is the one write path: every door and workflow that writes a prompt
goes through these functions, and splitting them would put the audit and change-log rules of one
write in two places.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from registry import testcases
from registry.db.audit import (
    AuditRow,
    ChangeRow,
    appended,
    record_audit,
    record_change,
    with_pending,
)
from registry.db.models import Prompt, Tenant
from registry.errors import Conflict, NotFound, PreconditionFailed
from registry.labels import DIRECT, Terms, approval_refusal, archived_refusal
from registry.labels import check_label_name as check_label_name
from registry.naming import LATEST
from registry.principal import Principal
from registry.prompts import as_tools, contracts, policy, prompt_tests
from registry.prompts import label_repository as label_repo
from registry.prompts import repository as repo
from registry.prompts import version_repository as versions
from registry.prompts.preparing import PreparedVersion, prepare_version
from registry.prompts.reading import (
    find_prompt,
    get_version,
    prompt_out,
    version_out,
    versions_out,
)
from registry.prompts.schemas import (
    ContractChange,
    DeclaredArgument,
    LabelOut,
    PartialLock,
    PromptCreate,
    VersionIn,
    VersionOut,
    WriteResult,
)


def _check_label_permission(tenant: Tenant, caller: Principal, label: str) -> None:
    refused = policy.role_refusal(tenant, caller, label)
    if refused is not None:
        raise refused


async def move_label(
    session: AsyncSession,
    tenant: Tenant,
    prompt: Prompt,
    label: str,
    version: int,
    caller: Principal,
    *,
    force: bool = False,
    terms: Terms = DIRECT,
    held: dict[str, int] | None = None,
    declared: Mapping[int, Sequence[DeclaredArgument]] | None = None,
) -> label_repo.MovedLabel | None:
    """Point ``label`` at ``version``; history, change log and audit included. Returns the label as
    it moved, None when it was already there. ``prompt`` must be locked FOR UPDATE; ``held``, every
    label of it as a statement of this transaction gave them since the lock (else the label is read);
    ``declared``, the arguments of versions that the transaction has already read (by version).

    A protected label needs the publisher role only when it actually moves, and moves onto a version
    whose argument contract breaks the one it serves now only with ``force`` (recorded); a label
    that needs approvals moves on the ``terms`` the policy accepts (a change request applied, whose
    one change-log row the request writes, or break-glass, sent as its own kind of change). The
    label ``latest`` follows every new version with none of these checks, in the statement that
    writes the version (``versions.insert_version``)."""
    ruling, before = policy.Ruling("move"), None
    if label != LATEST:
        if held is None:
            before = await label_repo.label_version(session, prompt, label, lock=True)
        else:  # the prompt's lock, which every label write takes first, holds them as they were
            before = held.get(label)
        changes = []
        checked = before != version and policy.role_refusal(tenant, caller, label) is None
        if checked and before is not None and policy.needs_contract_check(tenant, label, before):
            changes = await contract_changes(session, prompt, before, version, declared)
        ruling = policy.rule(
            tenant,
            caller,
            prompt.name,
            label,
            before=before,
            after=version,
            breaking=changes,
            force=force,
            terms=terms,
        ).enforce()
        if ruling.outcome == "unchanged":
            return None
    # Its rows go with the move's statement, after those the transaction queued (``latest`` leaves
    # a change row only, which needs no version before).
    audit, logged = with_pending(
        session, *_move_rows(prompt, label, version, before, caller, ruling, terms)
    )
    moved = await label_repo.move_label(
        session, prompt, label, version, caller.actor, audit=audit, changes=logged
    )
    if moved is not None:
        appended(session, logged)
    return moved


def _move_rows(
    prompt: Prompt,
    label: str,
    version: int,
    before: int | None,
    caller: Principal,
    ruling: policy.Ruling,
    terms: Terms,
) -> tuple[list[AuditRow], list[ChangeRow]]:
    """What a label move leaves in the audit log and the change log, however it was written (by
    ``move_label``, or with the version that ``latest`` follows): the rows of each."""
    changes = []
    if terms.release is None:
        kind = "label.break_glass" if ruling.break_glass else "label.move"
        changes.append(
            ChangeRow(tenant_id=prompt.tenant_id, kind=kind, prompt_id=prompt.id, label=label)
        )
    audit = []
    if label != LATEST:  # latest moves with every version; the version.create row covers it
        audit.append(
            AuditRow(
                tenant_id=prompt.tenant_id,
                actor=caller.actor,
                action="label.break_glass" if ruling.break_glass else "label.move",
                target=f"prompt:{prompt.name}@{label}",
                before={"version": before} if before else None,
                after=_move_record(version, ruling, terms),
            )
        )
    return audit, changes


def _move_record(version: int, ruling: policy.Ruling, terms: Terms) -> dict[str, object]:
    """What the audit log keeps of a move: the version, a forced break, the reason of a
    break-glass move, the change request that made it."""
    record: dict[str, object] = {"version": version}
    if ruling.breaking:
        record |= {"force": True, "breaking": [c.detail for c in ruling.breaking]}
    if ruling.break_glass:
        record["reason"] = terms.reason
    if terms.release is not None:
        record["change_request"] = terms.release
    return record


async def contract_changes(
    session: AsyncSession,
    prompt: Prompt,
    before: int,
    after: int,
    declared: Mapping[int, Sequence[DeclaredArgument]] | None = None,
) -> list[ContractChange]:
    """How the argument contract changes from version ``before`` to ``after`` (the policy says
    which changes refuse a move): the arguments alone, those ``declared`` does not give read in one
    statement (the full diff of registry.prompts.diff compares the messages too)."""
    known = dict(declared or {})
    missing = [(prompt.id, v) for v in (before, after) if v not in known]
    if missing:
        read = await repo.arguments_of(session, prompt.tenant_id, missing)
        known |= {v: read[(prompt.id, v)] for _, v in missing}
    return contracts.compare(known[before], known[after])


@dataclass(frozen=True)
class VersionWrite:
    """What a version write did: the version the prompt is now at, and whether it is new."""

    created: bool
    version: VersionOut
    labels_moved: tuple[str, ...] = ()
    # The prompt's labels after the write, when a move told them (else read them again).
    labels: dict[str, int] | None = None

    def said(self, *, dry_run: bool) -> str:
        """The write in words: as it happened, or (a dry run) as it would have."""
        number = self.version.version
        if self.created:
            done = f"version {number} would be written" if dry_run else f"version {number} written"
        else:
            verb = "would be written" if dry_run else "written"
            done = f"identical to version {number}: no new version {verb}"
        return done + (" (dry run: nothing saved)" if dry_run else "")


async def write_version(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    prompt: Prompt,
    prepared: PreparedVersion,
    requested: Sequence[str],
    *,
    if_match: int | None,
    force: bool = False,
) -> VersionWrite:
    """The one path every version write takes: the version, then the ``requested`` labels moved
    onto it. ``prompt`` must be locked FOR UPDATE; it is kept current (its latest version) as the
    write goes."""
    for label in requested:
        check_label_name(label)
    latest = prompt.latest_version
    if if_match is not None and if_match != latest:
        raise PreconditionFailed(
            f"prompt {prompt.name!r} is at version {latest}, not {if_match}: reload it and write again",
            field="If-Match",
            latest_version=latest,
        )
    # The write appends the rows the transaction queued before it, then its own (the version's
    # audit row and the change of ``latest``, which the statement names by the version it wrote).
    audit, changes = with_pending(session, [], [])
    # The arguments that the protected labels it moves serve now come with the write: their
    # contract checks need no statement of their own.
    contracted = [label for label in requested if policy.contract_checked(tenant, label)]
    written = await versions.insert_version(
        session,
        prompt=prompt,
        content=prepared.content(prompt.name, caller.actor),
        partials=prepared.lock_rows(),
        latest=LATEST,
        audit=audit,
        changes=changes,
        contracted=contracted,
    )
    labels: dict[str, int] | None = None
    declared: dict[int, Sequence[DeclaredArgument]] | None = None
    if written is None:  # the latest version has this content already
        outcome = VersionWrite(False, (await versions_out(session, prompt, [latest]))[0])
    else:
        appended(session, changes, prompt.tenant_id)
        row, latest_moved, served = written
        if latest_moved is not None:  # moved by the version's statement, with no checks
            labels = latest_moved.labels
        outcome = VersionWrite(
            True,
            version_out(
                prompt,
                row,
                prepared.arguments,
                prepared.messages,
                [PartialLock(ref=lock.ref, version=lock.child_version) for lock in prepared.locks],
            ),
        )
        declared = {**served, outcome.version.version: outcome.version.arguments}
    moved = []
    for label in requested:
        found = await move_label(
            session,
            tenant,
            prompt,
            label,
            outcome.version.version,
            caller,
            force=force,
            held=labels,
            declared=declared,
        )
        if found is not None:
            moved.append(label)
            labels = found.labels
    return dataclasses.replace(outcome, labels_moved=tuple(moved), labels=labels)


async def _result(
    session: AsyncSession, tenant: Tenant, prompt: Prompt, outcome: VersionWrite, dry_run: bool
) -> WriteResult:
    """The answer to a version write, with the prompt's test cases run on the version (shown, never
    blocking: a change request is where failing tests stop a label)."""
    number = outcome.version.version
    tests = await prompt_tests.run_tests(session, tenant, prompt, number) if prompt.tests else None
    return WriteResult(
        created=outcome.created,
        version=number,
        detail=outcome.said(dry_run=dry_run),
        dry_run=dry_run,
        labels_moved=list(outcome.labels_moved),
        tests=tests,
        prompt=await prompt_out(session, prompt, latest=outcome.version, labels=outcome.labels),
    )


async def create_prompt(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    body: PromptCreate,
    *,
    max_blob_bytes: int,
    dry_run: bool = False,
) -> WriteResult:
    """A new prompt with its first version (``dry_run``: the caller rolls the transaction back)."""
    prepared = await prepare_version(
        session, tenant, body.name, body, max_blob_bytes=max_blob_bytes
    )
    for label in body.labels:
        check_label_name(label)
        _check_label_permission(tenant, caller, label)  # a new prompt's labels always move
    prompt = await create_prompt_row(session, tenant, caller, body.name, body.tags)
    if body.as_tool:
        await as_tools.check_mark(session, tenant, prompt)
        prompt = await repo.update_prompt(session, prompt, as_tool=True)
    if body.tests:
        prompt = await repo.update_prompt(session, prompt, tests=testcases.stored(body.tests))
    outcome = await write_version(
        session, tenant, caller, prompt, prepared, body.labels, if_match=None
    )
    return await _result(session, tenant, prompt, outcome, dry_run)


async def create_prompt_row(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    name: str,
    tags: list[str],
) -> Prompt:
    prompt = await repo.insert_prompt(session, tenant.id, name, tags)
    await _audit_created(session, tenant, caller, name, tags)
    return prompt


async def find_or_create_prompt(
    session: AsyncSession, tenant: Tenant, caller: Principal, name: str, tags: list[str]
) -> tuple[Prompt, bool]:
    """The prompt ``name`` locked FOR UPDATE, created if absent (whether it was): writers that race
    to create the same prompt all succeed, one creating it, the others finding it."""
    created = await repo.insert_prompt_if_absent(session, tenant.id, name, tags)
    if created is not None:
        await _audit_created(session, tenant, caller, name, tags, imported=True)
        return created, True
    found = await repo.prompt_by_name(session, tenant.id, name, lock=True)
    if found is None:  # it existed a moment ago, and an admin deleted it meanwhile
        raise Conflict(f"prompt {name!r} was deleted while this write ran: send it again")
    return found, False


async def _audit_created(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    name: str,
    tags: list[str],
    *,
    imported: bool = False,
) -> None:
    after: dict[str, object] = {"name": name, "tags": tags}
    if imported:
        after["import"] = True
    await record_audit(
        session,
        tenant_id=tenant.id,
        actor=caller.actor,
        action="prompt.create",
        target=f"prompt:{name}",
        after=after,
    )


async def create_version(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    name: str,
    body: VersionIn,
    *,
    if_match: int | None,
    max_blob_bytes: int,
    dry_run: bool = False,
    force: bool = False,
) -> WriteResult:
    prompt = await find_prompt(session, tenant, name, lock=True)
    prepared = await prepare_version(session, tenant, name, body, max_blob_bytes=max_blob_bytes)
    outcome = await write_version(
        session, tenant, caller, prompt, prepared, body.labels, if_match=if_match, force=force
    )
    return await _result(session, tenant, prompt, outcome, dry_run)


def as_version_in(version: VersionOut, labels: Sequence[str] = ()) -> VersionIn:
    """A stored version as a write body (blob references stay references, partial locks stay as
    they were)."""
    return VersionIn.model_validate(
        {
            "title": version.title,
            "description": version.description,
            "icons": version.icons,
            "config": version.config,
            "partials": [p.model_dump() for p in version.partials] or None,
            "commit_message": version.commit_message,
            "labels": list(labels),
            "arguments": [a.model_dump(exclude_none=True) for a in version.arguments],
            "messages": [m.model_dump() for m in version.messages],
        }
    )


async def refresh_partials(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    name: str,
    labels: Sequence[str],
    *,
    if_match: int | None,
    max_blob_bytes: int,
    dry_run: bool = False,
    force: bool = False,
) -> WriteResult:
    """A new version with the latest version's content and its partial tags resolved anew (written
    only when a lock changes; ``labels`` then move to it)."""
    prompt = await find_prompt(session, tenant, name)
    latest = await get_version(session, tenant, name, prompt.latest_version)
    body = as_version_in(latest, labels)
    body.partials = None  # resolve every tag again
    body.commit_message = "refresh partials"
    return await create_version(
        session,
        tenant,
        caller,
        name,
        body,
        if_match=if_match,
        max_blob_bytes=max_blob_bytes,
        dry_run=dry_run,
        force=force,
    )


async def restore_version(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    name: str,
    version: int,
    *,
    if_match: int | None,
    max_blob_bytes: int,
) -> WriteResult:
    """Restore = a new version with an old version's content (labels are moved separately)."""
    body = as_version_in(await get_version(session, tenant, name, version))
    body.commit_message = f"restore version {version}"
    return await create_version(
        session, tenant, caller, name, body, if_match=if_match, max_blob_bytes=max_blob_bytes
    )


# --- labels, archive, tags, delete -----------------------------------------------------------


async def set_label(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    name: str,
    label: str,
    version: int,
    *,
    force: bool = False,
    terms: Terms = DIRECT,
) -> LabelOut:
    check_label_name(label)
    _check_label_permission(tenant, caller, label)
    prompt = await find_prompt(session, tenant, name, lock=True)
    if not 1 <= version <= prompt.latest_version:
        raise NotFound(f"prompt {name!r} has no version {version}", field="version")
    archived = archived_refusal("prompt", name, prompt.archived_at is not None)
    if archived is not None:
        raise archived
    moved = await move_label(
        session, tenant, prompt, label, version, caller, force=force, terms=terms
    )
    if moved is not None:
        return LabelOut.model_validate(moved)
    return LabelOut.model_validate(
        await label_repo.label_row(session, prompt, label)
    )  # already there


async def delete_label(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    name: str,
    label: str,
    terms: Terms = DIRECT,
) -> None:
    check_label_name(label)
    _check_label_permission(tenant, caller, label)
    refused = approval_refusal(tenant, caller, label, terms)  # removing it is a move too
    if refused is not None:
        raise refused
    prompt = await find_prompt(session, tenant, name, lock=True)
    current = await label_repo.label_row(session, prompt, label, lock=True)
    if current is None:
        raise NotFound(f"prompt {name!r} has no label {label!r}", field="label")
    await label_repo.delete_label(session, prompt, label)
    await label_repo.insert_label_history(
        session, prompt, label, current.version, None, caller.actor
    )
    record_change(
        session, tenant_id=tenant.id, kind="label.delete", prompt_id=prompt.id, label=label
    )
    await record_audit(
        session,
        tenant_id=tenant.id,
        actor=caller.actor,
        action="label.delete",
        target=f"prompt:{name}@{label}",
        before={"version": current.version},
    )
