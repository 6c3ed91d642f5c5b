"""SQL of the database layer itself: entering a transaction's role and tenant, health and schema
checks, server-wide secrets, and the append-only audit and change logs. Only this module builds
them (the domains have their own repositories)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

import asyncpg
import orjson
from sqlalchemy import (
    DateTime,
    LargeBinary,
    Text,
    bindparam,
    cast,
    column,
    func,
    select,
    text,
    true,
)
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import ProgrammingError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from registry.db.models import ChangeLog, RegistrySecret, SigningKey, Tenant

# A tenant's transaction plans its statements once per connection (generic plans), from the
# statement after the one that enters it. Left to choose, PostgreSQL kept planning each execution
# of the write path's statements for its parameters (custom plans): 20 % of its CPU per version
# write (log_statement_stats, bench/history.md). The tenant's statements look rows up by keys,
# which a generic plan reaches as well; the owner role's work across tenants (the scheduler, whose
# partial index needs its parameter's value) keeps PostgreSQL's choice. Set in the statement that
# enters the tenant, for the transaction only: no round trip, nothing left on the connection.
_GENERIC_PLANS = "set_config('plan_cache_mode', 'force_generic_plan', true)"

# One round trip: drop to the application role and set the tenant, both for this transaction only.
_ENTER_TENANT = text(
    "SELECT set_config('role', :role, true), set_config('registry.tenant_id', :tenant, true), "
    + _GENERIC_PLANS
)
_ENTER_ROLE = text("SELECT set_config('role', :role, true)")
_SET_TENANT = text("SELECT set_config('registry.tenant_id', :tenant, true)")


async def enter_role(session: AsyncSession, role: str, tenant_id: uuid.UUID | None = None) -> None:
    """This transaction runs as ``role`` (and sees ``tenant_id``'s rows only, when given)."""
    if tenant_id is None:
        await session.execute(_ENTER_ROLE, {"role": role})
    else:
        await session.execute(_ENTER_TENANT, {"role": role, "tenant": str(tenant_id)})


# One round trip: the tenant named :slug, and this transaction dropped to :role and scoped to it.
# tenants has no row-level security, so the lookup reads the same whichever role it runs as.
_ENTER_NAMED_TENANT = (
    select(Tenant)
    .add_columns(
        func.set_config("role", bindparam("role"), True),
        func.set_config("registry.tenant_id", cast(Tenant.id, Text), True),
        text(_GENERIC_PLANS),
    )
    .where(Tenant.slug == bindparam("slug"))
)


class StoredKey(NamedTuple):
    """An API key as a caller's check reads it (never its hash)."""

    id: uuid.UUID
    role: str
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None


# The same round trip, reading beside the tenant its API key with the SHA-256 :secret_hash (under
# row-level security: the function enters the tenant before it reads; migrations/sql/0024).
_KEY = (
    func.registry_api_key_v1(Tenant.id, bindparam("secret_hash", type_=LargeBinary))
    .table_valued(
        column("id", UUID(as_uuid=True)),
        column("role", Text),
        column("expires_at", DateTime(timezone=True)),
        column("revoked_at", DateTime(timezone=True)),
        column("last_used_at", DateTime(timezone=True)),
    )
    .lateral("key")
)
_ENTER_NAMED_TENANT_WITH_KEY = _ENTER_NAMED_TENANT.add_columns(*_KEY.c).outerjoin_from(
    Tenant, _KEY, true()
)


async def enter_named_tenant(
    session: AsyncSession, role: str, slug: str, key_hash: bytes | None = None
) -> tuple[Tenant | None, StoredKey | None]:
    """This transaction runs as ``role`` and sees the rows of the tenant named ``slug``, which is
    returned; None when no tenant has that name (then it sees no tenant's rows). Given
    ``key_hash``, the tenant's API key with that SHA-256 comes with it (None: it has none)."""
    if key_hash is None:
        row = (await session.execute(_ENTER_NAMED_TENANT, {"role": role, "slug": slug})).first()
    else:
        row = (
            await session.execute(
                _ENTER_NAMED_TENANT_WITH_KEY,
                {"role": role, "slug": slug, "secret_hash": key_hash},
            )
        ).first()
    if row is None:
        await enter_role(session, role)
        return None, None
    tenant: Tenant = row[0]
    found = row[-len(_KEY.c) :]  # the key's columns come last, in StoredKey's order
    key = StoredKey(*found) if key_hash is not None and found[0] is not None else None
    return tenant, key


async def set_tenant(session: AsyncSession, tenant_id: uuid.UUID) -> None:
    await session.execute(_SET_TENANT, {"tenant": str(tenant_id)})


_ENTER_ON_REPLICA = text(
    "SELECT set_config('role', :role, true), set_config('registry.tenant_id', :tenant, true), "
    "(SELECT seq FROM change_sequences WHERE tenant_id = CAST(:tenant AS uuid))"
)


async def enter_tenant_on_replica(
    session: AsyncSession, role: str, tenant_id: uuid.UUID
) -> int | None:
    """``enter_role`` for a read on a replica, in the same round trip reading how far the replica
    has replayed the tenant's changes (its change sequence there; None: not there yet)."""
    row = (await session.execute(_ENTER_ON_REPLICA, {"role": role, "tenant": str(tenant_id)})).one()
    return None if row[2] is None else int(row[2])


async def replayed_sequence(pool: asyncpg.Pool, tenant_id: uuid.UUID) -> int | None:
    """The tenant's change sequence as a replica has it (None: not replayed yet)."""
    found = await pool.fetchval("SELECT seq FROM change_sequences WHERE tenant_id = $1", tenant_id)
    return None if found is None else int(found)


async def primary_sample(pool: asyncpg.Pool) -> tuple[str, int]:
    """Which server the primary's connections reach (its address, or its socket directory, and
    port) and its WAL write position in bytes."""
    row = await pool.fetchrow(
        "SELECT coalesce(host(inet_server_addr()), current_setting('unix_socket_directories'))"
        " || ':' || current_setting('port'),"
        " pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint"
    )
    return str(row[0]), int(row[1])


async def replayed_position(pool: asyncpg.Pool) -> int | None:
    """How far a standby has replayed the WAL, in bytes; None when the server is not in recovery
    (it was promoted, or it never was a standby)."""
    found = await pool.fetchval(
        "SELECT CASE WHEN pg_is_in_recovery()"
        " THEN coalesce(pg_wal_lsn_diff(pg_last_wal_replay_lsn(), '0/0')::bigint, 0) END"
    )
    return None if found is None else int(found)


async def ping(conn: AsyncConnection) -> None:
    await conn.execute(text("SELECT 1"))


async def probe(connection: asyncpg.Connection) -> None:
    """A round trip on a plain driver connection (the LISTEN connection's liveness check)."""
    await connection.fetchval("SELECT 1")


async def migration_revision(conn: AsyncConnection) -> str | None:
    """The Alembic revision the schema is at; None for a database never migrated."""
    try:
        result = await conn.execute(text("SELECT version_num FROM alembic_version"))
    except ProgrammingError:  # no alembic_version table
        return None
    return result.scalar_one_or_none()


async def read_secret(session: AsyncSession, name: str) -> bytes:
    result = await session.execute(select(RegistrySecret.secret).where(RegistrySecret.name == name))
    return bytes(result.scalar_one())


async def record_signing_key(session: AsyncSession, key_id: str, public_pem: str) -> None:
    """A public key the server signs with, kept once (the first use stays)."""
    await session.execute(
        pg_insert(SigningKey)
        .values(key_id=key_id, public_key=public_pem)
        .on_conflict_do_nothing(index_elements=[SigningKey.key_id])
    )


async def signing_keys(session: AsyncSession) -> Sequence[SigningKey]:
    """Every public key the registry has signed with, oldest first."""
    result = await session.execute(
        select(SigningKey).order_by(SigningKey.first_used, SigningKey.key_id).limit(1000)
    )
    return result.scalars().all()


async def driver(reads: asyncpg.Pool | AsyncSession) -> Any:
    """Something asyncpg answers ``fetch`` and ``execute`` on: a plain pool, or the driver
    connection under a session (its statements join the session's transaction, with none of the
    ORM's statement machinery; a driver error is translated as the transaction ends)."""
    if not isinstance(reads, AsyncSession):
        return reads
    raw = await (await reads.connection()).get_raw_connection()
    return raw.driver_connection


def journal_ctes(audit: str, changes: str, *, when: str | None = None) -> str:
    """The common table expressions that append audit rows and change rows (``journal_audit``,
    ``journal_changes``), each list one parameter (``audit`` and ``changes``: SQL expressions) holding
    a JSON array of ``registry.db.audit``'s rows; ``when``, a common table expression of the same
    statement, appends them only if it has a row (a write that happened). One text for the statement
    the transaction runs before its commit and for the writes that append their own rows."""
    source = f"{when}, " if when else ""
    return f"""journal_audit AS (
    INSERT INTO audit_log (tenant_id, actor, action, target, before, after)
    SELECT (a.row->>'tenant_id')::uuid, a.row->>'actor', a.row->>'action', a.row->>'target',
           nullif(a.row->'before', 'null'), nullif(a.row->'after', 'null')
      FROM {source}jsonb_array_elements(CAST({audit}::text AS jsonb)) WITH ORDINALITY AS a(row, n)
     ORDER BY a.n
), journal_changes AS (
    INSERT INTO change_pending (tenant_id, kind, prompt_id, label, detail)
    SELECT (c.row->>'tenant_id')::uuid, c.row->>'kind', (c.row->>'prompt_id')::uuid, c.row->>'label',
           nullif(c.row->'detail', 'null')
      FROM {source}jsonb_array_elements(CAST({changes}::text AS jsonb)) WITH ORDINALITY AS c(row, n)
     ORDER BY c.n
)"""


_APPEND_JOURNAL = f"WITH {journal_ctes('$1', '$2')} SELECT"


def journal_json(rows: Sequence[Any]) -> str:
    """Rows of ``registry.db.audit`` (its dataclasses, which orjson writes as objects) as one
    parameter of ``journal_ctes``."""
    return orjson.dumps(rows, default=str, option=orjson.OPT_NON_STR_KEYS).decode()  # ids: any UUID


async def append_journal(
    session: AsyncSession, audit: Sequence[Any], changes: Sequence[Any]
) -> None:
    """Append audit rows and change rows in one statement, compiled once (the rows travel as two
    JSON arrays). A change row waits in change_pending until the transaction commits: then a
    deferred trigger moves it to the change log, numbered per tenant, stamped with the moment of
    committing, and NOTIFYs (see migrations/sql/0014_change_at_commit_v1.sql)."""
    await (await driver(session)).execute(
        _APPEND_JOURNAL, journal_json(audit), journal_json(changes)
    )


async def change_sequences(pool: asyncpg.Pool, tenant_ids: list[uuid.UUID]) -> dict[uuid.UUID, int]:
    """Each tenant's change sequence now (after a commit: at least as far as what it wrote)."""
    rows = await pool.fetch(
        "SELECT tenant_id, seq FROM change_sequences WHERE tenant_id = ANY($1::uuid[])",
        tenant_ids,
    )
    return {row["tenant_id"]: int(row["seq"]) for row in rows}


async def changes_after(
    session: AsyncSession, tenant_id: uuid.UUID, after: int, limit: int
) -> list[dict[str, Any]]:
    """The tenant's change-log rows past ``after``, oldest first: seq, kind, the prompt's or (kinds
    ``skill.*``) the skill's name (None for changes of the whole tenant, and for one deleted since),
    label, created_at, and detail (what a change request's events add; None for the others)."""
    result = await session.execute(
        text(
            """
            SELECT c.seq, c.kind, p.name AS prompt, s.name AS skill, c.label, c.created_at,
                   c.detail
              FROM change_log c
              LEFT JOIN prompts p ON p.tenant_id = c.tenant_id AND p.id = c.prompt_id
                                 AND c.kind NOT LIKE 'skill.%'
              LEFT JOIN skills s ON s.tenant_id = c.tenant_id AND s.id = c.prompt_id
                                AND c.kind LIKE 'skill.%'
             WHERE c.tenant_id = :tenant AND c.seq > :after
             ORDER BY c.seq
             LIMIT :limit
            """
        ),
        {"tenant": tenant_id, "after": after, "limit": limit},
    )
    return [dict(row) for row in result.mappings().all()]


async def last_change_before(
    session: AsyncSession, tenant_id: uuid.UUID, after: int, at: datetime
) -> int | None:
    """The last change past ``after`` made before ``at`` (None: none): where a replay that wants
    nothing older than ``at`` starts."""
    result = await session.execute(
        select(func.max(ChangeLog.seq)).where(
            ChangeLog.tenant_id == tenant_id, ChangeLog.seq > after, ChangeLog.created_at < at
        )
    )
    value = result.scalar_one_or_none()
    return int(value) if value is not None else None


async def oldest_change(session: AsyncSession, tenant_id: uuid.UUID) -> int | None:
    """The first sequence number the tenant's change log still holds."""
    result = await session.execute(
        select(func.min(ChangeLog.seq)).where(ChangeLog.tenant_id == tenant_id)
    )
    value = result.scalar_one_or_none()
    return int(value) if value is not None else None


async def connection_limits(connection: asyncpg.Connection) -> tuple[int, int]:
    """The server's max_connections and how many of them are reserved for superusers (and, from
    PostgreSQL 16, for roles with pg_use_reserved_connections)."""
    limit = int(await connection.fetchval("SELECT current_setting('max_connections')"))
    reserved = int(
        await connection.fetchval("SELECT current_setting('superuser_reserved_connections')")
    )
    extra = await connection.fetchval(
        "SELECT setting FROM pg_settings WHERE name = 'reserved_connections'"
    )
    return limit, reserved + int(extra or 0)
