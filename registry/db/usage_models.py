"""The serve ledger's tables (schema 0030): answers counted per minute, hour and day, by what was
served (kind, name, version, label), where (surface) and to whom (caller, client). Each is
partitioned by time (``registry_usage_partitions_v1`` makes and drops the partitions) and is the
tenant's, under row-level security; the workers write them as the owner role."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import BigInteger, DateTime, ForeignKeyConstraint, Integer, Text, text
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import Mapped, declared_attr, mapped_column

from registry.db.base import Base

USAGE_TABLES = ("usage_minutes", "usage_hours", "usage_days")


class _Counted:
    """The columns every ledger table has; the key leads with the tenant and what was served, so
    that the questions about one prompt or skill read its rows alone."""

    @declared_attr.directive
    def __table_args__(cls) -> tuple[object, ...]:
        return (
            ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
            {"postgresql_partition_by": "RANGE (at)"},
        )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID, primary_key=True)
    kind: Mapped[str] = mapped_column(Text, primary_key=True)
    name: Mapped[str] = mapped_column(Text, primary_key=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    label: Mapped[str] = mapped_column(Text, primary_key=True)  # "" when asked by version
    surface: Mapped[str] = mapped_column(Text, primary_key=True)
    caller: Mapped[str] = mapped_column(Text, primary_key=True)  # as the audit log names it
    client: Mapped[str] = mapped_column(Text, primary_key=True)  # "name/version", "" if not sent
    answers: Mapped[int] = mapped_column(BigInteger)
    # Requests a rollout routed here that ended in an error (schema 0032; answers count no errors).
    errors: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    first_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    last_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class UsageMinute(_Counted, Base):
    __tablename__ = "usage_minutes"


class UsageHour(_Counted, Base):
    __tablename__ = "usage_hours"


class UsageDay(_Counted, Base):
    __tablename__ = "usage_days"
