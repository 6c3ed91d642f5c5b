"""Tenant and API-key shapes shared by the REST API and the CLI."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from registry.inputs import StrictInput
from registry.naming import LABEL_PATTERN, SLUG_PATTERN, Role


class TenantCreate(StrictInput):
    slug: str = Field(pattern=SLUG_PATTERN, description="lowercase letters, digits and hyphens")
    title: str | None = Field(default=None, max_length=200)
    public_read: bool = False


class TenantOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    slug: str
    title: str | None
    public_read: bool
    public_drafts: bool
    default_label: str
    protected_labels: list[str]
    page_size: int | None
    list_ttl_ms: int | None
    instructions: str | None
    created_at: datetime
    updated_at: datetime


class KeyCreate(StrictInput):
    name: str | None = Field(default=None, min_length=1, max_length=100)
    role: Role
    expires_at: datetime | None = None


class KeyOut(BaseModel):
    """A key as listed: never the secret."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    tenant_id: uuid.UUID
    name: str
    role: Role
    created_by: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None


class KeyCreated(KeyOut):
    """The answer to a key creation: the only time the secret is shown."""

    secret: str


class TenantPatch(StrictInput):
    title: str | None = Field(default=None, max_length=200)
    public_read: bool | None = None
    public_drafts: bool | None = Field(
        default=None,
        description="anonymous readers may read every label and pin versions, not only the "
        "published (protected) labels",
    )
    default_label: str | None = Field(default=None, pattern=LABEL_PATTERN)
    protected_labels: list[Annotated[str, Field(pattern=LABEL_PATTERN)]] | None = Field(
        default=None, max_length=32
    )
    page_size: int | None = Field(default=None, ge=1, le=1000)
    list_ttl_ms: int | None = Field(default=None, ge=0, le=86_400_000)
    instructions: str | None = Field(default=None, max_length=10000)


class AuditOut(BaseModel):
    id: int
    actor: str
    action: str
    target: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    created_at: datetime
