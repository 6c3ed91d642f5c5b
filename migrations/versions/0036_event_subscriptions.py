"""the Events extension's webhook subscriptions (events/subscribe); expand only

Revision ID: 0036
Revises: 0035
Create Date: 2026-11-29 15:20:00
"""

from collections.abc import Sequence

from alembic import op

from registry.migrations.sqlfile import run_sql_file

revision: str = "0036"
down_revision: str | Sequence[str] | None = "0035"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    run_sql_file("0036_event_subscriptions_v1.sql")


def downgrade() -> None:
    op.execute("DROP TRIGGER webhook_wakeup_events_v1 ON change_log")
    op.execute("DROP FUNCTION registry_event_wakeup_v1()")
    op.execute("DROP TABLE event_subscriptions")
