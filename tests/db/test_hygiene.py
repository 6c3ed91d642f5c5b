"""Connection hygiene: whatever kind of transaction a connection served, the next one on it sees no
tenant's rows and runs as the connecting role. Each pool here has one connection, so "the next
transaction" is on the same connection for certain (the backend pid says so). Through a transaction
pooler (PgBouncer), the next transaction on the same server connection is another client's: it too
sees no tenant."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.engine import Database
from registry.prompts import hot_reads
from registry.prompts import version_repository as prompts
from tests.conftest import PgServer
from tests.pgbouncer import Pooler

PID = text("SELECT pg_backend_pid()")
SEEN = text("SELECT count(*) FROM prompts")
SETTING = text("SELECT current_setting('registry.tenant_id', true)")
PLANS = text("SELECT current_setting('plan_cache_mode')")


@pytest.fixture
async def one_connection(pg_server: PgServer, db_name: str) -> AsyncIterator[Database]:
    database = Database(pg_server.url(db_name), pool_size=1, max_overflow=0, read_pool_size=1)
    yield database
    await database.dispose()


@pytest.fixture
async def two_clients_of_a_pooler(
    pgbouncer: Pooler, db_name: str
) -> AsyncIterator[tuple[Database, Database]]:
    """Two registries' databases through the same PgBouncer (transaction mode): one serves a
    transaction, the other's next transaction takes the server connection it left (PgBouncer hands
    out the connection released last; the backend pid says so)."""
    url = pgbouncer.url(db_name).replace("postgresql://", "postgresql+asyncpg://", 1)
    made = [Database(url, pool_size=1, max_overflow=0, pooled=True) for _ in range(2)]
    yield made[0], made[1]
    for database in made:
        await database.dispose()


async def _tenant(db: Database, alpha: uuid.UUID) -> int:
    async with db.tenant_tx(alpha) as session:
        return await _pid_after_reading(session)


async def _named_tenant(db: Database, alpha: uuid.UUID) -> int:
    async with db.named_tenant_tx("alpha") as (session, tenant, _key):
        assert tenant is not None and tenant.id == alpha
        return await _pid_after_reading(session)


async def _tenant_read(db: Database, alpha: uuid.UUID) -> int:
    async with db.tenant_read_tx(alpha) as session:
        return await _pid_after_reading(session)


async def _app(db: Database, alpha: uuid.UUID) -> int:
    async with db.app_tx() as session:
        return int((await session.execute(PID)).scalar_one())


async def _operator(db: Database, alpha: uuid.UUID) -> int:
    async with db.operator_tx() as session:
        return int((await session.execute(PID)).scalar_one())


async def _pid_after_reading(session: AsyncSession) -> int:
    assert (await session.execute(SEEN)).scalar_one() == 1  # alpha's row, and only it
    return int((await session.execute(PID)).scalar_one())


async def _plans_of(kind: str, db: Database, alpha: uuid.UUID) -> str:
    transaction = {
        "tenant": lambda: db.tenant_tx(alpha),
        "named tenant": lambda: _named(db),
        "operator": db.operator_tx,
    }[kind]()
    async with transaction as session:
        return str((await session.execute(PLANS)).scalar_one())


@asynccontextmanager
async def _named(db: Database) -> AsyncIterator[AsyncSession]:
    async with db.named_tenant_tx("alpha", key_hash=bytes(32)) as (session, tenant, key):
        assert tenant is not None and key is None  # no key has that hash
        yield session


KINDS: dict[str, Callable[[Database, uuid.UUID], Awaitable[int]]] = {
    "tenant": _tenant,
    "named tenant": _named_tenant,
    "tenant read": _tenant_read,
    "app": _app,
    "operator": _operator,
}


async def _sees_no_tenant(db: Database, used: int) -> None:
    """``db``'s next two transactions run on the server connection with backend pid ``used``: as
    the application role with no tenant, and as the connecting role; neither sees a tenant."""
    async with db.app_tx() as session:
        assert (await session.execute(PID)).scalar_one() == used  # the same server connection
        assert (await session.execute(SEEN)).scalar_one() == 0
        assert (await session.execute(SETTING)).scalar_one() in (None, "")
    async with db.operator_tx() as session:
        assert (await session.execute(PID)).scalar_one() == used
        assert (await session.execute(text("SELECT current_user = session_user"))).scalar_one()
        assert (await session.execute(SETTING)).scalar_one() in (None, "")


@pytest.mark.parametrize("kind", list(KINDS))
async def test_the_next_transaction_on_a_connection_sees_no_tenant(
    one_connection: Database, two_tenants: tuple[uuid.UUID, uuid.UUID], kind: str
) -> None:
    db = one_connection
    alpha, _ = two_tenants
    await _sees_no_tenant(db, await KINDS[kind](db, alpha))


@pytest.mark.parametrize("kind", list(KINDS))
async def test_another_clients_next_transaction_through_a_pooler_sees_no_tenant(
    two_clients_of_a_pooler: tuple[Database, Database],
    two_tenants: tuple[uuid.UUID, uuid.UUID],
    kind: str,
) -> None:
    served, other = two_clients_of_a_pooler
    alpha, _ = two_tenants
    await _sees_no_tenant(other, await KINDS[kind](served, alpha))


async def test_a_tenant_transaction_plans_generically_and_leaves_the_connection_as_it_was(
    one_connection: Database, two_tenants: tuple[uuid.UUID, uuid.UUID]
) -> None:
    """The statements after the one that enters a tenant run with generic plans (planned once per
    connection, not for each execution); the next transaction on the connection, the owner role's
    across tenants, has PostgreSQL's own choice again."""
    db = one_connection
    alpha, _ = two_tenants
    assert await _plans_of("tenant", db, alpha) == "force_generic_plan"
    assert await _plans_of("operator", db, alpha) == "auto"
    assert await _plans_of("named tenant", db, alpha) == "force_generic_plan"
    assert await _plans_of("operator", db, alpha) == "auto"


async def test_the_hot_paths_plain_connection_keeps_no_tenant(
    one_connection: Database, two_tenants: tuple[uuid.UUID, uuid.UUID]
) -> None:
    """The hot path's statements, and the write made in one call, are functions that enter the
    tenant for their own transaction: the plain connection they ran on is left as it was."""
    db = one_connection
    alpha, _ = two_tenants
    pool = await db.read_pool(alpha)

    async def write_at_once() -> None:  # the operator's, to a prompt there is not: declined
        async with db.one_call(alpha) as connection:
            assert await prompts.write_version_at_once(
                connection, tenant_id=alpha, key=None, roles=["admin"], name="nope",
                if_match=None, latest="latest", content=prompts.VersionContent(
                    meta={}, author="operator", content_hash=bytes(32), list_entry="{}",
                    arguments=[], messages=[]),
            ) is None  # fmt: skip

    for statement in (
        lambda: hot_reads.served_page(pool, alpha, "production", after=None, limit=10),
        lambda: hot_reads.served_tool(pool, alpha, "production", "some_tool"),
        write_at_once,
    ):
        await statement()
        async with pool.acquire() as connection:
            assert await connection.fetchval(
                "SELECT current_setting('registry.tenant_id', true)"
            ) in (None, "")
            assert await connection.fetchval("SELECT current_user = session_user")
