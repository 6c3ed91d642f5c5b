"""The LISTEN connection of one worker process: change notifications in, caches dropped and streams told.

One connection outside the pool, probed for liveness, re-established with jittered backoff when it dies.
After every (re)connect the caches are flushed and the sequence of every watched tenant is read again,
so a notification lost while disconnected costs at most an extra list_changed, never a missed one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import asyncpg
from sqlalchemy.exc import SQLAlchemyError

from registry.db.repository import probe
from registry.errors import RegistryError
from registry.events import notices
from registry.events.hub import Hub
from registry.metrics import LISTENER_RECONNECTS, LISTENERS_CONNECTED, NOTIFICATIONS_SENT

logger = logging.getLogger("registry.events")
MISSING_RANGE: Any = object()
# What a notification that changes nothing served moved (no label is named so: labels are never empty).
NOTHING_SERVED = ""
CHANNEL = "registry_changes"


class ChangeSource(Protocol):
    """What the feed reads from the database (given by the app; this layer imports no domain)."""

    async def labels_changed(self, tenant_id: uuid.UUID, after: int, upto: int) -> set[str] | None:
        """Labels whose served list changed in (after, upto]; None when every label may have."""

    async def current_sequences(self, tenant_ids: list[uuid.UUID]) -> dict[uuid.UUID, int]:
        """Each tenant's change sequence now (absent: the tenant is gone)."""

    async def libraries(self) -> set[uuid.UUID]:
        """The tenants that offer themselves as a library."""

    async def library_readers(self, library: uuid.UUID) -> Readers:
        """Whether ``library`` offers itself now, the tenants that read it (and whether each
        follows its label), and every tenant subscribed to it, read or not."""


Readers = tuple[bool, list[tuple[uuid.UUID, bool]], list[uuid.UUID]]


class Invalidates(Protocol):
    def invalidate(self, tenant_id: uuid.UUID) -> None: ...

    def clear(self) -> None: ...


class ChangeFeed:
    def __init__(
        self,
        connect: Callable[[], Awaitable[asyncpg.Connection]],
        hub: Hub,
        source: ChangeSource,
        caches: list[Invalidates],
        auth_caches: list[Invalidates] | None = None,
        *,
        access_checks: list[Callable[[uuid.UUID], Awaitable[None]]] | None = None,
        session_ends: list[Callable[[uuid.UUID, str], None]] | None = None,
        sequences: list[Callable[[uuid.UUID, int], None]] | None = None,
        outbox: list[Callable[[], None]] | None = None,
        probe_seconds: float = 1.0,
        max_backoff_seconds: float = 5.0,
    ) -> None:
        self.connect = connect
        self.hub = hub
        self.source = source
        self.caches = caches
        self.auth_caches = auth_caches or []
        # Told when who may read a tenant may have changed (keys, settings), so that open streams
        # are checked again; and when a session ended, so that its stream ends on this worker.
        self.access_checks = access_checks or []
        self.session_ends = session_ends or []
        # Told every change sequence heard (read replicas answer only once they have replayed it).
        self.sequences = sequences or []
        # Told when a committed change queued webhook deliveries (and after a reconnect, when such a
        # notification may have gone unheard): the dispatcher looks for them at once.
        self.outbox = outbox or []
        self._checking: dict[uuid.UUID, asyncio.Task[None]] = {}
        self._recheck: set[uuid.UUID] = set()
        self.probe_seconds = probe_seconds
        self.max_backoff_seconds = max_backoff_seconds
        self.connected = asyncio.Event()
        # Set once the first connection was tried, whether it was made or not (a worker starting
        # waits for that, not for a database that is not there).
        self.tried = asyncio.Event()
        # When the connection last proved it carries notifications (a probe answered, or a
        # notification came): what this worker keeps is trusted only for ``trust_seconds`` after,
        # so a stalled connection (up, but silent) stops that trust within seconds.
        self.heard_at = -math.inf
        self.trust_seconds = 3 * probe_seconds  # a late probe or two on a busy loop is no silence
        self.connection: asyncpg.Connection | None = None
        self.reconnects = 0
        self._pending: dict[uuid.UUID, int] = {}
        # Per watched tenant, the label each notified sequence number moved (None: any label).
        self._labels: dict[uuid.UUID, dict[int, str | None]] = {}
        self._delivering: dict[uuid.UUID, asyncio.Task[None]] = {}
        self._lost = asyncio.Event()
        self._stopped = False
        # The tenants that offer themselves as libraries, each with the tenants that read it and
        # whether each follows: a library's change reaches them here, one notification fanned out
        # by every worker, never one notification per subscriber.
        self._libraries: dict[uuid.UUID, list[tuple[uuid.UUID, bool]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # Each kind of notice to its handler: a new kind of notification is a notice type in
        # registry.events.notices and one row here.
        self._handlers: dict[type[Any], Callable[[Any], None]] = {
            notices.WebhooksQueued: self._webhooks_queued,
            notices.AccessChanged: self._access_changed,
            notices.SessionEnded: self._session_ended,
            notices.TenantDeleted: self._tenant_deleted,
            notices.Changed: self._changed,
            notices.LibraryChanged: self._library_changed,
        }

    # --- the connection ------------------------------------------------------------------------

    async def run(self) -> None:
        delay = 0.1
        first = True
        while not self._stopped:
            connection: asyncpg.Connection | None = None
            try:
                connection = await self.connect()
                self._lost.clear()
                connection.add_termination_listener(lambda _: self._lost.set())
                await connection.add_listener(CHANNEL, self._on_notify)
                self.connection = connection
                if not first:
                    self.reconnects += 1
                    LISTENER_RECONNECTS.inc()
                    logger.info(
                        "listener_reconnected", extra={"fields": {"reconnects": self.reconnects}}
                    )
                first = False
                await self._resync()
                self.heard_at = time.monotonic()
                self.connected.set()
                LISTENERS_CONNECTED.set(1)
                self.tried.set()
                delay = 0.1
                await self._watch(connection)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as error:
                self.tried.set()
                if not self._stopped:
                    logger.warning(
                        "listener_lost", extra={"fields": {"error": type(error).__name__}}
                    )
            finally:
                self.connected.clear()
                LISTENERS_CONNECTED.set(0)
                self.connection = None
                if connection is not None:
                    connection.terminate()
            if self._stopped:
                break
            await asyncio.sleep(delay * random.uniform(0.5, 1.0))  # noqa: S311 - jitter, not security
            delay = min(self.max_backoff_seconds, delay * 2)

    async def _watch(self, connection: asyncpg.Connection) -> None:
        """Until the connection dies: wake on termination, or probe it every few seconds."""
        while not self._stopped:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._lost.wait(), self.probe_seconds)
            if self._stopped:
                return  # told to stop (stop() sets _lost to wake this): not a lost connection
            if self._lost.is_set() or connection.is_closed():
                raise ConnectionResetError("LISTEN connection terminated")
            await asyncio.wait_for(probe(connection), self.probe_seconds)
            self.heard_at = time.monotonic()

    def hearing(self) -> bool:
        """Whether every change made now would reach this worker: connected, and heard from within
        ``trust_seconds`` (what caches and read replicas ask before they are trusted)."""
        return self.connected.is_set() and time.monotonic() - self.heard_at <= self.trust_seconds

    async def stop(self) -> None:
        self._stopped = True
        self._lost.set()
        for task in [*self._delivering.values(), *self._checking.values(), *self._tasks]:
            task.cancel()

    # --- notifications -------------------------------------------------------------------------

    def _on_notify(self, connection: Any, pid: int, channel: str, payload: str) -> None:
        self.heard_at = time.monotonic()
        notice = notices.parse(payload)
        if notice is None:
            logger.warning("listener_bad_payload")
            return
        self._handlers[type(notice)](notice)

    def _webhooks_queued(self, notice: notices.WebhooksQueued) -> None:
        for wake in self.outbox:
            wake()

    def _access_changed(self, notice: notices.AccessChanged) -> None:
        for cache in self.auth_caches:
            cache.invalidate(notice.tenant)
        self.check_access(notice.tenant)

    def _session_ended(self, notice: notices.SessionEnded) -> None:
        for ended in self.session_ends:
            ended(notice.tenant, notice.session)

    def _tenant_deleted(self, notice: notices.TenantDeleted) -> None:
        for cache in [*self.caches, *self.auth_caches]:
            cache.invalidate(notice.tenant)
        self.hub.close_tenant(notice.tenant)

    def _changed(self, notice: notices.Changed) -> None:
        tenant_id, seq = notice.tenant, notice.seq
        if notice.serves:
            for cache in self.caches:  # at once: the next request of this worker reads fresh data
                cache.invalidate(tenant_id)
            if tenant_id in self._libraries:
                self._library_published(tenant_id)
        if seq is None:
            return
        for heard in self.sequences:
            heard(tenant_id, seq)
        if notice.label is None and notice.serves:
            self.check_access(tenant_id)  # settings (public_read) may have changed
        if self.hub.watching(tenant_id):
            if notice.labelled:  # each notification says what it moved: no need to read it back
                moved = notice.label if notice.serves else NOTHING_SERVED
                self._labels.setdefault(tenant_id, {})[seq] = moved
            self.note(tenant_id, seq)

    # --- libraries: one tenant's change reaching the tenants that read it ------------------------

    def _library_published(self, library: uuid.UUID) -> None:
        """What the library serves changed: its readers' caches drop, and the streams of those
        that follow its label are told (those that pin versions are not: their versions stay)."""
        for reader, follows in self._libraries.get(library, ()):
            for cache in self.caches:
                cache.invalidate(reader)
            if follows:
                NOTIFICATIONS_SENT.inc(self.hub.poke(reader, library))

    def committed(self, tenant_id: uuid.UUID) -> None:
        """This worker committed a change of ``tenant_id``: when it is a library whose readers
        are known, their caches drop at once too (their streams are told on the notification), so
        what a library's publisher wrote is what its subscribers read next from this worker."""
        for reader, _ in self._libraries.get(tenant_id, ()):
            for cache in self.caches:
                cache.invalidate(reader)

    def reads_libraries(
        self, tenant_id: uuid.UUID, libraries: list[tuple[uuid.UUID, bool]]
    ) -> None:
        """``tenant_id`` reads these libraries now (read by this worker to serve it): each
        library's change reaches it here even before the consent's notification is heard."""
        for library, follows in libraries:
            readers = self._libraries.setdefault(library, [])
            if (tenant_id, follows) not in readers:
                readers[:] = [r for r in readers if r[0] != tenant_id]
                readers.append((tenant_id, follows))

    def _library_changed(self, notice: notices.LibraryChanged) -> None:
        self._spawn(self._load_library(notice.tenant))

    async def _load_library(self, library: uuid.UUID) -> None:
        """Read whom the library reaches now; after a consent changed, every tenant subscribed to
        it (read or not) drops what it holds and its streams are told."""
        offers, readers, subscribed = await self.source.library_readers(library)
        if offers:
            self._libraries[library] = readers
        else:
            self._libraries.pop(library, None)
        for tenant_id in {*subscribed, *(r for r, _ in readers)}:
            for cache in self.caches:
                cache.invalidate(tenant_id)
            NOTIFICATIONS_SENT.inc(self.hub.poke(tenant_id, library))

    def _spawn(self, work: Awaitable[None]) -> None:
        async def logged() -> None:
            try:
                await work
            except (OSError, asyncpg.PostgresError, RegistryError, SQLAlchemyError) as error:
                for cache in self.caches:  # whom it reaches is unknown: trust nothing kept
                    cache.clear()
                logger.warning(
                    "library_fan_out_failed", extra={"fields": {"error": type(error).__name__}}
                )

        task = asyncio.create_task(logged())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def check_access(self, tenant_id: uuid.UUID) -> None:
        """Have the open streams of a tenant checked again (one check at a time per tenant; a
        change heard during a check runs another after it)."""
        if not self.access_checks or not self.hub.watching(tenant_id):
            return
        if tenant_id in self._checking:
            self._recheck.add(tenant_id)
            return
        self._checking[tenant_id] = asyncio.create_task(self._check(tenant_id))

    async def _check(self, tenant_id: uuid.UUID) -> None:
        try:
            while True:
                self._recheck.discard(tenant_id)
                for check in self.access_checks:
                    try:
                        await check(tenant_id)
                    except (
                        OSError,
                        asyncpg.PostgresError,
                        RegistryError,
                        SQLAlchemyError,
                    ) as error:
                        logger.warning(
                            "stream_access_check_failed",
                            extra={"fields": {"error": type(error).__name__}},
                        )
                if tenant_id not in self._recheck:
                    return
        finally:
            self._checking.pop(tenant_id, None)

    def note(self, tenant_id: uuid.UUID, seq: int) -> None:
        """A tenant reached ``seq``: deliver to its streams (bursts coalesce into one delivery)."""
        if seq <= max(self._pending.get(tenant_id, 0), self.hub.published(tenant_id)):
            if seq <= self.hub.published(tenant_id):  # already told: what it moved is of no use
                self._labels.get(tenant_id, {}).pop(seq, None)
            return
        self._pending[tenant_id] = seq
        if tenant_id not in self._delivering:
            self._delivering[tenant_id] = asyncio.create_task(self._deliver(tenant_id))

    async def _deliver(self, tenant_id: uuid.UUID) -> None:
        try:
            await asyncio.sleep(0)  # let the rest of a burst arrive first
            while (target := self._pending.pop(tenant_id, None)) is not None:
                after = self.hub.published(tenant_id)
                if target <= after:
                    continue
                labels = self._notified_labels(tenant_id, after, target)
                if labels is MISSING_RANGE:
                    try:
                        labels = await self.source.labels_changed(tenant_id, after, target)
                    except (OSError, asyncpg.PostgresError) as error:
                        logger.warning(
                            "listener_labels_failed",
                            extra={"fields": {"error": type(error).__name__}},
                        )
                        labels = None  # tell every label: an extra notification, never a missed one
                told = self.hub.publish(tenant_id, target, labels)
                NOTIFICATIONS_SENT.inc(told)
        finally:
            self._delivering.pop(tenant_id, None)

    def _notified_labels(self, tenant_id: uuid.UUID, after: int, upto: int) -> Any:
        """The labels moved in (after, upto] as the notifications told them; None when any label may
        have moved; MISSING_RANGE when a number of the range was not heard (then the log is read)."""
        heard = self._labels.get(tenant_id, {})
        labels: set[str] | None = set()
        for seq in range(after + 1, upto + 1):
            if seq not in heard:
                labels = MISSING_RANGE
                break
            label = heard[seq]
            if label == NOTHING_SERVED:
                continue
            if label is None:
                labels = None
            elif labels is not None:
                labels.add(label)
        for seq in [s for s in heard if s <= upto]:
            del heard[seq]
        if not heard:
            self._labels.pop(tenant_id, None)
        return labels

    async def _resync(self) -> None:
        self._labels.clear()  # notifications may have been lost: read the log for these ranges
        for cache in [*self.caches, *self.auth_caches]:
            cache.clear()
        # Consents may have changed unheard: whom each library reaches is read again.
        self._libraries = {}
        for library in await self.source.libraries():
            offers, readers, _ = await self.source.library_readers(library)
            if offers:
                self._libraries[library] = readers
        for wake in self.outbox:
            wake()
        watched = self.hub.tenants()
        if not watched:
            return
        current = await self.source.current_sequences(watched)
        for tenant_id, seq in current.items():
            for heard in self.sequences:
                heard(tenant_id, seq)
        for tenant_id in watched:
            if tenant_id not in current:
                self.hub.close_tenant(tenant_id)
            elif current[tenant_id] > self.hub.published(tenant_id):
                self.note(tenant_id, current[tenant_id])
        for tenant_id in watched:  # key or setting changes may have gone unheard meanwhile
            self.check_access(tenant_id)
