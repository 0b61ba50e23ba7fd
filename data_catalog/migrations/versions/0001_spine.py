"""The spine: datasets, versions, shards, the sources of each version, runs.

Revision ID: 0001_spine
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001_spine"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "datasets",
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "versions",
        sa.Column("dataset_hash", sa.String(64), primary_key=True),
        sa.Column("name", sa.String(200), sa.ForeignKey("datasets.name"), nullable=False),
        sa.Column("parent_hash", sa.String(64), nullable=True),
        sa.Column("config_hash", sa.String(64), nullable=False),
        sa.Column("code_version", sa.String(200), nullable=False),
        sa.Column("run_id", sa.String(100), nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("records", sa.BigInteger, nullable=False),
        sa.Column("split_counts", sa.JSON, nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("status_reason", sa.Text, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_versions_name", "versions", ["name"])
    op.create_table(
        "shards",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column(
            "dataset_hash", sa.String(64), sa.ForeignKey("versions.dataset_hash"), nullable=False
        ),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("split", sa.String(20), nullable=False),
        sa.Column("rows", sa.BigInteger, nullable=False),
        sa.Column("bytes", sa.BigInteger, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.UniqueConstraint("dataset_hash", "path"),
    )
    op.create_index("ix_shards_dataset_hash", "shards", ["dataset_hash"])
    op.create_table(
        "version_sources",
        sa.Column(
            "dataset_hash", sa.String(64), sa.ForeignKey("versions.dataset_hash"), primary_key=True
        ),
        sa.Column("source", sa.String(200), primary_key=True),
        sa.Column("license", sa.String(200), nullable=False),
        sa.Column("consent", sa.String(50), nullable=False),
        sa.Column("owner", sa.Text, nullable=False),
        sa.Column("declaration", sa.JSON, nullable=False),
    )
    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(100), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("config_hash", sa.String(64), nullable=False),
        sa.Column("dataset_hash", sa.String(64), nullable=True),
        sa.Column("created_version", sa.Integer, nullable=True),
        sa.Column("counts", sa.JSON, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_runs_name", "runs", ["name"])


def downgrade() -> None:
    for table in ("runs", "version_sources", "shards", "versions", "datasets"):
        op.drop_table(table)
