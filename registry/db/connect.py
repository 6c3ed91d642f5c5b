"""Connection set-up, for the primary and the replicas alike: the SQLAlchemy engine of one server, the
plain asyncpg pool of the hot read path, the driver arguments a URL means, and what a connection
through a transaction pooler must not do."""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg
import orjson
from sqlalchemy import event, make_url
from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

APP_ROLE = "registry_app"
_DIALECT = asyncpg_dialect()  # type: ignore[no-untyped-call]


def pooler_safe_arguments() -> dict[str, Any]:
    """Connect arguments (SQLAlchemy's asyncpg dialect) for a connection that may reach another
    server connection at every transaction (a transaction pooler): no statement is cached across
    transactions, and the statements SQLAlchemy prepares within one get names no other client can
    have taken. The
    driver's unnamed statements are parsed and executed within one protocol sync, so they need
    nothing more; the rest of the registry's state is transaction-local (set_config(..., true))."""
    return {
        "statement_cache_size": 0,
        "prepared_statement_cache_size": 0,
        "prepared_statement_name_func": _statement_name,
    }


def _statement_name() -> str:
    return f"__registry_{uuid.uuid4().hex}__"


def stored_json(raw: str) -> Any:
    """JSON as PostgreSQL gives it back (jsonb's text), parsed: by orjson, which reads an integer
    past 64 bits as the double it stands for (jsonb writes a double such as 1e20 without its
    exponent, 100000000000000000000, which the standard library would read as an integer no answer
    could carry), and by the standard library what orjson refuses. Every JSON column the engine
    reads, and the hot path's served records, are read by it."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


def make_engine(
    url: str, pool_size: int, max_overflow: int, pooled: bool, application_name: str = "registry"
) -> AsyncEngine:
    """The SQLAlchemy engine of one server (the primary, or a replica)."""
    connect_args: dict[str, Any] = {"server_settings": {"application_name": application_name}}
    if pooled:
        connect_args.update(pooler_safe_arguments())
    engine = create_async_engine(
        url,
        # A failed statement's error never carries its parameters (prompt text, argument
        # descriptions and defaults) into logs or tracebacks.
        hide_parameters=True,
        pool_size=pool_size,
        max_overflow=max_overflow,
        connect_args=connect_args,
        json_deserializer=stored_json,
    )
    event.listen(engine.sync_engine, "checkout", _refuse_closed)
    return engine


def _refuse_closed(dbapi_connection: Any, record: Any, proxy: Any) -> None:
    """A pooled connection whose server went away (restarted, failed over, a pooler restarted)
    is replaced at checkout, without a round trip: the driver saw its socket close. SQLAlchemy's
    pre-ping would ask the server instead, with three round trips (BEGIN, a statement, ROLLBACK)
    before every transaction: a quarter of an admin write's. A connection that dies between this
    check and its first statement fails that statement as a disconnect, which invalidates the
    pool's older connections too."""
    if dbapi_connection._connection.is_closed():
        raise DisconnectionError("the server closed this connection")


async def make_read_pool(
    url: str, size: int, pooled: bool, application_name: str = "registry-reads"
) -> asyncpg.Pool:
    """A plain asyncpg pool for the hot read path: single statements, no ORM."""
    return await asyncpg.create_pool(
        **asyncpg_arguments(url, application_name=application_name),
        min_size=1,
        max_size=size,
        connection_class=_ReadConnection,
        # Through a transaction pooler, no statement outlives its own round trip.
        statement_cache_size=0 if pooled else 100,
    )


class _ReadConnection(asyncpg.Connection):  # type: ignore[misc]
    """The read pool runs single statements whose settings end with them: nothing to reset between
    uses, so no reset query (a round trip) each time a connection goes back to the pool."""

    def get_reset_query(self) -> str:
        return ""


def asyncpg_arguments(url: str, application_name: str = "registry-listener") -> dict[str, object]:
    """asyncpg.connect() arguments for a SQLAlchemy URL, read the way the engine reads it (a Unix
    socket directory as host, several hosts with target_session_attrs for failover)."""
    _, arguments = _DIALECT.create_connect_args(make_url(url))  # type: ignore[no-untyped-call]
    arguments["server_settings"] = {"application_name": application_name}
    return {k: v for k, v in arguments.items() if v is not None}
