"""Blobs: content-addressed bytes (image, audio, resources), stored once per tenant."""

from __future__ import annotations

import hashlib

from sqlalchemy.ext.asyncio import AsyncSession

from registry.content.media import check_media
from registry.db.audit import record_audit
from registry.db.models import Tenant
from registry.errors import NotFound
from registry.principal import Principal
from registry.prompts import repository as repo


async def upload_blob(
    session: AsyncSession, tenant: Tenant, caller: Principal, data: bytes, mime_type: str
) -> tuple[str, bool]:
    """Store ``data``; returns its sha256 (hex) and whether it was new to the tenant."""
    check_media(data, mime_type, "body")
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
