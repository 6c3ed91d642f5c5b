"""change requests: label moves reviewed and applied as one release; a tenant's approvals per
label; test cases stored with prompts and skills; a change's detail (expand only)

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-26 08:45:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from registry.migrations.sqlfile import run_sql_file

revision: str = "0023"
down_revision: str | Sequence[str] | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_EMPTY_OBJECT = sa.text("'{}'::jsonb")
_EMPTY_LIST = sa.text("'[]'::jsonb")


def upgrade() -> None:
    op.add_column(
        "tenants",
        sa.Column("approvals", postgresql.JSONB(), server_default=_EMPTY_OBJECT, nullable=False),
    )
    op.add_column(
        "prompts",
        sa.Column("tests", postgresql.JSONB(), server_default=_EMPTY_LIST, nullable=False),
    )
    op.add_column(
        "skills", sa.Column("tests", postgresql.JSONB(), server_default=_EMPTY_LIST, nullable=False)
    )
    op.add_column("change_log", sa.Column("detail", postgresql.JSONB(), nullable=True))
    op.add_column("change_pending", sa.Column("detail", postgresql.JSONB(), nullable=True))
    op.create_table(
        "change_requests",
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.Text(), server_default=sa.text("'open'"), nullable=False),
        sa.Column("author", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("revision", sa.Integer(), server_default=sa.text("1"), nullable=False),
        sa.Column("apply_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("override_by", sa.Text(), nullable=True),
        sa.Column("override_reason", sa.Text(), nullable=True),
        sa.Column("override_revision", sa.Integer(), nullable=True),
        sa.Column("stale_reason", sa.Text(), nullable=True),
        sa.Column("applied_by", sa.Text(), nullable=True),
        sa.Column("applied_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "state IN ('open', 'approved', 'applied', 'rejected', 'withdrawn', 'stale')",
            name=op.f("ck_change_requests_state_known"),
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_change_requests_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", "id", name=op.f("pk_change_requests")),
    )
    op.create_index(
        "ix_change_requests_due", "change_requests", ["tenant_id", "apply_at"], unique=False,
        postgresql_where=sa.text("state = 'approved' AND apply_at IS NOT NULL"),
    )  # fmt: skip
    op.create_index(
        "ix_change_requests_tenant_id_state", "change_requests", ["tenant_id", "state", "id"],
        unique=False,
    )  # fmt: skip
    op.create_table(
        "change_request_moves",
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("request_id", sa.BigInteger(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("before", sa.Integer(), nullable=True),
        sa.CheckConstraint(
            "kind IN ('prompt', 'skill')", name=op.f("ck_change_request_moves_kind_known")
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id", "request_id"],
            ["change_requests.tenant_id", "change_requests.id"],
            name=op.f("fk_change_request_moves_tenant_id_change_requests"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "tenant_id", "request_id", "position", name=op.f("pk_change_request_moves")
        ),
        sa.UniqueConstraint(
            "tenant_id",
            "request_id",
            "kind",
            "name",
            "label",
            name=op.f("uq_change_request_moves_tenant_id_request_id_kind_name_label"),
        ),
    )
    op.create_table(
        "change_request_reviews",
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("request_id", sa.BigInteger(), nullable=False),
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=True),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "kind IN ('approve', 'reject', 'comment', 'withdraw', 'override', 'apply', 'stale', "
            "'edit')",
            name=op.f("ck_change_request_reviews_kind_known"),
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id", "request_id"],
            ["change_requests.tenant_id", "change_requests.id"],
            name=op.f("fk_change_request_reviews_tenant_id_change_requests"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "tenant_id", "request_id", "id", name=op.f("pk_change_request_reviews")
        ),
    )
    run_sql_file("0023_change_requests_v1.sql")


def downgrade() -> None:
    for table, trigger, function in (
        ("change_log", "webhook_outbox_v4", "registry_webhook_outbox_v4"),
        ("change_log", "notify_v3", "registry_notify_change_v3"),
    ):
        op.execute(f"DROP TRIGGER {trigger} ON {table}")
        op.execute(f"DROP FUNCTION {function}()")
    op.execute(
        "CREATE TRIGGER webhook_outbox_v3 AFTER INSERT ON change_log "
        "FOR EACH ROW EXECUTE FUNCTION registry_webhook_outbox_v3()"
    )
    op.execute(
        "CREATE TRIGGER notify_v2 AFTER INSERT ON change_log "
        "FOR EACH ROW EXECUTE FUNCTION registry_notify_change_v2()"
    )
    op.execute("DROP TRIGGER commit_change_v2 ON change_pending")
    op.execute("DROP FUNCTION registry_commit_change_v2()")
    op.execute(
        "CREATE CONSTRAINT TRIGGER commit_change_v1 AFTER INSERT ON change_pending "
        "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION registry_commit_change_v1()"
    )
    op.drop_table("change_request_reviews")
    op.drop_table("change_request_moves")
    op.drop_index("ix_change_requests_tenant_id_state", table_name="change_requests")
    op.drop_index("ix_change_requests_due", table_name="change_requests")
    op.drop_table("change_requests")
    op.drop_column("change_pending", "detail")
    op.drop_column("change_log", "detail")
    op.drop_column("skills", "tests")
    op.drop_column("prompts", "tests")
    op.drop_column("tenants", "approvals")
