"""Alembic environment: async engine, URL from the caller (registry migrate) or REGISTRY_DATABASE_URL."""

from __future__ import annotations

import asyncio
from logging.config import fileConfig

from alembic import context
from sqlalchemy import pool
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from registry.config import get_settings
from registry.db.base import Base
from registry.db.connect import pooler_safe_arguments

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logging", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _url() -> str:
    url = config.attributes.get("url")
    if url:
        return str(url)
    dsn = get_settings().database_dsn()
    if dsn is None:
        raise SystemExit(
            "REGISTRY_DATABASE_URL is not set; use `registry migrate` for the embedded server"
        )
    return dsn


def _include_object(
    obj: object, name: str | None, type_: str, reflected: bool, compare_to: object
) -> bool:
    # Tables created outside the models (none today) would be ignored here.
    return True


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        include_object=_include_object,
        compare_server_default=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    # Pooler-safe whatever the settings: a migration runs rarely, and may go through a pooler.
    engine = create_async_engine(
        _url(), poolclass=pool.NullPool, connect_args=pooler_safe_arguments()
    )
    try:
        async with engine.connect() as conn:
            await conn.run_sync(_run)
    finally:
        await engine.dispose()


if context.is_offline_mode():
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    asyncio.run(_run_async())
