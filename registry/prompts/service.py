"""Prompt operations. Callers own the transaction (scoped to one tenant); these functions flush only.

Every write records an audit row, and every write that changes what the tenant serves appends to the
change log, in the same transaction.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg
from sqlalchemy.ext.asyncio import AsyncSession

from registry.db import pagination
from registry.db.audit import record_audit, record_change
from registry.db.models import (
    LabelHistory,
    Prompt,
    PromptArgument,
    PromptMessage,
    PromptVersion,
    Tenant,
)
from registry.db.pagination import Page
from registry.errors import Conflict, Forbidden, InvalidInput, NotFound, PreconditionFailed
from registry.naming import LABEL_RE, LATEST, PROMPT_NAME_RE
from registry.principal import Principal
from registry.prompts import repository as repo
from registry.prompts.content import PreparedVersion, prepare_version
from registry.prompts.schemas import (
    ArgumentDiff,
    ArgumentOut,
    Bundle,
    BundleBlob,
    BundlePrompt,
    BundleVersion,
    FieldChange,
    ImportResult,
    LabelHistoryOut,
    LabelOut,
    MessageDiff,
    MessageOut,
    PromptCreate,
    PromptOut,
    PromptSummary,
    RenderedPrompt,
    VersionDiff,
    VersionIn,
    VersionOut,
    VersionSummary,
    WriteResult,
)
from registry.templates.arguments import ArgumentSpec, resolve_arguments
from registry.templates.mustache import Template, parse

# --- reading ------------------------------------------------------------------------------------


async def _prompt(
    session: AsyncSession, tenant: Tenant, name: str, *, lock: bool = False
) -> Prompt:
    prompt = await repo.prompt_by_name(session, tenant.id, name, lock=lock)
    if prompt is None:
        raise NotFound(f"prompt {name!r} not found", field="name")
    return prompt


def _version_out(
    prompt: Prompt,
    row: PromptVersion,
    arguments: Sequence[PromptArgument],
    messages: Sequence[PromptMessage],
) -> VersionOut:
    return VersionOut(
        prompt=prompt.name,
        version=row.version,
        title=row.title,
        description=row.description,
        icons=row.icons,
        commit_message=row.commit_message,
        author=row.author,
        content_hash=row.content_hash.hex(),
        created_at=row.created_at,
        arguments=[_argument_out(a) for a in arguments],
        messages=[MessageOut(role=m.role, content=m.content) for m in messages],
    )


def _argument_out(a: PromptArgument) -> ArgumentOut:
    return ArgumentOut.model_validate(a, from_attributes=True)


async def _versions_out(
    session: AsyncSession, prompt: Prompt, versions: Sequence[int]
) -> list[VersionOut]:
    rows = await repo.version_rows(session, prompt, versions)
    arguments, messages = await repo.version_children(
        session, prompt.tenant_id, prompt.id, [r.version for r in rows]
    )
    return [
        _version_out(
            prompt,
            row,
            [a for a in arguments if a.version == row.version],
            [m for m in messages if m.version == row.version],
        )
        for row in rows
    ]


async def _prompt_out(
    session: AsyncSession, prompt: Prompt, *, with_latest: bool = True
) -> PromptOut:
    labels = (await repo.labels_of(session, [prompt]))[prompt.id]
    latest = None
    if with_latest and prompt.latest_version:
        latest = (await _versions_out(session, prompt, [prompt.latest_version]))[0]
    return PromptOut(
        id=prompt.id,
        name=prompt.name,
        tags=prompt.tags,
        latest_version=prompt.latest_version,
        labels=labels,
        archived_at=prompt.archived_at,
        created_at=prompt.created_at,
        updated_at=prompt.updated_at,
        latest=latest,
    )


async def get_prompt(session: AsyncSession, tenant: Tenant, name: str) -> PromptOut:
    return await _prompt_out(session, await _prompt(session, tenant, name))


async def list_prompts(
    session: AsyncSession,
    tenant: Tenant,
    *,
    cursor: str | None,
    limit: int,
    prefix: str | None = None,
    tag: str | None = None,
    label: str | None = None,
    text: str | None = None,
    archived: bool | None = False,
) -> Page[PromptSummary]:
    after = pagination.decode_cursor(cursor, str)
    rows = await repo.list_prompts(
        session,
        tenant.id,
        after=after[0] if after else None,
        limit=limit + 1,
        prefix=prefix,
        tag=tag,
        label=label,
        text=text,
        archived=archived,
    )
    page, next_cursor = pagination.cut(rows, limit, lambda row: row[0].name)
    labels = await repo.labels_of(session, [p for p, _ in page])
    items = [
        PromptSummary(
            name=p.name,
            title=v.title if v else None,
            description=v.description if v else None,
            tags=p.tags,
            latest_version=p.latest_version,
            labels=labels[p.id],
            archived_at=p.archived_at,
            updated_at=p.updated_at,
        )
        for p, v in page
    ]
    return Page(items=items, next_cursor=next_cursor)


async def list_versions(
    session: AsyncSession, tenant: Tenant, name: str, *, cursor: str | None, limit: int
) -> Page[VersionSummary]:
    prompt = await _prompt(session, tenant, name)
    before = pagination.decode_cursor(cursor, int)
    rows = await repo.list_versions(
        session, prompt, before=before[0] if before else None, limit=limit + 1
    )
    page, next_cursor = pagination.cut(rows, limit, lambda row: row.version)
    items = [
        VersionSummary(
            version=r.version,
            title=r.title,
            commit_message=r.commit_message,
            author=r.author,
            content_hash=r.content_hash.hex(),
            created_at=r.created_at,
        )
        for r in page
    ]
    return Page(items=items, next_cursor=next_cursor)


async def get_version(session: AsyncSession, tenant: Tenant, name: str, version: int) -> VersionOut:
    prompt = await _prompt(session, tenant, name)
    found = await _versions_out(session, prompt, [version])
    if not found:
        raise NotFound(f"prompt {name!r} has no version {version}", field="version")
    return found[0]


# --- writing versions ---------------------------------------------------------------------------


def _check_label_name(label: str) -> None:
    if not LABEL_RE.fullmatch(label):
        raise InvalidInput(
            f"invalid label {label!r}: use lowercase letters, digits, '.', '_' and '-'",
            field="label",
        )
    if label == LATEST:
        raise InvalidInput("the label 'latest' moves by itself to every new version", field="label")


def _check_label_permission(tenant: Tenant, caller: Principal, label: str) -> None:
    if label in tenant.protected_labels and not caller.has("publisher"):
        raise Forbidden(
            f"label {label!r} is protected: moving it needs the publisher role (this key is {caller.role})",
            field="label",
        )


async def _move_label(
    session: AsyncSession,
    tenant: Tenant,
    prompt: Prompt,
    label: str,
    version: int,
    caller: Principal,
) -> bool:
    """Point ``label`` at ``version``; history, change log and audit included. False if already there.

    A protected label needs the publisher role only when it actually moves."""
    current = await repo.label_row(session, prompt, label, lock=True)
    before = current.version if current else None
    if before == version:
        return False
    if label != LATEST:
        _check_label_permission(tenant, caller, label)
    await repo.upsert_label(session, prompt, label, version, caller.actor)
    await repo.insert_label_history(session, prompt, label, before, version, caller.actor)
    record_change(
        session, tenant_id=prompt.tenant_id, kind="label.move", prompt_id=prompt.id, label=label
    )
    if label != LATEST:  # latest moves with every version; the version.create row covers it
        await record_audit(
            session,
            tenant_id=prompt.tenant_id,
            actor=caller.actor,
            action="label.move",
            target=f"prompt:{prompt.name}@{label}",
            before={"version": before} if before else None,
            after={"version": version},
        )
    return True


async def _write_version(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    prompt: Prompt,
    prepared: PreparedVersion,
    labels: Sequence[str],
    *,
    if_match: int | None,
) -> tuple[bool, int, str]:
    """The one path every version write takes. ``prompt`` must be locked FOR UPDATE."""
    for label in labels:
        _check_label_name(label)
    latest = prompt.latest_version
    if if_match is not None and if_match != latest:
        raise PreconditionFailed(
            f"prompt {prompt.name!r} is at version {latest}, not {if_match}: reload it and write again",
            field="If-Match",
            latest_version=latest,
        )
    same = latest and (await repo.version_row(session, prompt, latest))
    if same and same.content_hash == prepared.content_hash:
        created, version = False, latest
        detail = f"identical to version {latest}: no new version written"
    else:
        version = await repo.next_version(session, prompt)
        await repo.insert_version(
            session,
            prompt=prompt,
            version=version,
            meta=prepared.meta,
            author=caller.actor,
            content_hash=prepared.content_hash,
            arguments=prepared.arguments,
            messages=prepared.messages,
        )
        await record_audit(
            session,
            tenant_id=tenant.id,
            actor=caller.actor,
            action="version.create",
            target=f"prompt:{prompt.name}@{version}",
            before={"version": latest} if latest else None,
            after={
                "version": version,
                "content_hash": prepared.content_hash.hex(),
                "commit_message": prepared.meta.get("commit_message"),
            },
        )
        await _move_label(session, tenant, prompt, LATEST, version, caller)
        created, detail = True, f"version {version} written"
    for label in labels:
        await _move_label(session, tenant, prompt, label, version, caller)
    return created, version, detail


async def _result(
    session: AsyncSession, prompt: Prompt, created: bool, version: int, detail: str, dry_run: bool
) -> WriteResult:
    fresh = await repo.prompt_by_name(session, prompt.tenant_id, prompt.name)
    assert fresh is not None
    await session.refresh(fresh)
    return WriteResult(
        created=created,
        version=version,
        detail=detail,
        dry_run=dry_run,
        prompt=await _prompt_out(session, fresh),
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
    prepared = await prepare_version(session, tenant.id, body, max_blob_bytes=max_blob_bytes)
    for label in body.labels:
        _check_label_name(label)
        _check_label_permission(tenant, caller, label)  # a new prompt's labels always move
    prompt = await repo.insert_prompt(session, tenant.id, body.name, body.tags)
    await record_audit(
        session,
        tenant_id=tenant.id,
        actor=caller.actor,
        action="prompt.create",
        target=f"prompt:{body.name}",
        after={"name": body.name, "tags": body.tags},
    )
    created, version, detail = await _write_version(
        session, tenant, caller, prompt, prepared, body.labels, if_match=None
    )
    return await _result(session, prompt, created, version, detail, dry_run)


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
) -> WriteResult:
    prompt = await _prompt(session, tenant, name, lock=True)
    prepared = await prepare_version(session, tenant.id, body, max_blob_bytes=max_blob_bytes)
    created, version, detail = await _write_version(
        session, tenant, caller, prompt, prepared, body.labels, if_match=if_match
    )
    return await _result(session, prompt, created, version, detail, dry_run)


def _as_version_in(version: VersionOut, labels: Sequence[str] = ()) -> VersionIn:
    """A stored version as a write body (blob references stay references)."""
    return VersionIn.model_validate(
        {
            "title": version.title,
            "description": version.description,
            "icons": version.icons,
            "commit_message": version.commit_message,
            "labels": list(labels),
            "arguments": [a.model_dump(exclude_none=True) for a in version.arguments],
            "messages": [m.model_dump() for m in version.messages],
        }
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
    old = await get_version(session, tenant, name, version)
    body = _as_version_in(old)
    body.commit_message = f"restore version {version}"
    return await create_version(
        session, tenant, caller, name, body, if_match=if_match, max_blob_bytes=max_blob_bytes
    )


# --- labels, archive, tags, delete -----------------------------------------------------------


async def set_label(
    session: AsyncSession, tenant: Tenant, caller: Principal, name: str, label: str, version: int
) -> LabelOut:
    _check_label_name(label)
    _check_label_permission(tenant, caller, label)
    prompt = await _prompt(session, tenant, name, lock=True)
    if await repo.version_row(session, prompt, version) is None:
        raise NotFound(f"prompt {name!r} has no version {version}", field="version")
    await _move_label(session, tenant, prompt, label, version, caller)
    row = await repo.label_row(session, prompt, label)
    assert row is not None
    return LabelOut(
        prompt=name,
        label=label,
        version=row.version,
        updated_by=row.updated_by,
        updated_at=row.updated_at,
    )


async def delete_label(
    session: AsyncSession, tenant: Tenant, caller: Principal, name: str, label: str
) -> None:
    _check_label_name(label)
    _check_label_permission(tenant, caller, label)
    prompt = await _prompt(session, tenant, name, lock=True)
    current = await repo.label_row(session, prompt, label, lock=True)
    if current is None:
        raise NotFound(f"prompt {name!r} has no label {label!r}", field="label")
    await repo.delete_label(session, prompt, label)
    await repo.insert_label_history(session, prompt, label, current.version, None, caller.actor)
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


async def label_history(
    session: AsyncSession,
    tenant: Tenant,
    name: str,
    *,
    label: str | None,
    cursor: str | None,
    limit: int,
) -> Page[LabelHistoryOut]:
    prompt = await _prompt(session, tenant, name)
    before = pagination.decode_cursor(cursor, int)
    rows: Sequence[LabelHistory] = await repo.label_history(
        session, prompt, label=label, before=before[0] if before else None, limit=limit + 1
    )
    page, next_cursor = pagination.cut(rows, limit, lambda row: row.id)
    items = [
        LabelHistoryOut(
            id=r.id,
            label=r.label,
            from_version=r.from_version,
            to_version=r.to_version,
            actor=r.actor,
            moved_at=r.moved_at,
        )
        for r in page
    ]
    return Page(items=items, next_cursor=next_cursor)


async def set_archived(
    session: AsyncSession, tenant: Tenant, caller: Principal, name: str, archived: bool
) -> PromptOut:
    prompt = await _prompt(session, tenant, name, lock=True)
    labels = (await repo.labels_of(session, [prompt]))[prompt.id]
    protected = sorted(set(labels) & set(tenant.protected_labels))
    if protected and not caller.has("publisher"):
        raise Forbidden(
            f"prompt {name!r} holds the protected label {protected[0]!r}: archiving or restoring it "
            f"needs the publisher role (this key is {caller.role})"
        )
    if (prompt.archived_at is not None) == archived:
        return await _prompt_out(session, prompt)
    before = repo.when(prompt.archived_at)
    prompt = await repo.update_prompt(
        session, prompt, archived_at=datetime.now(UTC) if archived else None
    )
    action = "prompt.archive" if archived else "prompt.unarchive"
    record_change(session, tenant_id=tenant.id, kind=action, prompt_id=prompt.id)
    await record_audit(
        session,
        tenant_id=tenant.id,
        actor=caller.actor,
        action=action,
        target=f"prompt:{name}",
        before={"archived_at": before},
        after={"archived_at": repo.when(prompt.archived_at)},
    )
    return await _prompt_out(session, prompt)


async def set_tags(
    session: AsyncSession, tenant: Tenant, caller: Principal, name: str, tags: list[str]
) -> PromptOut:
    prompt = await _prompt(session, tenant, name, lock=True)
    before = list(prompt.tags)
    tags = list(dict.fromkeys(tags))
    if tags != before:
        prompt = await repo.update_prompt(session, prompt, tags=tags)
        await record_audit(
            session,
            tenant_id=tenant.id,
            actor=caller.actor,
            action="prompt.tags",
            target=f"prompt:{name}",
            before={"tags": before},
            after={"tags": tags},
        )
    return await _prompt_out(session, prompt)


async def delete_prompt(
    session: AsyncSession, tenant: Tenant, caller: Principal, name: str
) -> None:
    """Removes the prompt with all its versions and history; only once archived."""
    prompt = await _prompt(session, tenant, name, lock=True)
    if prompt.archived_at is None:
        raise Conflict(
            f"prompt {name!r} is not archived: archive it before deleting it", field="name"
        )
    await repo.delete_prompt(session, prompt)
    record_change(session, tenant_id=tenant.id, kind="prompt.delete")
    await record_audit(
        session,
        tenant_id=tenant.id,
        actor=caller.actor,
        action="prompt.delete",
        target=f"prompt:{name}",
        before={"latest_version": prompt.latest_version},
    )


# --- rendering ----------------------------------------------------------------------------------


def parse_prompt_ref(ref: str) -> tuple[str, int | None, str | None]:
    """``name``, ``name@3`` (version 3) or ``name@staging`` (a label)."""
    name, _, selector = ref.partition("@")
    if not PROMPT_NAME_RE.fullmatch(name):
        raise InvalidInput(f"invalid prompt name {name!r}", field="name")
    if not selector:
        return name, None, None
    if selector.isdigit():
        return name, int(selector), None
    if LABEL_RE.fullmatch(selector):
        return name, None, selector
    raise InvalidInput(f"invalid version or label {selector!r} after '@' in {ref!r}", field="name")


def _not_served(name: str, label: str, version: int | None, missing: str) -> NotFound:
    """What is missing when a name does not resolve (the same words from SQL and from Python)."""
    if missing == "prompt":
        return NotFound(f"unknown prompt {name!r}", field="name")
    if missing == "version":
        return NotFound(f"prompt {name!r} has no version {version}", field="version")
    return NotFound(f"prompt {name!r} has no version labelled {label!r}", field="label")


async def resolve_version(
    session: AsyncSession, tenant: Tenant, name: str, *, version: int | None, label: str | None
) -> tuple[Prompt, int]:
    """The prompt (never an archived one) and the version a label or number points at."""
    label = label or tenant.default_label
    prompt = await repo.prompt_by_name(session, tenant.id, name)
    if prompt is None or prompt.archived_at is not None:
        raise _not_served(name, label, version, "prompt")
    if version is not None:
        if not 1 <= version <= prompt.latest_version:
            raise _not_served(name, label, version, "version")
        return prompt, version
    row = await repo.label_row(session, prompt, label)
    if row is None:
        raise _not_served(name, label, version, "label")
    return prompt, row.version


@dataclass(frozen=True)
class CompiledMessage:
    role: str
    content: dict[str, Any]  # as stored: blob references by sha256
    template: Template | None  # the text (or embedded resource text), parsed


@dataclass(frozen=True)
class CompiledVersion:
    """Everything needed to render a version; versions are immutable, so this may be kept forever."""

    description: str | None
    specs: tuple[ArgumentSpec, ...]
    messages: tuple[CompiledMessage, ...]
    blobs: tuple[bytes, ...]


async def served_version(
    reads: asyncpg.Pool | AsyncSession,
    tenant: Tenant,
    name: str,
    *,
    version: int | None,
    label: str | None,
) -> tuple[uuid.UUID, int, CompiledVersion]:
    """Resolve (never to an archived prompt) and compile in one database round trip.

    Returns the prompt id, the version number and the compiled version.
    """
    label = label or tenant.default_label
    found = await repo.served_version(reads, tenant.id, name, label, version)
    if "missing" in found:
        raise _not_served(name, label, version, found["missing"])
    compiled = []
    blobs = []
    for m in found["messages"]:
        content = m["content"]
        source = content.get("text") if content["type"] == "text" else None
        if content["type"] == "resource" and "text" in content["resource"]:
            source = content["resource"]["text"]
        compiled.append(
            CompiledMessage(m["role"], content, parse(source) if source is not None else None)
        )
        if m["blob"] is not None:
            blobs.append(bytes.fromhex(m["blob"]))
    specs = tuple(
        ArgumentSpec(
            name=a["name"],
            required=a["required"],
            default=a["default"],
            enum=tuple(a["enum"]) if a["enum"] else None,
            pattern=a["pattern"],
            max_length=a["max_length"],
        )
        for a in found["arguments"]
    )
    return (
        uuid.UUID(found["prompt"]),
        found["version"],
        CompiledVersion(
            description=found["description"],
            specs=specs,
            messages=tuple(compiled),
            blobs=tuple(blobs),
        ),
    )


async def load_blobs(
    session: AsyncSession, tenant_id: uuid.UUID, shas: Sequence[bytes]
) -> dict[bytes, str]:
    """Blob bytes as base64, as content blocks carry them."""
    found = await repo.blob_data(session, tenant_id, shas)
    return {sha: base64.b64encode(blob.data).decode() for sha, blob in found.items()}


def render_compiled(
    compiled: CompiledVersion,
    arguments: dict[str, Any] | None,
    blobs: dict[bytes, str],
    *,
    max_value_length: int,
) -> RenderedPrompt:
    """The one renderer: MCP prompts/get, the REST preview and the CLI all end here."""
    values = resolve_arguments(compiled.specs, arguments, max_value_length=max_value_length)
    return RenderedPrompt(
        description=compiled.description,
        messages=[
            {"role": m.role, "content": _render_block(m, values, blobs)} for m in compiled.messages
        ],
    )


def _render_block(
    message: CompiledMessage, values: dict[str, str], blobs: dict[bytes, str]
) -> dict[str, Any]:
    out = dict(message.content)
    kind = out["type"]
    if kind == "text":
        assert message.template is not None
        out["text"] = message.template.render(values)
    elif kind in ("image", "audio"):
        out["data"] = blobs[bytes.fromhex(out.pop("blob"))]
    elif kind == "resource":
        resource = dict(out["resource"])
        if message.template is not None:
            resource["text"] = message.template.render(values)
        else:
            resource["blob"] = blobs[bytes.fromhex(resource["blob"])]
        out["resource"] = resource
    return out


async def render(
    session: AsyncSession,
    tenant: Tenant,
    name: str,
    arguments: dict[str, Any] | None,
    *,
    version: int | None = None,
    label: str | None = None,
    max_value_length: int,
) -> RenderedPrompt:
    """Resolve, compile and render in one go (the REST preview; MCP does the same steps with caches)."""
    _, _, compiled = await served_version(session, tenant, name, version=version, label=label)
    blobs = await load_blobs(session, tenant.id, compiled.blobs)
    return render_compiled(compiled, arguments, blobs, max_value_length=max_value_length)


def blob_of(content: dict[str, Any]) -> str | None:
    """The sha256 (hex) of the blob a stored content block refers to, if any."""
    if content["type"] in ("image", "audio"):
        return str(content["blob"])
    if content["type"] == "resource":
        blob = content["resource"].get("blob")
        return str(blob) if blob is not None else None
    return None


# --- diff ---------------------------------------------------------------------------------------


def _message_text(content: dict[str, Any]) -> str:
    if content["type"] == "text":
        return str(content["text"])
    if content["type"] == "resource" and "text" in content["resource"]:
        return str(content["resource"]["text"])
    return json.dumps(content, sort_keys=True, indent=1)


async def diff_versions(
    session: AsyncSession, tenant: Tenant, name: str, a: int, b: int
) -> VersionDiff:
    prompt = await _prompt(session, tenant, name)
    found = {v.version: v for v in await _versions_out(session, prompt, [a, b])}
    for number in (a, b):
        if number not in found:
            raise NotFound(f"prompt {name!r} has no version {number}", field="version")
    old, new = found[a], found[b]
    metadata = {
        key: FieldChange(before=getattr(old, key), after=getattr(new, key))
        for key in ("title", "description", "icons")
        if getattr(old, key) != getattr(new, key)
    }
    old_args = {x.name: x.model_dump() for x in old.arguments}
    new_args = {x.name: x.model_dump() for x in new.arguments}
    changed = {
        arg: {
            k: FieldChange(before=old_args[arg][k], after=new_args[arg][k])
            for k in old_args[arg]
            if old_args[arg][k] != new_args[arg][k]
        }
        for arg in old_args.keys() & new_args.keys()
        if old_args[arg] != new_args[arg]
    }
    messages: list[MessageDiff] = []
    for i in range(max(len(old.messages), len(new.messages))):
        before = old.messages[i] if i < len(old.messages) else None
        after = new.messages[i] if i < len(new.messages) else None
        if before == after:
            continue
        status = "added" if before is None else "removed" if after is None else "changed"
        lines = difflib.unified_diff(
            _message_text(before.content).splitlines() if before else [],
            _message_text(after.content).splitlines() if after else [],
            fromfile=f"v{a}/messages[{i}]",
            tofile=f"v{b}/messages[{i}]",
            lineterm="",
        )
        role = (
            FieldChange(before=before.role, after=after.role)
            if before and after and before.role != after.role
            else None
        )
        messages.append(MessageDiff(position=i, status=status, role=role, diff=list(lines)))
    return VersionDiff(
        prompt=name,
        from_version=a,
        to_version=b,
        metadata=metadata,
        arguments=ArgumentDiff(
            added=sorted(new_args.keys() - old_args.keys()),
            removed=sorted(old_args.keys() - new_args.keys()),
            changed=changed,
        ),
        messages=messages,
    )


# --- blobs --------------------------------------------------------------------------------------


async def upload_blob(
    session: AsyncSession, tenant: Tenant, caller: Principal, data: bytes, mime_type: str
) -> tuple[str, bool]:
    sha = hashlib.sha256(data).digest()
    created = await repo.store_blob(session, tenant.id, sha, mime_type, data)
    if created:
        await record_audit(
            session,
            tenant_id=tenant.id,
            actor=caller.actor,
            action="blob.create",
            target=f"blob:{sha.hex()}",
            after={"size": len(data), "mime_type": mime_type},
        )
    return sha.hex(), created


async def get_blob(session: AsyncSession, tenant: Tenant, sha_hex: str) -> tuple[bytes, str]:
    try:
        sha = bytes.fromhex(sha_hex)
    except ValueError:
        sha = b""
    blob = await repo.blob_meta(session, tenant.id, sha) if len(sha) == 32 else None
    if blob is None:
        raise NotFound(f"blob {sha_hex!r} not found", field="sha256")
    return blob.data, blob.mime_type


# --- export / import ----------------------------------------------------------------------------


async def export_bundle(session: AsyncSession, tenant: Tenant, *, only_labelled: bool) -> Bundle:
    prompts: list[BundlePrompt] = []
    shas: set[bytes] = set()
    after: str | None = None
    while True:
        rows = await repo.list_prompts(
            session,
            tenant.id,
            after=after,
            limit=500,
            prefix=None,
            tag=None,
            label=None,
            text=None,
            archived=None,
        )
        if not rows:
            break
        labels = await repo.labels_of(session, [p for p, _ in rows])
        for prompt, _ in rows:
            wanted = set(labels[prompt.id].values()) if only_labelled else None
            versions = await _versions_out(
                session,
                prompt,
                sorted(wanted) if wanted is not None else range(1, prompt.latest_version + 1),
            )
            for v in versions:
                for m in v.messages:
                    sha = m.content.get("blob") or m.content.get("resource", {}).get("blob")
                    if (sha and m.content["type"] != "resource") or (
                        sha and "text" not in m.content.get("resource", {})
                    ):
                        shas.add(bytes.fromhex(sha))
            prompts.append(
                BundlePrompt(
                    name=prompt.name,
                    tags=prompt.tags,
                    archived=prompt.archived_at is not None,
                    versions=[
                        BundleVersion(
                            version=v.version,
                            content_hash=v.content_hash,
                            **_as_version_in(v).model_dump(by_alias=True, exclude_none=True),
                        )
                        for v in versions
                    ],
                    labels={k: n for k, n in labels[prompt.id].items() if k != LATEST},
                )
            )
        after = rows[-1][0].name
    blobs = await repo.blob_data(session, tenant.id, shas)
    return Bundle(
        tenant=tenant.slug,
        exported_at=datetime.now(UTC),
        blobs={
            sha.hex(): BundleBlob(mime_type=b.mime_type, data=base64.b64encode(b.data).decode())
            for sha, b in sorted(blobs.items())
        },
        prompts=prompts,
    )


async def import_bundle(
    session: AsyncSession, tenant: Tenant, caller: Principal, bundle: Bundle, *, max_blob_bytes: int
) -> ImportResult:
    """Idempotent: versions already present (same content hash) are reused, labels already in place
    stay, so importing the same bundle twice writes nothing the second time."""
    result = ImportResult()
    for sha_hex, blob in bundle.blobs.items():
        data = base64.b64decode(blob.data)
        if len(data) > max_blob_bytes:
            raise InvalidInput(
                f"blobs[{sha_hex}] is larger than {max_blob_bytes} bytes", field="blobs"
            )
        sha, created = await upload_blob(session, tenant, caller, data, blob.mime_type)
        if sha != sha_hex:
            raise InvalidInput(f"blobs[{sha_hex}]: the data hashes to {sha}", field="blobs")
        result.blobs_stored += created
    for index, item in enumerate(bundle.prompts):
        for label in item.labels:
            _check_label_name(label)
        prompt = await repo.prompt_by_name(session, tenant.id, item.name, lock=True)
        if prompt is None:
            prompt = await repo.insert_prompt(session, tenant.id, item.name, item.tags)
            await record_audit(
                session,
                tenant_id=tenant.id,
                actor=caller.actor,
                action="prompt.create",
                target=f"prompt:{item.name}",
                after={"name": item.name, "tags": item.tags, "import": True},
            )
            result.prompts_created += 1
        mapping: dict[int, int] = {}
        for version in sorted(item.versions, key=lambda v: v.version):
            body = VersionIn.model_validate(
                version.model_dump(by_alias=True, exclude={"version", "content_hash"})
            )
            try:
                prepared = await prepare_version(
                    session, tenant.id, body, max_blob_bytes=max_blob_bytes
                )
            except InvalidInput as error:
                raise InvalidInput(
                    f"prompts[{index}] ({item.name}) version {version.version}: {error.message}",
                    **error.detail,
                ) from None
            existing = await repo.version_by_hash(session, prompt, prepared.content_hash)
            if existing is not None:
                mapping[version.version] = existing
                result.unchanged_versions += 1
                continue
            await session.refresh(prompt)
            _, number, _ = await _write_version(
                session, tenant, caller, prompt, prepared, [], if_match=None
            )
            await session.refresh(prompt)
            mapping[version.version] = number
            result.versions_created += 1
        for label, source_version in sorted(item.labels.items()):
            if source_version not in mapping:
                raise InvalidInput(
                    f"prompts[{index}] ({item.name}): label {label!r} points at version {source_version}, "
                    "which is not in the bundle",
                    field="labels",
                )
            result.labels_moved += await _move_label(
                session, tenant, prompt, label, mapping[source_version], caller
            )
    if result.prompts_created or result.versions_created or result.labels_moved:
        await record_audit(
            session,
            tenant_id=tenant.id,
            actor=caller.actor,
            action="tenant.import",
            target=f"tenant:{tenant.slug}",
            after=result.model_dump(),
        )
    return result


# --- serving (MCP) ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServedArgument:
    name: str
    title: str | None
    description: str | None
    required: bool


@dataclass(frozen=True)
class ServedPrompt:
    """A prompt as a label serves it, before any protocol revision shapes it."""

    name: str
    version: int
    title: str | None
    description: str | None
    icons: list[dict[str, Any]] | None
    arguments: list[ServedArgument]


async def served_page(
    session: AsyncSession, tenant: Tenant, label: str, *, after: str | None, limit: int
) -> tuple[list[ServedPrompt], bool]:
    """One page of what ``label`` serves, by name, and whether more may follow."""
    rows = await repo.served_page(session, tenant.id, label, after=after, limit=limit + 1)
    rows, more = rows[:limit], len(rows) > limit
    arguments = await repo.arguments_of(session, tenant.id, [(r[1], r[2]) for r in rows])
    page = [
        ServedPrompt(
            name=name,
            version=number,
            title=row.title,
            description=row.description,
            icons=row.icons,
            arguments=[
                ServedArgument(a.name, a.title, a.description, a.required)
                for a in arguments[(prompt_id, number)]
            ],
        )
        for name, prompt_id, number, row in rows
    ]
    return page, more


async def served_count(session: AsyncSession, tenant: Tenant, label: str) -> int:
    return await repo.served_count(session, tenant.id, label)


COMPLETION_LIMIT = 100


async def complete_argument(
    session: AsyncSession,
    tenant: Tenant,
    ref: str,
    argument: str,
    value: str,
    *,
    label: str,
) -> tuple[list[str], int]:
    """Suggested values for one argument of the served version: enum values and declared suggestions,
    those starting with ``value`` first (case-insensitively), then those containing it; at most 100,
    with the total number of matches."""
    name, version, pinned_label = parse_prompt_ref(ref)
    prompt, number = await resolve_version(
        session, tenant, name, version=version, label=pinned_label or label
    )
    specs, _ = await repo.version_children(session, tenant.id, prompt.id, [number])
    spec = next((a for a in specs if a.name == argument), None)
    if spec is None:
        known = ", ".join(repr(a.name) for a in specs) or "none"
        raise InvalidInput(
            f"prompt {name!r} has no argument {argument!r} (it takes: {known})", field="argument"
        )
    candidates = list(dict.fromkeys([*(spec.enum or []), *(spec.suggestions or [])]))
    needle = value.casefold()
    prefix = [c for c in candidates if c.casefold().startswith(needle)]
    inner = [c for c in candidates if needle and needle in c.casefold() and c not in prefix]
    matches = prefix + inner
    return matches[:COMPLETION_LIMIT], len(matches)


async def labels_changed(
    session: AsyncSession, tenant_id: uuid.UUID, after: int, upto: int
) -> set[str] | None:
    """Labels whose served list changed in the tenant's changes (after, upto]; None means any may have
    (a change not tied to one label, or rows this transaction cannot see)."""
    labels, rows = await repo.changed_labels(session, tenant_id, after, upto)
    if rows < upto - after or None in labels:
        return None
    return {label for label in labels if label is not None}


async def argument_declarations(
    session: AsyncSession, tenant: Tenant, name: str, *, version: int | None, label: str | None
) -> tuple[tuple[PromptArgument, ...], str | None]:
    """The arguments as declared (titles and descriptions included) and the description of the
    version ``name`` resolves to."""
    prompt, number = await resolve_version(session, tenant, name, version=version, label=label)
    arguments, _ = await repo.version_children(session, tenant.id, prompt.id, [number])
    row = await repo.version_row_by_id(session, tenant.id, prompt.id, number)
    return tuple(arguments), row.description if row else None
