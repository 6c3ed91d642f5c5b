"""a session's end is announced, so the worker holding its stream ends it; sessions remember the
address of an anonymous client, so that each address holds a bounded number

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23 01:25:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from registry.migrations.sqlfile import run_sql_file

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("mcp_sessions", sa.Column("client_address", sa.Text(), nullable=True))
    op.create_index(
        op.f("ix_mcp_sessions_tenant_id_key_id_client_address"),
        "mcp_sessions",
        ["tenant_id", "key_id", "client_address"],
    )
    run_sql_file("0007_notify_session_end_v1.sql")


def downgrade() -> None:
    op.execute("DROP TRIGGER notify_session_end_v1 ON mcp_sessions")
    op.execute("DROP FUNCTION registry_notify_session_end_v1()")
    op.drop_index(op.f("ix_mcp_sessions_tenant_id_key_id_client_address"), "mcp_sessions")
    op.drop_column("mcp_sessions", "client_address")
