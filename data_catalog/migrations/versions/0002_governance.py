"""Governance: the reviewer queue, its append-only decisions, deletion requests, and when a
version was withdrawn or purged.

Revision ID: 0002_governance
Revises: 0001_spine
"""

import sqlalchemy as sa
from alembic import op

revision = "0002_governance"
down_revision = "0001_spine"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "review_items",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("record_id", sa.String(32), nullable=False),
        sa.Column("source_content_hash", sa.String(32), nullable=False),
        sa.Column("review_hash", sa.String(32), nullable=False),
        sa.Column("reason", sa.String(64), nullable=False),
        sa.Column("source", sa.String(200), nullable=False, index=True),
        sa.Column("group_hash", sa.String(32), nullable=True),
        sa.Column("dataset", sa.String(200), nullable=False),
        sa.Column("run_id", sa.String(100), nullable=False),
        sa.Column("evidence", sa.Text, nullable=True),
        sa.Column("text", sa.Text, nullable=True),
        sa.Column("metadata", sa.Text, nullable=True),
        sa.Column("group", sa.Text, nullable=True),
        sa.Column("label", sa.Text, nullable=True),
        sa.Column("status", sa.String(20), nullable=False, index=True),
        sa.Column("reviewer", sa.String(200), nullable=True),
        sa.Column("note", sa.Text, nullable=True),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("erased_by_request", sa.Integer, nullable=True),
        sa.UniqueConstraint("record_id", "source_content_hash", "reason", "review_hash"),
    )
    op.create_table(
        "review_decisions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("item_id", sa.Integer, sa.ForeignKey("review_items.id"), nullable=False),
        sa.Column("decision", sa.String(20), nullable=False),
        sa.Column("reviewer", sa.String(200), nullable=False),
        sa.Column("note", sa.Text, nullable=True),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "deletion_requests",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("requested_by", sa.String(200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.add_column("versions", sa.Column("withdrawn_at", sa.DateTime(timezone=True)))
    op.add_column("versions", sa.Column("purged_at", sa.DateTime(timezone=True)))
    # a source whose records were all dropped by the policy is listed with 0
    op.add_column("version_sources", sa.Column("records", sa.BigInteger))


def downgrade() -> None:
    with op.batch_alter_table("version_sources") as batch:
        batch.drop_column("records")
    with op.batch_alter_table("versions") as batch:
        batch.drop_column("purged_at")
        batch.drop_column("withdrawn_at")
    op.drop_table("deletion_requests")
    op.drop_table("review_decisions")
    op.drop_table("review_items")
