"""Exports: the sha256 of each export's manifest, so that readers check an export against
the catalog and not only against itself.

Revision ID: 0008_exports
Revises: 0007_reveals
"""

import sqlalchemy as sa
from alembic import op

revision = "0008_exports"
down_revision = "0007_reveals"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "exports",
        sa.Column("digest", sa.String(64), primary_key=True),
        sa.Column(
            "dataset_hash",
            sa.String(64),
            sa.ForeignKey("versions.dataset_hash"),
            nullable=False,
            index=True,
        ),
        sa.Column("format", sa.String(20), nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("exports")
