"""Each worker's look, every few seconds, for running rollouts whose step has lasted its least time
(``service.advance`` decides, with the rollout's row locked: whichever worker looks first moves it,
once)."""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.exc import SQLAlchemyError

from registry.db.engine import Database
from registry.errors import RegistryError
from registry.rollouts import repository as repo
from registry.rollouts import service
from registry.tenants import repository as tenants

logger = logging.getLogger("registry.rollouts")
POLL_SECONDS = 5.0
BATCH = 50


class Advancer:
    def __init__(self, db: Database, every_seconds: float = POLL_SECONDS) -> None:
        self.db = db
        self.every_seconds = every_seconds

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.every_seconds)
            try:
                await self.advance_due()
            except (SQLAlchemyError, OSError) as error:
                logger.warning(
                    "rollout_advance_failed", extra={"fields": {"error": type(error).__name__}}
                )

    async def advance_due(self) -> int:
        """Every due rollout looked at (each in its own transaction); how many moved."""
        async with self.db.operator_tx() as session:
            due = await repo.due(session, BATCH)
        moved = 0
        for tenant_id, rollout_id in due:
            try:
                async with self.db.tenant_tx(tenant_id) as session:
                    tenant = await tenants.tenant_by_id(session, tenant_id)
                    if tenant is None:
                        continue
                    done = await service.advance(session, tenant, rollout_id)
            except RegistryError as error:  # said, and looked at again next time
                logger.warning(
                    "rollout_advance_refused",
                    extra={"fields": {"id": rollout_id, "error": error.message}},
                )
                continue
            if done is not None:
                moved += 1
                logger.info(
                    "rollout_advanced",
                    extra={"fields": {"tenant": tenant.slug, "id": rollout_id, "now": done}},
                )
        return moved
