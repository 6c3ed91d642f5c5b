"""The skills of a tenant (the Skills extension of MCP): a folder of files, in immutable numbered
versions, moved between by labels as prompts are. File bytes are content-addressed blobs of the
tenant (``blobs``), so a file unchanged between versions is stored once. Tenant-owned: every table is
keyed by ``tenant_id`` first and under row-level security (``migrations/sql/0021_skills_v1.sql``)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    DateTime,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID
from sqlalchemy.orm import Mapped, mapped_column

from registry.db.base import Base, now

SKILL_TABLES = ("skills", "skill_versions", "skill_files", "skill_labels")

# The extension's naming rule for a skill: 1-64 lowercase letters, digits and single hyphens.
SKILL_NAME_CHECK = r"name ~ '^[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$' AND name !~ '--'"


class Skill(Base):
    __tablename__ = "skills"
    __table_args__ = (
        ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        CheckConstraint(SKILL_NAME_CHECK, name="name_format"),
        UniqueConstraint("tenant_id", "name"),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    id: Mapped[uuid.UUID] = mapped_column(
        UUID, primary_key=True, server_default=text("gen_random_uuid()")
    )
    name: Mapped[str] = mapped_column(Text)
    # Highest version number written; bumped under the row lock.
    latest_version: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    archived_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Test cases of its SKILL.md (registry.testcases), as a prompt carries them.
    tests: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, server_default=text("'[]'::jsonb"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())


class SkillVersion(Base):
    """Immutable once written: the front matter of its SKILL.md, the SKILL.md as written (with
    partial tags; the served file has them resolved), the locks they resolved to, and the hash of
    the manifest (every file's path, digest and size) that is signed when served."""

    __tablename__ = "skill_versions"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "skill_id"], ["skills.tenant_id", "skills.id"], ondelete="CASCADE"
        ),
        CheckConstraint("version >= 1", name="version_positive"),
        CheckConstraint("octet_length(manifest_sha256) = 32", name="manifest_sha256_length"),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    skill_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    description: Mapped[str] = mapped_column(Text)
    frontmatter: Mapped[dict[str, Any]] = mapped_column(JSONB)
    source: Mapped[str] = mapped_column(Text)  # SKILL.md as written
    locks: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, server_default=text("'[]'::jsonb"))
    manifest_sha256: Mapped[bytes] = mapped_column(LargeBinary)
    commit_message: Mapped[str | None] = mapped_column(Text)
    author: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())


class SkillFile(Base):
    """One file of a skill version, by its path inside the skill folder; its bytes are a blob."""

    __tablename__ = "skill_files"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "skill_id", "version"],
            ["skill_versions.tenant_id", "skill_versions.skill_id", "skill_versions.version"],
            ondelete="CASCADE",
        ),
        ForeignKeyConstraint(["tenant_id", "sha256"], ["blobs.tenant_id", "blobs.sha256"]),
        CheckConstraint("octet_length(sha256) = 32", name="sha256_length"),
        CheckConstraint("size >= 0", name="size_not_negative"),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    skill_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    path: Mapped[str] = mapped_column(Text, primary_key=True)
    sha256: Mapped[bytes] = mapped_column(LargeBinary)
    size: Mapped[int] = mapped_column(BigInteger)
    mime_type: Mapped[str] = mapped_column(Text)


class SkillLabel(Base):
    """(skill, label) -> version; the name is copied so a label's listing is one index range."""

    __tablename__ = "skill_labels"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "skill_id", "version"],
            ["skill_versions.tenant_id", "skill_versions.skill_id", "skill_versions.version"],
            ondelete="CASCADE",
        ),
        CheckConstraint(r"label ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'", name="label_format"),
        Index("ix_skill_labels_tenant_id_label_skill_name", "tenant_id", "label", "skill_name"),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    skill_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    label: Mapped[str] = mapped_column(Text, primary_key=True)
    skill_name: Mapped[str] = mapped_column(Text)
    version: Mapped[int] = mapped_column(Integer)
    updated_by: Mapped[str] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())
