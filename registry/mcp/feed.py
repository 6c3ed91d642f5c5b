"""What the change feed reads from the database, answered by the domain services (the events layer
imports no domain, so the transports hand it this)."""

from __future__ import annotations

import uuid

from registry.db.engine import Database
from registry.prompts import reading as prompt_reading
from registry.tenants import service as tenant_service


class DatabaseChanges:
    """What the change feed reads, answered by the domain services."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def labels_changed(self, tenant_id: uuid.UUID, after: int, upto: int) -> set[str] | None:
        async with self.db.tenant_tx(tenant_id) as session:
            return await prompt_reading.labels_changed(session, tenant_id, after, upto)

    async def current_sequences(self, tenant_ids: list[uuid.UUID]) -> dict[uuid.UUID, int]:
        async with self.db.app_tx() as session:
            return await tenant_service.sequences(session, tenant_ids)
