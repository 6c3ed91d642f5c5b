"""progressive delivery: rollouts of a label (a new version to a share of callers, in steps) and
the tenant's count of live ones; expand only

Revision ID: 0031
Revises: 0030
Create Date: 2026-11-29 06:40:00
"""

from collections.abc import Sequence

from alembic import op

from registry.migrations.sqlfile import run_sql_file

revision: str = "0031"
down_revision: str | Sequence[str] | None = "0030"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    run_sql_file("0031_rollouts_v1.sql")


def downgrade() -> None:
    op.execute("ALTER TABLE tenants DROP COLUMN rollouts_live")
    op.execute("DROP TABLE rollout_feedback")
    op.execute("DROP TABLE rollouts")
