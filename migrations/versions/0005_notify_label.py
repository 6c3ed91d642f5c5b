"""change notifications name the label that moved

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-21 08:30:00
"""

from collections.abc import Sequence

from alembic import op

from registry.migrations.sqlfile import run_sql_file, sql_text

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    run_sql_file("0005_notify_label_v2.sql")


def downgrade() -> None:
    op.execute("DROP TRIGGER notify_v2 ON change_log")
    op.execute("DROP FUNCTION registry_notify_change_v2()")
    # The v1 function and trigger, as 0001 created them.
    source = sql_text("0001_triggers_v1.sql")
    start = source.index("CREATE FUNCTION registry_notify_change_v1()")
    function = source[start : source.index("$$;", start) + 3]
    op.execute(function)
    op.execute(
        "CREATE TRIGGER notify_v1 AFTER INSERT ON change_log "
        "FOR EACH ROW EXECUTE FUNCTION registry_notify_change_v1()"
    )
