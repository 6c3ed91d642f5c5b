"""a tenant's live rollouts read in one statement on the hot path's pool; expand only

Revision ID: 0034
Revises: 0033
Create Date: 2026-11-29 09:25:00
"""

from collections.abc import Sequence

from alembic import op

from registry.migrations.sqlfile import run_sql_file

revision: str = "0034"
down_revision: str | Sequence[str] | None = "0033"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    run_sql_file("0034_live_rollouts_v1.sql")


def downgrade() -> None:
    op.execute("DROP FUNCTION registry_live_rollouts_v1(uuid)")
