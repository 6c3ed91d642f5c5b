"""Rollouts of a label (schema 0031): a new version served to a share of callers, in steps.
Tenant-owned, under row-level security."""

from __future__ import annotations

import uuid
from datetime import datetime

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
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, REAL, UUID
from sqlalchemy.orm import Mapped, mapped_column

from registry.db.base import Base, now

ROLLOUT_TABLES = ("rollouts", "rollout_feedback")
LIVE = ("running", "paused")


class Rollout(Base):
    __tablename__ = "rollouts"
    __table_args__ = (
        ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        CheckConstraint("kind IN ('prompt', 'skill')", name="rollout_kind"),
        CheckConstraint(
            "state IN ('running', 'paused', 'promoted', 'rolled_back')", name="rollout_state"
        ),
        Index(
            "ix_rollouts_live",
            "tenant_id",
            "kind",
            "name",
            "label",
            unique=True,
            postgresql_where=text("state IN ('running', 'paused')"),
        ),
        Index(
            "ix_rollouts_running",
            "tenant_id",
            "step_started_at",
            postgresql_where=text("state = 'running'"),
        ),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    kind: Mapped[str] = mapped_column(Text)
    name: Mapped[str] = mapped_column(Text)
    label: Mapped[str] = mapped_column(Text)
    from_version: Mapped[int] = mapped_column(Integer)
    to_version: Mapped[int] = mapped_column(Integer)
    steps: Mapped[list[int]] = mapped_column(ARRAY(Integer))
    step: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    min_answers: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    min_seconds: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    min_outcomes: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    state: Mapped[str] = mapped_column(Text, server_default=text("'running'"))
    salt: Mapped[bytes] = mapped_column(LargeBinary)
    step_started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())
    reason: Mapped[str | None] = mapped_column(Text)
    started_by: Mapped[str] = mapped_column(Text)
    # The change request whose approval started it (schema 0032); None: started directly.
    change_request_id: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())


class RolloutFeedback(Base):
    """One report of what an answer a rollout decided was worth (POST /feedback)."""

    __tablename__ = "rollout_feedback"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "rollout_id"],
            ["rollouts.tenant_id", "rollouts.id"],
            ondelete="CASCADE",
            name="fk_rollout_feedback_rollout",
        ),
        CheckConstraint("side IN ('old', 'new')", name="feedback_side"),
        Index("ix_rollout_feedback_step", "tenant_id", "rollout_id", "step", "caller"),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    rollout_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    receipt: Mapped[bytes] = mapped_column(LargeBinary, primary_key=True)
    caller: Mapped[str] = mapped_column(Text)
    step: Mapped[int] = mapped_column(Integer)
    side: Mapped[str] = mapped_column(Text)
    good: Mapped[bool] = mapped_column(Boolean)
    score: Mapped[float | None] = mapped_column(REAL)
    reported_by: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())
