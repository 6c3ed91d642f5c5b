"""Reading prompts: one prompt, listings, versions, label history, what a label serves, and how a
name resolves to a version. The caller owns the (tenant-scoped) transaction."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any, NamedTuple

import asyncpg
from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.models import Prompt, PromptArgument, PromptMessage, PromptVersion, Tenant
from registry.db.pagination import Page, PageRequest
from registry.errors import NotFound
from registry.prompts import hot_reads
from registry.prompts import label_repository as label_repo
from registry.prompts import partial_repository as partial_repo
from registry.prompts import repository as repo
from registry.prompts.listing import ServedPrompt, served_prompt, stored_entry
from registry.prompts.schemas import (
    ArgumentOut,
    LabelHistoryOut,
    MessageOut,
    PartialLock,
    PromptFields,
    PromptOut,
    PromptSummary,
    VersionOut,
    VersionSummary,
)


async def find_prompt(
    session: AsyncSession, tenant: Tenant, name: str, *, lock: bool = False
) -> Prompt:
    prompt = await repo.prompt_by_name(session, tenant.id, name, lock=lock)
    if prompt is None:
        raise NotFound(f"prompt {name!r} not found", field="name")
    return prompt


def version_out(
    prompt: Prompt,
    row: PromptVersion,
    arguments: Iterable[PromptArgument | dict[str, Any]],
    messages: Iterable[PromptMessage | dict[str, Any]],
    partials: Iterable[PartialLock] = (),
) -> VersionOut:
    return VersionOut.model_validate(
        {
            **VersionSummary.model_validate(row).model_dump(),
            "prompt": prompt.name,
            "description": row.description,
            "icons": row.icons,
            "config": row.config,
            "partials": list(partials),
            "arguments": [ArgumentOut.model_validate(a) for a in arguments],
            "messages": [MessageOut.model_validate(m) for m in messages],
        }
    )


async def versions_out(
    session: AsyncSession, prompt: Prompt, versions: Iterable[int]
) -> list[VersionOut]:
    rows = await repo.version_rows(session, prompt, versions)
    numbers = [r.version for r in rows]
    arguments, messages = await repo.version_children(session, prompt.tenant_id, prompt.id, numbers)
    locks = await partial_repo.partial_locks(session, prompt.tenant_id, prompt.id, numbers)
    return [
        version_out(
            prompt,
            row,
            [a for a in arguments if a.version == row.version],
            [m for m in messages if m.version == row.version],
            [
                PartialLock(ref=lock.ref, version=lock.child_version)
                for lock in locks
                if lock.version == row.version
            ],
        )
        for row in rows
    ]


async def prompt_out(
    session: AsyncSession,
    prompt: Prompt,
    *,
    latest: VersionOut | None = None,
    labels: dict[str, int] | None = None,
) -> PromptOut:
    """The prompt with its labels and latest version (``latest`` and ``labels`` when the caller
    has them already)."""
    if labels is None:
        labels = (await label_repo.labels_of(session, [prompt]))[prompt.id]
    if latest is None and prompt.latest_version:
        latest = (await versions_out(session, prompt, [prompt.latest_version]))[0]
    return prompt_of(prompt, latest, labels)


def prompt_of(prompt: Prompt, latest: VersionOut | None, labels: dict[str, int]) -> PromptOut:
    """The prompt as the API shows it, from its row, its latest version and its labels."""
    fields = PromptFields.model_validate(prompt).model_dump()
    return PromptOut(**fields, labels=labels, latest=latest)


async def get_prompt(session: AsyncSession, tenant: Tenant, name: str) -> PromptOut:
    return await prompt_out(session, await find_prompt(session, tenant, name))


async def list_prompts(
    session: AsyncSession,
    tenant: Tenant,
    page: PageRequest,
    *,
    prefix: str | None = None,
    tag: str | None = None,
    label: str | None = None,
    text: str | None = None,
    archived: bool | None = False,
) -> Page[PromptSummary]:
    listing = ["prompts", tenant.id.hex]
    after = page.after(listing, str)
    rows = await repo.list_prompts(
        session,
        tenant.id,
        after=after[0] if after else None,
        limit=page.limit + 1,
        prefix=prefix,
        tag=tag,
        label=label,
        text=text,
        archived=archived,
    )
    found, next_cursor = page.cut(listing, rows, lambda row: row[0].name)
    labels = await label_repo.labels_of(session, [p for p, _ in found])
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
        for p, v in found
    ]
    return Page(items=items, next_cursor=next_cursor)


async def list_versions(
    session: AsyncSession, tenant: Tenant, name: str, page: PageRequest
) -> Page[VersionSummary]:
    prompt = await find_prompt(session, tenant, name)
    listing = ["versions", tenant.id.hex, prompt.id.hex]
    before = page.after(listing, int)
    rows = await repo.list_versions(
        session, prompt, before=before[0] if before else None, limit=page.limit + 1
    )
    found, next_cursor = page.cut(listing, rows, lambda row: row.version)
    return Page(items=[VersionSummary.model_validate(r) for r in found], next_cursor=next_cursor)


async def get_version(session: AsyncSession, tenant: Tenant, name: str, version: int) -> VersionOut:
    prompt = await find_prompt(session, tenant, name)
    found = await versions_out(session, prompt, [version])
    if not found:
        raise NotFound(f"prompt {name!r} has no version {version}", field="version")
    return found[0]


async def label_history(
    session: AsyncSession,
    tenant: Tenant,
    name: str,
    page: PageRequest,
    *,
    label: str | None,
) -> Page[LabelHistoryOut]:
    prompt = await find_prompt(session, tenant, name)
    listing = ["label-history", tenant.id.hex, prompt.id.hex, label or ""]
    before = page.after(listing, int)
    rows = await label_repo.label_history(
        session, prompt, label=label, before=before[0] if before else None, limit=page.limit + 1
    )
    found, next_cursor = page.cut(listing, rows, lambda row: row.id)
    return Page(items=[LabelHistoryOut.model_validate(r) for r in found], next_cursor=next_cursor)


# --- what a name resolves to --------------------------------------------------------------------


def not_served(name: str, label: str, version: int | None, missing: str) -> NotFound:
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
        raise not_served(name, label, version, "prompt")
    if version is not None:
        if not 1 <= version <= prompt.latest_version:
            raise not_served(name, label, version, "version")
        return prompt, version
    row = await label_repo.label_row(session, prompt, label)
    if row is None:
        raise not_served(name, label, version, "label")
    return prompt, row.version


async def argument_declarations(
    session: AsyncSession, tenant: Tenant, name: str, *, version: int | None, label: str | None
) -> tuple[tuple[PromptArgument, ...], str | None]:
    """The arguments as declared (titles and descriptions included) and the description of the
    version ``name`` resolves to."""
    prompt, number = await resolve_version(session, tenant, name, version=version, label=label)
    arguments, _ = await repo.version_children(session, tenant.id, prompt.id, [number])
    row = await repo.version_row_by_id(session, tenant.id, prompt.id, number)
    return tuple(arguments), row.description if row else None


async def check_label(session: AsyncSession, tenant: Tenant, label: str) -> None:
    """A label to serve must be the tenant's default or protected one, or one some prompt has had:
    a typo (or a client appending /mcp to the URL) is told, not served an empty list."""
    if label in (tenant.default_label, *tenant.protected_labels):
        return
    if await label_repo.label_ever_used(session, tenant.id, label):
        return
    known = await label_repo.labels_in_use(session, tenant.id, limit=20)
    raise NotFound(
        f"no prompt of tenant {tenant.slug!r} has ever had the label {label!r}; labels in use: "
        + (", ".join(known) if known else "none yet"),
        field="label",
    )


# --- what a label serves ------------------------------------------------------------------------


async def served_page(
    reads: asyncpg.Pool | AsyncSession,
    tenant: Tenant,
    label: str,
    *,
    after: str | None,
    limit: int,
) -> tuple[list[ServedPrompt], bool]:
    """One page of what ``label`` serves, by name, and whether more may follow: one round trip, on
    the hot path's plain pool or inside a tenant transaction."""
    rows = await hot_reads.served_page(reads, tenant.id, label, after=after, limit=limit + 1)
    return [served_prompt(*row) for row in rows[:limit]], len(rows) > limit


class EntryPage(NamedTuple):
    """A page of what a label serves as stored entries (``listing.stored_entry``): the JSON array
    itself, the last name on it and whether more may follow."""

    encoded: bytes
    last_name: str | None
    more: bool


async def served_entries(
    reads: asyncpg.Pool | AsyncSession,
    tenant: Tenant,
    label: str,
    *,
    after: str | None,
    limit: int,
) -> EntryPage:
    """``served_page`` as the stored entries, in one round trip; a version written before entries
    were stored (schema 0015) is shaped here from its row, as ``stored_entry`` would have stored it."""
    rows = await hot_reads.served_entries(reads, tenant.id, label, after=after, limit=limit + 1)
    page = rows[:limit]
    entries = [
        entry if entry is not None else stored_entry(served_prompt(name, *served or ()))
        for name, entry, served in page
    ]
    return EntryPage(
        ("[" + ",".join(entries) + "]").encode(),
        page[-1][0] if page else None,
        len(rows) > limit,
    )


async def served_count(reads: asyncpg.Pool | AsyncSession, tenant: Tenant, label: str) -> int:
    return await hot_reads.served_count(reads, tenant.id, label)


async def labels_changed(
    session: AsyncSession, tenant_id: uuid.UUID, after: int, upto: int
) -> set[str] | None:
    """Labels whose served list changed in the tenant's changes (after, upto]; None means any may have
    (a change not tied to one label, or rows this transaction cannot see)."""
    labels, rows = await repo.changed_labels(session, tenant_id, after, upto)
    if rows < upto - after or None in labels:
        return None
    return {label for label in labels if label is not None}
