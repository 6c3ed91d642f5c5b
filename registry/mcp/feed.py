"""What the change feed reads from the database, answered by the domain services (the events layer
imports no domain, so the transports hand it this)."""

from __future__ import annotations

import uuid

from registry.db.engine import Database
from registry.libraries import repository as library_repo
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

    async def libraries(self) -> set[uuid.UUID]:
        return await library_repo.offering(await self.db.reads())

    async def library_readers(
        self, library: uuid.UUID
    ) -> tuple[bool, list[tuple[uuid.UUID, bool]], list[uuid.UUID]]:
        pool = await self.db.reads()
        offers = await library_repo.offers(pool, library)
        readers = await library_repo.subscribers(pool, library) if offers else []
        return offers, readers, await library_repo.every_subscription(pool, library)
