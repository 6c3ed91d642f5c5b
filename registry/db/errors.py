"""Driver errors become registry errors here, by constraint name, and nowhere else."""

from __future__ import annotations

import re

import asyncpg
from sqlalchemy.exc import DBAPIError, InterfaceError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from registry.errors import Conflict, InvalidInput, RegistryError, Unavailable

# constraint name -> (error class, message). Names come from the naming convention in models.py.
CONSTRAINT_ERRORS: dict[str, tuple[type[RegistryError], str]] = {
    "uq_tenants_slug": (Conflict, "a tenant with this slug already exists"),
    "ck_tenants_slug_format": (
        InvalidInput,
        "slug must match ^[a-z0-9][a-z0-9-]{0,62}$ (lowercase letters, digits, hyphens)",
    ),
    "ck_tenants_page_size_range": (InvalidInput, "page_size must be between 1 and 1000"),
    "uq_api_keys_tenant_id_name_active": (Conflict, "an active key with this name already exists"),
    "ck_api_keys_role_known": (InvalidInput, "role must be reader, editor, publisher or admin"),
    "uq_prompts_tenant_id_name": (Conflict, "a prompt with this name already exists"),
    "ck_prompts_name_format": (
        InvalidInput,
        "prompt name must match ^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$",
    ),
    "pk_prompt_versions": (Conflict, "this version number was just taken by another writer"),
    "fk_prompt_messages_tenant_id_blob_sha256_blobs": (
        InvalidInput,
        "a message references a blob that this tenant has not uploaded",
    ),
    "ck_labels_label_format": (InvalidInput, "label must match ^[a-z0-9][a-z0-9_.-]{0,62}$"),
}

_KEY_DETAIL = re.compile(r"Key \((?P<columns>[^)]*)\)=\((?P<values>.*)\)")

# SQLSTATE classes that mean "the database is not there right now" rather than "bad request".
_UNAVAILABLE_STATES = ("08", "53", "57P")


def _driver_cause(error: BaseException) -> BaseException | None:
    """The asyncpg exception under SQLAlchemy's wrappers, if any: the server's, or the driver's own
    failure of a connection (``InternalClientError``, one of OUTAGES)."""
    seen: BaseException | None = error
    for _ in range(5):
        if seen is None:
            return None
        if hasattr(seen, "constraint_name") or isinstance(seen, asyncpg.InternalClientError):
            return seen
        seen = getattr(seen, "orig", None) or seen.__cause__
    return None


def translate_db_error(error: DBAPIError | asyncpg.PostgresError, **values: object) -> Exception:
    """The registry error for a driver error (through SQLAlchemy, or from a statement run on the
    driver connection under a session), or the error itself when it is not a known case.

    ``values`` name what the caller was writing; they are added to the message when the server gives
    no detail (PostgreSQL withholds key values on tables with row-level security).
    """
    cause = _driver_cause(error)
    constraint = getattr(cause, "constraint_name", None)
    if constraint in CONSTRAINT_ERRORS:
        cls, message = CONSTRAINT_ERRORS[constraint]
        # "Key (slug)=(acme) already exists." -> name the value at fault.
        found = _KEY_DETAIL.search(getattr(cause, "detail", None) or "")
        if found:
            columns = [c.strip() for c in found["columns"].split(",")]
            shown = [v.strip() for v in found["values"].split(",")]
            pairs = [f"{c}={v}" for c, v in zip(columns, shown, strict=False) if c != "tenant_id"]
            if pairs:
                message = f"{message}: {', '.join(pairs)}"
        elif values:
            message = f"{message}: {', '.join(f'{k}={v}' for k, v in values.items())}"
        return cls(message, constraint=constraint)
    if (
        isinstance(error, InterfaceError)
        or getattr(error, "connection_invalidated", False)
        or isinstance(cause, OUTAGES)  # the driver's own failures of a connection (OUTAGES)
    ):
        # The connection died under the statement, its COMMIT or the rollback after it (a server
        # stopped or failing over): the database is not there right now, nothing was acknowledged.
        return Unavailable("the database is unavailable")
    orig = getattr(error, "orig", None)
    state = getattr(cause, "sqlstate", None) or getattr(orig, "sqlstate", None) or ""
    if isinstance(state, str) and state.startswith(_UNAVAILABLE_STATES):
        return Unavailable("the database is unavailable")
    if state in ("40001", "40P01"):  # serialization failure, deadlock: nothing was written
        return Unavailable("the database aborted this request to resolve a conflict: retry it")
    if state == "57014":  # a statement timeout the server was given, or an operator's cancel
        return Unavailable("the database cancelled this request's statement: nothing was written")
    if isinstance(state, str) and state.startswith(
        "22"
    ):  # data exception: a value PostgreSQL refuses
        lines = str(getattr(cause, "message", "") or "").splitlines() if cause else []
        message = lines[0] if lines else ""
        return InvalidInput(f"a value was refused by the database: {message or 'invalid data'}")
    return error


# What a database that is down, restarting or out of connections raises before any statement runs.
OUTAGES = (
    OSError,  # refused, reset, unreachable
    TimeoutError,  # connecting took too long
    PoolTimeout,  # every pooled connection busy past the pool's timeout
    InterfaceError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.CannotConnectNowError,
    asyncpg.TooManyConnectionsError,
    # The driver's own failures of a connection: every host of a URL answered, none of the kind it
    # asks for (target_session_attrs: in a failover, the old primary back as a standby before the
    # new one is promoted); a pooled connection whose protocol failed or was left mid-operation when
    # its server went away ("cannot switch to state ...", seen in a Patroni failover under load);
    # a cached statement outdated by a schema change. Retrying gets a sound connection.
    asyncpg.InternalClientError,
)


def outage(error: BaseException) -> Unavailable | None:
    """Unavailable when ``error`` says the database cannot be reached now (retrying later may work);
    None for any other error."""
    if isinstance(error, Unavailable):
        return error
    if isinstance(error, DBAPIError):
        translated = translate_db_error(error)
        if isinstance(translated, Unavailable):
            return translated
        if isinstance(error.orig, OUTAGES) or error.connection_invalidated:
            return Unavailable("the database is unavailable")
        return None
    if isinstance(error, OUTAGES):
        return Unavailable("the database is unavailable")
    return None
