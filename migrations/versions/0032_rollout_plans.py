"""rollouts through change requests (a move's rollout plan, the rollout's request) and errors
per side in the serve ledger; expand only

Revision ID: 0032
Revises: 0031
Create Date: 2026-11-29 09:00:00
"""

from collections.abc import Sequence

from alembic import op

from registry.migrations.sqlfile import run_sql_file

revision: str = "0032"
down_revision: str | Sequence[str] | None = "0031"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    run_sql_file("0032_rollout_plans_v1.sql")


def downgrade() -> None:
    for table in ("usage_days", "usage_hours", "usage_minutes"):
        op.execute(f"ALTER TABLE {table} DROP COLUMN errors")
    op.execute("ALTER TABLE rollouts DROP COLUMN change_request_id")
    op.execute("ALTER TABLE change_request_moves DROP COLUMN rollout")
