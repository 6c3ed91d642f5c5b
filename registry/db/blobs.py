"""SQL for blobs, the content-addressed bytes of a tenant that prompts (images, audio, resources)
and skills (their files) share: stored once per tenant whoever refers to them."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.models import Blob


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
