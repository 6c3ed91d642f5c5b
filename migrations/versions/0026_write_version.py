"""a prompt's new version written by one SQL function, in the caller's transaction
(registry_version_rows_v1) or as the plain route's whole write in one call
(registry_write_version_v1); expand only

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-28 04:00:00
"""

from collections.abc import Sequence

from alembic import op

from registry.migrations.sqlfile import run_sql_file

revision: str = "0026"
down_revision: str | Sequence[str] | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    run_sql_file("0026_write_version_v1.sql")


def downgrade() -> None:
    op.execute(
        "DROP FUNCTION registry_write_version_v1(uuid, boolean, uuid, bytea, text[], text, integer,"
        " bytea, text, text, text, text, text, text, text, text, text, text)"
    )
    op.execute(
        "DROP FUNCTION registry_version_rows_v1(uuid, uuid, integer, bytea, text, text, text, text,"
        " text, text, text, text, text, text, text, text, text, text, text[])"
    )
