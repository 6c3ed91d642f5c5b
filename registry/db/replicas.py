"""Read replicas: which one may answer a read, so that no caller sees a state older than one it saw.

Two rules decide. Per tenant, a worker knows the newest change sequence committed that it has heard
of (a NOTIFY, or a write it made itself): ``Watermarks``. A replica answers a read of a tenant only
when it has replayed that sequence (checked in the read's own transaction, on the replica), else the
primary answers. And every replica is watched (``Replicas.check``, each second from
``Database.watch``): one that cannot be reached, or that is not in recovery (promoted: its
connections are closed, to find a standby again), or whose replay is behind the primary by more than
the lag bound, is skipped until it is fine again; while
this worker's change listener is down, nothing it knows of sequences is trusted and the primary
answers every read.

Lag is measured against the primary's own write position: each check samples the primary's current
WAL position, and a replica's lag is the time since the newest sample it has replayed past (zero when
it has replayed the newest), so a replica that stopped receiving is seen as lagging too.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import asyncpg
from sqlalchemy import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from registry.db import repository as repo
from registry.db.connect import APP_ROLE, make_engine, make_read_pool
from registry.db.errors import OUTAGES
from registry.metrics import REPLICA_LAG, REPLICA_USABLE

logger = logging.getLogger("registry.db")
PROMOTED = "not in recovery (promoted, or a primary): connecting again to find a standby"


class Watermarks:
    """Per tenant, the newest change sequence this worker knows to be committed."""

    def __init__(self) -> None:
        self._seen: dict[uuid.UUID, int] = {}

    def saw(self, tenant_id: uuid.UUID, seq: int) -> None:
        if seq > self._seen.get(tenant_id, 0):
            self._seen[tenant_id] = seq

    def of(self, tenant_id: uuid.UUID) -> int:
        return self._seen.get(tenant_id, 0)


@dataclass
class Replica:
    url: str
    pool_size: int
    pooled: bool
    usable: bool = False
    lag_seconds: float | None = None
    problem: str | None = "not checked yet"
    _reads: asyncpg.Pool | None = None
    _opening: asyncio.Lock = field(default_factory=asyncio.Lock)

    def __post_init__(self) -> None:
        self.engine = make_engine(self.url, self.pool_size, 0, self.pooled, "registry-replica")
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False, autoflush=False)

    @property
    def name(self) -> str:
        """Where it is, never with its password (for /readyz and logs)."""
        parsed = make_url(self.url)
        hosts = parsed.query.get("host") or parsed.host or "localhost"
        if isinstance(hosts, tuple):  # several hosts, each host:port already
            return f"{','.join(hosts)}/{parsed.database}"
        return f"{hosts}:{parsed.port or 5432}/{parsed.database}"

    async def reads(self) -> asyncpg.Pool:
        if self._reads is None:
            async with self._opening:
                if self._reads is None:
                    self._reads = await make_read_pool(
                        self.url, self.pool_size, self.pooled, "registry-replica-reads"
                    )
        return self._reads

    def down(self, error: BaseException) -> None:
        if self.usable:
            logger.warning(
                "replica_skipped",
                extra={"fields": {"replica": self.name, "error": type(error).__name__}},
            )
        self.usable = False
        self.problem = f"unreachable: {type(error).__name__}"

    async def promoted(self, within: float) -> None:
        """The server this replica's connections reach is not in recovery: it was promoted (a
        failover), or the URL names a primary. Its connections are closed, so the next check
        connects again: a URL naming several hosts with target_session_attrs=standby then finds
        the cluster's standby (an old primary that rejoined, say)."""
        if self.usable or self.problem != PROMOTED:
            logger.warning("replica_promoted", extra={"fields": {"replica": self.name}})
        self.usable = False
        self.problem = PROMOTED
        await self.dispose(within)

    async def dispose(self, within: float | None = None) -> None:
        """Close the connections: gracefully (reads in flight finish), those still busy after
        ``within`` seconds at once."""
        if self._reads is not None:
            reads, self._reads = self._reads, None
            try:
                async with asyncio.timeout(within):
                    await reads.close()
            except TimeoutError:
                reads.terminate()
        await self.engine.dispose()


class Replicas:
    def __init__(
        self,
        urls: list[str],
        *,
        pool_size: int,
        pooled: bool,
        max_lag_seconds: float,
        check_seconds: float = 1.0,
        check_timeout: float = 5.0,
    ) -> None:
        self.replicas = [Replica(url, pool_size, pooled) for url in urls]
        # A replica that does not answer within this is down for this check: a server that takes
        # connections and says nothing (one being rebuilt by a failover manager, say) must not hold
        # up the worker's watch, which samples the primary too.
        self.check_timeout = check_timeout
        self.watermarks = Watermarks()
        self.max_lag_seconds = max_lag_seconds
        self.check_seconds = check_seconds
        # Set by the app: whether this worker hears every change (its LISTEN connection is up).
        self.trusted: Callable[[], bool] = lambda: False
        self._next = 0
        # (moment, primary WAL position) samples, newest last: enough to measure the lag bound.
        self._samples: deque[tuple[float, int]] = deque(
            maxlen=int(max_lag_seconds / check_seconds) + 3
        )

    @classmethod
    def none(cls) -> Replicas:
        """No replicas: every method answers "the primary reads" (pool and session are None)."""
        return cls([], pool_size=1, pooled=False, max_lag_seconds=1.0)

    @property
    def any(self) -> bool:
        return bool(self.replicas)

    def pick(self) -> Replica | None:
        """A usable replica (in turns), or None: the primary answers."""
        if not self.trusted():
            return None
        usable = [replica for replica in self.replicas if replica.usable]
        if not usable:
            return None
        self._next = (self._next + 1) % len(usable)
        return usable[self._next]

    # --- reads ---------------------------------------------------------------------------------

    async def session(self, tenant_id: uuid.UUID) -> AsyncSession | None:
        """An open read transaction on a replica that has replayed everything this worker knows
        of ``tenant_id``, as the application role scoped to it; None when no replica qualifies."""
        replica = self.pick()
        if replica is None:
            return None
        session = replica.sessions()
        try:
            replayed = await repo.enter_tenant_on_replica(session, APP_ROLE, tenant_id)
        except (DBAPIError, *OUTAGES) as error:
            replica.down(error)
            await _close(session)
            return None
        if replayed is None or replayed < self.watermarks.of(tenant_id):
            await _close(session)
            return None
        return session

    async def pool(self, tenant_id: uuid.UUID) -> asyncpg.Pool | None:
        """A replica's plain read pool, when that replica has replayed what this worker knows of
        ``tenant_id`` (one round trip to check); None: the primary answers."""
        replica = self.pick()
        if replica is None:
            return None
        try:
            pool = await replica.reads()
            replayed = await repo.replayed_sequence(pool, tenant_id)
        except (asyncpg.PostgresError, *OUTAGES) as error:
            replica.down(error)
            return None
        if replayed is None or replayed < self.watermarks.of(tenant_id):
            return None
        return pool

    # --- watching ------------------------------------------------------------------------------

    async def check(self, now: float, primary_position: int | None) -> None:
        """Judge every replica against the primary's WAL position sampled at ``now`` (None: the
        primary could not be reached, and the last verdicts stand)."""
        if primary_position is None:
            return
        self._samples.append((now, primary_position))
        for replica in self.replicas:
            try:
                async with asyncio.timeout(self.check_timeout):
                    replayed = await repo.replayed_position(await replica.reads())
            except (asyncpg.PostgresError, *OUTAGES) as error:
                replica.down(error)
                continue
            if replayed is None:
                await replica.promoted(self.check_timeout)
                continue
            replica.lag_seconds = self._lag(now, replayed)
            fresh = replica.lag_seconds <= self.max_lag_seconds
            if fresh != replica.usable:
                logger.info(
                    "replica_usable" if fresh else "replica_lagging",
                    extra={"fields": {"replica": replica.name, "lag": replica.lag_seconds}},
                )
            replica.usable = fresh
            replica.problem = None if fresh else f"lagging {replica.lag_seconds:.1f} s"
            REPLICA_LAG.labels(replica.name).set(replica.lag_seconds)
        for replica in self.replicas:
            REPLICA_USABLE.labels(replica.name).set(1 if replica.usable else 0)

    def _lag(self, now: float, replayed: int) -> float:
        caught_up = None
        for moment, position in self._samples:
            if position <= replayed:
                caught_up = moment
        if caught_up is None:  # behind every sample we hold: at least as old as the oldest
            return now - self._samples[0][0] if self._samples else 0.0
        newest = self._samples[-1]
        return 0.0 if caught_up == newest[0] else now - caught_up

    def status(self) -> list[dict[str, object]]:
        return [
            {
                "replica": replica.name,
                "usable": replica.usable,
                "lag_seconds": None
                if replica.lag_seconds is None
                else round(replica.lag_seconds, 3),
                **({"problem": replica.problem} if replica.problem else {}),
            }
            for replica in self.replicas
        ]

    async def dispose(self) -> None:
        for replica in self.replicas:
            await replica.dispose()


async def _close(session: AsyncSession) -> None:
    try:
        await session.close()
    except (DBAPIError, *OUTAGES):
        pass
