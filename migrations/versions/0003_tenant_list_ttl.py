"""tenant list ttl

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21 06:25:07.145418
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("tenants", sa.Column("list_ttl_ms", sa.Integer(), nullable=True))
    op.create_check_constraint(
        op.f("ck_tenants_list_ttl_ms_positive"),
        "tenants",
        "list_ttl_ms IS NULL OR list_ttl_ms >= 0",
    )


def downgrade() -> None:
    op.drop_constraint(op.f("ck_tenants_list_ttl_ms_positive"), "tenants", type_="check")
    op.drop_column("tenants", "list_ttl_ms")
