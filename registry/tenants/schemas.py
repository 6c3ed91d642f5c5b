"""Tenant and API-key shapes shared by the REST API and the CLI."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

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
    mcp_tools: bool
    default_label: str
    protected_labels: list[str]
    approvals: dict[str, int]
    page_size: int | None
    list_ttl_ms: int | None
    usage_retention_days: int
    instructions: str | None
    api_keys: bool
    created_at: datetime
    updated_at: datetime


Owner = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        description="the person who holds the key (a name or an email): approvals count owners",
    ),
]


class KeyCreate(StrictInput):
    name: str | None = Field(default=None, min_length=1, max_length=100)
    role: Role
    expires_at: datetime | None = None
    owner: Owner | None = Field(
        default=None, description="required when the tenant has approvals on"
    )


class KeyPatch(StrictInput):
    owner: Owner


class KeyOut(BaseModel):
    """A key as listed: never the secret."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    tenant_id: uuid.UUID
    name: str
    role: Role
    owner: str | None = None
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
    mcp_tools: bool | None = Field(
        default=None,
        description="MCP clients are offered tools too: each prompt marked as_tool, and a finder "
        "and a renderer of every served prompt (for clients that show no prompts)",
    )
    default_label: str | None = Field(default=None, pattern=LABEL_PATTERN)
    protected_labels: list[Annotated[str, Field(pattern=LABEL_PATTERN)]] | None = Field(
        default=None, max_length=32
    )
    approvals: (
        dict[Annotated[str, Field(pattern=LABEL_PATTERN)], Annotated[int, Field(ge=1, le=10)]]
        | None
    ) = Field(
        default=None,
        max_length=32,
        description="approvals a move of each protected label needs: such a label moves through a "
        "change request (or directly by an admin with a reason); {} turns approvals off",
    )
    page_size: int | None = Field(default=None, ge=1, le=1000)
    list_ttl_ms: int | None = Field(default=None, ge=0, le=86_400_000)
    usage_retention_days: int | None = Field(
        default=None, ge=1, le=3650, description="days the serve ledger keeps (default 90)"
    )
    instructions: str | None = Field(default=None, max_length=10000)
    api_keys: bool | None = Field(
        default=None,
        description="whether API keys are accepted (operator only; off leaves OAuth tokens only)",
    )


class AuditOut(BaseModel):
    id: int
    actor: str
    action: str
    target: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    created_at: datetime


# --- OAuth: the issuers a tenant trusts and how their claims map to roles ----------------------


class ClaimRule(StrictInput):
    """Tokens whose ``claim`` equals ``equals`` (or, for a list claim such as groups, holds it), or
    whose ``claim`` is an e-mail address in ``email_domain``, get ``role``."""

    claim: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.:-]+$")
    equals: str | None = Field(default=None, min_length=1, max_length=500)
    email_domain: str | None = Field(default=None, min_length=1, max_length=253)
    role: Role

    @model_validator(mode="after")
    def _one_test(self) -> ClaimRule:
        if (self.equals is None) == (self.email_domain is None):
            raise ValueError("give exactly one of equals or email_domain")
        return self


class IssuerIn(StrictInput):
    issuer: str = Field(
        min_length=1,
        max_length=500,
        pattern=r"^https?://[^\s/?#]+(/[^\s?#]*)?$",
        description="the issuer URL, exactly as its tokens' iss claim says",
    )
    rules: list[ClaimRule] = Field(min_length=1, max_length=50)
    introspection_client_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="for issuers of opaque tokens: the client the registry introspects them as",
    )
    introspection_secret: str | None = Field(
        default=None, min_length=1, max_length=500, description="that client's secret (write-only)"
    )

    @model_validator(mode="after")
    def _both_or_neither(self) -> IssuerIn:
        if (self.introspection_client_id is None) != (self.introspection_secret is None):
            raise ValueError(
                "give both introspection_client_id and introspection_secret, or neither"
            )
        return self


class IssuersIn(StrictInput):
    issuers: list[IssuerIn] = Field(max_length=10)


class IssuerOut(BaseModel):
    """An issuer as shown: never its introspection secret."""

    model_config = ConfigDict(from_attributes=True)

    issuer: str
    rules: list[dict[str, Any]]
    introspection_client_id: str | None = None
    created_by: str
    created_at: datetime


class ResourceMetadata(BaseModel):
    """OAuth 2.0 Protected Resource Metadata (RFC 9728) of a tenant's MCP endpoint or REST base.
    A tenant that trusts no issuer lists none, and says that it takes API keys."""

    resource: str
    authorization_servers: list[str]
    scopes_supported: list[str]
    bearer_methods_supported: list[str] = ["header"]
    resource_name: str
    authentication: list[str] = Field(
        serialization_alias="dev.prompt-registry/authentication",
        description="what the tenant accepts: oauth (tokens from the listed servers), api_key",
    )
