"""skills: a tenant's agent instructions as versioned folders of files, with labels (expand only)

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-26 05:28:08.143693
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from registry.migrations.sqlfile import run_sql_file

revision: str = "0021"
down_revision: str | Sequence[str] | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "skills",
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("id", sa.UUID(), server_default=sa.text("gen_random_uuid()"), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("latest_version", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("archived_at", sa.DateTime(timezone=True), nullable=True),
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
            "name ~ '^[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$' AND name !~ '--'",
            name=op.f("ck_skills_name_format"),
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_skills_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", "id", name=op.f("pk_skills")),
        sa.UniqueConstraint("tenant_id", "name", name=op.f("uq_skills_tenant_id_name")),
    )
    op.create_table(
        "skill_versions",
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("skill_id", sa.UUID(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("frontmatter", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column(
            "locks",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'[]'::jsonb"),
            nullable=False,
        ),
        sa.Column("manifest_sha256", sa.LargeBinary(), nullable=False),
        sa.Column("commit_message", sa.Text(), nullable=True),
        sa.Column("author", sa.Text(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "octet_length(manifest_sha256) = 32",
            name=op.f("ck_skill_versions_manifest_sha256_length"),
        ),
        sa.CheckConstraint("version >= 1", name=op.f("ck_skill_versions_version_positive")),
        sa.ForeignKeyConstraint(
            ["tenant_id", "skill_id"],
            ["skills.tenant_id", "skills.id"],
            name=op.f("fk_skill_versions_tenant_id_skill_id_skills"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", "skill_id", "version", name=op.f("pk_skill_versions")),
    )
    op.create_table(
        "skill_files",
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("skill_id", sa.UUID(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("sha256", sa.LargeBinary(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("mime_type", sa.Text(), nullable=False),
        sa.CheckConstraint("octet_length(sha256) = 32", name=op.f("ck_skill_files_sha256_length")),
        sa.CheckConstraint("size >= 0", name=op.f("ck_skill_files_size_not_negative")),
        sa.ForeignKeyConstraint(
            ["tenant_id", "sha256"],
            ["blobs.tenant_id", "blobs.sha256"],
            name=op.f("fk_skill_files_tenant_id_sha256_blobs"),
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id", "skill_id", "version"],
            ["skill_versions.tenant_id", "skill_versions.skill_id", "skill_versions.version"],
            name=op.f("fk_skill_files_tenant_id_skill_id_version_skill_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "tenant_id", "skill_id", "version", "path", name=op.f("pk_skill_files")
        ),
    )
    op.create_table(
        "skill_labels",
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("skill_id", sa.UUID(), nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("skill_name", sa.Text(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_by", sa.Text(), nullable=False),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "label ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'", name=op.f("ck_skill_labels_label_format")
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id", "skill_id", "version"],
            ["skill_versions.tenant_id", "skill_versions.skill_id", "skill_versions.version"],
            name=op.f("fk_skill_labels_tenant_id_skill_id_version_skill_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", "skill_id", "label", name=op.f("pk_skill_labels")),
    )
    op.create_index(
        "ix_skill_labels_tenant_id_label_skill_name",
        "skill_labels",
        ["tenant_id", "label", "skill_name"],
        unique=False,
    )
    run_sql_file("0021_skills_v1.sql")


def downgrade() -> None:
    op.execute("DROP TRIGGER webhook_outbox_v3 ON change_log")
    op.execute(
        "CREATE TRIGGER webhook_outbox_v2 AFTER INSERT ON change_log "
        "FOR EACH ROW EXECUTE FUNCTION registry_webhook_outbox_v2()"
    )
    op.execute("DROP FUNCTION registry_webhook_outbox_v3()")
    op.drop_index("ix_skill_labels_tenant_id_label_skill_name", table_name="skill_labels")
    op.drop_table("skill_labels")
    op.drop_table("skill_files")
    op.drop_table("skill_versions")
    op.drop_table("skills")
