"""Labels: the label a reviewer chose when approving a label conflict (on the item and on the
decision), and every reviewer's label of an item, for reviewer agreement.

Revision ID: 0006_labels
Revises: 0005_failures
"""

import sqlalchemy as sa
from alembic import op

revision = "0006_labels"
down_revision = "0005_failures"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("review_items", sa.Column("adjudicated_label", sa.String(), nullable=True))
    op.add_column("review_decisions", sa.Column("label", sa.String(), nullable=True))
    op.create_table(
        "review_labels",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column(
            "item_id", sa.Integer, sa.ForeignKey("review_items.id"), nullable=False, index=True
        ),
        sa.Column("reviewer", sa.String(200), nullable=False),
        sa.Column("label", sa.String(), nullable=False),
        sa.Column("labelled_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("item_id", "reviewer"),
    )


def downgrade() -> None:
    op.drop_table("review_labels")
    with op.batch_alter_table("review_decisions") as batch:
        batch.drop_column("label")
    with op.batch_alter_table("review_items") as batch:
        batch.drop_column("adjudicated_label")
