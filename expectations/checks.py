"""The three gates: what each one measures (in polars) and hands Great Expectations.

Per-record gates (ingested, governed) validate one row per record, in batches of
`gates.batch_rows`; the published gate validates small summary frames computed over whole
splits (shares, overlaps, row counts), since a batch cannot see across splits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from datetime import datetime

import polars as pl

from expectations.gates import GateProject, GateResult, suites_of
from pipeline.config import SPLITS, GatesConfig, RunConfig, SplitConfig
from pipeline.core import reasons, storage
from pipeline.core.licenses import license_class
from pipeline.core.storage import file_sha256
from pipeline.leakage import leakage_columns, spanning
from pipeline.text import content_findings

# four standard deviations of a binomial share: a fair hash split of few groups strays
BINOMIAL_SIGMAS = 4.0


def ingested_rows(records: pl.LazyFrame) -> pl.LazyFrame:
    return records.select(
        "record_id", "source", "location", "source_content_hash", "content_hash",
        pl.col("text").str.len_chars().alias("text_chars"),
        "timestamp", "license", "consent",
    )  # fmt: skip


def governed_rows(records: pl.LazyFrame, cfg: RunConfig, approved: pl.DataFrame) -> pl.LazyFrame:
    """license_class, license_check ("allowed", "approved" or the class the policy does not
    allow) and open_secret_findings (secrets a fresh scan finds that the policy blocks and no
    reviewer cleared) per record."""
    columns = ["record_id", "source", "license", *content_findings.SCANNED_FIELDS]
    frame = records.select(columns).collect()
    classes = pl.DataFrame(
        [
            (source, name, license_class(name, cfg.policy.for_source(source).licenses.classes))
            for source, name in frame.select("source", "license").unique().iter_rows()
        ],
        schema={"source": pl.String, "license": pl.String, "license_class": pl.String},
        orient="row",
    )
    allowed = pl.DataFrame(
        [
            (source.name, allowed_class)
            for source in cfg.source_list
            for allowed_class in cfg.policy.for_source(source.name).licenses.allow
        ],
        schema={"source": pl.String, "allowed_class": pl.String},
        orient="row",
    )
    metadata_names = sorted({name for s in cfg.source_list for name in s.fields.metadata})
    findings = content_findings.secret_findings(frame, cfg.policy, metadata_names)
    open_findings = (
        findings.filter(pl.col("action").is_in(["drop", "quarantine"]))
        .join(approved, on="record_id", how="anti")
        .group_by("record_id")
        .len("open_secret_findings")
    )
    is_approved = pl.col("record_id").is_in(approved["record_id"].implode())
    is_allowed = pl.col("allowed_class").is_not_null()
    return (
        frame.lazy()
        .select("record_id", "source", "license")
        .join(classes.lazy(), on=["source", "license"], how="left")
        .join(
            allowed.lazy(),
            left_on=["source", "license_class"],
            right_on=["source", "allowed_class"],
            how="left",
            coalesce=False,
        )
        .join(open_findings.lazy(), on="record_id", how="left")
        .select(
            "record_id",
            "source",
            "license_class",
            pl.when(is_allowed)
            .then(pl.lit("allowed"))
            .when(is_approved)
            .then(pl.lit("approved"))
            .otherwise(pl.col("license_class"))
            .alias("license_check"),
            pl.col("open_secret_findings").fill_null(0),
        )
    )


def split_shares(version: pl.LazyFrame, split: SplitConfig, tolerance: float) -> pl.DataFrame:
    """Per split: its share of the records against its fraction, where the fraction is a
    target: group splits. Time splits follow their cutoffs (quantile cutoffs are frozen at the
    first publish, so later data lands in test by design)."""
    targets = split.strategy == "group"
    counted = (
        version.group_by("split")
        .agg(
            pl.len().alias("records"), pl.coalesce("group", "record_id").n_unique().alias("groups")
        )
        .collect()
    )
    total = counted["records"].sum() or 0
    if not targets or total == 0:
        return pl.DataFrame(
            schema={"split": pl.String, "deviation": pl.Float64, "allowed_deviation": pl.Float64}
        )
    groups = max(counted["groups"].sum(), 1)
    rows = []
    for name in SPLITS:
        records = dict(counted.select("split", "records").iter_rows()).get(name, 0)
        target = split.fractions.get(name, 0.0)
        allowance = BINOMIAL_SIGMAS * math.sqrt(target * (1 - target) / groups)
        rows.append((name, records, round(records / total, 6), target,
                     round(abs(records / total - target), 6), round(tolerance + allowance, 6)))  # fmt: skip
    return pl.DataFrame(
        rows,
        schema=["split", "records", "share", "fraction", "deviation", "allowed_deviation"],
        orient="row",
    )


def split_overlaps(version: pl.LazyFrame, split: SplitConfig) -> pl.DataFrame:
    """Per key that must not span splits (record_id and the split's leakage columns: `time`
    splits may cut groups): how many of its values sit in more than one split."""
    rows = []
    for key in ("record_id", *leakage_columns(split)):
        shared = spanning(version, key)
        examples = shared["first_record"].unique(maintain_order=True).head(3).to_list()
        rows.append((key, shared[key].n_unique(), ",".join(examples)))
    return pl.DataFrame(rows, schema=["key", "values_in_several_splits", "examples"], orient="row")


def shard_rows(version_dir: storage.Location, manifest: dict) -> pl.DataFrame:
    """Per split: records the manifest counts, rows its shard entries list, rows the files in
    data/<split>/ hold (listed or not), and listed shards whose sha256 differs."""
    rows = []
    for name in SPLITS:
        listed = [shard for shard in manifest["shards"] if shard["split"] == name]
        files = sorted((version_dir / "data" / name).glob("*.parquet"), key=str)
        mismatches = sum(
            not (version_dir / s["path"]).exists()
            or file_sha256(version_dir / s["path"]) != s["sha256"]
            for s in listed
        )
        rows.append((
            name,
            manifest["split_counts"].get(name, 0),
            sum(shard["rows"] for shard in listed),
            sum(storage.parquet_file(file).metadata.num_rows for file in files),
            mismatches,
        ))  # fmt: skip
    return pl.DataFrame(
        rows,
        schema=["split", "manifest_rows", "listed_rows", "file_rows", "checksum_mismatches"],
        orient="row",
    )


def check_ingested(
    project: GateProject, records: pl.LazyFrame, cfg: GatesConfig, started: datetime
) -> GateResult:
    earliest, latest = cfg.timestamp_bounds(started)  # what ingest dropped outside of
    parameters = {
        "min_text_chars": cfg.min_text_chars,
        "max_text_chars": cfg.max_text_chars,
        "earliest_timestamp": earliest,
        "latest_timestamp": latest,
    }
    return _per_record(project, "ingested", records, ingested_rows, cfg.batch_rows, parameters)


def check_governed(
    project: GateProject, records: pl.LazyFrame, cfg: RunConfig, approved: pl.DataFrame
) -> GateResult:
    def rows_of(part: pl.LazyFrame) -> pl.LazyFrame:
        return governed_rows(part, cfg, approved)

    return _per_record(project, "governed", records, rows_of, cfg.gates.batch_rows, {})


def check_published(
    project: GateProject, version_dir: storage.Location, manifest: dict, cfg: RunConfig
) -> GateResult:
    """The published splits' shares and overlaps, and the shards against the manifest; the
    staged version may be on object storage (a run's remote scratch)."""
    files = [str(version_dir / shard["path"]) for shard in manifest["shards"]]
    columns = ["record_id", "content_hash", "group", "cluster_id", "split"]
    version = (
        pl.scan_parquet(files).select(columns)
        if files
        else pl.LazyFrame(schema=dict.fromkeys(columns, pl.String))
    )
    frames = {
        "published_split_shares": split_shares(version, cfg.split, cfg.gates.split_tolerance),
        "published_overlaps": split_overlaps(version, cfg.split),
        "published_shard_rows": shard_rows(version_dir, manifest),
    }
    result = GateResult("published")
    for suite in suites_of("published"):
        checks, result.batches = project.validate(suite, [frames[suite].to_pandas()])
        result.checks.extend(checks)
    return result


def _per_record(
    project: GateProject,
    gate: str,
    records: pl.LazyFrame,
    rows_of: Callable[[pl.LazyFrame], pl.LazyFrame],
    batch_rows: int,
    parameters: dict,
) -> GateResult:
    """Validate the gate's per-record suites on `rows_of` each batch of `records`: the gate
    holds one batch at a time, never the whole dataset."""
    result = GateResult(gate)
    for suite in suites_of(gate):
        batches = _batches(records, rows_of, batch_rows)
        checks, result.batches = project.validate(suite, batches, parameters)
        result.checks.extend(checks)
    return result


def _batches(
    records: pl.LazyFrame, rows_of: Callable[[pl.LazyFrame], pl.LazyFrame], batch_rows: int
) -> Iterator:
    total = records.select(pl.len()).collect().item()
    for start in range(0, max(total, 1), batch_rows):  # one empty batch when there is none
        yield rows_of(records.slice(start, batch_rows)).collect().to_pandas()


def approved_records(ledger_dir: storage.Location, govern_part: str) -> pl.DataFrame:
    """record_id of every record a reviewer approved in this run's governance events (the
    ledger parts named from `govern_part`)."""
    parts = sorted(str(p) for p in ledger_dir.glob(f"{govern_part}*.parquet"))
    if not parts:
        return pl.DataFrame(schema={"record_id": pl.String})
    return (
        pl.scan_parquet(parts)
        .filter(pl.col("action") == reasons.APPROVED)
        .select("record_id")
        .unique()
        .collect()
    )
