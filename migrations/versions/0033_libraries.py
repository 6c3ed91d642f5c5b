"""shared libraries: a library's offers and a subscriber's acceptances, each side's consent under
its own tenant's row-level security; expand only

Revision ID: 0033
Revises: 0032
Create Date: 2026-11-29 09:20:00
"""

from collections.abc import Sequence

from alembic import op

from registry.migrations.sqlfile import run_sql_file

revision: str = "0033"
down_revision: str | Sequence[str] | None = "0032"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    run_sql_file("0033_libraries_v1.sql")


def downgrade() -> None:
    op.execute("DROP FUNCTION registry_library_grant_v1(uuid)")
    op.execute("DROP TABLE library_subscriptions")
    op.execute("DROP TABLE library_offers")
