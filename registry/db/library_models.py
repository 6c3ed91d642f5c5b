"""Shared libraries (schema 0033): a library's offers of one of its labels, and a subscriber's
acceptances. Each is its own tenant's, under row-level security; each side sees the consent the
other addressed to it (a SELECT policy), never writes it."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKeyConstraint,
    Identity,
    Index,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID
from sqlalchemy.orm import Mapped, mapped_column

from registry.db.base import Base, now

LIBRARY_TABLES = ("library_offers", "library_subscriptions")
EVERY_TENANT = uuid.UUID(int=0)  # how the unique index counts the offer to every tenant


class LibraryOffer(Base):
    """The library (``tenant_id``) offers what ``label`` serves to ``subscriber_id`` (None: to
    every tenant of the deployment)."""

    __tablename__ = "library_offers"
    __table_args__ = (
        ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        ForeignKeyConstraint(["subscriber_id"], ["tenants.id"], ondelete="CASCADE"),
        CheckConstraint("subscriber_id IS DISTINCT FROM tenant_id", name="library_offer_not_self"),
        Index(
            "ix_library_offers_to",
            "tenant_id",
            text("coalesce(subscriber_id, '00000000-0000-0000-0000-000000000000'::uuid)"),
            unique=True,
        ),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    subscriber_id: Mapped[uuid.UUID | None] = mapped_column(UUID)
    label: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())


class LibrarySubscription(Base):
    """The subscriber (``tenant_id``) accepts what ``label`` of ``library_id`` serves: following
    it, or with ``pins`` (name -> version)."""

    __tablename__ = "library_subscriptions"
    __table_args__ = (
        ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        ForeignKeyConstraint(["library_id"], ["tenants.id"], ondelete="CASCADE"),
        CheckConstraint("library_id <> tenant_id", name="library_subscription_not_self"),
        CheckConstraint("jsonb_typeof(pins) = 'object'", name="library_pins_object"),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    library_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    label: Mapped[str] = mapped_column(Text)
    follow: Mapped[bool] = mapped_column(Boolean, server_default=text("true"))
    pins: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    prefix: Mapped[str | None] = mapped_column(Text)
    accepted_by: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())
