"""notify on tenant deletion and key changes

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21 06:10:00
"""

from collections.abc import Sequence

from alembic import op

from registry.migrations.sqlfile import run_sql_file

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    run_sql_file("0002_notify_tenants_keys_v1.sql")


def downgrade() -> None:
    op.execute("DROP TRIGGER notify_key_v1 ON api_keys")
    op.execute("DROP FUNCTION registry_notify_key_change_v1()")
    op.execute("DROP TRIGGER notify_gone_v1 ON tenants")
    op.execute("DROP FUNCTION registry_notify_tenant_gone_v1()")
