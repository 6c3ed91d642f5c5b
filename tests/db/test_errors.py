"""Driver errors become registry errors, whether a statement went through SQLAlchemy or straight
to the driver connection under a session (the write path's one-round-trip statements)."""

from __future__ import annotations

import hashlib
import uuid

import asyncpg
import pytest
from sqlalchemy import make_url, text
from sqlalchemy.exc import DBAPIError

from registry.db import repository
from registry.db.connect import asyncpg_arguments, make_engine
from registry.db.engine import Database
from registry.db.errors import outage
from registry.db.repository import driver
from registry.errors import InvalidInput, Unavailable
from tests.conftest import PgServer
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


async def test_no_server_of_the_kind_a_url_asks_for_is_an_outage(
    pg_server: PgServer, db_name: str
) -> None:
    """In a failover, every host of a URL may answer and none be the kind it asks for (the old
    primary back as a standby before the new one is promoted): 503 and retry, never a 500, on the
    driver and through SQLAlchemy alike. The test server is a primary; the URL asks for a standby."""
    url = make_url(pg_server.url(db_name)).update_query_dict({"target_session_attrs": "standby"})
    with pytest.raises(asyncpg.exceptions.TargetServerAttributeNotMatched) as refused:
        await asyncpg.connect(**asyncpg_arguments(url.render_as_string(hide_password=False)))
    assert isinstance(outage(refused.value), Unavailable)
    engine = make_engine(url.render_as_string(hide_password=False), 1, 0, False)
    try:
        with pytest.raises(DBAPIError) as wrapped:
            async with engine.connect():
                pass
        assert isinstance(outage(wrapped.value), Unavailable)
    finally:
        await engine.dispose()


async def test_a_connection_the_driver_left_unusable_is_an_outage(
    db: Database, tenant: uuid.UUID, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pooled connection whose protocol failed when its server went away raises the driver's own
    error on its next statement (seen in a Patroni failover under load, reading the sequences back
    after a commit): 503 and retry inside a request; after a commit, the write still stands."""
    failed = asyncpg.InternalClientError(
        'cannot switch to state 15; protocol is in the "failed" state'
    )
    assert isinstance(outage(failed), Unavailable)
    with pytest.raises(Unavailable):
        async with db.tenant_tx(tenant):
            raise failed

    async def unusable(*args: object) -> dict[uuid.UUID, int]:
        raise failed

    monkeypatch.setattr(repository, "change_sequences", unusable)
    await db._saw_committed({tenant})  # logged and left to the listener's notification
