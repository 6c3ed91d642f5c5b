"""SQLAlchemy models: the schema of record, from which Alembic migrations are generated.

Every tenant-owned table has ``tenant_id`` as the first column of its primary key and of every index,
so the schema can later be distributed by tenant. Row-level security, triggers and functions live in
``migrations/sql/`` as plain SQL.

Longer than 500 lines because it is the schema of record in one metadata: Alembic compares it with the
migrated database, and the catalog tests walk it, table by table.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKeyConstraint,
    Identity,
    Index,
    Integer,
    LargeBinary,
    Text,
    UniqueConstraint,
    func,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID
from sqlalchemy.orm import Mapped, column_property, mapped_column

from registry.db.base import Base, now
from registry.db.library_models import LIBRARY_TABLES
from registry.db.release_models import RELEASE_TABLES
from registry.db.rollout_models import ROLLOUT_TABLES
from registry.db.skill_models import SKILL_TABLES
from registry.db.usage_models import USAGE_TABLES
from registry.db.webhook_models import WEBHOOK_TABLES

TENANT_OWNED_TABLES = (
    "api_keys",
    "blobs",
    "prompts",
    "prompt_versions",
    "prompt_arguments",
    "prompt_messages",
    "prompt_partials",
    "labels",
    "label_counts",
    "label_history",
    "change_log",
    "change_pending",
    "audit_log",
    "mcp_sessions",
    *WEBHOOK_TABLES,
    "tenant_issuers",
    "console_sessions",
    *SKILL_TABLES,
    *RELEASE_TABLES,
    *USAGE_TABLES,
    *ROLLOUT_TABLES,
    *LIBRARY_TABLES,
)


class Tenant(Base):
    """The tenant directory. Not tenant-owned itself, so it carries no row-level security."""

    __tablename__ = "tenants"
    __table_args__ = (
        CheckConstraint(r"slug ~ '^[a-z0-9][a-z0-9-]{0,62}$'", name="slug_format"),
        CheckConstraint(
            "page_size IS NULL OR page_size BETWEEN 1 AND 1000", name="page_size_range"
        ),
        CheckConstraint(
            "usage_retention_days BETWEEN 1 AND 3650", name="usage_retention_days_range"
        ),
        UniqueConstraint("slug"),
    )

    id: Mapped[uuid.UUID] = mapped_column(
        UUID, primary_key=True, server_default=text("gen_random_uuid()")
    )
    slug: Mapped[str] = mapped_column(Text)
    title: Mapped[str | None] = mapped_column(Text)
    public_read: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    # Anonymous readers (public_read) see the published (protected) labels only, unless this is set.
    public_drafts: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    # MCP clients are also offered tools (marked prompts, and a finder and renderer of any).
    mcp_tools: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    default_label: Mapped[str] = mapped_column(Text, server_default=text("'production'"))
    protected_labels: Mapped[list[str]] = mapped_column(
        ARRAY(Text), server_default=text("ARRAY['production']::text[]")
    )
    page_size: Mapped[int | None] = mapped_column(Integer)
    # How long clients may cache the prompt list (2026-07-28 ttlMs); NULL: the server's default.
    list_ttl_ms: Mapped[int | None] = mapped_column(Integer)
    # How many days the serve ledger keeps of this tenant's answers (registry.usage).
    usage_retention_days: Mapped[int] = mapped_column(Integer, server_default=text("90"))
    # Live rollouts (running or paused): serving looks for them only when there are some.
    rollouts_live: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    # Offers the tenant makes as a library, and libraries it subscribes to (kept by triggers,
    # schema 0035): whether its changes reach other tenants, and whether its lists merge libraries.
    library_offers: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    library_reads: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    instructions: Mapped[str | None] = mapped_column(Text)
    # API keys are accepted (an operator may turn them off, leaving OAuth tokens only).
    api_keys: Mapped[bool] = mapped_column(Boolean, server_default=text("true"))
    # How many approvals a move of each protected label needs ({} : moves need none).
    approvals: Mapped[dict[str, int]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    # change_seq below is read from change_sequences (the column of that name is RETIRED).
    if TYPE_CHECKING:
        change_seq: Mapped[int]  # mapped below, once ChangeSequence exists
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())


class ChangeSequence(Base):
    """A tenant's change sequence, bumped by the change_log trigger as each change commits:
    gap-free and ordered. A row of its own, beside the tenant's, so that the tenant's row does not
    change on every write (migrations/sql/0018_change_sequences_v1.sql). Part of the directory, like
    tenants: no row-level security (replica checks read it across tenants)."""

    __tablename__ = "change_sequences"
    __table_args__ = (
        ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        {"postgresql_with": {"fillfactor": 20}},
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))


# Read with every tenant (a primary-key lookup); never written through the ORM. A tenant inserted
# in this transaction has no row yet when RETURNING is computed: 0, its first value.
Tenant.change_seq = column_property(
    func.coalesce(
        select(ChangeSequence.seq)
        .where(ChangeSequence.tenant_id == Tenant.id)
        .correlate_except(ChangeSequence)
        .scalar_subquery(),
        0,
    ),
    expire_on_flush=False,
)

# Columns this release no longer maps and the next release's first migration drops (expand, then
# contract a release later: workers of the previous release still select them during an upgrade).
# tenants.change_seq: the change sequence before 0018, no longer written since.
RETIRED_COLUMNS = frozenset({("tenants", "change_seq")})

# Keyed by tenant, but part of the directory (no row-level security), like tenants itself.
DIRECTORY_TABLES_BY_TENANT = ("change_sequences",)


class ApiKey(Base):
    __tablename__ = "api_keys"
    __table_args__ = (
        ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        CheckConstraint("role IN ('reader', 'editor', 'publisher', 'admin')", name="role_known"),
        CheckConstraint("octet_length(secret_hash) = 32", name="secret_hash_sha256"),
        CheckConstraint(
            "owner IS NULL OR char_length(owner) BETWEEN 1 AND 200", name="owner_length"
        ),
        UniqueConstraint("tenant_id", "secret_hash"),
        Index(
            "uq_api_keys_tenant_id_name_active",
            "tenant_id",
            "name",
            unique=True,
            postgresql_where=text("revoked_at IS NULL"),
        ),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    id: Mapped[uuid.UUID] = mapped_column(
        UUID, primary_key=True, server_default=text("gen_random_uuid()")
    )
    name: Mapped[str] = mapped_column(Text)
    role: Mapped[str] = mapped_column(Text)
    # The person who holds it (a name or an email): approvals count owners, not keys.
    owner: Mapped[str | None] = mapped_column(Text)
    # SHA-256 of the secret. Secrets are 256-bit random tokens, so a fast hash is the right tool.
    secret_hash: Mapped[bytes] = mapped_column(LargeBinary)
    created_by: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Blob(Base):
    """Content-addressed bytes: the same bytes are stored once per tenant."""

    __tablename__ = "blobs"
    __table_args__ = (
        ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        CheckConstraint("octet_length(sha256) = 32", name="sha256_length"),
        CheckConstraint("size = octet_length(data)", name="size_matches"),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    sha256: Mapped[bytes] = mapped_column(LargeBinary, primary_key=True)
    mime_type: Mapped[str] = mapped_column(Text)
    size: Mapped[int] = mapped_column(BigInteger)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())


class Prompt(Base):
    __tablename__ = "prompts"
    __table_args__ = (
        ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        CheckConstraint(r"name ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$'", name="name_format"),
        UniqueConstraint("tenant_id", "name"),
        # A marked prompt found by its tool name (tools/call).
        Index(
            "ix_prompts_tenant_id_tool_name",
            "tenant_id",
            "tool_name",
            postgresql_where=text("tool_name IS NOT NULL"),
        ),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    id: Mapped[uuid.UUID] = mapped_column(
        UUID, primary_key=True, server_default=text("gen_random_uuid()")
    )
    name: Mapped[str] = mapped_column(Text)
    tags: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default=text("'{}'::text[]"))
    # Offered as an MCP tool of its own where the tenant serves tools.
    as_tool: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    # Its tool name when marked, else NULL: set by the database (trigger tool_name_v1 of migration
    # 0025, the rule of registry.naming), never written by the application.
    tool_name: Mapped[str | None] = mapped_column(Text)
    # Test cases (registry.testcases), run on every version written and on the versions a change
    # request moves labels to.
    tests: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, server_default=text("'[]'::jsonb"))
    # Highest version number written; bumped under the row lock, so numbers are assigned atomically.
    latest_version: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    archived_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())


class PromptVersion(Base):
    """Immutable once written (a trigger refuses UPDATE and direct DELETE)."""

    __tablename__ = "prompt_versions"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "prompt_id"], ["prompts.tenant_id", "prompts.id"], ondelete="CASCADE"
        ),
        CheckConstraint("version >= 1", name="version_positive"),
        CheckConstraint("octet_length(content_hash) = 32", name="content_hash_sha256"),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    prompt_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    title: Mapped[str | None] = mapped_column(Text)
    description: Mapped[str | None] = mapped_column(Text)
    icons: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONB)
    config: Mapped[dict[str, Any] | None] = mapped_column(JSONB)  # model settings (ModelConfig)
    commit_message: Mapped[str | None] = mapped_column(Text)
    author: Mapped[str] = mapped_column(Text)
    content_hash: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())
    # Its prompts/list entry, encoded (registry.prompts.listing); NULL when written before schema
    # 0015. Only the list function reads it: deferred, so loading a version never carries it.
    list_entry: Mapped[str | None] = mapped_column(Text, deferred=True)


class PromptArgument(Base):
    __tablename__ = "prompt_arguments"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "prompt_id", "version"],
            ["prompt_versions.tenant_id", "prompt_versions.prompt_id", "prompt_versions.version"],
            ondelete="CASCADE",
        ),
        UniqueConstraint("tenant_id", "prompt_id", "version", "name"),
        CheckConstraint("max_length IS NULL OR max_length >= 1", name="max_length_positive"),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    prompt_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    title: Mapped[str | None] = mapped_column(Text)
    description: Mapped[str | None] = mapped_column(Text)
    required: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    default: Mapped[str | None] = mapped_column(Text)
    enum: Mapped[list[str] | None] = mapped_column(ARRAY(Text))
    pattern: Mapped[str | None] = mapped_column(Text)
    max_length: Mapped[int | None] = mapped_column(Integer)
    # Completion hints beyond enum: values offered but not enforced.
    suggestions: Mapped[list[str] | None] = mapped_column(ARRAY(Text))


class PromptMessage(Base):
    __tablename__ = "prompt_messages"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "prompt_id", "version"],
            ["prompt_versions.tenant_id", "prompt_versions.prompt_id", "prompt_versions.version"],
            ondelete="CASCADE",
        ),
        # A message may reference only a blob of its own tenant; a referenced blob cannot vanish.
        ForeignKeyConstraint(["tenant_id", "blob_sha256"], ["blobs.tenant_id", "blobs.sha256"]),
        CheckConstraint("role IN ('user', 'assistant')", name="role_known"),
        Index("ix_prompt_messages_tenant_id_blob_sha256", "tenant_id", "blob_sha256"),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    prompt_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    role: Mapped[str] = mapped_column(Text)
    # One MCP content block; blob bytes are referenced by sha256, never inlined here.
    content: Mapped[dict[str, Any]] = mapped_column(JSONB)
    blob_sha256: Mapped[bytes | None] = mapped_column(LargeBinary)


class PromptPartial(Base):
    """A partial lock: the child version a partial tag (``ref``, as written) of a version was resolved
    to when that version was written. Immutable; a locked child version cannot be deleted."""

    __tablename__ = "prompt_partials"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "prompt_id", "version"],
            ["prompt_versions.tenant_id", "prompt_versions.prompt_id", "prompt_versions.version"],
            ondelete="CASCADE",
        ),
        ForeignKeyConstraint(
            ["tenant_id", "child_prompt_id", "child_version"],
            ["prompt_versions.tenant_id", "prompt_versions.prompt_id", "prompt_versions.version"],
            ondelete="RESTRICT",
        ),
        Index(
            "ix_prompt_partials_tenant_id_child_prompt_id_child_version",
            "tenant_id",
            "child_prompt_id",
            "child_version",
        ),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    prompt_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    ref: Mapped[str] = mapped_column(Text, primary_key=True)
    child_name: Mapped[str] = mapped_column(Text)
    child_prompt_id: Mapped[uuid.UUID] = mapped_column(UUID)
    child_version: Mapped[int] = mapped_column(Integer)


class Label(Base):
    """(prompt, label) -> version. Every move is also appended to label_history."""

    __tablename__ = "labels"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "prompt_id"], ["prompts.tenant_id", "prompts.id"], ondelete="CASCADE"
        ),
        ForeignKeyConstraint(
            ["tenant_id", "prompt_id", "version"],
            ["prompt_versions.tenant_id", "prompt_versions.prompt_id", "prompt_versions.version"],
            ondelete="CASCADE",
        ),
        CheckConstraint(r"label ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'", name="label_format"),
        # Serving a label lists its prompts in name order: this index drives that keyset scan.
        Index("ix_labels_tenant_id_label_prompt_name", "tenant_id", "label", "prompt_name"),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    prompt_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    label: Mapped[str] = mapped_column(Text, primary_key=True)
    # Prompt names never change, so a copy here lets a label's listing be one index range scan.
    prompt_name: Mapped[str] = mapped_column(Text)
    version: Mapped[int] = mapped_column(Integer)
    updated_by: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())
    # Copies kept by triggers (schema 0016), so a label's uncached prompts/list page reads this
    # table alone: its version's list entry (NULL for a version written before 0015), and whether
    # its prompt is archived. Only the list and count functions read them: deferred.
    list_entry: Mapped[str | None] = mapped_column(Text, deferred=True)
    archived: Mapped[bool] = mapped_column(Boolean, server_default=text("false"), deferred=True)


class LabelCount(Base):
    """How many prompts a label serves (its prompt not archived), kept by a trigger on ``labels``
    (schema 0029), so the first prompts/list page never counts a label's rows."""

    __tablename__ = "label_counts"
    __table_args__ = (ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),)

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    label: Mapped[str] = mapped_column(Text, primary_key=True)
    served: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))


class LabelHistory(Base):
    """Append-only: every label move, including deletions (to_version NULL)."""

    __tablename__ = "label_history"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "prompt_id"], ["prompts.tenant_id", "prompts.id"], ondelete="CASCADE"
        ),
        Index(
            "ix_label_history_tenant_id_prompt_id_label_id", "tenant_id", "prompt_id", "label", "id"
        ),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    prompt_id: Mapped[uuid.UUID] = mapped_column(UUID)
    label: Mapped[str] = mapped_column(Text)
    from_version: Mapped[int | None] = mapped_column(Integer)
    to_version: Mapped[int | None] = mapped_column(Integer)
    actor: Mapped[str] = mapped_column(Text)
    moved_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())


class ChangeLog(Base):
    """One row per write that changes what a tenant serves; seq is assigned by a trigger."""

    __tablename__ = "change_log"
    __table_args__ = (ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),)

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    kind: Mapped[str] = mapped_column(Text)
    prompt_id: Mapped[uuid.UUID | None] = mapped_column(UUID)
    label: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())
    # What a change request's events add (its id and moves); None for every other change.
    detail: Mapped[dict[str, Any] | None] = mapped_column(JSONB)


class ChangePending(Base):
    """A change-log row waiting for its transaction's commit, when a deferred trigger moves it to
    the change log with its sequence number (migrations/sql/0014_change_at_commit_v1.sql). Never
    committed, so unlogged."""

    __tablename__ = "change_pending"
    __table_args__ = {"prefixes": ["UNLOGGED"]}

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    kind: Mapped[str] = mapped_column(Text)
    prompt_id: Mapped[uuid.UUID | None] = mapped_column(UUID)
    label: Mapped[str | None] = mapped_column(Text)
    detail: Mapped[dict[str, Any] | None] = mapped_column(JSONB)


class AuditLog(Base):
    """Append-only record of every write: who, what, before and after."""

    __tablename__ = "audit_log"
    __table_args__ = (ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),)

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    actor: Mapped[str] = mapped_column(Text)
    action: Mapped[str] = mapped_column(Text)
    target: Mapped[str] = mapped_column(Text)
    before: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    after: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())


class McpSession(Base):
    """Session-era MCP sessions, kept here so any worker can serve any request of a session."""

    __tablename__ = "mcp_sessions"
    __table_args__ = (
        ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        Index("ix_mcp_sessions_tenant_id_last_seen_at", "tenant_id", "last_seen_at"),
        Index(
            "ix_mcp_sessions_tenant_id_key_id_client_address",
            "tenant_id",
            "key_id",
            "client_address",
        ),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    label: Mapped[str] = mapped_column(Text)
    key_id: Mapped[uuid.UUID | None] = mapped_column(UUID)
    client_address: Mapped[str | None] = mapped_column(Text)  # anonymous clients: their address
    protocol_version: Mapped[str] = mapped_column(Text)
    client_info: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    client_capabilities: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    log_level: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())
    last_seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())
    ended_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class SigningKey(Base):
    """A public key the registry has signed with (receipts, skills, snapshots): every one is
    published, so what was signed before a rotation still verifies. Never a private key."""

    __tablename__ = "signing_keys"

    key_id: Mapped[str] = mapped_column(Text, primary_key=True)
    public_key: Mapped[str] = mapped_column(Text)
    first_used: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())


class RegistrySecret(Base):
    """Server-wide secrets generated in the database (the MAC key for cursors), shared by all workers."""

    __tablename__ = "registry_secrets"

    name: Mapped[str] = mapped_column(Text, primary_key=True)
    secret: Mapped[bytes] = mapped_column(LargeBinary)


class TenantIssuer(Base):
    """An OAuth authorization server the tenant trusts, and how its tokens' claims map to roles:
    ``rules`` is a list of ``{"claim", "equals" | "email_domain", "role"}``."""

    __tablename__ = "tenant_issuers"
    __table_args__ = (ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),)

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    issuer: Mapped[str] = mapped_column(Text, primary_key=True)
    rules: Mapped[list[dict[str, Any]]] = mapped_column(JSONB)
    # For opaque tokens: the client the registry introspects them as (RFC 7662); the secret is
    # never shown again once set.
    introspection_client_id: Mapped[str | None] = mapped_column(Text)
    introspection_secret: Mapped[str | None] = mapped_column(Text)
    created_by: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())


class ConsoleSession(Base):
    """A signed-in person in the web console: the browser holds only an opaque cookie whose SHA-256
    is ``id``; who they are is an API key (checked again on every request) or an OAuth subject."""

    __tablename__ = "console_sessions"
    __table_args__ = (
        ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        ForeignKeyConstraint(
            ["tenant_id", "key_id"], ["api_keys.tenant_id", "api_keys.id"], ondelete="CASCADE"
        ),
        CheckConstraint("(key_id IS NULL) <> (subject IS NULL)", name="one_principal"),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    key_id: Mapped[uuid.UUID | None] = mapped_column(UUID)
    subject: Mapped[str | None] = mapped_column(Text)
    role: Mapped[str] = mapped_column(Text)
    csrf: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
