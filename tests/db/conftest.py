"""Fixtures of the database tests: a real PgBouncer, a real streaming replica of the test server,
and two tenants seeded with a row in every tenant-owned table."""

import uuid

import asyncpg
import pytest

from tests.db.test_rls import seed_tenant
from tests.pgbouncer import pgbouncer
from tests.replica import replica

__all__ = ["pgbouncer", "replica", "two_tenants"]


@pytest.fixture
async def two_tenants(superuser: asyncpg.Connection) -> tuple[uuid.UUID, uuid.UUID]:
    """Tenants alpha and bravo, each with one row in every tenant-owned table."""
    return await seed_tenant(superuser, "alpha"), await seed_tenant(superuser, "bravo")
