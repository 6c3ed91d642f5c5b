"""a request's caller key is read in the round trip that finds and enters its tenant
(registry_api_key_v1); expand only

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-26 20:40:00
"""

from collections.abc import Sequence

from alembic import op

from registry.migrations.sqlfile import run_sql_file

revision: str = "0024"
down_revision: str | Sequence[str] | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    run_sql_file("0024_api_key_v1.sql")


def downgrade() -> None:
    op.execute("DROP FUNCTION registry_api_key_v1(uuid, bytea)")
