"""Immutable versions and append-only logs; the change-log NOTIFY fires once per committed change."""

from __future__ import annotations

import asyncio
import json
import uuid

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from registry.db.audit import flush_changes, record_change
from registry.db.engine import Database
from tests.conftest import PgServer
from tests.db.test_rls import seed_tenant


@pytest.fixture
async def tenant(superuser: asyncpg.Connection) -> uuid.UUID:
    return await seed_tenant(superuser, "alpha")


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE prompt_versions SET description = 'changed'",
        "DELETE FROM prompt_versions",
        "UPDATE prompt_arguments SET name = 'other'",
        "DELETE FROM prompt_messages",
        "UPDATE audit_log SET actor = 'someone else'",
        "DELETE FROM label_history",
        "DELETE FROM change_log",
    ],
)
async def test_written_rows_cannot_change_even_for_the_owner(
    superuser: asyncpg.Connection, tenant: uuid.UUID, statement: str
) -> None:
    with pytest.raises(asyncpg.RestrictViolationError, match="immutable"):
        await superuser.execute(statement)


async def test_application_role_has_no_update_privilege_on_versions(
    db: Database, tenant: uuid.UUID
) -> None:
    with pytest.raises(DBAPIError, match="permission denied"):
        async with db.tenant_tx(tenant) as session:
            await session.execute(text("UPDATE prompt_versions SET description = 'x'"))


async def test_deleting_a_prompt_cascades_through_its_versions(
    db: Database, superuser: asyncpg.Connection, tenant: uuid.UUID
) -> None:
    async with db.tenant_tx(tenant) as session:
        await session.execute(text("DELETE FROM prompts"))
    for table in (
        "prompt_versions",
        "prompt_arguments",
        "prompt_messages",
        "labels",
        "label_history",
    ):
        assert await superuser.fetchval(f"SELECT count(*) FROM {table}") == 0, table


async def superuser_seq(pg_server: PgServer, db_name: str, kind: str) -> int:
    conn = await pg_server.connect(db_name)
    try:
        return int(await conn.fetchval("SELECT seq FROM change_log WHERE kind = $1", kind))
    finally:
        await conn.close()


async def _listen(
    pg_server: PgServer, db_name: str
) -> tuple[asyncpg.Connection, asyncio.Queue[str]]:
    conn = await pg_server.connect(db_name)
    queue: asyncio.Queue[str] = asyncio.Queue()
    await conn.add_listener("registry_changes", lambda *args: queue.put_nowait(args[3]))
    return conn, queue


async def test_notify_once_per_committed_change_and_never_on_rollback(
    db: Database, pg_server: PgServer, db_name: str, tenant: uuid.UUID
) -> None:
    listener, queue = await _listen(pg_server, db_name)
    try:

        class Rollback(Exception):
            pass

        with pytest.raises(Rollback):
            async with db.tenant_tx(tenant) as session:
                record_change(session, tenant_id=tenant, kind="rolled_back")
                await flush_changes(session)
                raise Rollback

        async with db.tenant_tx(tenant) as session:
            record_change(session, tenant_id=tenant, kind="one")
            record_change(session, tenant_id=tenant, kind="two")
            first, second = await flush_changes(session)

        # Notifications arrive in commit order, so the rolled-back one would have come first.
        received = [json.loads(await asyncio.wait_for(queue.get(), 5)) for _ in range(2)]
        assert received == [
            {"tenant": str(tenant), "seq": first, "label": None},
            {"tenant": str(tenant), "seq": second, "label": None},
        ]
        # The seeded row took seq 1; the rollback's number was given back with its transaction.
        assert (first, second) == (2, 3)

        async with db.tenant_tx(tenant) as session:
            record_change(session, tenant_id=tenant, kind="three")  # appended as it commits
        third = await superuser_seq(pg_server, db_name, "three")
        assert json.loads(await asyncio.wait_for(queue.get(), 5)) == {
            "tenant": str(tenant),
            "seq": third,
            "label": None,
        }
        assert queue.empty()
    finally:
        await listener.close()


async def test_change_sequence_is_per_tenant(db: Database, superuser: asyncpg.Connection) -> None:
    a = await seed_tenant(superuser, "one")
    b = await seed_tenant(superuser, "two")
    async with db.tenant_tx(a) as session:
        record_change(session, tenant_id=a, kind="x")
        assert await flush_changes(session) == [2]
    async with db.tenant_tx(b) as session:
        record_change(session, tenant_id=b, kind="x")
        record_change(session, tenant_id=b, kind="y")
        assert await flush_changes(session) == [2, 3]
    assert await superuser.fetchval("SELECT change_seq FROM tenants WHERE id = $1", a) == 2
