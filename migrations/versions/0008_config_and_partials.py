"""a version carries its model config and the locks of its partials (the exact child version each
partial tag was resolved to); the one-round-trip read of a served version returns both

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23 08:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from registry.migrations.sqlfile import run_sql_file

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("prompt_versions", sa.Column("config", postgresql.JSONB(), nullable=True))
    op.create_table(
        "prompt_partials",
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("prompt_id", sa.UUID(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("ref", sa.Text(), nullable=False),
        sa.Column("child_name", sa.Text(), nullable=False),
        sa.Column("child_prompt_id", sa.UUID(), nullable=False),
        sa.Column("child_version", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id", "prompt_id", "version"],
            ["prompt_versions.tenant_id", "prompt_versions.prompt_id", "prompt_versions.version"],
            name=op.f("fk_prompt_partials_tenant_id_prompt_id_version_prompt_versions"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id", "child_prompt_id", "child_version"],
            ["prompt_versions.tenant_id", "prompt_versions.prompt_id", "prompt_versions.version"],
            name=op.f("fk_prompt_partials_tenant_id_child_prompt_id_child_version_prompt_versions"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint(
            "tenant_id", "prompt_id", "version", "ref", name=op.f("pk_prompt_partials")
        ),
    )
    op.create_index(
        op.f("ix_prompt_partials_tenant_id_child_prompt_id_child_version"),
        "prompt_partials",
        ["tenant_id", "child_prompt_id", "child_version"],
    )
    run_sql_file("0008_partials_v1.sql")
    run_sql_file("0008_served_version_v2.sql")


def downgrade() -> None:
    op.execute("DROP FUNCTION registry_served_version_v2(uuid, text, text, integer)")
    op.drop_table("prompt_partials")
    op.drop_column("prompt_versions", "config")
