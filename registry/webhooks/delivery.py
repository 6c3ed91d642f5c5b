"""The dispatcher: each worker delivers what the outbox holds, signed as Standard Webhooks say
(``webhook-id``, ``webhook-timestamp``, ``webhook-signature``; the ``standardwebhooks`` package
signs), at least once, in order per endpoint, and never the same attempt from two workers: a
delivery is leased in a short transaction (only the oldest pending delivery of an endpoint, and only
while its tenant has fewer than ``PER_TENANT`` in flight across all workers), sent with no
transaction open, and settled in another short transaction if the lease is still the worker's.
Each delivery is a task of its own, at most ``PER_WORKER`` at once, so a receiver that never
answers holds one slot of its own tenant for one timeout, not a batch of other tenants' deliveries.
A failed delivery is tried again after growing, jittered delays for about
40 hours, then given up; an endpoint that has failed for ``webhook_disable_after_hours`` is disabled
and the audit log says so. Woken when a committed change queued deliveries (the outbox trigger
notifies), when a send ends, and every ``webhook_poll_seconds`` for retries; a worker stopped
mid-delivery leaves it pending, and another worker sends it once its lease has run out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from sqlalchemy.exc import SQLAlchemyError
from standardwebhooks.webhooks import Webhook

import registry
from registry import outbound
from registry.config import Settings
from registry.db.audit import record_audit
from registry.db.engine import Database
from registry.metrics import WEBHOOK_ATTEMPTS
from registry.webhooks import repository as repo
from registry.webhooks.service import ALLOWED_BY

logger = logging.getLogger(__name__)

# Delays before the 2nd, 3rd, ... attempt, in units of webhook_retry_seconds (5 s: 5 s, 30 s, 2 min,
# 10 min, 30 min, 1 h, 2 h, 4 h, 8 h, 12 h, 12 h: twelve attempts over about 40 hours).
RETRY_FACTORS = (1, 6, 24, 120, 360, 720, 1440, 2880, 5760, 8640, 8640)
PER_WORKER = 16  # deliveries one worker sends at once
PER_TENANT = 4  # deliveries of one tenant in flight at once, across every worker and instance
LEASE_MARGIN_MIN_SECONDS = 1.0  # the least time a lease leaves to settle a send that timed out
USER_AGENT = f"prompt-registry/{registry.__version__} (webhooks)"


def signature_headers(row: dict[str, Any], body: str, now: datetime) -> dict[str, str]:
    """The Standard Webhooks headers: signed with the endpoint's secret, and with the previous one
    too while a rotation's overlap lasts."""
    secrets = [row["secret"]]
    if row["previous_secret"] and row["previous_until"] and row["previous_until"] > now:
        secrets.append(row["previous_secret"])
    signatures = [Webhook(s).sign(row["message_id"], now, body) for s in secrets]
    return {
        "webhook-id": row["message_id"],
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": " ".join(signatures),
        "content-type": "application/json",
        "user-agent": USER_AGENT,
    }


class Pump:
    """A worker's loop over leased deliveries, shared by the registry's webhooks and the Events
    extension's: it claims what is due while it has free slots (``claim``, each claimed delivery a
    task of its own, ``start``), then waits until it is poked (a committed change said there is
    work), a slot frees up, or ``poll_seconds`` pass (retries come due). The wait makes no task of
    its own (``asyncio.timeout``, not ``wait_for``)."""

    failed = "dispatch_failed"  # what the log calls a claim that failed

    def __init__(self, poll_seconds: float, per_worker: int) -> None:
        self.poll = poll_seconds
        self.per_worker = per_worker
        self._wake = asyncio.Event()
        self._sending: set[asyncio.Task[None]] = set()

    def poke(self) -> None:
        """A committed change queued deliveries (a trigger said so): look now."""
        self._wake.set()

    @property
    def free(self) -> int:
        return self.per_worker - len(self._sending)

    async def claim(self) -> int:
        """Lease what is due (at most ``free``) and ``start`` each; how many were leased."""
        raise NotImplementedError

    def start(self, delivery: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(delivery)
        self._sending.add(task)
        task.add_done_callback(self._sent)

    async def run(self) -> None:
        try:
            while True:
                self._wake.clear()
                try:
                    claimed = await self.claim() if self.free > 0 else 0
                except (SQLAlchemyError, OSError) as error:
                    logger.warning(self.failed, extra={"fields": {"error": type(error).__name__}})
                    claimed = 0
                if claimed == 0 or self.free <= 0:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(self.poll):
                            await self._wake.wait()
        finally:
            for task in self._sending:
                task.cancel()
            await asyncio.gather(*self._sending, return_exceptions=True)

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._sending.discard(task)
        self._wake.set()  # a slot is free, and the next delivery may go


class Dispatcher(Pump):
    failed = "webhook_dispatch_failed"

    def __init__(self, db: Database, settings: Settings) -> None:
        super().__init__(settings.webhook_poll_seconds, PER_WORKER)
        self.db = db
        self.allow_private = settings.webhook_allow_private
        self.timeout = settings.webhook_timeout_seconds
        # A lease outlasts the send's timeout by as long again, the time to settle it: at the
        # default timeout (10 s), a delivery cut off with its worker is sent again 20 s later.
        self.lease_seconds = self.timeout + max(self.timeout, LEASE_MARGIN_MIN_SECONDS)
        self.retry = settings.webhook_retry_seconds
        self.disable_after = timedelta(hours=settings.webhook_disable_after_hours)

    async def claim(self) -> int:
        """Lease what is due, as far as this worker has free slots, and start sending each; how
        many were leased."""
        async with self.db.operator_tx() as session:
            rows = await repo.claim_due(
                session,
                self.free,
                per_tenant=PER_TENANT,
                lease_seconds=self.lease_seconds,
            )
        for row in rows:
            self.start(self._deliver(row))
        return len(rows)

    async def _deliver(self, row: dict[str, Any]) -> None:
        outcome = await self._send(row)  # no transaction is open while the receiver is called
        try:
            async with self.db.operator_tx() as session:
                await self._settle(session, row, outcome, datetime.now(UTC))
        except (SQLAlchemyError, OSError) as error:  # the lease runs out: it is sent again
            logger.warning(
                "webhook_settle_failed", extra={"fields": {"error": type(error).__name__}}
            )

    async def _send(self, row: dict[str, Any]) -> outbound.Outcome:
        payload = row["payload"]
        body = payload if isinstance(payload, str) else orjson.dumps(payload).decode()
        headers = signature_headers(row, body, datetime.now(UTC))
        return await outbound.post(
            row["url"],
            body.encode(),
            headers,
            seconds=self.timeout,
            allow_private=self.allow_private,
            allowed_by=ALLOWED_BY,
        )

    async def _settle(
        self, session: Any, row: dict[str, Any], outcome: outbound.Outcome, now: datetime
    ) -> None:
        tenant_id, endpoint_id = row["tenant_id"], row["endpoint_id"]
        attempt = row["attempts"] + 1
        if outcome.ok:
            status, next_at = "delivered", None
        elif attempt > len(RETRY_FACTORS):
            status, next_at = "failed", None  # given up: kept in the log, redeliverable by id
        else:
            delay = self.retry * RETRY_FACTORS[attempt - 1] * random.uniform(0.8, 1.2)  # noqa: S311
            status, next_at = "pending", now + timedelta(seconds=delay)
        settled = await repo.settle_delivery(
            session,
            tenant_id,
            row["id"],
            lease=row["leased_until"],
            attempts=attempt,
            status=status,
            next_attempt_at=next_at,
            delivered_at=now if outcome.ok else None,
        )
        if not settled:
            return  # the lease ran out and another worker took the delivery over
        WEBHOOK_ATTEMPTS.labels(
            "delivered" if outcome.ok else "retrying" if next_at else "failed"
        ).inc()
        if not outcome.ok:
            logger.warning(
                "webhook_attempt_failed",
                extra={
                    "fields": {
                        "tenant_id": str(tenant_id),
                        "endpoint_id": str(endpoint_id),
                        "delivery_id": str(row["id"]),
                        "attempt": attempt,
                        "status": status,
                        "status_code": outcome.status_code,
                        "error": outcome.error,
                    }
                },
            )
        await repo.record_attempt(
            session,
            tenant_id=tenant_id,
            delivery_id=row["id"],
            attempt=attempt,
            status_code=outcome.status_code,
            error=outcome.error,
            latency_ms=outcome.latency_ms,
            response_body=outcome.body,
        )
        if outcome.ok:
            if row["failing_since"] is not None:
                await repo.mark_endpoint(session, tenant_id, endpoint_id, failing_since=None)
            return
        failing_since = row["failing_since"] or now
        if row["failing_since"] is None:
            await repo.mark_endpoint(session, tenant_id, endpoint_id, failing_since=now)
        if now - failing_since >= self.disable_after:
            reason = (
                f"disabled after failing since {failing_since.isoformat()}: "
                f"{outcome.error or f'HTTP {outcome.status_code}'}"
            )
            await repo.mark_endpoint(
                session, tenant_id, endpoint_id, disabled_at=now, disabled_reason=reason
            )
            await record_audit(
                session,
                tenant_id=tenant_id,
                actor="registry",
                action="webhook.disabled",
                target=f"webhook:{endpoint_id}",
                after={"reason": reason},
            )
