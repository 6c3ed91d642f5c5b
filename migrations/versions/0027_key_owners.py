"""api keys name their owner (approvals count people); the public keys the registry has signed
with (signing_keys); expand only

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-28 23:40:00
"""

from collections.abc import Sequence

from alembic import op

from registry.migrations.sqlfile import run_sql_file

revision: str = "0027"
down_revision: str | Sequence[str] | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    run_sql_file("0027_key_owners_v1.sql")


def downgrade() -> None:
    op.execute("DROP TABLE signing_keys")
    op.execute("ALTER TABLE api_keys DROP COLUMN owner")
