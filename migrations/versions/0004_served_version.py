"""one-round-trip read of a served version (the MCP prompts/get cache miss)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21 07:40:00
"""

from collections.abc import Sequence

from alembic import op

from registry.migrations.sqlfile import run_sql_file

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    run_sql_file("0004_served_version_v1.sql")


def downgrade() -> None:
    op.execute("DROP FUNCTION registry_served_version_v1(uuid, text, text, integer)")
