"""The domain tier: services called on the ``db`` fixture (a real PostgreSQL, each test its own
database), without HTTP. A scenario about what the registry decides is written here, once; the door
tests (tests/api, tests/mcp, tests/console) check only what each door adds: status codes, shapes,
headers.

``domain`` is the one way a test makes a tenant: created by the tenants service as the operator, in
the same transaction kind the doors use, so the audit and change log see it as they would."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.engine import Database
from registry.db.models import Tenant
from registry.principal import Principal
from registry.prompts.schemas import PromptCreate
from registry.tenants import service as tenants


@dataclass
class Domain:
    db: Database

    async def tenant(self, slug: str, **settings: Any) -> Tenant:
        """A new tenant (``settings``: columns of the tenant to set, such as protected_labels)."""
        async with self.db.app_tx() as session:
            tenant = await tenants.create_tenant(
                session, slug=slug, title=None, public_read=False, actor="operator"
            )
            for key, value in settings.items():
                setattr(tenant, key, value)
        return tenant

    @asynccontextmanager
    async def tx(self, tenant: Tenant) -> AsyncIterator[AsyncSession]:
        """One transaction scoped to ``tenant`` (committed when the block ends)."""
        async with self.db.tenant_tx(tenant.id) as session:
            yield session

    def caller(self, tenant: Tenant, role: str) -> Principal:
        """A caller of ``tenant`` with ``role``, as an API key of that role authenticates."""
        return Principal(role=role, tenant_id=tenant.id, key_id=uuid.uuid4())


@pytest.fixture
async def domain(db: Database) -> Domain:
    return Domain(db)


def prompt(name: str, text: str, **fields: Any) -> PromptCreate:
    """A prompt with one user message (``fields``: anything else a prompt file may give)."""
    body: dict[str, Any] = {
        "name": name,
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        **fields,
    }
    return PromptCreate.model_validate(body)
