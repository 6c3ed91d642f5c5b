"""SQL for prompts, versions, arguments and blobs. Labels are in ``label_repository.py`` and partial
locks in ``partial_repository.py``; the three are the only modules that build the domain's queries.

Every query runs inside a tenant-scoped transaction, so row-level security already limits it to one
tenant; the explicit tenant filters are there for the planner (they match the leading index column).
The hot path's statements (what MCP serving reads through the plain driver) are in
``prompts/hot_reads.py``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from sqlalchemy import (
    Select,
    and_,
    bindparam,
    delete,
    func,
    insert,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.blobs import blob_bytes as blob_bytes
from registry.db.blobs import store_blob as store_blob
from registry.db.errors import translate_db_error
from registry.db.models import (
    Blob,
    ChangeLog,
    Label,
    Prompt,
    PromptArgument,
    PromptMessage,
    PromptVersion,
)
from registry.db.repository import driver as _driver
from registry.naming import serves_change

# --- prompts ----------------------------------------------------------------------------------


# Built once (every write and most admin reads look a prompt up by name).
_PROMPT_BY_NAME = select(Prompt).where(
    Prompt.tenant_id == bindparam("tenant_id"), Prompt.name == bindparam("name")
)
_PROMPT_BY_NAME_LOCKED = _PROMPT_BY_NAME.with_for_update()


async def prompt_by_name(
    session: AsyncSession, tenant_id: uuid.UUID, name: str, *, lock: bool = False
) -> Prompt | None:
    # lock: serialises writers of one prompt, so version numbers and label moves stay consistent
    query = _PROMPT_BY_NAME_LOCKED if lock else _PROMPT_BY_NAME
    result = await session.execute(query, {"tenant_id": tenant_id, "name": name})
    return result.scalar_one_or_none()


async def insert_prompt(
    session: AsyncSession, tenant_id: uuid.UUID, name: str, tags: list[str]
) -> Prompt:
    statement = insert(Prompt).values(tenant_id=tenant_id, name=name, tags=tags).returning(Prompt)
    try:
        return (await session.execute(statement)).scalar_one()
    except IntegrityError as error:
        raise translate_db_error(error, name=name) from error


async def insert_prompt_if_absent(
    session: AsyncSession, tenant_id: uuid.UUID, name: str, tags: list[str]
) -> Prompt | None:
    """The new prompt, or None when one of that name exists (or another transaction just committed
    it: the insert waits for it rather than failing)."""
    statement = (
        pg_insert(Prompt)
        .values(tenant_id=tenant_id, name=name, tags=tags)
        .on_conflict_do_nothing(index_elements=[Prompt.tenant_id, Prompt.name])
        .returning(Prompt)
    )
    return (await session.execute(statement)).scalar_one_or_none()


async def update_prompt(session: AsyncSession, prompt: Prompt, **values: Any) -> Prompt:
    result = await session.execute(
        update(Prompt)
        .where(Prompt.tenant_id == prompt.tenant_id, Prompt.id == prompt.id)
        .values(**values, updated_at=func.now())
        .returning(Prompt)
        .execution_options(populate_existing=True)
    )
    return result.scalar_one()


async def delete_prompt(session: AsyncSession, prompt: Prompt) -> None:
    await session.execute(
        delete(Prompt).where(Prompt.tenant_id == prompt.tenant_id, Prompt.id == prompt.id)
    )


async def list_prompts(
    session: AsyncSession,
    tenant_id: uuid.UUID,
    *,
    after: str | None,
    limit: int,
    prefix: str | None,
    tag: str | None,
    label: str | None,
    text: str | None,
    archived: bool | None,
) -> Sequence[tuple[Prompt, PromptVersion | None]]:
    """Keyset page ordered by name, with each prompt's latest version for title and description."""
    latest = and_(
        PromptVersion.tenant_id == Prompt.tenant_id,
        PromptVersion.prompt_id == Prompt.id,
        PromptVersion.version == Prompt.latest_version,
    )
    query = (
        select(Prompt, PromptVersion)
        .outerjoin(PromptVersion, latest)
        .where(Prompt.tenant_id == tenant_id)
        .order_by(Prompt.name)
        .limit(limit)
    )
    if after is not None:
        query = query.where(Prompt.name > after)
    if prefix:
        # A range, not LIKE, so the (tenant_id, name) index drives it whatever the characters.
        query = query.where(Prompt.name >= prefix, Prompt.name < prefix + "\U0010ffff")
    if tag:
        query = query.where(Prompt.tags.any_() == tag)
    if archived is not None:
        query = query.where(
            Prompt.archived_at.is_not(None) if archived else Prompt.archived_at.is_(None)
        )
    if label:
        query = query.where(
            select(Label.prompt_id)
            .where(
                Label.tenant_id == Prompt.tenant_id,
                Label.prompt_id == Prompt.id,
                Label.label == label,
            )
            .exists()
        )
    if text:
        pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        query = query.where(
            or_(
                Prompt.name.ilike(pattern),
                PromptVersion.title.ilike(pattern),
                PromptVersion.description.ilike(pattern),
            )
        )
    return [(row[0], row[1]) for row in (await session.execute(query)).all()]


# --- versions ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoredArgument:
    """An argument as a version declares it (``schemas.DeclaredArgument``), read without the ORM
    (``arguments_of``, and a version write's ``contracted`` labels)."""

    name: str
    title: str | None
    description: str | None
    required: bool
    default: str | None
    enum: list[str] | None
    pattern: str | None
    max_length: int | None


# StoredArgument's columns of prompt_arguments ``a``: as a select list, and as a JSON object's members.
_ARGUMENT_COLUMNS = ", ".join(f'a."{f.name}"' for f in fields(StoredArgument))
ARGUMENT_OBJECT = ", ".join(f"'{f.name}', a.\"{f.name}\"" for f in fields(StoredArgument))


async def version_row_by_id(
    session: AsyncSession, tenant_id: uuid.UUID, prompt_id: uuid.UUID, version: int
) -> PromptVersion | None:
    result = await session.execute(
        select(PromptVersion).where(
            PromptVersion.tenant_id == tenant_id,
            PromptVersion.prompt_id == prompt_id,
            PromptVersion.version == version,
        )
    )
    return result.scalar_one_or_none()


async def changed_labels(
    session: AsyncSession, tenant_id: uuid.UUID, after: int, upto: int
) -> tuple[set[str | None], int]:
    """Labels named by the change log's changes of what is served in (after, upto], and how many
    rows that range holds (a change request's review events count, and name no label)."""
    result = await session.execute(
        select(ChangeLog.label, ChangeLog.kind).where(
            ChangeLog.tenant_id == tenant_id, ChangeLog.seq > after, ChangeLog.seq <= upto
        )
    )
    rows = result.all()
    return {label for label, kind in rows if serves_change(kind)}, len(rows)


R = TypeVar("R")


def of_prompt(model: type[R], *order: Any) -> Select[R]:
    """Rows of ``model`` that belong to one prompt, in ``order``: a statement built once, its
    parameters bound at each call (``tenant_id``, ``prompt_id``). Building a statement and its
    cache key at each call cost a REST read more than running it."""
    rows: Any = model  # a mapped class of a prompt's version rows or their children
    return (
        select(model)
        .where(rows.tenant_id == bindparam("tenant_id"), rows.prompt_id == bindparam("prompt_id"))
        .order_by(*order)
    )


def of_versions(model: type[R], *order: Any) -> Select[R]:
    """The rows of ``of_prompt`` that belong to some of its versions (``versions`` bound too)."""
    rows: Any = model
    return of_prompt(model, *order).where(rows.version.in_(bindparam("versions", expanding=True)))


_VERSION_ROWS = of_prompt(PromptVersion, PromptVersion.version)
_SOME_VERSION_ROWS = of_versions(PromptVersion, PromptVersion.version)
_ARGUMENTS = of_versions(PromptArgument, PromptArgument.version, PromptArgument.position)
_MESSAGES = of_versions(PromptMessage, PromptMessage.version, PromptMessage.position)


async def version_rows(
    session: AsyncSession, prompt: Prompt, versions: Iterable[int] | None = None
) -> Sequence[PromptVersion]:
    params: dict[str, Any] = {"tenant_id": prompt.tenant_id, "prompt_id": prompt.id}
    if versions is None:
        return (await session.execute(_VERSION_ROWS, params)).scalars().all()
    params["versions"] = list(versions)
    return (await session.execute(_SOME_VERSION_ROWS, params)).scalars().all()


async def version_children(
    session: AsyncSession, tenant_id: uuid.UUID, prompt_id: uuid.UUID, versions: Sequence[int]
) -> tuple[Sequence[PromptArgument], Sequence[PromptMessage]]:
    """Arguments and messages of some versions of one prompt, each in position order."""
    params = {"tenant_id": tenant_id, "prompt_id": prompt_id, "versions": list(versions)}
    arguments = await session.execute(_ARGUMENTS, params)
    messages = await session.execute(_MESSAGES, params)
    return arguments.scalars().all(), messages.scalars().all()


async def list_versions(
    session: AsyncSession, prompt: Prompt, *, before: int | None, limit: int
) -> Sequence[PromptVersion]:
    query = (
        select(PromptVersion)
        .where(PromptVersion.tenant_id == prompt.tenant_id, PromptVersion.prompt_id == prompt.id)
        .order_by(PromptVersion.version.desc())
        .limit(limit)
    )
    if before is not None:
        query = query.where(PromptVersion.version < before)
    return (await session.execute(query)).scalars().all()


async def version_by_hash(session: AsyncSession, prompt: Prompt, content_hash: bytes) -> int | None:
    result = await session.execute(
        select(func.max(PromptVersion.version)).where(
            PromptVersion.tenant_id == prompt.tenant_id,
            PromptVersion.prompt_id == prompt.id,
            PromptVersion.content_hash == content_hash,
        )
    )
    found = result.scalar_one_or_none()
    return int(found) if found is not None else None


# --- blobs ------------------------------------------------------------------------------------


async def blob_meta(session: AsyncSession, tenant_id: uuid.UUID, sha256: bytes) -> Blob | None:
    result = await session.execute(
        select(Blob).where(Blob.tenant_id == tenant_id, Blob.sha256 == sha256)
    )
    return result.scalar_one_or_none()


async def existing_blobs(
    session: AsyncSession, tenant_id: uuid.UUID, shas: Iterable[bytes]
) -> set[bytes]:
    wanted = list(set(shas))
    if not wanted:
        return set()
    result = await session.execute(
        select(Blob.sha256).where(Blob.tenant_id == tenant_id, Blob.sha256.in_(wanted))
    )
    return set(result.scalars().all())


async def blob_data(
    session: AsyncSession, tenant_id: uuid.UUID, shas: Iterable[bytes]
) -> dict[bytes, Blob]:
    wanted = list(set(shas))
    if not wanted:
        return {}
    result = await session.execute(
        select(Blob).where(Blob.tenant_id == tenant_id, Blob.sha256.in_(wanted))
    )
    return {blob.sha256: blob for blob in result.scalars().all()}


# --- arguments ----------------------------------------------------------------------------------


# The arguments of (prompt, version) pairs, in one round trip on the driver: the pairs come as two
# arrays, unnested with their place in the request (a pair is found by its place: the driver's ids
# are a type of its own), each pair reached on the primary key.
_ARGUMENTS_OF = f"""
SELECT p.place, {_ARGUMENT_COLUMNS}
  FROM unnest($2::uuid[], $3::int[]) WITH ORDINALITY AS p(prompt_id, version, place)
  JOIN prompt_arguments a ON a.tenant_id = $1 AND a.prompt_id = p.prompt_id AND a.version = p.version
 ORDER BY p.place, a.position
"""


async def arguments_of(
    session: AsyncSession, tenant_id: uuid.UUID, versions: Sequence[tuple[uuid.UUID, int]]
) -> dict[tuple[uuid.UUID, int], list[StoredArgument]]:
    """The arguments of each (prompt, version) pair, in position order (none for a pair without)."""
    wanted = list(dict.fromkeys(versions))
    found: dict[tuple[uuid.UUID, int], list[StoredArgument]] = {key: [] for key in wanted}
    if not wanted:
        return found
    rows = await (await _driver(session)).fetch(
        _ARGUMENTS_OF, tenant_id, [p for p, _ in wanted], [v for _, v in wanted]
    )
    for row in rows:
        found[wanted[row[0] - 1]].append(StoredArgument(*row[1:]))
    return found


# --- prompts served as tools -------------------------------------------------------------------


async def served_marked(
    session: AsyncSession,
    tenant_id: uuid.UUID,
    label: str,
    *,
    after: str | None,
    limit: int,
) -> list[tuple[Prompt, PromptVersion]]:
    """The prompts marked as tools that ``label`` serves (not archived), by name, after ``after``,
    with the version the label points at."""
    query = (
        select(Prompt, PromptVersion)
        .join(Label, and_(Label.tenant_id == Prompt.tenant_id, Label.prompt_id == Prompt.id))
        .join(
            PromptVersion,
            and_(
                PromptVersion.tenant_id == Label.tenant_id,
                PromptVersion.prompt_id == Label.prompt_id,
                PromptVersion.version == Label.version,
            ),
        )
        .where(
            Label.tenant_id == tenant_id,
            Label.label == label,
            Prompt.as_tool.is_(True),
            Prompt.archived_at.is_(None),
        )
        .order_by(Label.prompt_name)
        .limit(limit)
    )
    if after is not None:
        query = query.where(Label.prompt_name > after)
    return [(row[0], row[1]) for row in (await session.execute(query)).all()]


# A mark's check holds a transaction lock of the tool name it takes (the first key says "tool
# names", the second names the tenant and the tool; registry.change_requests.repository numbers change
# requests under a space of its own): two transactions marking prompts of the same tool name check
# one after the other, so the second sees the first's mark once it commits.
_MARK_LOCK = 0x746F_6F6C  # "tool"


async def marked_as_tool(
    session: AsyncSession, tenant_id: uuid.UUID, tool: str, *, besides: str
) -> str | None:
    """The name of a marked prompt other than ``besides`` whose tool name is ``tool``, if any,
    read under the lock of that tool name until the transaction ends (a concurrent check of the
    same name waits for it)."""
    await session.execute(
        text("SELECT pg_advisory_xact_lock(:space, hashtext(:key))"),
        {"space": _MARK_LOCK, "key": f"{tenant_id}:{tool}"},
    )
    query = (
        select(Prompt.name)
        .where(Prompt.tenant_id == tenant_id, Prompt.tool_name == tool, Prompt.name != besides)
        .limit(1)
    )
    return (await session.execute(query)).scalar()


async def prompts_by_names(
    session: AsyncSession, tenant_id: uuid.UUID, names: Sequence[str]
) -> Sequence[Prompt]:
    if not names:
        return []
    result = await session.execute(
        select(Prompt).where(Prompt.tenant_id == tenant_id, Prompt.name.in_(list(names)))
    )
    return result.scalars().all()
