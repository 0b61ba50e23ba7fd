"""Table definitions used by the queries. Migrations under migrations/versions create them."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    DateTime,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()

datasets = Table(
    "datasets",
    metadata,
    Column("name", String(200), primary_key=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

versions = Table(
    "versions",
    metadata,
    Column("dataset_hash", String(64), primary_key=True),
    Column("name", String(200), ForeignKey("datasets.name"), nullable=False, index=True),
    Column("parent_hash", String(64), nullable=True),
    Column("config_hash", String(64), nullable=False),
    Column("code_version", String(200), nullable=False),
    Column("run_id", String(100), nullable=False),
    Column("path", Text, nullable=False),  # relative to the work folder
    Column("records", BigInteger, nullable=False),
    Column("split_counts", JSON, nullable=False),
    Column("status", String(20), nullable=False),  # published | withdrawn
    Column("status_reason", Text, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

shards = Table(
    "shards",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column(
        "dataset_hash", String(64), ForeignKey("versions.dataset_hash"), nullable=False, index=True
    ),
    Column("path", Text, nullable=False),
    Column("split", String(20), nullable=False),
    Column("rows", BigInteger, nullable=False),
    Column("bytes", BigInteger, nullable=False),
    Column("sha256", String(64), nullable=False),
    UniqueConstraint("dataset_hash", "path"),
)

version_sources = Table(
    "version_sources",
    metadata,
    Column("dataset_hash", String(64), ForeignKey("versions.dataset_hash"), primary_key=True),
    Column("source", String(200), primary_key=True),
    Column("license", String(200), nullable=False),
    Column("consent", String(50), nullable=False),
    Column("owner", Text, nullable=False),
    Column("declaration", JSON, nullable=False),
)

runs = Table(
    "runs",
    metadata,
    Column("run_id", String(100), primary_key=True),
    Column("name", String(200), nullable=False, index=True),
    Column("status", String(20), nullable=False),  # running | succeeded | failed
    Column("config_hash", String(64), nullable=False),
    Column("dataset_hash", String(64), nullable=True),
    Column("created_version", Integer, nullable=True),  # 1: this run added the version
    Column("counts", JSON, nullable=True),
    Column("error", Text, nullable=True),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True), nullable=True),
)
