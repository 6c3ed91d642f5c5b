"""webhook payloads name the kind of artifact a change is about (artifact: prompt or skill);
expand only

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-29 04:00:00
"""

from collections.abc import Sequence

from alembic import op

from registry.migrations.sqlfile import run_sql_file

revision: str = "0028"
down_revision: str | Sequence[str] | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    run_sql_file("0028_artifact_in_events_v1.sql")


def downgrade() -> None:
    op.execute("DROP TRIGGER webhook_outbox_v5 ON change_log")
    op.execute("DROP FUNCTION registry_webhook_outbox_v5()")
    op.execute(
        "CREATE TRIGGER webhook_outbox_v4 AFTER INSERT ON change_log "
        "FOR EACH ROW EXECUTE FUNCTION registry_webhook_outbox_v4()"
    )
