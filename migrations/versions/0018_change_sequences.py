"""a tenant's change sequence is a row of its own (change_sequences), no longer its tenants row

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-25 06:30:00
"""

from collections.abc import Sequence

from alembic import op

from registry.migrations.sqlfile import run_sql_file

revision: str = "0018"
down_revision: str | Sequence[str] | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    run_sql_file("0018_change_sequences_v1.sql")


def downgrade() -> None:
    op.execute("LOCK TABLE change_sequences IN SHARE ROW EXCLUSIVE MODE")
    op.execute(
        "UPDATE tenants t SET change_seq = s.seq FROM change_sequences s WHERE s.tenant_id = t.id"
    )
    op.execute("DROP TRIGGER assign_seq_v2 ON change_log")
    op.execute(
        "CREATE TRIGGER assign_seq_v1 BEFORE INSERT ON change_log "
        "FOR EACH ROW EXECUTE FUNCTION registry_change_seq_v1()"
    )
    op.execute("DROP FUNCTION registry_change_seq_v2()")
    op.execute("DROP TRIGGER tenant_sequence_v1 ON tenants")
    op.execute("DROP FUNCTION registry_tenant_sequence_v1()")
    op.execute("DROP TABLE change_sequences")
