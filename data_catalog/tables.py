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
    Column("withdrawn_at", DateTime(timezone=True), nullable=True),
    Column("purged_at", DateTime(timezone=True), nullable=True),  # shards deleted
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
    Column("records", BigInteger, nullable=True),  # how many of its records the version holds
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

review_items = Table(
    "review_items",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("record_id", String(32), nullable=False),
    Column("source_content_hash", String(32), nullable=False),
    # xxh3-128 of all a reviewer sees (text, metadata, group, label, terms): a decision holds
    # for exactly that, and a change anywhere in the record is reviewed again
    Column("review_hash", String(32), nullable=False),
    Column("reason", String(64), nullable=False),
    Column("source", String(200), nullable=False, index=True),
    Column("group_hash", String(32), nullable=True),  # xxh3-128 of the group: erasure by group
    Column("dataset", String(200), nullable=False),
    Column("run_id", String(100), nullable=False),  # the run that queued it
    Column("evidence", Text, nullable=True),  # JSON, redacted
    Column("text", Text, nullable=True),  # secrets masked
    Column("metadata", Text, nullable=True),  # secrets masked
    Column("group", Text, nullable=True),  # secrets masked
    Column("label", Text, nullable=True),  # secrets masked
    Column("status", String(20), nullable=False, index=True),  # pending | approved | rejected
    Column("reviewer", String(200), nullable=True),
    Column("note", Text, nullable=True),
    Column("decided_at", DateTime(timezone=True), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    # a deletion request blanked text and metadata; the decision trail stays
    Column("erased_by_request", Integer, nullable=True),
    # the label an approval chose (label_conflict items): the kept record is published with it
    Column("adjudicated_label", String, nullable=True),
    UniqueConstraint("record_id", "source_content_hash", "reason", "review_hash"),
)

# Append-only: who decided what, when, and why. An item is decided once.
review_decisions = Table(
    "review_decisions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("item_id", Integer, ForeignKey("review_items.id"), nullable=False),
    Column("decision", String(20), nullable=False),  # approved | rejected
    Column("reviewer", String(200), nullable=False),
    Column("note", Text, nullable=True),
    Column("decided_at", DateTime(timezone=True), nullable=False),
    Column("label", String, nullable=True),  # the label an approval chose
)

# Each reviewer's label of an item (deciding with a label, or labelling without deciding): one
# per reviewer and item, replaced when they label it again. Reviewer agreement reads these.
review_labels = Table(
    "review_labels",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("item_id", Integer, ForeignKey("review_items.id"), nullable=False, index=True),
    Column("reviewer", String(200), nullable=False),
    Column("label", String, nullable=False),
    Column("labelled_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("item_id", "reviewer"),
)

# Append-only: each time a reviewer with the permission revealed the personal data the policy
# masks in an item (`review.reveal`).
review_reveals = Table(
    "review_reveals",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("item_id", Integer, ForeignKey("review_items.id"), nullable=False, index=True),
    Column("reviewer", String(200), nullable=False),
    Column("revealed_at", DateTime(timezone=True), nullable=False),
)

# Every `thresher export`: the sha256 of its export_manifest.json, which lists every file of
# the export with its sha256. An export is trusted only as the catalog (or this digest) names it.
exports = Table(
    "exports",
    metadata,
    Column("digest", String(64), primary_key=True),
    Column("dataset_hash", String(64), ForeignKey("versions.dataset_hash"), nullable=False),
    Column("format", String(20), nullable=False),
    Column("path", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

deletion_requests = Table(
    "deletion_requests",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(20), nullable=False),  # source | group | record_id | content_hash
    Column("value", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("requested_by", String(200), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

# A frozen test set: its records stay in test in every later version of the dataset name.
# The newest lock of a name is the one in force; earlier ones stay as history.
test_locks = Table(
    "test_locks",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(200), ForeignKey("datasets.name"), nullable=False, index=True),
    Column("dataset_hash", String(64), ForeignKey("versions.dataset_hash"), nullable=False),
    Column("records", BigInteger, nullable=False),
    Column("locked_by", String(200), nullable=True),
    Column("note", Text, nullable=True),
    Column("locked_at", DateTime(timezone=True), nullable=False),
)

# Kept in the catalog, not read from the version's shards: a purge must not unlock them.
locked_test_records = Table(
    "locked_test_records",
    metadata,
    Column("lock_id", Integer, ForeignKey("test_locks.id"), primary_key=True),
    Column("record_id", String(32), primary_key=True),
)

# Time cutoffs computed from quantiles, frozen at the first publish of a dataset name.
split_cutoffs = Table(
    "split_cutoffs",
    metadata,
    Column("name", String(200), ForeignKey("datasets.name"), primary_key=True),
    Column("cutoffs", JSON, nullable=False),  # {"validation": ISO time, "test": ISO time}
    Column("dataset_hash", String(64), nullable=False),  # the version that froze them
    Column("frozen_at", DateTime(timezone=True), nullable=False),
)

# A protected evaluation set: items and index files under `path` (relative to the work
# folder), their sha256s in `files`; `digest` is a sha256 of the items' ids and texts.
eval_sets = Table(
    "eval_sets",
    metadata,
    Column("name", String(200), primary_key=True),
    Column("digest", String(64), nullable=False),
    Column("path", Text, nullable=False),
    Column("source", Text, nullable=False),  # the file it was registered from
    Column("text_field", String(200), nullable=False),
    Column("items", Integer, nullable=False),
    Column("files", JSON, nullable=False),
    Column("settings", JSON, nullable=False),  # the contamination methods its files were built for
    Column("registered_at", DateTime(timezone=True), nullable=False),
)

# A run of the training stage, against the dataset version it trained on. A resumed run keeps
# its row (and started_at); `manifest_path` is the run's training manifest.
training_runs = Table(
    "training_runs",
    metadata,
    Column("run_id", String(100), primary_key=True),
    Column(
        "dataset_hash", String(64), ForeignKey("versions.dataset_hash"), nullable=False, index=True
    ),
    Column("name", String(200), ForeignKey("datasets.name"), nullable=False),
    Column("objective", String(40), nullable=False),
    Column("status", String(20), nullable=False),  # running | completed | failed
    Column("manifest_path", Text, nullable=False),
    Column("manifest_sha256", String(64), nullable=True),  # set when the run finishes
    Column("config_hash", String(64), nullable=False),
    Column("world_size", Integer, nullable=False),
    Column("best_step", Integer, nullable=True),
    Column("test_metrics", JSON, nullable=True),
    Column("error", Text, nullable=True),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True), nullable=True),
)

# A failed or crashed flow run, recorded by its state hook; `alerts` says what each configured
# notification answered ({"webhook": "HTTP 200"} or {"command": "exit 0"}, or the error).
failures = Table(
    "failures",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("flow_run_id", String(64), nullable=False, unique=True),
    Column("flow_run_name", String(200), nullable=True),
    Column("flow", String(200), nullable=False),
    Column("deployment", String(200), nullable=True),
    Column("state", String(20), nullable=False),  # Failed | Crashed
    Column("reason", Text, nullable=False),  # secrets masked
    Column("config_path", Text, nullable=True),
    Column("dataset", String(200), nullable=True),
    Column("alerts", JSON, nullable=False),
    Column("occurred_at", DateTime(timezone=True), nullable=False),
)
