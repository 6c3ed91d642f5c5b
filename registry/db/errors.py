"""Driver errors become registry errors here, by constraint name, and nowhere else."""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError

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

# SQLSTATE classes that mean "the database is not there right now" rather than "bad request".
_UNAVAILABLE_STATES = ("08", "53", "57P")


def _driver_cause(error: BaseException) -> BaseException | None:
    """The asyncpg exception under SQLAlchemy's wrappers, if any."""
    seen: BaseException | None = error
    for _ in range(5):
        if seen is None:
            return None
        if hasattr(seen, "constraint_name"):
            return seen
        seen = getattr(seen, "orig", None) or seen.__cause__
    return None


def translate_db_error(error: DBAPIError) -> Exception:
    """The registry error for a driver error, or the error itself when it is not a known case."""
    cause = _driver_cause(error)
    constraint = getattr(cause, "constraint_name", None)
    if constraint in CONSTRAINT_ERRORS:
        cls, message = CONSTRAINT_ERRORS[constraint]
        return cls(message, constraint=constraint)
    state = getattr(cause, "sqlstate", None) or getattr(error.orig, "sqlstate", None) or ""
    if isinstance(state, str) and state.startswith(_UNAVAILABLE_STATES):
        return Unavailable("the database is unavailable")
    return error
