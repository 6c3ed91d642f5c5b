"""Migrations go up, down and up again, and the models match the migrated schema."""

from __future__ import annotations

import asyncio
import json
import re

import asyncpg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from registry.db import migrate
from registry.db.base import Base
from registry.db.models import (
    RETIRED_COLUMNS,
    TENANT_OWNED_TABLES,
)
from registry.errors import SchemaNotAtHead
from registry.prompts.listing import served_prompt, stored_entry
from tests.conftest import PgServer, modules_loaded
from tests.db.test_rls import seed_tenant

PARTITION = re.compile(r"^usage_(minutes_\d{8}|hours_\d{6}|days_\d{6})$")


def _diff(connection: Connection) -> list[object]:
    context = MigrationContext.configure(connection, opts={"compare_server_default": True})
    differences = [d for d in compare_metadata(context, Base.metadata) if not _partition(d)]
    retired = [d for d in differences if _retired(d)]
    assert len(retired) == len(RETIRED_COLUMNS), "a retired column is gone: drop it from the list"
    return [d for d in differences if not _retired(d)]


def _partition(difference: object) -> bool:
    """A partition of a ledger table (made by registry_usage_partitions_v1, never a model)."""
    if not (isinstance(difference, tuple) and difference[0] == "remove_table"):
        return False
    return bool(PARTITION.match(difference[1].name))


def _retired(difference: object) -> bool:
    """A column the schema still has and the models no longer map (models.RETIRED_COLUMNS)."""
    if not (isinstance(difference, tuple) and difference[0] == "remove_column"):
        return False
    _, _, table, column = difference
    return (table, column.name) in RETIRED_COLUMNS


async def _tables(pg_server: PgServer, name: str) -> set[str]:
    conn = await pg_server.connect(name)
    try:
        rows = await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        return {r["tablename"] for r in rows}
    finally:
        await conn.close()


async def test_up_down_up_and_models_match(pg_server: PgServer, empty_db_name: str) -> None:
    url = pg_server.url(empty_db_name)
    await asyncio.to_thread(migrate.upgrade, url)
    assert set(TENANT_OWNED_TABLES) | {"tenants", "alembic_version"} <= await _tables(
        pg_server, empty_db_name
    )

    await asyncio.to_thread(migrate.downgrade, url, "base")
    assert await _tables(pg_server, empty_db_name) == {"alembic_version"}

    await asyncio.to_thread(migrate.upgrade, url)
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            assert await conn.run_sync(_diff) == []  # what `alembic check` verifies
        assert await migrate.current_revision(engine) == migrate.head_revision()
    finally:
        await engine.dispose()


async def test_upgrading_fills_the_entries_of_versions_written_before_them(
    pg_server: PgServer, empty_db_name: str
) -> None:
    """A version written at schema 0016 (the one seed_tenant writes, without a list entry, with an
    argument and a label) has its entry filled in by 0017, as the write path would have stored it;
    its label takes it and serves it from then on."""
    url = pg_server.url(empty_db_name)
    await asyncio.to_thread(migrate.upgrade, url, "0016")
    conn = await pg_server.connect(empty_db_name)
    try:
        tenant = await seed_tenant(conn, "alpha")
        await asyncio.to_thread(migrate.upgrade, url)
        (row,) = json.loads(
            await conn.fetchval(
                "SELECT registry_served_page_v1($1, 'production', NULL, 10)::text", tenant
            )
        )
        expected = stored_entry(served_prompt(*row))
        assert '"topic"' in expected  # the seeded argument is part of it
        assert (
            await conn.fetchval(
                "SELECT list_entry FROM prompt_versions WHERE tenant_id = $1", tenant
            )
            == expected
        )
        assert (
            await conn.fetchval("SELECT list_entry FROM labels WHERE tenant_id = $1", tenant)
            == expected
        )
        # The fill set the immutability trigger aside for itself only: versions are immutable again.
        with pytest.raises(asyncpg.RestrictViolationError, match="immutable"):
            await conn.execute(
                "UPDATE prompt_versions SET list_entry = 'x' WHERE tenant_id = $1", tenant
            )
        async with conn.transaction():
            served = await conn.fetch(
                "SELECT entry, served FROM registry_served_entries_v2($1, 'production', NULL, 10)",
                tenant,
            )
        assert [tuple(r) for r in served] == [(expected, None)]
    finally:
        await conn.close()


async def test_upgrading_keeps_the_tool_name_of_prompts_marked_before(
    pg_server: PgServer, empty_db_name: str
) -> None:
    """0025: a prompt marked as a tool at schema 0024 has its tool name on its row after the
    upgrade, one not marked has none, and the downgrade takes the column away again."""
    url = pg_server.url(empty_db_name)
    await asyncio.to_thread(migrate.upgrade, url, "0024")
    conn = await pg_server.connect(empty_db_name)
    try:
        tenant = await seed_tenant(conn, "alpha")
        await conn.execute(
            "INSERT INTO prompts (tenant_id, name, as_tool) VALUES ($1, 'a.b:c', true), "
            "($1, 'd.e', false)",
            tenant,
        )
        await asyncio.to_thread(migrate.upgrade, url)
        found = await conn.fetch(
            "SELECT name, tool_name FROM prompts WHERE tenant_id = $1 AND name IN ('a.b:c', 'd.e')",
            tenant,
        )
        assert {r["name"]: r["tool_name"] for r in found} == {"a.b:c": "a_b_c", "d.e": None}
        await asyncio.to_thread(migrate.downgrade, url, "0024")
        columns = await conn.fetchval(
            "SELECT count(*) FROM information_schema.columns WHERE table_name = 'prompts' "
            "AND column_name = 'tool_name'"
        )
        assert columns == 0
    finally:
        await conn.close()


async def test_upgrading_moves_each_tenants_change_sequence_to_its_own_row(
    pg_server: PgServer, empty_db_name: str
) -> None:
    """0018: the sequence a tenant reached on its tenants row goes on from its change_sequences row;
    the tenants row no longer changes when a change commits; a new tenant starts at 0; downgrading
    gives the sequence back to the tenants row."""
    url = pg_server.url(empty_db_name)
    await asyncio.to_thread(migrate.upgrade, url, "0017")
    conn = await pg_server.connect(empty_db_name)
    change = "INSERT INTO change_log (tenant_id, seq, kind) VALUES ($1, 0, 'x') RETURNING seq"
    try:
        tenant = await seed_tenant(conn, "alpha")
        for _ in range(3):
            await conn.fetchval(change, tenant)
        before = await conn.fetchval("SELECT change_seq FROM tenants WHERE id = $1", tenant)
        assert before >= 3
        await asyncio.to_thread(migrate.upgrade, url)
        row = "SELECT xmin::text, change_seq FROM tenants WHERE id = $1"
        untouched = tuple(await conn.fetchrow(row, tenant))
        assert await conn.fetchval(change, tenant) == before + 1
        assert await conn.fetchval(change, tenant) == before + 2
        assert tuple(await conn.fetchrow(row, tenant)) == untouched  # not even a new row version
        assert (
            await conn.fetchval("SELECT seq FROM change_sequences WHERE tenant_id = $1", tenant)
            == before + 2
        )
        fresh = await seed_tenant(conn, "beta")  # created at 0018: numbered from 1
        recorded = await conn.fetchval(
            "SELECT count(*) FROM change_log WHERE tenant_id = $1", fresh
        )
        assert await conn.fetchval(change, fresh) == recorded + 1

        await asyncio.to_thread(migrate.downgrade, url, "0017")
        assert (
            await conn.fetchval("SELECT change_seq FROM tenants WHERE id = $1", tenant)
            == before + 2
        )
        assert await conn.fetchval(change, tenant) == before + 3
    finally:
        await conn.close()


async def test_the_code_serves_its_own_schema_and_a_later_one_never_an_older(
    pg_server: PgServer, empty_db_name: str
) -> None:
    """While an upgrade rolls, the previous release's workers serve the next release's schema
    (migrations only expand); an older schema, or none, is refused with the command to run."""
    url = pg_server.url(empty_db_name)
    engine = create_async_engine(url)
    try:
        with pytest.raises(SchemaNotAtHead, match=r"nothing \(empty database\).*registry migrate"):
            await migrate.check_at_head(engine)
        await asyncio.to_thread(migrate.upgrade, url, "0022")
        with pytest.raises(SchemaNotAtHead, match="at 0022, the code needs"):
            await migrate.check_at_head(engine)
        await asyncio.to_thread(migrate.upgrade, url)
        assert await migrate.check_at_head(engine) == migrate.head_revision()
        connection = await pg_server.connect(empty_db_name)
        try:  # a later release's `registry migrate` ran: a revision this code does not know
            await connection.execute("UPDATE alembic_version SET version_num = '9999_later'")
        finally:
            await connection.close()
        assert await migrate.check_at_head(engine) == "9999_later"
    finally:
        await engine.dispose()


def test_finding_the_head_loads_neither_alembic_nor_a_model_of_the_application() -> None:
    """Every `registry` command and each worker's first /readyz learn the head: from the migration
    files' headers, without importing Alembic or running a migration."""
    finding = "from registry.db import migrate; migrate.head_revision(); migrate.known_revisions()"
    prefixes = ("registry.prompts", "registry.skills", "registry.mcp", "registry.api", "alembic")
    assert modules_loaded(finding, (*prefixes, "mako")) == []


def test_the_headers_name_the_revisions_alembic_finds() -> None:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(migrate.alembic_config())
    assert migrate.head_revision() == script.get_current_head()
    assert migrate.known_revisions() == {r.revision for r in script.walk_revisions()}


def test_a_migration_header_that_is_not_one_revision_is_refused() -> None:
    assert migrate._header('revision: str = "0007"\ndown_revision = None\n', "revision") == "0007"
    assert migrate._header('revision = "0007"\ndown_revision = None\n', "down_revision") is None
    with pytest.raises(RuntimeError, match="one revision expected"):
        migrate._header('down_revision = ("0003", "0004")\n', "down_revision")
