"""a marked prompt's tool name is kept on its row (set by a trigger) and indexed, so that tools/call
finds the prompt in one indexed statement (registry_served_tool_v1, on the hot path's pool); expand
only

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-27 15:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from registry.migrations.sqlfile import run_sql_file

revision: str = "0025"
down_revision: str | Sequence[str] | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("prompts", sa.Column("tool_name", sa.Text(), nullable=True))
    run_sql_file("0025_tool_names_v1.sql")


def downgrade() -> None:
    op.execute("DROP FUNCTION registry_served_tool_v1(uuid, text, text)")
    op.drop_index("ix_prompts_tenant_id_tool_name", table_name="prompts")
    op.execute("DROP TRIGGER tool_name_v1 ON prompts")
    op.execute("DROP FUNCTION registry_prompt_tool_name_v1()")
    op.drop_column("prompts", "tool_name")
