"""one-round-trip read of a served prompts/list page and of a label's served count (the MCP
prompts/list cache miss), on the hot path's plain pool instead of an ORM transaction

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-23 23:30:00
"""

from collections.abc import Sequence

from alembic import op

from registry.migrations.sqlfile import run_sql_file

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    run_sql_file("0012_served_page_v1.sql")


def downgrade() -> None:
    op.execute("DROP FUNCTION registry_served_count_v1(uuid, text)")
    op.execute("DROP FUNCTION registry_served_page_v1(uuid, text, text, integer)")
