"""What a label serves, whole, for applications that render locally (``registry.client``): each
served prompt as its served-version record (the very record ``prompts/get`` compiles: arguments,
messages, model config, partial locks and templates) and the blobs its messages use. Served over REST
page by page and one prompt at a time, and written by ``registry snapshot`` as a signed file."""

from __future__ import annotations

import base64
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.models import Tenant
from registry.prompts import hot_reads
from registry.prompts import repository as repo

FORMAT = "prompt-registry/snapshot-v1"
PAGE = 200  # records per REST page


async def served_record_at(
    session: AsyncSession, tenant: Tenant, name: str, version: int
) -> dict[str, Any] | None:
    """The record of ``name`` at ``version`` (what a live rollout's new side is served)."""
    found = await hot_reads.served_version(session, tenant.id, name, "", version)
    if "missing" in found:
        return None
    return {"name": name, **found}


async def served_record(
    session: AsyncSession, tenant: Tenant, label: str, name: str
) -> dict[str, Any] | None:
    """The record of ``name`` as ``label`` serves it, None when the label does not serve it."""
    found = await hot_reads.served_version(session, tenant.id, name, label, None)
    if "missing" in found:
        return None
    return {"name": name, **found}


async def served_page(
    session: AsyncSession, tenant: Tenant, label: str, *, after: str | None, limit: int
) -> tuple[list[dict[str, Any]], bool]:
    rows = await hot_reads.served_page(session, tenant.id, label, after=after, limit=limit + 1)
    records = []
    for name, *_ in rows[:limit]:  # names only: each record is read whole below
        record = await served_record(session, tenant, label, name)
        if record is not None:
            records.append(record)
    return records, len(rows) > limit


async def blobs_of(
    session: AsyncSession, tenant: Tenant, records: Iterable[dict[str, Any]]
) -> dict[str, dict[str, str]]:
    """sha256 (hex) -> {"mime_type", "data" (base64)} of every blob the records' messages use."""
    shas = {
        bytes.fromhex(m["blob"])
        for r in records
        for m in r["messages"]
        if m.get("blob") is not None
    }
    found = await repo.blob_data(session, tenant.id, sorted(shas))
    return {
        sha.hex(): {"mime_type": blob.mime_type, "data": base64.b64encode(blob.data).decode()}
        for sha, blob in found.items()
    }


def document(
    tenant: Tenant, label: str, records: list[dict[str, Any]], blobs: dict[str, dict[str, str]]
) -> dict[str, Any]:
    """Everything ``label`` serves, as one document (to be signed): tenant, label, the change
    sequence it is current with, when it was made, the records and their blobs."""
    return {
        "format": FORMAT,
        "tenant": tenant.slug,
        "label": label,
        "seq": tenant.change_seq,
        "created_at": datetime.now(UTC).isoformat(),
        "prompts": records,
        "blobs": blobs,
    }
