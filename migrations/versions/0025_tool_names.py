"""a marked prompt is found by its tool name through an index (the tool name of
registry.naming, as an expression over prompts.name, of marked prompts only); expand only

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-27 15:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025"
down_revision: str | Sequence[str] | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_prompts_tenant_id_tool_name",
        "prompts",
        ["tenant_id", sa.text("translate(left(name, 64), '.:', '__')")],
        postgresql_where=sa.text("as_tool"),
    )


def downgrade() -> None:
    op.drop_index("ix_prompts_tenant_id_tool_name", table_name="prompts")
