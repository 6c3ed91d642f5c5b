"""the one-round-trip read of a served version walks partial locks only when the version has any

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-24 00:30:00
"""

from collections.abc import Sequence

from alembic import op

from registry.migrations.sqlfile import run_sql_file

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    run_sql_file("0013_served_version_v3.sql")


def downgrade() -> None:
    op.execute("DROP FUNCTION registry_served_version_v3(uuid, text, text, integer)")
