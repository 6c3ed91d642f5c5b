"""Counting served answers where they are made, in the worker's memory, written in batches.

``Ledger.count`` is what every serving path calls: a dictionary increment under the answer's key and
minute. ``Ledger.run`` writes what was counted every ``REGISTRY_USAGE_FLUSH_SECONDS`` (and sooner
when ``REGISTRY_USAGE_MAX_KEYS`` counters are held) in one statement that adds to the minute, hour
and day tables at once, and ``close`` writes the rest when the worker stops. A worker killed between
two flushes loses the counts of that interval, and no more; a flush that fails (the database away)
keeps its counts for the next one while they fit. Each hour (and before its first write) it also
makes the coming partitions and drops the expired ones (``repository.keep_partitions``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import asyncpg

from registry import metrics
from registry.config import Settings
from registry.principal import Principal
from registry.usage import repository
from registry.usage.schemas import CLIENT_MAX, Key, Served

logger = logging.getLogger("registry.usage")

# A counter: answers, the first and the last time (epoch seconds) within its minute, and errors
# (requests a rollout routed that ended in an error: ``failed``).
Counter = list[float]
Counts = dict[tuple[Key, int], Counter]  # by key and minute (epoch seconds // 60)
MAINTAIN_EVERY_SECONDS = 3600.0


def caller_of(principal: Principal | None) -> str:
    """How the ledger names a caller: as the audit log does (``key:ID``, ``token:SUBJECT``,
    ``anonymous``)."""
    return "anonymous" if principal is None else principal.actor


def client_of(info: Any) -> str:
    """``name/version`` of a clientInfo the client sent (bounded), or ""."""
    if not isinstance(info, dict):
        return ""
    name, version = info.get("name"), info.get("version")
    if not isinstance(name, str) or not name:
        return ""
    shown = f"{name}/{version}" if isinstance(version, str) and version else name
    return shown[:CLIENT_MAX]


class Ledger:
    """One worker's counts between flushes: the current minute's by key (one hash of the key per
    answer), and the earlier minutes' not yet written."""

    def __init__(self, settings: Settings, pool: Callable[[], Any] | None = None) -> None:
        self.enabled = settings.usage_ledger and pool is not None  # nowhere to write: off
        self.settings = settings
        self.pool = pool  # an awaitable asyncpg pool of the primary (the owner role)
        self.minute = 0
        self.starts, self.ends = 0.0, 0.0  # the current minute, in epoch seconds
        self.current: dict[Key, Counter] = {}  # the counts of ``minute``
        self.earlier: Counts = {}  # of the minutes before it, until the flush
        self.due = asyncio.Event()
        self.exporters: list[Callable[[Counts], Awaitable[None]]] = []  # given each batch (OTLP)
        self.closers: list[Callable[[], Awaitable[None]]] = []  # run after the last flush
        self.dropped = 0
        self.maintained: float | None = None  # when the partitions were last kept (monotonic)

    @property
    def held(self) -> int:
        return len(self.current) + len(self.earlier)

    def count(self, key: Key) -> None:
        """One answer served under ``key``, now: a dictionary increment."""
        if not self.enabled:
            return
        now = time.time()
        if not self.starts <= now < self.ends:
            self._next_minute(now)
        counter = self.current.get(key)
        if counter is not None:
            counter[0] += 1
            counter[2] = now
        elif self.held < self.settings.usage_max_keys:
            self.current[key] = [1, now, now, 0]
        else:
            self._overflow(key, now, [1, now, now, 0])

    def failed(self, key: Key) -> None:
        """One request under ``key`` that ended in an error (an argument error, a refusal): counted
        apart from the answers (a rollout compares its sides' errors)."""
        if not self.enabled:
            return
        now = time.time()
        if not (self.starts <= now < self.ends):  # a new minute (as in ``count``)
            self._next_minute(now)
        counter = self.current.get(key)
        if counter is not None:
            counter[3] += 1
            counter[2] = now
        elif self.held < self.settings.usage_max_keys:
            self.current[key] = [0, now, now, 1]
        else:
            self._overflow(key, now, [0, now, now, 1])

    def _next_minute(self, now: float) -> None:
        """The current minute's counts set aside for the flush; a new minute begins."""
        minute = self.minute
        for key, counter in self.current.items():
            _merge(self.earlier, (key, minute), counter)
        self.current = {}
        self.minute = int(now // 60)
        self.starts, self.ends = self.minute * 60.0, self.minute * 60.0 + 60.0

    def _overflow(self, key: Key, now: float, counter: Counter) -> None:
        """A new key past REGISTRY_USAGE_MAX_KEYS: flush early, and until then hold at most twice
        the bound (beyond, the answer is not counted, and that is counted)."""
        self.due.set()
        if self.held >= 2 * self.settings.usage_max_keys:
            self.dropped += 1
            metrics.USAGE_DROPPED.inc()
            return
        self.current[key] = counter

    def served(
        self,
        tenant_id: uuid.UUID,
        served: Served,
        surface: str,
        principal: Principal | None,
        client: str = "",
        *,
        failed: bool = False,
    ) -> None:
        """Count one answer that served ``served`` to ``principal`` (``failed``: one request for
        it that ended in an error)."""
        if self.enabled:
            key = Key(tenant_id.int, *served, surface, caller_of(principal), client)
            if failed:
                self.failed(key)
            else:
                self.count(key)

    def taken(self) -> Counts:
        """Every count held, by key and minute, handed over (the ledger starts empty)."""
        counts = self.earlier
        for key, counter in self.current.items():
            _merge(counts, (key, self.minute), counter)
        self.earlier, self.current = {}, {}
        return counts

    async def flush(self) -> int:
        """Write what was counted (one statement); the number of counters written."""
        counts = self.taken()
        self.due.clear()
        if not counts or self.pool is None:
            return 0
        try:
            pool = await self.pool()
            async with pool.acquire() as conn:
                await repository.record(conn, _columns(counts))
            metrics.USAGE_FLUSHED.inc(len(counts))
        except (TimeoutError, asyncpg.PostgresError, OSError) as error:
            logger.warning(
                "usage_flush_failed",
                extra={"fields": {"error": type(error).__name__, "counters": len(counts)}},
            )
            self._keep(counts)
            if isinstance(error, asyncpg.CheckViolationError):  # no partition for a row yet
                await self.maintain()
            return 0
        for export in self.exporters:
            with contextlib.suppress(Exception):  # an exporter says its own failures
                await export(counts)
        return len(counts)

    def _keep(self, counts: Counts) -> None:
        """Counts a failed flush could not write, merged into the next (while they fit)."""
        for slot, counter in counts.items():
            if slot in self.earlier or self.held < 2 * self.settings.usage_max_keys:
                _merge(self.earlier, slot, counter)
            else:
                self.dropped += int(counter[0])
                metrics.USAGE_DROPPED.inc(int(counter[0]))

    async def maintain(self) -> None:
        """Make the coming partitions and drop the expired ones (every worker may: one at a time)."""
        if self.pool is None:
            return
        try:
            pool = await self.pool()
            async with pool.acquire() as conn:
                dropped = await repository.keep_partitions(
                    conn, self.settings.usage_minute_days, self.settings.usage_hour_days
                )
        except (TimeoutError, asyncpg.PostgresError, OSError) as error:
            logger.warning(
                "usage_partitions_failed", extra={"fields": {"error": type(error).__name__}}
            )
            return
        if dropped:
            logger.info("usage_partitions_dropped", extra={"fields": {"count": dropped}})

    async def run(self) -> None:
        """Flush every interval (or when due), and keep the partitions each hour."""
        if not self.enabled:
            return
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.due.wait(), self.settings.usage_flush_seconds)
            await self._maintained()
            await self.flush()

    async def _maintained(self) -> None:
        """The partitions kept before the first write (a worker that serves nothing opens no
        connection for the ledger) and each hour after."""
        due = (
            self.maintained is None or time.monotonic() - self.maintained >= MAINTAIN_EVERY_SECONDS
        )
        if due and (self.held or self.maintained is not None):
            await self.maintain()
            self.maintained = time.monotonic()

    async def close(self) -> None:
        """The last flush, as the worker stops."""
        if self.enabled:
            if self.maintained is None:
                await self._maintained()
            await self.flush()
        for close in self.closers:
            with contextlib.suppress(Exception):  # each says its own failures
                await close()


def _merge(counts: Counts, slot: tuple[Key, int], counter: Counter) -> None:
    """``counter`` added to ``counts`` under ``slot``."""
    held = counts.get(slot)
    if held is None:
        counts[slot] = counter
        return
    held[0] += counter[0]
    held[1] = min(held[1], counter[1])
    held[2] = max(held[2], counter[2])
    held[3] += counter[3]


def _columns(counts: Counts) -> list[list[Any]]:
    """The counters as the statement's arrays, column by column."""
    columns: list[list[Any]] = [[] for _ in range(13)]
    (
        tenant,
        kind,
        name,
        version,
        label,
        surface,
        caller,
        client,
        at,
        answers,
        first,
        last,
        errors,
    ) = columns
    for (key, minute), (n, first_at, last_at, failed) in counts.items():
        tenant.append(uuid.UUID(int=key.tenant))
        kind.append(key.kind)
        name.append(key.name)
        version.append(key.version)
        label.append(key.label)
        surface.append(key.surface)
        caller.append(key.caller)
        client.append(key.client)
        at.append(datetime.fromtimestamp(minute * 60, UTC))
        answers.append(int(n))
        first.append(datetime.fromtimestamp(first_at, UTC))
        last.append(datetime.fromtimestamp(last_at, UTC))
        errors.append(int(failed))
    return columns
