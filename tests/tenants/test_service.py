"""Tenants and keys through the service layer, against the real database."""

from __future__ import annotations

import hashlib

import asyncpg
import pytest

from registry.db.engine import Database, enter_tenant
from registry.errors import Conflict, InvalidInput, NotFound
from registry.tenants import service


async def _create(db: Database, slug: str, **kw: object):  # type: ignore[no-untyped-def]
    async with db.app_tx() as session:
        return await service.create_tenant(
            session, slug=slug, title=kw.get("title"), public_read=bool(kw.get("public_read")),  # type: ignore[arg-type]
            actor="test",
        )  # fmt: skip


async def test_key_secret_is_never_stored(db: Database, superuser: asyncpg.Connection) -> None:
    tenant = await _create(db, "acme")
    async with db.tenant_tx(tenant.id) as session:
        key, secret = await service.create_key(
            session, tenant=tenant, role="editor", name="ci", actor="test"
        )
    assert secret.startswith("prk_") and len(secret) > 60
    stored = await superuser.fetchrow("SELECT * FROM api_keys WHERE id = $1", key.id)
    assert stored["secret_hash"] == hashlib.sha256(secret.encode()).digest()
    # Search every column of every table for the secret, as text and as bytes.
    tables = [r["tablename"] for r in await superuser.fetch(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]  # fmt: skip
    for table in tables:
        hits = await superuser.fetchval(
            f"SELECT count(*) FROM {table} t WHERE strpos(t::text, $1) > 0", secret
        )
        assert hits == 0, table
    assert service.tenant_of_secret(secret) == tenant.id


async def test_duplicate_and_bad_input(db: Database, superuser: asyncpg.Connection) -> None:
    await _create(db, "acme")
    with pytest.raises(Conflict, match="slug=acme"):
        await _create(db, "acme")
    with pytest.raises(InvalidInput, match="invalid tenant slug"):
        await _create(db, "Not A Slug")
    assert await superuser.fetchval("SELECT count(*) FROM tenants") == 1
    # The failed attempts left no audit rows behind either.
    assert await superuser.fetchval("SELECT count(*) FROM audit_log") == 1


async def test_revoke_and_key_names(db: Database) -> None:
    tenant = await _create(db, "acme")
    async with db.app_tx() as session:
        await enter_tenant(session, tenant.id)
        key, _ = await service.create_key(
            session, tenant=tenant, role="admin", name="ops", actor="t"
        )
    with pytest.raises(Conflict, match="name=ops"):
        async with db.tenant_tx(tenant.id) as session:
            await service.create_key(session, tenant=tenant, role="reader", name="ops", actor="t")
    async with db.tenant_tx(tenant.id) as session:
        revoked = await service.revoke_key(session, tenant_id=tenant.id, key_id=key.id, actor="t")
        assert revoked.revoked_at is not None
        # The name is free again once the old key is revoked.
        await service.create_key(session, tenant=tenant, role="reader", name="ops", actor="t")
    with pytest.raises(NotFound):
        async with db.tenant_tx(tenant.id) as session:
            await service.revoke_key(session, tenant_id=tenant.id, key_id=key.id, actor="t")


async def test_keys_of_one_tenant_are_invisible_to_another(db: Database) -> None:
    a = await _create(db, "a")
    b = await _create(db, "b")
    async with db.tenant_tx(a.id) as session:
        key, _ = await service.create_key(session, tenant=a, role="admin", name="x", actor="t")
    async with db.tenant_tx(b.id) as session:
        assert list(await service.list_keys(session, a.id)) == []
        with pytest.raises(NotFound):
            await service.revoke_key(session, tenant_id=a.id, key_id=key.id, actor="t")
