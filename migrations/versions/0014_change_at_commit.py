"""a change-log row takes its sequence number as its transaction commits (change_pending)

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-24 09:20:00
"""

from collections.abc import Sequence

from alembic import op

from registry.migrations.sqlfile import run_sql_file

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    run_sql_file("0014_change_at_commit_v1.sql")


def downgrade() -> None:
    op.execute("DROP TABLE change_pending")
    op.execute("DROP FUNCTION registry_commit_change_v1()")
