"""each version keeps its prompts/list entry; an uncached page concatenates them; the page and
count functions are planned for each call's values

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-24 18:30:00
"""

from collections.abc import Sequence

from alembic import op

from registry.migrations.sqlfile import run_sql_file

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    run_sql_file("0015_served_entries_v1.sql")


def downgrade() -> None:
    op.execute("ALTER FUNCTION registry_served_count_v1(uuid, text) RESET plan_cache_mode")
    op.execute(
        "ALTER FUNCTION registry_served_page_v1(uuid, text, text, integer) RESET plan_cache_mode"
    )
    op.execute("DROP FUNCTION registry_served_entries_v1(uuid, text, text, integer)")
    op.execute("ALTER TABLE prompt_versions DROP COLUMN list_entry")
