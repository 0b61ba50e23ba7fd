"""Reveals: a reviewer with the permission showing the personal data the policy masks in a
review item's text; each reveal is logged (who, which item, when).

Revision ID: 0007_reveals
Revises: 0006_labels
"""

import sqlalchemy as sa
from alembic import op

revision = "0007_reveals"
down_revision = "0006_labels"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "review_reveals",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column(
            "item_id", sa.Integer, sa.ForeignKey("review_items.id"), nullable=False, index=True
        ),
        sa.Column("reviewer", sa.String(200), nullable=False),
        sa.Column("revealed_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("review_reveals")
