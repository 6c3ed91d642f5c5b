"""SQL for labels: which version each label of a prompt serves, moving and deleting them (with their
history), and which labels a tenant uses. The prompts domain's other SQL is in ``repository.py``."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import (
    delete,
    insert,
    select,
)
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm.attributes import set_committed_value
from sqlalchemy.orm.util import identity_key

from registry.db.models import (
    Label,
    LabelHistory,
    Prompt,
)
from registry.db.repository import driver as _driver
from registry.db.repository import journal_ctes, journal_json

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


def move_ctes(label: str, rows: str, actor: str) -> str:
    """The common table expressions that move a label of the prompt ($1 tenant, $2 prompt) and
    write its history row: ``before`` (its version before), ``moved`` (the label as moved; no row
    when it pointed there already) and ``history``. ``label`` and ``actor`` are SQL expressions (a
    parameter), ``rows`` the label's row as a VALUES or SELECT clause (tenant, prompt, label,
    prompt name, version, actor). One text for every statement that moves a label: ``_MOVE_LABEL``
    and the version write that moves ``latest`` with it (version_repository.py, whose SQL function
    in migration 0026 is a copy of its statement)."""
    return f"""before AS (
    SELECT version FROM labels WHERE tenant_id = $1 AND prompt_id = $2 AND label = {label}
), moved AS (
    INSERT INTO labels AS l (tenant_id, prompt_id, label, prompt_name, version, updated_by)
    {rows}
    ON CONFLICT (tenant_id, prompt_id, label) DO UPDATE
       SET version = EXCLUDED.version, updated_by = EXCLUDED.updated_by, updated_at = now()
     WHERE l.version <> EXCLUDED.version
    RETURNING l.prompt_name, l.label, l.version, l.updated_by, l.updated_at
), history AS (
    INSERT INTO label_history (tenant_id, prompt_id, label, from_version, to_version, actor)
    SELECT $1, $2, {label}, (SELECT version FROM before), moved.version, {actor} FROM moved
)"""


# What a statement built on move_ctes selects: the label as moved, its version before, and the
# prompt's labels in the same scan of them (as they were before the move: ``moved_label`` applies
# it), so a write's answer needs no read of its own.
MOVED_COLUMNS = """moved.prompt_name, moved.label, moved.version, moved.updated_by, moved.updated_at,
       (SELECT version FROM before) AS before, held.labels, held.versions"""
HELD_LABELS = """LATERAL (SELECT array_agg(label ORDER BY label) AS labels,
                       array_agg(version ORDER BY label) AS versions
                  FROM labels WHERE tenant_id = $1 AND prompt_id = $2) AS held"""

# A label moved, with its history row, in one round trip on the driver; no row comes back when it
# already points there. The caller holds the prompt locked FOR UPDATE, which every label move
# takes first, so the label row cannot change between the read of ``before`` and the write.
_MOVE_LABEL = f"""
WITH {move_ctes("$3", "VALUES ($1, $2, $3, $4, $5, $6)", "$6")},
{journal_ctes("$7", "$8", when="moved")}
SELECT {MOVED_COLUMNS}
  FROM moved, {HELD_LABELS}
"""


async def move_label(
    session: AsyncSession,
    prompt: Prompt,
    label: str,
    version: int,
    actor: str,
    *,
    audit: Sequence[Any],
    changes: Sequence[Any],
) -> MovedLabel | None:
    """Point ``label`` at ``version`` and record it in the label's history (None: it was there),
    appending the ``audit`` and ``changes`` rows (``registry.db.audit``'s) only if it moved."""
    found = await (await _driver(session)).fetchrow(
        _MOVE_LABEL,
        prompt.tenant_id,
        prompt.id,
        label,
        prompt.name,
        version,
        actor,
        journal_json(audit),
        journal_json(changes),
    )
    return None if found is None else moved_label(session, prompt, found)


def labels_after(found: Any) -> dict[str, int]:
    """The prompt's labels after the move a statement built on ``move_ctes`` made (``MOVED_COLUMNS``
    of ``found``, whose label moved). The statement's labels are as they were before it (a statement
    does not see its own writes); the caller holds the prompt locked, which every label write takes,
    so nothing else moved."""
    labels = dict(zip(found["labels"] or (), found["versions"] or (), strict=True))
    labels[found["label"]] = found["version"]
    return _in_label_order(labels)


def moved_label(session: AsyncSession, prompt: Prompt, found: Any) -> MovedLabel | None:
    """The label as a statement built on ``move_ctes`` moved it (``MOVED_COLUMNS`` of ``found``;
    None: it did not move), with an ORM row of it read earlier in the transaction kept true."""
    if found["label"] is None:
        return None
    label, version = found["label"], found["version"]
    moved = MovedLabel(
        found["prompt_name"],
        label,
        version,
        found["updated_by"],
        found["updated_at"],
        found["before"],
        labels_after(found),
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
