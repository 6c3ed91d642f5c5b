"""Change requests: moves of prompts' and skills' labels reviewed, then applied together as one
release (at once, or at a set time). Tenant-owned: every table is keyed by ``tenant_id`` first and
under row-level security (``migrations/sql/0023_change_requests_v1.sql``)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    DateTime,
    ForeignKeyConstraint,
    Identity,
    Index,
    Integer,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID
from sqlalchemy.orm import Mapped, mapped_column

from registry.db.base import Base, now

RELEASE_TABLES = ("change_requests", "change_request_moves", "change_request_reviews")


class ChangeRequest(Base):
    __tablename__ = "change_requests"
    __table_args__ = (
        ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        CheckConstraint(
            "state IN ('open', 'approved', 'applied', 'rejected', 'withdrawn', 'stale')",
            name="state_known",
        ),
        # What the workers' scheduler looks for across tenants: the few approved requests with a time.
        Index(
            "ix_change_requests_due",
            "tenant_id",
            "apply_at",
            postgresql_where=text("state = 'approved' AND apply_at IS NOT NULL"),
        ),
        Index("ix_change_requests_tenant_id_state", "tenant_id", "state", "id"),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    # Numbered per tenant (1, 2, ...), under a transaction lock of the tenant's numbering.
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    state: Mapped[str] = mapped_column(Text, server_default=text("'open'"))
    author: Mapped[str] = mapped_column(Text)
    description: Mapped[str] = mapped_column(Text)
    # Bumped whenever the moves change: an approval counts for the revision it saw.
    revision: Mapped[int] = mapped_column(Integer, server_default=text("1"))
    apply_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # An admin's override of failing tests or broken contracts, for one revision, with its reason.
    override_by: Mapped[str | None] = mapped_column(Text)
    override_reason: Mapped[str | None] = mapped_column(Text)
    override_revision: Mapped[int | None] = mapped_column(Integer)
    stale_reason: Mapped[str | None] = mapped_column(Text)
    applied_by: Mapped[str | None] = mapped_column(Text)
    applied_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())


class ChangeRequestMove(Base):
    """One label move of a request: the version it was at when the move was written (``before``;
    None: the label did not exist), so a move someone else made meanwhile makes the request stale."""

    __tablename__ = "change_request_moves"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "request_id"],
            ["change_requests.tenant_id", "change_requests.id"],
            ondelete="CASCADE",
        ),
        CheckConstraint("kind IN ('prompt', 'skill')", name="kind_known"),
        UniqueConstraint("tenant_id", "request_id", "kind", "name", "label"),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    request_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(Text)
    name: Mapped[str] = mapped_column(Text)
    label: Mapped[str] = mapped_column(Text)
    version: Mapped[int] = mapped_column(Integer)
    before: Mapped[int | None] = mapped_column(Integer)
    # A rollout plan (steps and gates, schema 0032): applying the request starts a rollout of the
    # label to ``version`` instead of moving it.
    rollout: Mapped[dict[str, Any] | None] = mapped_column(JSONB)


class ChangeRequestReview(Base):
    """What people did to a request, in order: approvals (for the revision they saw), rejections,
    comments, an override, the withdrawal, the edit that reset approvals, the apply."""

    __tablename__ = "change_request_reviews"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "request_id"],
            ["change_requests.tenant_id", "change_requests.id"],
            ondelete="CASCADE",
        ),
        CheckConstraint(
            "kind IN ('approve', 'reject', 'comment', 'withdraw', 'override', 'apply', 'stale', "
            "'edit')",
            name="kind_known",
        ),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    request_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    actor: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(Text)
    body: Mapped[str | None] = mapped_column(Text)
    revision: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())
