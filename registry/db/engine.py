"""The engine and the transactions every piece of code runs in.

The caller owns the transaction: ``async with db.tenant_tx(tenant_id) as session:`` runs as the
application role with the tenant set for this transaction only, and commits on success. Services flush,
never commit. Driver errors are translated into the registry's error tree here, once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import asyncpg
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    AsyncSessionTransaction,
    async_sessionmaker,
)
from sqlalchemy.pool import QueuePool

from registry import metrics
from registry.db import repository as repo
from registry.db.audit import append_pending
from registry.db.connect import (
    APP_ROLE,
    asyncpg_arguments,
    make_engine,
    make_read_pool,
)
from registry.db.errors import OUTAGES, translate_db_error
from registry.db.replicas import Replicas
from registry.errors import Unavailable, WriteNotAcknowledged
from registry.naming import SLUG_RE
from registry.tokens import TokenCodec

logger = logging.getLogger("registry.db")
# A transaction that writes WAL, so that its commit waits as a write's does (for a synchronous
# standby, where one is named); a read-only or merely xid-holding one waits for nothing.
PROBE = "SELECT pg_logical_emit_message(true, 'registry', 'ready')"

if TYPE_CHECKING:
    from registry.db.models import Tenant


SPARE_CONNECTIONS = 10  # kept free for the CLI, migrations, backups and a person with psql
MIN_WORKER_CONNECTIONS = 3  # a worker's least share: its ORM pool, its read pool, its listener


@dataclass(frozen=True)
class PoolSizes:
    """How one worker's connections to the primary are split."""

    orm: int  # the SQLAlchemy pool (writes, REST, sessions, webhooks)
    overflow: int
    reads: int  # the plain asyncpg pool of the hot read path

    @property
    def total(self) -> int:
        return self.orm + self.overflow + self.reads + 1  # and the LISTEN connection

    @classmethod
    def within(cls, connections: int) -> PoolSizes:
        """At most ``connections`` in all: one listens, a third of the rest read, the others go
        to the ORM (no overflow: a busy pool waits for a connection rather than failing)."""
        rest = max(2, connections - 1)
        reads = max(1, rest // 3)
        return cls(orm=rest - reads, overflow=0, reads=reads)


# How many of one tenant's writes made in one call (Database.one_call) a worker has in the database at
# once: measured with 16 and 64 writers of one tenant on two cores, 2 wrote as fast as 4 (1,245 and
# 1,225 writes/s at 64) with a p99 of 65 ms against 101.
ONE_CALL_WRITES_PER_TENANT = 2


class _Turns:
    """The turns of one tenant's one-call writes: a semaphore (its waiters served in order), and
    how many requests hold or wait for it (the entry goes when none do)."""

    def __init__(self, size: int) -> None:
        self.semaphore = asyncio.Semaphore(size)
        self.users = 0


def per_worker(max_connections: int, reserved: int, workers: int) -> int:
    """Each worker's share of what the server accepts, less its reserved and a spare few, so that
    adding workers never takes the server past max_connections; ValueError when it cannot."""
    each = _budget(max_connections, reserved) // workers
    if each < MIN_WORKER_CONNECTIONS:
        raise ValueError(
            f"{workers} workers cannot share the server's {max_connections} connections "
            f"({reserved} reserved, {SPARE_CONNECTIONS} kept spare): at least "
            f"{MIN_WORKER_CONNECTIONS} each are needed; "
            "use fewer workers or raise max_connections"
        )
    return each


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, which a container's cpuset narrows),
    at most 64 (the most workers the setting accepts)."""
    affinity = getattr(os, "sched_getaffinity", None)
    count = len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)
    return max(1, min(count, 64))


def default_workers(max_connections: int, reserved: int, cores: int) -> int:
    """Workers when none are asked for: one per core, as many as can each have the least share of
    the server's connections that ``per_worker`` accepts (one at least)."""
    return max(1, min(cores, _budget(max_connections, reserved) // MIN_WORKER_CONNECTIONS))


def _budget(max_connections: int, reserved: int) -> int:
    """The server's connections that the workers share: what it accepts, less its reserved ones
    and a spare few."""
    return max_connections - reserved - SPARE_CONNECTIONS


async def connection_limits(url: str) -> tuple[int, int]:
    """The server's max_connections, and how many of them it reserves."""
    connection = await asyncpg.connect(**asyncpg_arguments(url))
    try:
        limit, reserved = await repo.connection_limits(connection)
    finally:
        await connection.close()
    return limit, reserved


class Database:
    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        max_overflow: int = 10,
        pooled: bool = False,
        read_pool_size: int | None = None,
        replicas: Replicas | None = None,
        commit_wait_seconds: float = 10.0,
    ) -> None:
        """``pooled``: the URL goes through a transaction pooler (see pooler_safe_arguments);
        ``replicas``: read replicas (REGISTRY_READ_DATABASE_URLS), else the primary reads too;
        ``commit_wait_seconds``: the longest a commit (or a one-call write) may wait."""
        self.url = url
        self.pooled = pooled
        self.engine: AsyncEngine = make_engine(url, pool_size, max_overflow, pooled)
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False, autoflush=False)
        self.read_pool_size = read_pool_size or pool_size  # the hot path's plain pool
        self.replicas = replicas or Replicas.none()
        self._tokens: TokenCodec | None = None
        self._reads: asyncpg.Pool | None = None
        self._reads_opening: asyncio.Lock | None = None
        # Told, right after a commit, of each tenant whose changes it appended (set by the app: the
        # worker's own caches of the tenant go at once, before the change's notification comes back
        # through LISTEN, so that what a worker wrote is what it serves next).
        self.committed: list[Callable[[uuid.UUID], None]] = []
        self._turns: dict[uuid.UUID, _Turns] = {}  # one_call's, by tenant, while any is taken
        self.commit_wait_seconds = commit_wait_seconds
        # When a commit last went unacknowledged past the bound (monotonic), until one is again:
        # /readyz says not ready meanwhile.
        self.unacknowledged_since: float | None = None

    async def reads(self) -> asyncpg.Pool:
        """The primary's plain asyncpg pool for the hot read path (MCP serving) and the writes
        made in one call (``one_call``).

        Its statements run as the connecting role; those that touch tenant rows are SQL functions that
        drop to the application role and set the tenant themselves (see registry_served_version_v1).
        """
        if self._reads is None:
            if self._reads_opening is None:
                self._reads_opening = asyncio.Lock()
            async with self._reads_opening:
                if self._reads is None:
                    self._reads = await make_read_pool(self.url, self.read_pool_size, self.pooled)
        return self._reads

    async def read_pool(self, tenant_id: uuid.UUID) -> asyncpg.Pool:
        """A plain pool to read ``tenant_id`` from: a replica that has replayed everything this
        worker knows of the tenant, else the primary's."""
        pool = await self.replicas.pool(tenant_id)
        return pool if pool is not None else await self.reads()

    def saw(self, tenant_id: uuid.UUID, seq: int) -> None:
        """A change of ``tenant_id`` up to ``seq`` is committed (heard, or written here)."""
        self.replicas.watermarks.saw(tenant_id, seq)

    async def tokens(self) -> TokenCodec:
        """The codec of the opaque tokens handed to clients (cursors, request state), keyed with the
        server-wide secret (read once, then kept)."""
        if self._tokens is None:
            async with self.app_tx() as session:
                self._tokens = TokenCodec(await repo.read_secret(session, "mac"))
        return self._tokens

    async def watch(self) -> None:
        """For as long as the worker runs, each ``check_seconds`` of the replicas (1 s): which
        server the primary is (logged when it changes, as after a failover), how full the pools
        are, and how far each replica is behind."""
        primary: str | None = None
        while True:
            sample: tuple[str, int] | None = None
            try:
                async with asyncio.timeout(self.replicas.check_timeout):
                    sample = await repo.primary_sample(await self.reads())
            except (asyncpg.PostgresError, *OUTAGES):
                pass  # no primary now: the last verdicts stand until one answers
            except Exception:  # the watch must outlive any error, or its signals freeze
                logger.exception("primary_sample_failed")
            if sample is not None and sample[0] != primary:
                if primary is not None:
                    metrics.PRIMARY.labels(primary).set(0)
                    logger.warning(
                        "primary_changed", extra={"fields": {"was": primary, "now": sample[0]}}
                    )
                primary = sample[0]
                metrics.PRIMARY.labels(primary).set(1)
            self._sample_pools()
            if self.replicas.any:
                try:
                    await self.replicas.check(time.monotonic(), sample and sample[1])
                except Exception:  # as above: one replica's surprise must not end the watch
                    logger.exception("replica_check_failed")
            await asyncio.sleep(self.replicas.check_seconds)

    def _sample_pools(self) -> None:
        pool = self.engine.pool
        if isinstance(pool, QueuePool):
            metrics.POOL_IN_USE.labels("orm").set(pool.checkedout())
            metrics.POOL_CAPACITY.labels("orm").set(pool.size() + max(pool._max_overflow, 0))
        if self._reads is not None:
            reads = self._reads
            metrics.POOL_IN_USE.labels("reads").set(reads.get_size() - reads.get_idle_size())
            metrics.POOL_CAPACITY.labels("reads").set(reads.get_max_size())

    async def dispose(self) -> None:
        await self.replicas.dispose()
        if self._reads is not None:
            await self._reads.close()
            self._reads = None
        await self.engine.dispose()

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[AsyncSession]:
        async with self.sessions() as session:
            try:
                transaction = await session.begin()
                try:
                    waited = time.perf_counter()
                    await session.connection()  # from the pool; BEGIN goes with the first statement
                    metrics.POOL_WAITS.observe(time.perf_counter() - waited)
                    yield session
                    changed = await append_pending(session)  # last: see record_change
                except BaseException:
                    await transaction.rollback()
                    raise
                await self._commit(session, transaction)
                await self.after_commit(changed)
            except (DBAPIError, asyncpg.PostgresError) as error:  # the latter: driver statements
                raise translate_db_error(error) from error
            except OUTAGES as error:  # the database is not there: 503, retry later
                raise Unavailable("the database is unavailable") from error

    async def _commit(self, session: AsyncSession, transaction: AsyncSessionTransaction) -> None:
        """The commit, bounded: one the database does not acknowledge in time (a synchronous
        standby gone) is given up, its connection thrown away, and answered 503."""
        bound = asyncio.timeout(self.commit_wait_seconds)
        try:
            async with bound:
                await transaction.commit()
        except TimeoutError:
            if not bound.expired():
                raise
            await session.invalidate()
            raise self._not_acknowledged() from None
        self.unacknowledged_since = None

    def _not_acknowledged(self) -> WriteNotAcknowledged:
        if self.unacknowledged_since is None:
            self.unacknowledged_since = time.monotonic()
        logger.warning(
            "commit_not_acknowledged", extra={"fields": {"seconds": self.commit_wait_seconds}}
        )
        return WriteNotAcknowledged(
            f"the database did not acknowledge the write within {self.commit_wait_seconds:g} s "
            "(REGISTRY_COMMIT_WAIT_SECONDS): it may have been applied; try it again later"
        )

    async def writes_acknowledged(self, seconds: float) -> bool:
        """Whether a commit that writes is acknowledged within ``seconds`` (what /readyz asks; a
        read-only commit waits for no standby, so it would say nothing)."""
        pool = await self.reads()
        bound = asyncio.timeout(seconds)
        try:
            async with bound, pool.acquire() as connection:
                await connection.fetchval(PROBE)
        except TimeoutError:
            if not bound.expired():
                raise
            if self.unacknowledged_since is None:
                self.unacknowledged_since = time.monotonic()
            return False
        self.unacknowledged_since = None
        return True

    @asynccontextmanager
    async def one_call(self, tenant_id: uuid.UUID) -> AsyncIterator[asyncpg.Connection]:
        """A connection of the primary's plain pool for a write of ``tenant_id`` that is one
        statement, its own transaction (committed as the statement ends); driver errors and outages
        answered as a transaction's are. The caller tells ``after_commit`` what it changed.

        At most ONE_CALL_WRITES_PER_TENANT of a tenant's such writes are in the database at once
        from this worker; the next wait their turn here, in order (another tenant's never wait on
        them). A tenant's writes contend for its rows (the prompt's, its change sequence's at each
        commit): let every request in, they queued in PostgreSQL, which spent a third more CPU per
        write on the contention and served them out of order (docs/benchmarks.md)."""
        turns = self._turns.get(tenant_id)
        if turns is None:
            turns = self._turns[tenant_id] = _Turns(ONE_CALL_WRITES_PER_TENANT)
        turns.users += 1
        try:
            async with turns.semaphore:
                pool = await self.reads()
                waited = time.perf_counter()
                async with pool.acquire() as connection:
                    metrics.POOL_WAITS.observe(time.perf_counter() - waited)
                    # the write is one statement, committed as it ends: bounded as a commit is
                    bound = asyncio.timeout(self.commit_wait_seconds)
                    try:
                        async with bound:
                            yield connection
                    except TimeoutError:
                        if bound.expired():
                            raise self._not_acknowledged() from None
                        raise
            self.unacknowledged_since = None
        except asyncpg.PostgresError as error:
            raise translate_db_error(error) from error
        except OUTAGES as error:
            raise Unavailable("the database is unavailable") from error
        finally:
            turns.users -= 1
            if not turns.users:
                del self._turns[tenant_id]

    async def after_commit(self, changed: set[uuid.UUID]) -> None:
        """A commit changed the tenants ``changed``: this worker's own caches are told at once (not
        on the notification's echo), and its replica watermarks follow."""
        for tenant_id in changed:
            for told in self.committed:
                told(tenant_id)
        if changed and self.replicas.any:
            await self._saw_committed(changed)

    async def _saw_committed(self, tenants: set[uuid.UUID]) -> None:
        """After a commit that changed ``tenants``: this worker's reads of them never see less than
        it wrote (their sequence numbers were given at commit, so they are read back). The write
        is committed whatever happens here: when the read fails, the listener's notification of the
        same changes moves the watermarks instead."""
        try:
            found = await repo.change_sequences(await self.reads(), list(tenants))
        except (*OUTAGES, asyncpg.PostgresError) as error:
            logger.warning(
                "watermark_read_failed", extra={"fields": {"error": type(error).__name__}}
            )
            return
        for tenant_id, seq in found.items():
            self.saw(tenant_id, seq)

    @asynccontextmanager
    async def tenant_tx(self, tenant_id: uuid.UUID) -> AsyncIterator[AsyncSession]:
        """A transaction as the application role that sees only ``tenant_id``'s rows."""
        async with self._transaction() as session:
            await repo.enter_role(session, APP_ROLE, tenant_id)
            yield session

    @asynccontextmanager
    async def tenant_read_tx(self, tenant_id: uuid.UUID) -> AsyncIterator[AsyncSession]:
        """``tenant_tx`` for a block that only reads: on a replica that has replayed everything
        this worker knows of the tenant, else on the primary. Writing in it fails."""
        replica = await self.replicas.session(tenant_id)
        if replica is None:
            async with self.tenant_tx(tenant_id) as session:
                yield session
            return
        try:
            yield replica
        except DBAPIError as error:
            raise translate_db_error(error) from error
        except OUTAGES as error:
            raise Unavailable("the database is unavailable") from error
        finally:
            await replica.close()  # it only read: closing rolls back

    @asynccontextmanager
    async def app_tx(self) -> AsyncIterator[AsyncSession]:
        """A transaction as the application role with no tenant: only the tenant directory is visible.

        Used to resolve a tenant (or create one) before entering it with ``enter_tenant``.
        """
        async with self._transaction() as session:
            await repo.enter_role(session, APP_ROLE)
            yield session

    @asynccontextmanager
    async def named_tenant_tx(
        self, slug: str, *, key_hash: bytes | None = None
    ) -> AsyncIterator[tuple[AsyncSession, Tenant | None, repo.StoredKey | None]]:
        """``tenant_tx`` for a tenant known by its name, found in the same round trip that scopes
        the transaction to it (every REST request and MCP session starts so); for a name no
        tenant has, None, in a transaction that sees the tenant directory only (``app_tx``).
        Given ``key_hash``, the same round trip reads the tenant's API key with that SHA-256."""
        async with self._transaction() as session:
            if SLUG_RE.fullmatch(slug):
                tenant, key = await repo.enter_named_tenant(session, APP_ROLE, slug, key_hash)
            else:  # not a name at all: no lookup
                tenant, key = None, None
                await repo.enter_role(session, APP_ROLE)
            yield session, tenant, key

    @asynccontextmanager
    async def operator_tx(self) -> AsyncIterator[AsyncSession]:
        """A transaction as the connecting (owner) role, for operator work that spans tenants.

        Never used to serve a tenant's request.
        """
        async with self._transaction() as session:
            yield session


class LazyTx:
    """A tenant transaction opened only when first asked for (answers from caches need none).

    ``async with LazyTx(db, tenant_id) as tx: session = await tx.session()``; the transaction, if it
    was opened, commits when the block ends (rolls back on an exception). Given an open ``session``,
    it hands that out and leaves its ending to whoever opened it.

    ``reads_on_replica``: reads (``session()``) may go to a fresh read replica, in a transaction of
    their own; writes (``session(write=True)``) never do.
    """

    def __init__(
        self,
        db: Database,
        tenant_id: uuid.UUID,
        session: AsyncSession | None = None,
        *,
        reads_on_replica: bool = False,
    ) -> None:
        self.db = db
        self.tenant_id = tenant_id
        self._session = session
        self._opened: list[AbstractAsyncContextManager[AsyncSession]] = []
        self._reads: AsyncSession | None = None
        self._replica_reads = reads_on_replica and db.replicas.any

    async def session(self, *, write: bool = False) -> AsyncSession:
        if self._replica_reads and not write:
            if self._reads is None:
                self._reads = await self._open(self.db.tenant_read_tx(self.tenant_id))
            return self._reads
        if self._session is None:
            self._session = await self._open(self.db.tenant_tx(self.tenant_id))
        return self._session

    async def _open(self, opening: AbstractAsyncContextManager[AsyncSession]) -> AsyncSession:
        session = await opening.__aenter__()
        self._opened.append(opening)
        return session

    async def __aenter__(self) -> LazyTx:
        return self

    async def __aexit__(self, *exc: object) -> bool | None:
        opened, self._opened = self._opened, []
        failure: BaseException | None = None
        for opening in reversed(opened):  # each ends, whatever the others did
            try:
                await opening.__aexit__(*exc)  # type: ignore[arg-type]
            except BaseException as error:  # noqa: BLE001 - re-raised below, once all ended
                failure = failure or error
        if failure is not None:
            raise failure
        return None


async def enter_tenant(session: AsyncSession, tenant_id: uuid.UUID) -> None:
    """Scope the rest of an ``app_tx`` transaction to one tenant (after resolving or creating it)."""
    await repo.set_tenant(session, tenant_id)


async def listen_connection(url: str) -> asyncpg.Connection:
    """A connection of its own for LISTEN: never from the pool, never through a transaction pooler."""
    return await asyncpg.connect(**asyncpg_arguments(url), timeout=10)
