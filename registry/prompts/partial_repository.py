"""SQL for partial locks: which versions a version embeds (locked when it was written), the tree of
them a render walks, and who embeds what. The prompts domain's other SQL is in ``repository.py``."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    UUID,
    Integer,
    Text,
    and_,
    column,
    func,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.models import (
    Label,
    Prompt,
    PromptPartial,
)
from registry.prompts import repository as repo

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


_PARTIAL_LOCKS = repo.of_versions(PromptPartial, PromptPartial.version, PromptPartial.ref)


async def partial_locks(
    session: AsyncSession, tenant_id: uuid.UUID, prompt_id: uuid.UUID, versions: Sequence[int]
) -> Sequence[PromptPartial]:
    params = {"tenant_id": tenant_id, "prompt_id": prompt_id, "versions": list(versions)}
    return (await session.execute(_PARTIAL_LOCKS, params)).scalars().all()


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
