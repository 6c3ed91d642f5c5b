"""the OAuth issuers each tenant trusts, with the rules that map their tokens' claims to roles;
whether a tenant accepts API keys

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-23 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from registry.migrations.sqlfile import run_sql_file

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "tenant_issuers",
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("issuer", sa.Text(), nullable=False),
        sa.Column("rules", postgresql.JSONB(), nullable=False),
        sa.Column("introspection_client_id", sa.Text(), nullable=True),
        sa.Column("introspection_secret", sa.Text(), nullable=True),
        sa.Column("created_by", sa.Text(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_tenant_issuers_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", "issuer", name=op.f("pk_tenant_issuers")),
    )
    op.add_column(
        "tenants",
        sa.Column("api_keys", sa.Boolean(), server_default=sa.text("true"), nullable=False),
    )
    run_sql_file("0010_tenant_issuers_v1.sql")


def downgrade() -> None:
    op.execute("DROP TRIGGER notify_api_keys_switch_v1 ON tenants")
    op.execute("DROP FUNCTION registry_notify_api_keys_switch_v1()")
    op.drop_column("tenants", "api_keys")
    op.drop_table("tenant_issuers")
    op.execute("DROP FUNCTION registry_notify_tenant_auth_v1()")
