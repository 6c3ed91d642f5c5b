"""a library's prompts served to its subscribers (reads, fan-out); expand only

Revision ID: 0035
Revises: 0034
Create Date: 2026-11-29 09:25:00
"""

from collections.abc import Sequence

from alembic import op

from registry.migrations.sqlfile import run_sql_file

revision: str = "0035"
down_revision: str | Sequence[str] | None = "0034"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    run_sql_file("0035_library_serving_v1.sql")


def downgrade() -> None:
    op.execute("DROP TRIGGER library_subscriptions_count_v1 ON library_subscriptions")
    op.execute("DROP TRIGGER library_offers_count_v1 ON library_offers")
    op.execute("DROP FUNCTION registry_library_counts_v1()")
    op.execute("ALTER TABLE tenants DROP COLUMN library_reads, DROP COLUMN library_offers")
    op.execute("DROP TRIGGER library_subscriptions_notify_v1 ON library_subscriptions")
    op.execute("DROP TRIGGER library_offers_notify_v1 ON library_offers")
    op.execute("DROP FUNCTION registry_library_notify_v1()")
    op.execute("DROP FUNCTION registry_library_skills_v1(uuid, uuid, text, text, integer)")
    op.execute("DROP FUNCTION registry_library_blobs_v1(uuid, uuid, bytea[])")
    op.execute("DROP FUNCTION registry_library_subscriptions_v1(uuid)")
    op.execute("DROP FUNCTION registry_library_subscribers_v1(uuid)")
    op.execute("DROP FUNCTION registry_library_served_version_v1(uuid, uuid, text)")
    op.execute("DROP FUNCTION registry_library_count_v1(uuid, uuid)")
    op.execute("DROP FUNCTION registry_library_entries_v1(uuid, uuid, text, integer)")
    op.execute("DROP FUNCTION registry_library_published_v1(uuid, uuid, text, integer)")
    op.execute("DROP FUNCTION registry_library_reads_v1(uuid)")
