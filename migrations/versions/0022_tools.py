"""tools: a tenant may serve its prompts as MCP tools (mcp_tools), and a prompt may be marked as a
tool of its own (as_tool); expand only, both off by default

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-26 06:05:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | Sequence[str] | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "tenants",
        sa.Column("mcp_tools", sa.Boolean(), server_default=sa.text("false"), nullable=False),
    )
    op.add_column(
        "prompts",
        sa.Column("as_tool", sa.Boolean(), server_default=sa.text("false"), nullable=False),
    )


def downgrade() -> None:
    op.drop_column("prompts", "as_tool")
    op.drop_column("tenants", "mcp_tools")
