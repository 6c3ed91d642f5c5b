"""Webhooks: a tenant's endpoints, the outbox of deliveries a trigger writes in the transaction of
each change, and every attempt. Tenant-owned: every table is keyed by ``tenant_id`` first and under
row-level security."""

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
    Integer,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID
from sqlalchemy.orm import Mapped, mapped_column

from registry.db.base import Base, now

WEBHOOK_TABLES = (
    "webhook_endpoints",
    "webhook_deliveries",
    "webhook_attempts",
    "event_subscriptions",
)


class WebhookEndpoint(Base):
    """Where a tenant's changes are sent (Standard Webhooks). The secret signs each delivery; after
    a rotation the previous one signs too, until ``previous_until``."""

    __tablename__ = "webhook_endpoints"
    __table_args__ = (ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),)

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    id: Mapped[uuid.UUID] = mapped_column(
        UUID, primary_key=True, server_default=text("gen_random_uuid()")
    )
    url: Mapped[str] = mapped_column(Text)
    events: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default=text("'{}'"))  # {}: all
    description: Mapped[str | None] = mapped_column(Text)
    secret: Mapped[str] = mapped_column(Text)
    previous_secret: Mapped[str | None] = mapped_column(Text)
    previous_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_by: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())
    failing_since: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    disabled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    disabled_reason: Mapped[str | None] = mapped_column(Text)


class WebhookDelivery(Base):
    """The outbox: one message for one endpoint, written by a trigger in the transaction of the
    change it tells (so a committed change is never lost and a rolled-back one never sent)."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "endpoint_id"],
            ["webhook_endpoints.tenant_id", "webhook_endpoints.id"],
            ondelete="CASCADE",
        ),
        CheckConstraint("status IN ('pending', 'delivered', 'failed')", name="status_known"),
        Index(
            "ix_webhook_deliveries_due",
            "tenant_id",
            "next_attempt_at",
            postgresql_where=text("status = 'pending'"),
        ),
        Index("ix_webhook_deliveries_tenant_id_endpoint_id_id", "tenant_id", "endpoint_id", "id"),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    endpoint_id: Mapped[uuid.UUID] = mapped_column(UUID)
    message_id: Mapped[str] = mapped_column(Text)
    event_type: Mapped[str] = mapped_column(Text)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB)
    status: Mapped[str] = mapped_column(Text, server_default=text("'pending'"))
    attempts: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    next_attempt_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())
    delivered_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Set while a worker sends it (no transaction is held across the HTTP call): another worker
    # takes it only once the lease has run out, so a worker that died mid-send loses nothing.
    leased_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class WebhookAttempt(Base):
    """One try of a delivery: when, how it ended, how long it took, the start of the answer."""

    __tablename__ = "webhook_attempts"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "delivery_id"],
            ["webhook_deliveries.tenant_id", "webhook_deliveries.id"],
            ondelete="CASCADE",
        ),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    delivery_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    attempt: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())
    status_code: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    latency_ms: Mapped[int] = mapped_column(Integer)
    response_body: Mapped[str | None] = mapped_column(Text)


class EventSubscription(Base):
    """A webhook subscription of the MCP Events extension (schema 0036): one per key (principal,
    callback URL, event type, arguments), written once its endpoint proved its intent. ``position``
    is its watermark in the tenant's change log (every event at or before it acknowledged or
    abandoned); a worker delivers what follows under a lease."""

    __tablename__ = "event_subscriptions"
    __table_args__ = (
        ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        CheckConstraint(
            "jsonb_typeof(arguments) = 'object'", name="event_subscription_arguments_object"
        ),
        Index(
            "ix_event_subscriptions_due",
            "tenant_id",
            "next_attempt_at",
            postgresql_where=text("active"),
        ),
        Index("ix_event_subscriptions_principal", "tenant_id", "principal", "url"),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    principal: Mapped[str] = mapped_column(Text)
    url: Mapped[str] = mapped_column(Text)
    name: Mapped[str] = mapped_column(Text)
    arguments: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    secret: Mapped[str] = mapped_column(Text)
    previous_secret: Mapped[str | None] = mapped_column(Text)
    previous_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    position: Mapped[int] = mapped_column(BigInteger)
    attempts: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    next_attempt_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())
    lease: Mapped[uuid.UUID | None] = mapped_column(UUID)
    leased_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    active: Mapped[bool] = mapped_column(Boolean, server_default=text("true"))
    last_delivery_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_error: Mapped[str | None] = mapped_column(Text)
    failed_since: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=now())
