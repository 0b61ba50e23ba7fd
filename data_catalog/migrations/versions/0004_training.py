"""Training runs: each run of the torch training stage, registered against the dataset
version it trained on, with its manifest, best step and test metrics.

Revision ID: 0004_training
Revises: 0003_splits
"""

import sqlalchemy as sa
from alembic import op

revision = "0004_training"
down_revision = "0003_splits"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "training_runs",
        sa.Column("run_id", sa.String(100), primary_key=True),
        sa.Column(
            "dataset_hash",
            sa.String(64),
            sa.ForeignKey("versions.dataset_hash"),
            nullable=False,
            index=True,
        ),
        sa.Column("name", sa.String(200), sa.ForeignKey("datasets.name"), nullable=False),
        sa.Column("objective", sa.String(40), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("manifest_path", sa.Text, nullable=False),
        sa.Column("manifest_sha256", sa.String(64), nullable=True),
        sa.Column("config_hash", sa.String(64), nullable=False),
        sa.Column("world_size", sa.Integer, nullable=False),
        sa.Column("best_step", sa.Integer, nullable=True),
        sa.Column("test_metrics", sa.JSON, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("training_runs")
