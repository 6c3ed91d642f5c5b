"""The scheduler every worker runs: approved change requests applied when their time comes, each
exactly once whichever worker or instance gets there first (the apply locks the request's row and
checks that it is still approved and due, in the transaction that applies it). It sleeps until the
next request is due (at most ``POLL_SECONDS``, so one scheduled by another worker or instance is
found), and is woken when this worker approves one with a time. A restart loses nothing: what is due
is read from the database."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime

from sqlalchemy.exc import SQLAlchemyError

from registry.change_requests import repository as repo
from registry.change_requests import service
from registry.db.engine import Database
from registry.errors import RegistryError
from registry.tenants import repository as tenants

logger = logging.getLogger(__name__)

POLL_SECONDS = 30.0  # the longest a due request waits for a worker that was not woken for it
BATCH = 20  # requests applied per look


class Scheduler:
    def __init__(self, db: Database) -> None:
        self.db = db
        self._wake = asyncio.Event()

    def poke(self) -> None:
        """A request got a time: look again now."""
        self._wake.set()

    async def run(self) -> None:
        while True:
            self._wake.clear()
            try:
                applied = await self.apply_due()
                wait = 0.0 if applied == BATCH else await self._until_next()
            except (SQLAlchemyError, OSError) as error:
                logger.warning(
                    "release_schedule_failed", extra={"fields": {"error": type(error).__name__}}
                )
                wait = POLL_SECONDS
            if wait > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), wait)

    async def apply_due(self) -> int:
        """Every request due now applied (each in its own transaction); how many were looked at."""
        async with self.db.operator_tx() as session:
            due = await repo.due(session, BATCH)
        for tenant_id, request_id in due:
            try:
                async with self.db.tenant_tx(tenant_id) as session:
                    tenant = await tenants.tenant_by_id(session, tenant_id)
                    if tenant is None:
                        continue
                    applied = await service.apply_scheduled(session, tenant, request_id)
                if applied is not None:
                    logger.info(
                        "release_applied",
                        extra={
                            "fields": {
                                "tenant": tenant.slug,
                                "id": request_id,
                                "state": applied.state,
                            }
                        },
                    )
            except RegistryError as error:  # this one cannot apply: it turns stale, saying why
                logger.warning(
                    "release_apply_failed",
                    extra={"fields": {"id": request_id, "error": error.message}},
                )
                async with self.db.tenant_tx(tenant_id) as session:
                    await service.fail_scheduled(session, tenant_id, request_id, error.message)
        return len(due)

    async def _until_next(self) -> float:
        async with self.db.operator_tx() as session:
            upcoming = await repo.next_due(session)
        if upcoming is None:
            return POLL_SECONDS
        return min(POLL_SECONDS, max(0.0, (upcoming - datetime.now(UTC)).total_seconds()))
