"""each label row carries its version's list entry and its prompt's archived state, so an uncached
prompts/list page reads the label index alone

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-24 21:30:00
"""

from collections.abc import Sequence

from alembic import op

from registry.migrations.sqlfile import run_sql_file

revision: str = "0016"
down_revision: str | Sequence[str] | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    run_sql_file("0016_label_entries_v1.sql")


def downgrade() -> None:
    op.execute("DROP FUNCTION registry_served_count_v2(uuid, text)")
    op.execute("DROP FUNCTION registry_served_entries_v2(uuid, text, text, integer)")
    op.execute("DROP TRIGGER prompt_archived_v1 ON prompts")
    op.execute("DROP FUNCTION registry_prompt_archived_v1()")
    op.execute("DROP TRIGGER label_served_v1 ON labels")
    op.execute("DROP FUNCTION registry_label_served_v1()")
    op.execute("ALTER TABLE labels DROP COLUMN archived, DROP COLUMN list_entry")
