"""webhook deliveries are leased for the time of a send, so no transaction is held across HTTP

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-26 03:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | Sequence[str] | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Expand only: the previous release's dispatcher never reads the column and keeps working.
    op.add_column(
        "webhook_deliveries", sa.Column("leased_until", sa.DateTime(timezone=True), nullable=True)
    )


def downgrade() -> None:
    op.drop_column("webhook_deliveries", "leased_until")
