"""The SQL of change requests: the requests, their moves and reviews (tenant transactions), and the
requests due to be applied (the scheduler, as the owner role, across tenants)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.release_models import ChangeRequest, ChangeRequestMove, ChangeRequestReview

# A request's number: the tenant's next, under a transaction lock of the tenant's numbering (the
# first key says "change requests", the second names the tenant).
_NUMBERING_LOCK = 0x7265_6C73  # "rels"


async def insert_request(
    session: AsyncSession, tenant_id: uuid.UUID, **values: Any
) -> ChangeRequest:
    await session.execute(
        text("SELECT pg_advisory_xact_lock(:space, hashtext(:tenant))"),
        {"space": _NUMBERING_LOCK, "tenant": str(tenant_id)},
    )
    number = await session.scalar(
        select(func.coalesce(func.max(ChangeRequest.id), 0) + 1).where(
            ChangeRequest.tenant_id == tenant_id
        )
    )
    request = ChangeRequest(tenant_id=tenant_id, id=number, **values)
    session.add(request)
    await session.flush()
    await session.refresh(request)
    return request


async def replace_moves(
    session: AsyncSession, request: ChangeRequest, moves: Sequence[dict[str, Any]]
) -> None:
    await session.execute(
        delete(ChangeRequestMove).where(
            ChangeRequestMove.tenant_id == request.tenant_id,
            ChangeRequestMove.request_id == request.id,
        )
    )
    session.add_all(
        ChangeRequestMove(
            tenant_id=request.tenant_id, request_id=request.id, position=position, **move
        )
        for position, move in enumerate(moves)
    )
    await session.flush()


async def request_by_id(
    session: AsyncSession, tenant_id: uuid.UUID, request_id: int, *, lock: bool = False
) -> ChangeRequest | None:
    query = select(ChangeRequest).where(
        ChangeRequest.tenant_id == tenant_id, ChangeRequest.id == request_id
    )
    if lock:
        query = query.with_for_update()
    return (await session.execute(query.execution_options(populate_existing=True))).scalar()


async def moves_of(session: AsyncSession, request: ChangeRequest) -> list[ChangeRequestMove]:
    result = await session.execute(
        select(ChangeRequestMove)
        .where(
            ChangeRequestMove.tenant_id == request.tenant_id,
            ChangeRequestMove.request_id == request.id,
        )
        .order_by(ChangeRequestMove.position)
    )
    return list(result.scalars().all())


async def reviews_of(session: AsyncSession, request: ChangeRequest) -> list[ChangeRequestReview]:
    result = await session.execute(
        select(ChangeRequestReview)
        .where(
            ChangeRequestReview.tenant_id == request.tenant_id,
            ChangeRequestReview.request_id == request.id,
        )
        .order_by(ChangeRequestReview.id)
    )
    return list(result.scalars().all())


async def add_review(
    session: AsyncSession, request: ChangeRequest, actor: str, kind: str, body: str | None
) -> None:
    session.add(
        ChangeRequestReview(
            tenant_id=request.tenant_id,
            request_id=request.id,
            actor=actor,
            kind=kind,
            body=body,
            revision=request.revision,
        )
    )
    await session.flush()


async def update_request(
    session: AsyncSession, request: ChangeRequest, **values: Any
) -> ChangeRequest:
    result = await session.execute(
        update(ChangeRequest)
        .where(ChangeRequest.tenant_id == request.tenant_id, ChangeRequest.id == request.id)
        .values(**values, updated_at=func.now())
        .returning(ChangeRequest)
        .execution_options(populate_existing=True)
    )
    return result.scalar_one()


async def requests_page(
    session: AsyncSession,
    tenant_id: uuid.UUID,
    *,
    states: Sequence[str],
    author: str | None,
    before: int | None,
    limit: int,
) -> list[tuple[ChangeRequest, int]]:
    """Requests newest first (ids below ``before``), with how many moves each holds."""
    moves = (
        select(func.count())
        .where(
            ChangeRequestMove.tenant_id == ChangeRequest.tenant_id,
            ChangeRequestMove.request_id == ChangeRequest.id,
        )
        .scalar_subquery()
    )
    query = select(ChangeRequest, moves).where(ChangeRequest.tenant_id == tenant_id)
    if states:
        query = query.where(ChangeRequest.state.in_(list(states)))
    if author is not None:
        query = query.where(ChangeRequest.author == author)
    if before is not None:
        query = query.where(ChangeRequest.id < before)
    result = await session.execute(query.order_by(ChangeRequest.id.desc()).limit(limit))
    return [(row[0], int(row[1])) for row in result.all()]


# --- the scheduler (owner role, across tenants) -----------------------------------------------


async def due(session: AsyncSession, limit: int) -> list[tuple[uuid.UUID, int]]:
    """Approved requests whose time has come, oldest due first."""
    result = await session.execute(
        select(ChangeRequest.tenant_id, ChangeRequest.id)
        .where(
            ChangeRequest.state == "approved",
            ChangeRequest.apply_at.is_not(None),
            ChangeRequest.apply_at <= func.now(),
        )
        .order_by(ChangeRequest.apply_at)
        .limit(limit)
    )
    return [(row[0], int(row[1])) for row in result.all()]


async def next_due(session: AsyncSession) -> datetime | None:
    """When the next approved request is due (None: none is scheduled)."""
    return await session.scalar(
        select(func.min(ChangeRequest.apply_at)).where(
            ChangeRequest.state == "approved", ChangeRequest.apply_at.is_not(None)
        )
    )
