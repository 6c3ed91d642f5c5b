"""Driver errors become registry errors, whether a statement went through SQLAlchemy or straight
to the driver connection under a session (the write path's one-round-trip statements)."""

from __future__ import annotations

import hashlib
import uuid

import asyncpg
import pytest
from sqlalchemy import text

from registry.db.engine import Database
from registry.db.repository import driver
from registry.errors import InvalidInput, Unavailable
from tests.db.test_rls import seed_tenant

_MESSAGE = (
    "INSERT INTO prompt_messages (tenant_id, prompt_id, version, position, role, content, "
    "blob_sha256) SELECT tenant_id, prompt_id, version, 7, 'user', '{}', $1 FROM prompt_versions"
)


@pytest.fixture
async def tenant(superuser: asyncpg.Connection) -> uuid.UUID:
    return await seed_tenant(superuser, "alpha")


async def test_a_constraint_broken_on_the_driver_is_named(db: Database, tenant: uuid.UUID) -> None:
    missing = hashlib.sha256(b"never uploaded").digest()
    with pytest.raises(InvalidInput, match="references a blob that this tenant has not uploaded"):
        async with db.tenant_tx(tenant) as session:
            await (await driver(session)).execute(_MESSAGE, missing)
    async with db.tenant_tx(tenant) as session:  # nothing was written, the connection is sound
        assert await session.scalar(text("SELECT count(*) FROM prompt_messages")) == 1


async def test_a_value_refused_on_the_driver_and_a_cancelled_statement(
    db: Database, tenant: uuid.UUID
) -> None:
    with pytest.raises(InvalidInput, match="refused by the database"):
        async with db.tenant_tx(tenant) as session:
            await (await driver(session)).fetchval("SELECT 1 / $1::integer", 0)
    with pytest.raises(Unavailable, match="cancelled"):
        async with db.tenant_tx(tenant) as session:
            await (await driver(session)).execute("SET LOCAL statement_timeout = 1")
            await (await driver(session)).execute("SELECT pg_sleep(1)")
