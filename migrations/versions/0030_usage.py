"""the serve ledger: answers counted per minute, hour and day (usage_minutes, usage_hours,
usage_days, partitioned by time), the tenant's retention, and the function that keeps the
partitions; expand only

Revision ID: 0030
Revises: 0029
Create Date: 2026-11-29 06:00:00
"""

from collections.abc import Sequence

from alembic import op

from registry.migrations.sqlfile import run_sql_file

revision: str = "0030"
down_revision: str | Sequence[str] | None = "0029"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    run_sql_file("0030_usage_v1.sql")


def downgrade() -> None:
    op.execute("DROP FUNCTION registry_usage_partitions_v1(timestamptz, integer, integer)")
    op.execute("ALTER TABLE tenants DROP COLUMN usage_retention_days")
    for table in ("usage_minutes", "usage_hours", "usage_days"):
        op.execute(f"DROP TABLE {table}")
