"""web console sessions, kept on the server: the browser holds only an opaque cookie

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-23 20:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from registry.migrations.sqlfile import run_sql_file

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "console_sessions",
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("key_id", sa.UUID(), nullable=True),
        sa.Column("subject", sa.Text(), nullable=True),
        sa.Column("role", sa.Text(), nullable=False),
        sa.Column("csrf", sa.Text(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_console_sessions_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id", "key_id"],
            ["api_keys.tenant_id", "api_keys.id"],
            name=op.f("fk_console_sessions_tenant_id_api_keys"),
            ondelete="CASCADE",
        ),
        sa.CheckConstraint(
            "(key_id IS NULL) <> (subject IS NULL)",
            name=op.f("ck_console_sessions_one_principal"),
        ),
        sa.PrimaryKeyConstraint("tenant_id", "id", name=op.f("pk_console_sessions")),
    )
    run_sql_file("0011_console_sessions_v1.sql")


def downgrade() -> None:
    op.drop_table("console_sessions")
