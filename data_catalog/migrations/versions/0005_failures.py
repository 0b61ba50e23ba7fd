"""Failures: each failed or crashed flow run (scheduled or not), with its reason and whether
the configured alert reached anyone.

Revision ID: 0005_failures
Revises: 0004_training
"""

import sqlalchemy as sa
from alembic import op

revision = "0005_failures"
down_revision = "0004_training"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "failures",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("flow_run_id", sa.String(64), nullable=False, unique=True),
        sa.Column("flow_run_name", sa.String(200), nullable=True),
        sa.Column("flow", sa.String(200), nullable=False),
        sa.Column("deployment", sa.String(200), nullable=True),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("config_path", sa.Text, nullable=True),
        sa.Column("dataset", sa.String(200), nullable=True),
        sa.Column("alerts", sa.JSON, nullable=False),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("failures")
