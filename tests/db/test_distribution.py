"""Ready to distribute by tenant (docs/scale-out.md): read from the catalog of a database at head,
every tenant-owned table (one with a ``tenant_id`` column) has its primary key, unique constraints
and indexes leading with ``tenant_id``, and every foreign key between two tenant-owned tables joins
on ``tenant_id`` too, so each table can be distributed by ``tenant_id`` (Citus) and every join and
constraint stays on one shard. The other tables are the reference tables listed here. The check is
shown to catch a table keyed without the tenant, in the test itself."""

from __future__ import annotations

import asyncpg

from registry.db.models import DIRECTORY_TABLES_BY_TENANT, TENANT_OWNED_TABLES
from tests.db.test_migrations import PARTITION

# Shared by every tenant: the tenant directory, the server's own secrets and the public keys it signed
# with, replicated whole to every node (Citus reference tables), and the migrations' bookkeeping.
REFERENCE_TABLES = {"tenants", "registry_secrets", "signing_keys", "alembic_version"}

_TABLES = """
SELECT c.oid, c.relname,
       EXISTS (SELECT 1 FROM pg_attribute a
                WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND NOT a.attisdropped)
           AS tenant_owned
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
"""
_INDEXES = """
SELECT c.relname AS table_name, i.relname AS index_name, x.indisprimary, x.indisunique,
       (SELECT attname FROM pg_attribute WHERE attrelid = c.oid AND attnum = x.indkey[0]) AS lead
  FROM pg_index x
  JOIN pg_class c ON c.oid = x.indrelid
  JOIN pg_class i ON i.oid = x.indexrelid
 WHERE c.oid = ANY($1::oid[])
"""
_FOREIGN_KEYS = """
SELECT k.conname, c.relname AS table_name, f.relname AS target,
       ARRAY(SELECT attname FROM unnest(k.conkey) WITH ORDINALITY AS u(n, i)
               JOIN pg_attribute ON attrelid = k.conrelid AND attnum = u.n ORDER BY u.i) AS columns,
       ARRAY(SELECT attname FROM unnest(k.confkey) WITH ORDINALITY AS u(n, i)
               JOIN pg_attribute ON attrelid = k.confrelid AND attnum = u.n ORDER BY u.i)
           AS target_columns
  FROM pg_constraint k
  JOIN pg_class c ON c.oid = k.conrelid
  JOIN pg_class f ON f.oid = k.confrelid
 WHERE k.contype = 'f' AND k.conrelid = ANY($1::oid[]) AND k.confrelid = ANY($1::oid[])
"""


async def problems(conn: asyncpg.Connection) -> list[str]:
    """Everything in the schema that keeps it from being distributed by tenant, in words."""
    tables = await conn.fetch(_TABLES)
    owned = [t for t in tables if t["tenant_owned"]]
    found = [
        f"{t['relname']}: no tenant_id, and not a listed reference table"
        for t in tables
        if not t["tenant_owned"] and t["relname"] not in REFERENCE_TABLES
    ]
    oids = [t["oid"] for t in owned]
    for index in await conn.fetch(_INDEXES, oids):
        if index["lead"] != "tenant_id":
            what = (
                "primary key" if index["indisprimary"]
                else "unique index" if index["indisunique"] else "index"
            )  # fmt: skip
            found.append(
                f"{index['table_name']}: {what} {index['index_name']} leads with "
                f"{index['lead'] or 'an expression'}, not tenant_id"
            )
    for key in await conn.fetch(_FOREIGN_KEYS, oids):
        pairs = list(zip(key["columns"], key["target_columns"], strict=True))
        if ("tenant_id", "tenant_id") not in pairs:
            found.append(
                f"{key['table_name']}: foreign key {key['conname']} joins {key['target']} "
                "without tenant_id"
            )
    return sorted(found)


async def test_the_schema_is_ready_to_distribute_by_tenant(superuser: asyncpg.Connection) -> None:
    assert await problems(superuser) == []
    owned = await superuser.fetch(
        "SELECT DISTINCT table_name FROM information_schema.columns "
        "WHERE table_schema = 'public' AND column_name = 'tenant_id'"
    )
    tables = {r["table_name"] for r in owned if not PARTITION.match(r["table_name"])}
    assert tables == {*TENANT_OWNED_TABLES, *DIRECTORY_TABLES_BY_TENANT}


async def test_the_check_catches_tables_keyed_without_the_tenant(
    superuser: asyncpg.Connection,
) -> None:
    """In this test's own database: a table keyed by id alone, a foreign key that joins two
    tenant tables by id alone, and a table with no tenant that nobody listed."""
    await superuser.execute(
        """
        CREATE TABLE wrong (tenant_id uuid NOT NULL, id bigint PRIMARY KEY);
        CREATE TABLE wrong_child (
            tenant_id uuid NOT NULL, id bigint, parent bigint REFERENCES wrong (id),
            PRIMARY KEY (tenant_id, id));
        CREATE INDEX ix_wrong_child_parent ON wrong_child (parent);
        CREATE TABLE unlisted (id bigint PRIMARY KEY);
        """
    )
    assert await problems(superuser) == [
        "unlisted: no tenant_id, and not a listed reference table",
        "wrong: primary key wrong_pkey leads with id, not tenant_id",
        "wrong_child: foreign key wrong_child_parent_fkey joins wrong without tenant_id",
        "wrong_child: index ix_wrong_child_parent leads with parent, not tenant_id",
    ]
