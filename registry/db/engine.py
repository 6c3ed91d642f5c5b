"""The engine and the transactions every piece of code runs in.

The caller owns the transaction: ``async with db.tenant_tx(tenant_id) as session:`` runs as the
application role with the tenant set for this transaction only, and commits on success. Services flush,
never commit. Driver errors are translated into the registry's error tree here, once.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from sqlalchemy import make_url, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from registry.db.errors import translate_db_error
from registry.db.secrets import read_secret

APP_ROLE = "registry_app"

# One round trip: drop to the application role and set the tenant, both for this transaction only.
_ENTER_TENANT = text(
    "SELECT set_config('role', :role, true), set_config('registry.tenant_id', :tenant, true)"
)
_ENTER_APP = text("SELECT set_config('role', :role, true)")
_SET_TENANT = text("SELECT set_config('registry.tenant_id', :tenant, true)")


class Database:
    def __init__(self, url: str, *, pool_size: int = 10, max_overflow: int = 10) -> None:
        self.url = url
        self.engine: AsyncEngine = create_async_engine(
            url,
            pool_size=pool_size,
            max_overflow=max_overflow,
            pool_pre_ping=True,
            connect_args={"server_settings": {"application_name": "registry"}},
        )
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False, autoflush=False)
        self._mac_key: bytes | None = None

    async def mac_key(self) -> bytes:
        """The MAC key for cursors and request state (read once, then kept)."""
        if self._mac_key is None:
            async with self.app_tx() as session:
                self._mac_key = await read_secret(session, "mac")
        return self._mac_key

    async def dispose(self) -> None:
        await self.engine.dispose()

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[AsyncSession]:
        async with self.sessions() as session:
            try:
                async with session.begin():
                    yield session
            except DBAPIError as error:
                raise translate_db_error(error) from error

    @asynccontextmanager
    async def tenant_tx(self, tenant_id: uuid.UUID) -> AsyncIterator[AsyncSession]:
        """A transaction as the application role that sees only ``tenant_id``'s rows."""
        async with self._transaction() as session:
            await session.execute(_ENTER_TENANT, {"role": APP_ROLE, "tenant": str(tenant_id)})
            yield session

    @asynccontextmanager
    async def app_tx(self) -> AsyncIterator[AsyncSession]:
        """A transaction as the application role with no tenant: only the tenant directory is visible.

        Used to resolve a tenant (or create one) before entering it with ``enter_tenant``.
        """
        async with self._transaction() as session:
            await session.execute(_ENTER_APP, {"role": APP_ROLE})
            yield session

    @asynccontextmanager
    async def operator_tx(self) -> AsyncIterator[AsyncSession]:
        """A transaction as the connecting (owner) role, for operator work that spans tenants.

        Never used to serve a tenant's request.
        """
        async with self._transaction() as session:
            yield session


async def enter_tenant(session: AsyncSession, tenant_id: uuid.UUID) -> None:
    """Scope the rest of an ``app_tx`` transaction to one tenant (after resolving or creating it)."""
    await session.execute(_SET_TENANT, {"tenant": str(tenant_id)})


def asyncpg_arguments(url: str) -> dict[str, object]:
    """asyncpg.connect() arguments for a SQLAlchemy URL (host may be a Unix socket directory)."""
    parsed = make_url(url)
    query = dict(parsed.query)
    arguments: dict[str, object] = {
        "user": parsed.username,
        "password": parsed.password,
        "database": parsed.database,
        "host": query.pop("host", None) or parsed.host,
        "port": int(str(query.pop("port", None) or parsed.port or 5432)),
        "server_settings": {"application_name": "registry-listener"},
    }
    return {k: v for k, v in arguments.items() if v is not None}


async def listen_connection(url: str) -> asyncpg.Connection:
    """A connection of its own for LISTEN: never from the pool, never through a transaction pooler."""
    return await asyncpg.connect(**asyncpg_arguments(url), timeout=10)
