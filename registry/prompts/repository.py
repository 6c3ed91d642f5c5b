"""SQL for prompts, versions, labels and blobs. Only this module builds their queries.

Every query runs inside a tenant-scoped transaction, so row-level security already limits it to one
tenant; the explicit tenant filters are there for the planner (they match the leading index column).
The hot path's statements (what MCP serving reads through the plain driver) are in
``prompts/serving.py``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, NamedTuple

import orjson
from sqlalchemy import (
    UUID,
    Integer,
    Text,
    and_,
    bindparam,
    column,
    delete,
    func,
    insert,
    or_,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm.attributes import set_committed_value
from sqlalchemy.orm.util import identity_key

from registry.db.errors import translate_db_error
from registry.db.models import (
    Blob,
    ChangeLog,
    Label,
    LabelHistory,
    Prompt,
    PromptArgument,
    PromptMessage,
    PromptPartial,
    PromptVersion,
)
from registry.db.repository import driver as _driver

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


# A new version in one round trip on the driver (no ORM statement): the prompt's latest version is
# bumped, the version row inserted and its child rows with it (arguments, messages, partial locks:
# each a JSON array of rows, read as the table's row type), unless the latest version already has
# this content (then nothing is written and no row comes back). The child rows' foreign keys are
# checked at the end of the statement, when the version row is there. The prompt must be locked FOR
# UPDATE by the caller.
_WRITE_VERSION = """
WITH same AS (
    SELECT 1 FROM prompt_versions
     WHERE tenant_id = $1 AND prompt_id = $2 AND version = $3 AND content_hash = $4
), bumped AS (
    UPDATE prompts SET latest_version = latest_version + 1, updated_at = now()
     WHERE tenant_id = $1 AND id = $2 AND NOT EXISTS (SELECT 1 FROM same)
    RETURNING latest_version, updated_at
), inserted AS (
    INSERT INTO prompt_versions
           (tenant_id, prompt_id, version, title, description, icons, config, commit_message,
            author, content_hash, list_entry)
    SELECT $1, $2, bumped.latest_version, $5, $6, CAST($7::text AS jsonb),
           CAST($8::text AS jsonb), $9, $10, $4, $11
      FROM bumped
    RETURNING version, created_at
), arguments AS (
    INSERT INTO prompt_arguments
           (tenant_id, prompt_id, version, position, name, title, description, required, "default",
            enum, pattern, max_length, suggestions)
    SELECT $1, $2, inserted.version, a.position, a.name, a.title, a.description,
           coalesce(a.required, false), a."default", a.enum, a.pattern, a.max_length, a.suggestions
      FROM inserted, jsonb_populate_recordset(NULL::prompt_arguments, CAST($12::text AS jsonb)) a
), messages AS (
    INSERT INTO prompt_messages (tenant_id, prompt_id, version, position, role, content, blob_sha256)
    SELECT $1, $2, inserted.version, m.position, m.role, m.content, m.blob_sha256
      FROM inserted, jsonb_populate_recordset(NULL::prompt_messages, CAST($13::text AS jsonb)) m
), partials AS (
    INSERT INTO prompt_partials
           (tenant_id, prompt_id, version, ref, child_name, child_prompt_id, child_version)
    SELECT $1, $2, inserted.version, l.ref, l.child_name, l.child_prompt_id, l.child_version
      FROM inserted, jsonb_populate_recordset(NULL::prompt_partials, CAST($14::text AS jsonb)) l
)
SELECT inserted.version, inserted.created_at, bumped.updated_at
  FROM inserted, bumped
"""


# The version row's columns that come from the write's metadata (PreparedVersion.meta).
_VERSION_META = ("title", "description", "icons", "config", "commit_message")


def _jsonb(value: Any) -> str | None:
    return None if value is None else orjson.dumps(value).decode()


def _row_array(rows: Iterable[dict[str, Any]]) -> str:
    """Rows as one JSON array for jsonb_populate_recordset: bytes as bytea's hex input, the rest
    as JSON gives it."""
    return orjson.dumps(
        [
            {k: "\\x" + v.hex() if isinstance(v, bytes) else v for k, v in row.items()}
            for row in rows
        ],
        default=str,  # ids read from the driver are asyncpg's own UUID type, which orjson does not know
    ).decode()


async def insert_version(
    session: AsyncSession,
    *,
    prompt: Prompt,
    meta: dict[str, Any],
    author: str,
    content_hash: bytes,
    list_entry: str,
    arguments: list[dict[str, Any]],
    messages: list[dict[str, Any]],
    partials: Sequence[dict[str, Any]] = (),
) -> PromptVersion | None:
    """The prompt's next version with its child rows, or None (nothing written) when its latest
    version has the same content hash. ``prompt`` (the same ORM object, locked FOR UPDATE) is kept
    current without a re-read; the version comes back as a transient row. ``list_entry``: its
    prompts/list entry (registry.prompts.listing)."""
    columns = {name: meta.get(name) for name in _VERSION_META}
    found = await (await _driver(session)).fetchrow(
        _WRITE_VERSION,
        prompt.tenant_id,
        prompt.id,
        prompt.latest_version,
        content_hash,
        columns["title"],
        columns["description"],
        _jsonb(columns["icons"]),
        _jsonb(columns["config"]),
        columns["commit_message"],
        author,
        list_entry,
        _row_array({**a, "position": i} for i, a in enumerate(arguments)),
        _row_array({**m, "position": i} for i, m in enumerate(messages)),
        _row_array(partials),
    )
    if found is None:
        return None
    set_committed_value(prompt, "latest_version", found["version"])
    set_committed_value(prompt, "updated_at", found["updated_at"])
    return PromptVersion(
        tenant_id=prompt.tenant_id,
        prompt_id=prompt.id,
        version=found["version"],
        **columns,
        author=author,
        content_hash=content_hash,
        created_at=found["created_at"],
    )


# --- partials -----------------------------------------------------------------------------------

_PARTIAL_TREE = text(
    """
    WITH RECURSIVE tree(prompt_id, version, depth) AS (
        SELECT r.prompt_id, r.version, 1
          FROM unnest(CAST(:prompts AS uuid[]), CAST(:versions AS integer[])) AS r(prompt_id, version)
        UNION
        SELECT l.child_prompt_id, l.child_version, t.depth + 1
          FROM tree t
          JOIN prompt_partials l
            ON l.tenant_id = :tenant AND l.prompt_id = t.prompt_id AND l.version = t.version
         WHERE t.depth < :depth
    )
    SELECT n.prompt_id, n.version, p.name,
           (SELECT jsonb_agg(m.content ORDER BY m.position) FROM prompt_messages m
             WHERE m.tenant_id = :tenant AND m.prompt_id = n.prompt_id AND m.version = n.version
           ) AS messages,
           (SELECT jsonb_agg(jsonb_build_object(
                       'ref', l.ref, 'child_name', l.child_name,
                       'child_prompt', l.child_prompt_id, 'child_version', l.child_version)
                   ORDER BY l.ref)
              FROM prompt_partials l
             WHERE l.tenant_id = :tenant AND l.prompt_id = n.prompt_id AND l.version = n.version
           ) AS locks
      FROM (SELECT DISTINCT prompt_id, version FROM tree) n
      JOIN prompts p ON p.tenant_id = :tenant AND p.id = n.prompt_id
    """
).columns(
    column("prompt_id", UUID()),
    column("version", Integer()),
    column("name", Text()),
    column("messages", JSONB()),
    column("locks", JSONB()),
)


async def partial_tree(
    session: AsyncSession, tenant_id: uuid.UUID, roots: Sequence[tuple[uuid.UUID, int]], depth: int
) -> list[dict[str, Any]]:
    """Every version reachable from ``roots`` through partial locks (at most ``depth`` levels, the
    roots being the first): its prompt's name, its message contents and its own locks."""
    if not roots:
        return []
    result = await session.execute(
        _PARTIAL_TREE,
        {
            "tenant": tenant_id,
            "prompts": [r[0] for r in roots],
            "versions": [r[1] for r in roots],
            "depth": depth,
        },
    )
    return [dict(row) for row in result.mappings().all()]


async def partial_locks(
    session: AsyncSession, tenant_id: uuid.UUID, prompt_id: uuid.UUID, versions: Sequence[int]
) -> Sequence[PromptPartial]:
    result = await session.execute(
        select(PromptPartial)
        .where(
            PromptPartial.tenant_id == tenant_id,
            PromptPartial.prompt_id == prompt_id,
            PromptPartial.version.in_(versions),
        )
        .order_by(PromptPartial.version, PromptPartial.ref)
    )
    return result.scalars().all()


async def embedding(
    session: AsyncSession, tenant_id: uuid.UUID, child_id: uuid.UUID
) -> list[dict[str, Any]]:
    """The labelled versions whose locks name a version of ``child_id``: the parent's name, version
    and labels, the lock's ref and locked child version; by parent name, newest version first."""
    result = await session.execute(
        select(
            Prompt.name.label("prompt"),
            PromptPartial.version,
            PromptPartial.ref,
            PromptPartial.child_version,
            func.array_agg(Label.label).label("labels"),
        )
        .join(
            Prompt,
            and_(Prompt.tenant_id == PromptPartial.tenant_id, Prompt.id == PromptPartial.prompt_id),
        )
        .join(
            Label,
            and_(
                Label.tenant_id == PromptPartial.tenant_id,
                Label.prompt_id == PromptPartial.prompt_id,
                Label.version == PromptPartial.version,
            ),
        )
        .where(PromptPartial.tenant_id == tenant_id, PromptPartial.child_prompt_id == child_id)
        .group_by(
            Prompt.name, PromptPartial.version, PromptPartial.ref, PromptPartial.child_version
        )
        .order_by(Prompt.name, PromptPartial.version.desc(), PromptPartial.ref)
    )
    return [dict(row) for row in result.mappings().all()]


async def locked_versions(session: AsyncSession, tenant_id: uuid.UUID) -> dict[uuid.UUID, set[int]]:
    """Every child version some partial lock of the tenant names, by child prompt."""
    result = await session.execute(
        select(PromptPartial.child_prompt_id, PromptPartial.child_version)
        .where(PromptPartial.tenant_id == tenant_id)
        .distinct()
    )
    found: dict[uuid.UUID, set[int]] = {}
    for prompt_id, version in result.all():
        found.setdefault(prompt_id, set()).add(version)
    return found


async def embedders(
    session: AsyncSession, tenant_id: uuid.UUID, child_id: uuid.UUID, limit: int
) -> list[str]:
    """Names of other prompts whose versions lock a version of ``child_id``."""
    result = await session.execute(
        select(Prompt.name)
        .join(
            PromptPartial,
            and_(Prompt.tenant_id == PromptPartial.tenant_id, Prompt.id == PromptPartial.prompt_id),
        )
        .where(
            PromptPartial.tenant_id == tenant_id,
            PromptPartial.child_prompt_id == child_id,
            PromptPartial.prompt_id != child_id,
        )
        .distinct()
        .order_by(Prompt.name)
        .limit(limit)
    )
    return list(result.scalars().all())


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
    """Labels named by the change log in (after, upto], and how many rows that range holds."""
    result = await session.execute(
        select(ChangeLog.label).where(
            ChangeLog.tenant_id == tenant_id, ChangeLog.seq > after, ChangeLog.seq <= upto
        )
    )
    labels = list(result.scalars().all())
    return set(labels), len(labels)


async def version_rows(
    session: AsyncSession, prompt: Prompt, versions: Iterable[int] | None = None
) -> Sequence[PromptVersion]:
    query = select(PromptVersion).where(
        PromptVersion.tenant_id == prompt.tenant_id, PromptVersion.prompt_id == prompt.id
    )
    if versions is not None:
        query = query.where(PromptVersion.version.in_(list(versions)))
    return (await session.execute(query.order_by(PromptVersion.version))).scalars().all()


async def version_children(
    session: AsyncSession, tenant_id: uuid.UUID, prompt_id: uuid.UUID, versions: Sequence[int]
) -> tuple[Sequence[PromptArgument], Sequence[PromptMessage]]:
    """Arguments and messages of some versions of one prompt, each in position order."""
    arguments = await session.execute(
        select(PromptArgument)
        .where(
            PromptArgument.tenant_id == tenant_id,
            PromptArgument.prompt_id == prompt_id,
            PromptArgument.version.in_(versions),
        )
        .order_by(PromptArgument.version, PromptArgument.position)
    )
    messages = await session.execute(
        select(PromptMessage)
        .where(
            PromptMessage.tenant_id == tenant_id,
            PromptMessage.prompt_id == prompt_id,
            PromptMessage.version.in_(versions),
        )
        .order_by(PromptMessage.version, PromptMessage.position)
    )
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


# --- labels -----------------------------------------------------------------------------------


_LABELS_OF = """
SELECT prompt_id, label, version FROM labels
 WHERE tenant_id = $1 AND prompt_id = ANY($2::uuid[])
 ORDER BY label COLLATE "C"
"""


def _in_label_order(labels: dict[str, int]) -> dict[str, int]:
    """Labels ordered as _LABELS_OF orders them (by code point: labels are ASCII)."""
    return dict(sorted(labels.items()))


async def labels_of(
    session: AsyncSession, prompts: Sequence[Prompt]
) -> dict[uuid.UUID, dict[str, int]]:
    """Each prompt's labels and their versions, in label order (on the driver: every write answers
    with its prompt's labels, and the ORM's statement machinery cost more than the read)."""
    if not prompts:
        return {}
    rows = await (await _driver(session)).fetch(
        _LABELS_OF, prompts[0].tenant_id, [p.id for p in prompts]
    )
    found: dict[uuid.UUID, dict[str, int]] = {p.id: {} for p in prompts}
    for prompt_id, label, version in rows:
        found[prompt_id][label] = version
    return found


async def label_ever_used(session: AsyncSession, tenant_id: uuid.UUID, label: str) -> bool:
    """Whether any prompt of the tenant has ever had ``label`` (its history keeps every move)."""
    query = select(LabelHistory.id).where(
        LabelHistory.tenant_id == tenant_id, LabelHistory.label == label
    )
    return bool((await session.execute(select(query.exists()))).scalar())


async def labels_in_use(session: AsyncSession, tenant_id: uuid.UUID, limit: int) -> list[str]:
    result = await session.execute(
        select(Label.label)
        .where(Label.tenant_id == tenant_id)
        .group_by(Label.label)
        .order_by(Label.label)
        .limit(limit)
    )
    return list(result.scalars().all())


async def label_row(
    session: AsyncSession, prompt: Prompt, label: str, *, lock: bool = False
) -> Label | None:
    query = select(Label).where(
        Label.tenant_id == prompt.tenant_id, Label.prompt_id == prompt.id, Label.label == label
    )
    if lock:
        query = query.with_for_update()
    return (await session.execute(query)).scalar_one_or_none()


async def label_version(
    session: AsyncSession, prompt: Prompt, label: str, *, lock: bool = False
) -> int | None:
    """The version ``label`` points at (a column, not an ORM row: nothing enters the session's
    identity map that a later move would leave stale)."""
    query = select(Label.version).where(
        Label.tenant_id == prompt.tenant_id, Label.prompt_id == prompt.id, Label.label == label
    )
    if lock:
        query = query.with_for_update()
    return (await session.execute(query)).scalar_one_or_none()


class MovedLabel(NamedTuple):
    """A label as one move left it, the version it pointed at before (None: it is new), and every
    label of its prompt after the move, in label order."""

    prompt_name: str
    label: str
    version: int
    updated_by: str
    updated_at: datetime
    before: int | None
    labels: dict[str, int]


# A label moved, with its history row, in one round trip on the driver; no row comes back when it
# already points there. The caller holds the prompt locked FOR UPDATE, which every label move
# takes first, so the label row cannot change between the read of ``before`` and the write. The
# prompt's labels come back in the same scan of them (as they were before the move: the caller
# applies it), so a write's answer needs no read of its own.
_MOVE_LABEL = """
WITH before AS (
    SELECT version FROM labels WHERE tenant_id = $1 AND prompt_id = $2 AND label = $3
), moved AS (
    INSERT INTO labels AS l (tenant_id, prompt_id, label, prompt_name, version, updated_by)
    VALUES ($1, $2, $3, $4, $5, $6)
    ON CONFLICT (tenant_id, prompt_id, label) DO UPDATE
       SET version = EXCLUDED.version, updated_by = EXCLUDED.updated_by, updated_at = now()
     WHERE l.version <> EXCLUDED.version
    RETURNING l.prompt_name, l.label, l.version, l.updated_by, l.updated_at
), history AS (
    INSERT INTO label_history (tenant_id, prompt_id, label, from_version, to_version, actor)
    SELECT $1, $2, $3, (SELECT version FROM before), $5, $6 FROM moved
)
SELECT moved.prompt_name, moved.label, moved.version, moved.updated_by, moved.updated_at,
       (SELECT version FROM before) AS before, held.labels, held.versions
  FROM moved,
       LATERAL (SELECT array_agg(label ORDER BY label) AS labels,
                       array_agg(version ORDER BY label) AS versions
                  FROM labels WHERE tenant_id = $1 AND prompt_id = $2) AS held
"""


async def move_label(
    session: AsyncSession, prompt: Prompt, label: str, version: int, actor: str
) -> MovedLabel | None:
    """Point ``label`` at ``version`` and record it in the label's history (None: it was there)."""
    found = await (await _driver(session)).fetchrow(
        _MOVE_LABEL, prompt.tenant_id, prompt.id, label, prompt.name, version, actor
    )
    if found is None:
        return None
    # The statement's labels are as they were before it (a statement does not see its own writes);
    # the caller holds the prompt locked, which every label write takes, so nothing else moved.
    labels = dict(zip(found["labels"] or (), found["versions"] or (), strict=True))
    labels[label] = version
    moved = MovedLabel(
        found["prompt_name"],
        found["label"],
        found["version"],
        found["updated_by"],
        found["updated_at"],
        found["before"],
        _in_label_order(labels),
    )
    held = session.identity_map.get(identity_key(Label, (prompt.tenant_id, prompt.id, label)))
    if held is not None:  # an ORM row of this label read earlier in the transaction: keep it true
        for name in ("version", "updated_by", "updated_at"):
            set_committed_value(held, name, getattr(moved, name))
    return moved


async def delete_label(session: AsyncSession, prompt: Prompt, label: str) -> None:
    await session.execute(
        delete(Label).where(
            Label.tenant_id == prompt.tenant_id, Label.prompt_id == prompt.id, Label.label == label
        )
    )


async def insert_label_history(
    session: AsyncSession,
    prompt: Prompt,
    label: str,
    from_version: int | None,
    to_version: int | None,
    actor: str,
) -> None:
    await session.execute(
        insert(LabelHistory).values(
            tenant_id=prompt.tenant_id,
            prompt_id=prompt.id,
            label=label,
            from_version=from_version,
            to_version=to_version,
            actor=actor,
        )
    )


async def label_history(
    session: AsyncSession, prompt: Prompt, *, label: str | None, before: int | None, limit: int
) -> Sequence[LabelHistory]:
    query = (
        select(LabelHistory)
        .where(LabelHistory.tenant_id == prompt.tenant_id, LabelHistory.prompt_id == prompt.id)
        .order_by(LabelHistory.id.desc())
        .limit(limit)
    )
    if label is not None:
        query = query.where(LabelHistory.label == label)
    if before is not None:
        query = query.where(LabelHistory.id < before)
    return (await session.execute(query)).scalars().all()


# --- blobs ------------------------------------------------------------------------------------


async def store_blob(
    session: AsyncSession, tenant_id: uuid.UUID, sha256: bytes, mime_type: str, data: bytes
) -> bool:
    """Store bytes once per tenant; True when they were not there before."""
    result = await session.execute(
        pg_insert(Blob)
        .values(tenant_id=tenant_id, sha256=sha256, mime_type=mime_type, size=len(data), data=data)
        .on_conflict_do_nothing(index_elements=[Blob.tenant_id, Blob.sha256])
        .returning(Blob.sha256)
    )
    return result.scalar_one_or_none() is not None


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


async def blob_bytes(
    session: AsyncSession, tenant_id: uuid.UUID, sha: bytes
) -> tuple[str, bytes] | None:
    """One blob's type and bytes, read as plain values (kept in no identity map: an export lets
    each go once it is written)."""
    result = await session.execute(
        select(Blob.mime_type, Blob.data).where(Blob.tenant_id == tenant_id, Blob.sha256 == sha)
    )
    row = result.one_or_none()
    return None if row is None else (row[0], row[1])


# --- arguments ----------------------------------------------------------------------------------


async def arguments_of(
    session: AsyncSession, tenant_id: uuid.UUID, versions: Sequence[tuple[uuid.UUID, int]]
) -> dict[tuple[uuid.UUID, int], list[PromptArgument]]:
    found: dict[tuple[uuid.UUID, int], list[PromptArgument]] = {key: [] for key in versions}
    if not versions:
        return found
    result = await session.execute(
        select(PromptArgument)
        .where(
            PromptArgument.tenant_id == tenant_id,
            tuple_(PromptArgument.prompt_id, PromptArgument.version).in_(list(versions)),
        )
        .order_by(PromptArgument.prompt_id, PromptArgument.version, PromptArgument.position)
    )
    for argument in result.scalars().all():
        found[(argument.prompt_id, argument.version)].append(argument)
    return found
