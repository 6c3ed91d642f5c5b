"""the number of prompts each label serves, kept with the writes (label_counts, its trigger) and
read by registry_served_count_v3; expand only

Revision ID: 0029
Revises: 0028
Create Date: 2026-11-29 04:10:00
"""

from collections.abc import Sequence

from alembic import op

from registry.migrations.sqlfile import run_sql_file

revision: str = "0029"
down_revision: str | Sequence[str] | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    run_sql_file("0029_label_counts_v1.sql")


def downgrade() -> None:
    op.execute("DROP FUNCTION registry_served_count_v3(uuid, text)")
    for name in ("added", "removed", "archived"):
        op.execute(f"DROP TRIGGER label_count_{name}_v1 ON labels")
        op.execute(f"DROP FUNCTION registry_label_count_{name}_v1()")
    op.execute("DROP TABLE label_counts")
