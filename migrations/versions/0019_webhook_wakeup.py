"""workers look for webhook deliveries when a change queued some, not after every change

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-25 09:30:00
"""

from collections.abc import Sequence

from alembic import op

from registry.migrations.sqlfile import run_sql_file

revision: str = "0019"
down_revision: str | Sequence[str] | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    run_sql_file("0019_webhook_wakeup_v1.sql")


def downgrade() -> None:
    op.execute("DROP TRIGGER webhook_outbox_v2 ON change_log")
    op.execute(
        "CREATE TRIGGER webhook_outbox_v1 AFTER INSERT ON change_log "
        "FOR EACH ROW EXECUTE FUNCTION registry_webhook_outbox_v1()"
    )
    op.execute("DROP FUNCTION registry_webhook_outbox_v2()")
