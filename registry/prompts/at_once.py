"""A version written in one database call: the ordinary write of the REST API's plain route.

The ordinary write is a new version of an existing prompt, by the operator or an API key this
worker checked a moment ago (``tenants.access.remembered_writer``), moving no label besides
``latest``, with no partials and no blobs. It is one statement on the hot path's pool
(``registry_write_version_v1``: the key checked again, the prompt locked, the version written as
every version is, its journal rows appended) instead of a transaction of five round trips through
the ORM session: a quarter of the CPU per write (bench/history.md). Whatever is not that case
is declined (None) with nothing written, and the caller writes through ``writing.create_version``,
which decides and words every other answer, errors included.
"""

from __future__ import annotations

import uuid

from registry.db.engine import Database
from registry.errors import RegistryError
from registry.naming import LATEST
from registry.principal import Principal, roles_with
from registry.prompts import version_repository as versions
from registry.prompts.preparing import prepare_alone
from registry.prompts.reading import prompt_of, version_out
from registry.prompts.schemas import VersionIn, WriteResult
from registry.prompts.writing import VersionWrite


async def create_version(
    db: Database,
    tenant_id: uuid.UUID,
    caller: Principal,
    key_hash: bytes | None,
    role: str,
    name: str,
    body: VersionIn,
    *,
    if_match: int | None,
    max_blob_bytes: int,
) -> WriteResult | None:
    """``writing.create_version`` for the ordinary write, in one call; None (nothing written) for
    any other. ``caller`` has ``role`` as this worker knows it; an API key's (``key_hash``: the
    SHA-256 of its secret) is checked again by the statement."""
    if body.labels:
        return None
    if caller.operator:
        key = None
    elif caller.key_id is not None and key_hash is not None and caller.tenant_id == tenant_id:
        key = (caller.key_id, key_hash)
    else:
        return None
    try:
        prepared = prepare_alone(tenant_id, body, max_blob_bytes=max_blob_bytes)
    except RegistryError:
        return None  # worded by the general path, after the checks that come before it
    if prepared is None:
        return None
    async with db.one_call(tenant_id) as connection:
        written = await versions.write_version_at_once(
            connection,
            tenant_id=tenant_id,
            key=key,
            roles=roles_with(role),
            name=name,
            if_match=if_match,
            content=prepared.content(name, caller.actor),
            latest=LATEST,
        )
    if written is None:
        return None
    await db.after_commit({tenant_id})
    version = version_out(written.prompt, written.row, prepared.arguments, prepared.messages)
    outcome = VersionWrite(True, version, labels=written.labels)
    return WriteResult(
        created=True,
        version=version.version,
        detail=outcome.said(dry_run=False),
        prompt=prompt_of(written.prompt, version, written.labels),
    )
