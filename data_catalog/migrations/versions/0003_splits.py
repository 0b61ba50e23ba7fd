"""Splits and contamination: test-set locks with their frozen membership, time cutoffs frozen
at a dataset's first publish, and registered protected evaluation sets.

Revision ID: 0003_splits
Revises: 0002_governance
"""

import sqlalchemy as sa
from alembic import op

revision = "0003_splits"
down_revision = "0002_governance"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "test_locks",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column(
            "name", sa.String(200), sa.ForeignKey("datasets.name"), nullable=False, index=True
        ),
        sa.Column(
            "dataset_hash", sa.String(64), sa.ForeignKey("versions.dataset_hash"), nullable=False
        ),
        sa.Column("records", sa.BigInteger, nullable=False),
        sa.Column("locked_by", sa.String(200), nullable=True),
        sa.Column("note", sa.Text, nullable=True),
        sa.Column("locked_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "locked_test_records",
        sa.Column("lock_id", sa.Integer, sa.ForeignKey("test_locks.id"), primary_key=True),
        sa.Column("record_id", sa.String(32), primary_key=True),
    )
    op.create_table(
        "split_cutoffs",
        sa.Column("name", sa.String(200), sa.ForeignKey("datasets.name"), primary_key=True),
        sa.Column("cutoffs", sa.JSON, nullable=False),
        sa.Column("dataset_hash", sa.String(64), nullable=False),
        sa.Column("frozen_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "eval_sets",
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("text_field", sa.String(200), nullable=False),
        sa.Column("items", sa.Integer, nullable=False),
        sa.Column("files", sa.JSON, nullable=False),
        sa.Column("settings", sa.JSON, nullable=False),
        sa.Column("registered_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    for table in ("eval_sets", "split_cutoffs", "locked_test_records", "test_locks"):
        op.drop_table(table)
