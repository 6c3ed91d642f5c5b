"""Immutable versions and append-only logs; the change-log NOTIFY fires once per committed change."""

from __future__ import annotations

import asyncio
import json
import uuid

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from registry.db.audit import append_pending, record_change
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
                await append_pending(session)
                raise Rollback

        async with db.tenant_tx(tenant) as session:
            record_change(session, tenant_id=tenant, kind="one")
            record_change(session, tenant_id=tenant, kind="two")
        first = await superuser_seq(pg_server, db_name, "one")
        second = await superuser_seq(pg_server, db_name, "two")

        # Notifications arrive in commit order, so the rolled-back one would have come first. The
        # tenant has a webhook endpoint: the outbox says it queued deliveries, once per transaction.
        queued = {"tenant": str(tenant), "webhooks": True}
        received = [json.loads(await asyncio.wait_for(queue.get(), 5)) for _ in range(3)]
        assert received == [
            {"tenant": str(tenant), "seq": first, "label": None, "serves": True},
            queued,
            {"tenant": str(tenant), "seq": second, "label": None, "serves": True},
        ]
        # The seeded row took seq 1; a rolled-back change never took a number.
        assert (first, second) == (2, 3)

        async with db.tenant_tx(tenant) as session:
            record_change(session, tenant_id=tenant, kind="three")  # appended as it commits
        third = await superuser_seq(pg_server, db_name, "three")
        received = [json.loads(await asyncio.wait_for(queue.get(), 5)) for _ in range(2)]
        assert received == [
            {"tenant": str(tenant), "seq": third, "label": None, "serves": True},
            queued,
        ]
        assert queue.empty()
    finally:
        await listener.close()


async def test_change_sequence_is_per_tenant(db: Database, superuser: asyncpg.Connection) -> None:
    a = await seed_tenant(superuser, "one")
    b = await seed_tenant(superuser, "two")
    async with db.tenant_tx(a) as session:
        record_change(session, tenant_id=a, kind="x")
    async with db.tenant_tx(b) as session:
        record_change(session, tenant_id=b, kind="x")
        record_change(session, tenant_id=b, kind="y")
    numbered = await superuser.fetch(
        "SELECT tenant_id, seq, kind FROM change_log WHERE kind IN ('x', 'y') ORDER BY tenant_id, seq"
    )
    assert sorted((r["tenant_id"] == a, r["seq"], r["kind"]) for r in numbered) == [
        (False, 2, "x"),
        (False, 3, "y"),
        (True, 2, "x"),
    ]
    assert await superuser.fetchval("SELECT seq FROM change_sequences WHERE tenant_id = $1", a) == 2
    assert await superuser.fetchval("SELECT count(*) FROM change_pending") == 0


async def test_a_change_locks_its_tenant_only_as_it_commits(
    db: Database, superuser: asyncpg.Connection, tenant: uuid.UUID
) -> None:
    """Appended changes wait, unnumbered, until their transaction commits: until then the tenant
    row is not locked, so another writer of the tenant commits (and takes the next number) first."""
    async with db.tenant_tx(tenant) as session:
        record_change(session, tenant_id=tenant, kind="slow")
        await append_pending(session)
        assert (
            await session.scalar(text("SELECT count(*) FROM change_log WHERE kind = 'slow'")) == 0
        )
        # Another writer of the same tenant, meanwhile: with the tenant row locked it would wait
        # for this transaction forever (lock_timeout turns that wait into an error instead).
        await superuser.execute("SET lock_timeout = '5s'")
        async with superuser.transaction():
            await superuser.execute(
                "INSERT INTO change_pending (tenant_id, kind) VALUES ($1, 'fast')", tenant
            )
    seqs = {
        r["kind"]: r["seq"]
        for r in await superuser.fetch(
            "SELECT kind, seq FROM change_log WHERE tenant_id = $1", tenant
        )
    }
    assert seqs["fast"] < seqs["slow"]  # numbered in commit order
    assert await superuser.fetchval("SELECT count(*) FROM change_pending") == 0


async def test_a_label_carries_its_versions_entry_and_its_prompts_state(
    db: Database, superuser: asyncpg.Connection, tenant: uuid.UUID
) -> None:
    """Written as the application role, as every write is: a label takes its version's list entry
    when written or moved, and follows its prompt into and out of the archive."""
    prompt_id = await superuser.fetchval("SELECT id FROM prompts WHERE tenant_id = $1", tenant)
    await superuser.execute(
        "INSERT INTO prompt_versions (tenant_id, prompt_id, version, author, content_hash, list_entry)"
        " VALUES ($1, $2, 2, 'test', $3, '{\"name\":\"two\"}')",
        tenant,
        prompt_id,
        bytes(32),
    )
    row = "SELECT list_entry, archived FROM labels WHERE tenant_id = $1 AND label = $2"

    async def run(statement: str, **values: object) -> None:
        async with db.tenant_tx(tenant) as session:
            await session.execute(text(statement), {"tenant": tenant, **values})

    # The seeded label points at version 1, written without an entry (as before schema 0015).
    assert tuple(await superuser.fetchrow(row, tenant, "production")) == (None, False)
    moved = "UPDATE labels SET version = :v WHERE tenant_id = :tenant AND label = 'production'"
    await run(moved, v=2)
    assert tuple(await superuser.fetchrow(row, tenant, "production")) == ('{"name":"two"}', False)
    archived = "UPDATE prompts SET archived_at = {} WHERE tenant_id = :tenant"
    await run(archived.format("now()"))
    assert tuple(await superuser.fetchrow(row, tenant, "production")) == ('{"name":"two"}', True)
    # A label written on an archived prompt is archived with it; a copy written by hand is not kept.
    await run(
        "INSERT INTO labels (tenant_id, prompt_id, label, prompt_name, version, updated_by,"
        " list_entry, archived) VALUES (:tenant, :prompt, 'staging', 'alpha-prompt', 2, 'test',"
        " 'forged', false)",
        prompt=prompt_id,
    )
    assert tuple(await superuser.fetchrow(row, tenant, "staging")) == ('{"name":"two"}', True)
    await run(archived.format("NULL"))
    both = await superuser.fetch(row.replace("label = $2", "label <> $2"), tenant, "")
    assert [tuple(r) for r in both] == [('{"name":"two"}', False)] * 2
    await run(moved, v=1)
    assert tuple(await superuser.fetchrow(row, tenant, "production")) == (None, False)
