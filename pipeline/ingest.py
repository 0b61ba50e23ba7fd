"""Ingest: read every declared source into the canonical record schema.

Files are read one at a time and written as Parquet parts under the run folder, so memory
follows the batch size, not the number of files. Bad rows never stop the run: each gets a
terminal `dropped` event naming its file and line (or row). Within a source, a repeated id
keeps its first occurrence; later ones are dropped as `duplicate_source_id`.
"""

from __future__ import annotations

import glob
import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl

from pipeline import ledger, reasons
from pipeline.config import SourceDeclaration
from pipeline.errors import DataError
from pipeline.identity import KEY_SEPARATOR, record_key, xxh3_128_hex
from pipeline.normalize import normalize_text
from pipeline.progress import progress
from pipeline.readers import read_file
from pipeline.schema import RECORD_SCHEMA
from pipeline.stage import RunContext, StageResult

STAGE = "ingest"
PART_ROWS = 250_000
BATCH_BYTES = 16 << 20
INGEST_THREADS = 2
# Run-folder files are read once and deleted: write speed matters more than size.
INTERMEDIATE_PARQUET = {"compression": "uncompressed", "statistics": False}

_TIMESTAMP_FORMATS = (
    "%Y-%m-%dT%H:%M:%S%.f%#z",
    "%Y-%m-%d %H:%M:%S%.f%#z",
    "%Y-%m-%dT%H:%M:%S%.f",
    "%Y-%m-%d %H:%M:%S%.f",
    "%Y-%m-%d",
    "%Y%m%d",
    "%a, %d %b %Y %H:%M:%S %z",
)


def source_files(source: SourceDeclaration) -> list[tuple[Path, str]]:
    """(path, stable name) for each file of a source, in a fixed order.

    The name is part of record identities and locations, so it must not depend on where a
    machine keeps the data or on which other files exist: a relative location is named
    relative to the source's `root` (default: the folder of the file that declared it), an
    absolute one relative to its fixed part, the folders before the first wildcard.
    Symbolic links to an already listed file are read once (Debian links the doc folders
    of binary packages to their source package's).
    """
    root = source.root_dir
    by_target: dict[str, tuple[Path, str]] = {}
    for pattern in source.patterns:
        absolute = os.path.isabs(pattern)
        matches = sorted(
            glob.glob(pattern if absolute else os.path.join(root, pattern), recursive=True)
        )
        matches = [match for match in matches if os.path.isfile(match)]
        if not matches:
            raise DataError(
                f"source {source.name!r}: location {pattern!r} matches no file"
                f"{'' if absolute else f' (relative to {root})'}; "
                "fix the location or remove the source"
            )
        named_from = _fixed_part(pattern) if absolute else root
        for match in matches:
            by_target.setdefault(
                os.path.realpath(match), (Path(match), os.path.relpath(match, named_from))
            )
    named = sorted(by_target.values(), key=lambda item: item[1])
    for (first, name), (second, other) in zip(named, named[1:], strict=False):
        if name == other:
            raise DataError(
                f"source {source.name!r}: {first} and {second} would both be named {name!r}, "
                "and names are part of record identities; set the source's `root` to a folder "
                "above both and give their locations relative to it"
            )
    return named


def _fixed_part(pattern: str) -> str:
    """The folder of an absolute pattern before its first wildcard (a file's own folder)."""
    parts = Path(pattern).parts
    fixed = next((i for i, part in enumerate(parts) if glob.has_magic(part)), len(parts) - 1)
    return str(Path(*parts[:fixed]))


def ingest(sources: list[SourceDeclaration], ctx: RunContext, out_dir: Path) -> StageResult:
    """Read all sources into `out_dir` as Parquet parts; return a scan of them.

    Files are read and mapped in batches of about BATCH_BYTES on a few threads (polars and
    most of the reading release the GIL); results are written in file order, so the
    output does not depend on the thread count.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    writer = _PartWriter(out_dir)
    bad_rows: list[pl.DataFrame] = []
    per_source: dict[str, dict[str, int]] = {}
    files = {source.name: source_files(source) for source in sources}
    with (
        progress("ingest", sum(len(found) for found in files.values())) as advance,
        ThreadPoolExecutor(max_workers=INGEST_THREADS) as pool,
    ):
        for source in sources:
            per_source[source.name] = {"records_in": 0}
            batches = _batches(files[source.name])
            results = _in_order(
                pool, lambda batch, source=source: _read_batch(batch, source), batches
            )
            for batch, (rows_in, records, bad) in zip(batches, results, strict=True):
                per_source[source.name]["records_in"] += rows_in
                bad_rows.append(writer.add(records, bad))
                advance(len(batch))
    writer.close()
    repeats, repeat_events = _repeated_ids(writer.scan())
    writer.remove(repeats)
    events = pl.concat([*bad_rows, repeat_events])
    for source_name, dropped in events.group_by("source").len().iter_rows():
        per_source[source_name]["bad_rows"] = dropped
    records_in = sum(counts["records_in"] for counts in per_source.values())
    stats = {"records_in": records_in, "bad_rows": events.height, "sources": per_source}
    return StageResult(frame=writer.scan(), events=events, stats=stats)


def _in_order(pool: ThreadPoolExecutor, work, items: list) -> Iterator:
    """Results of `work` over `items`, in order, with at most one item per thread waiting
    ahead (pool.map would start them all and hold every result in memory)."""
    pending: deque = deque()
    for item in items:
        pending.append(pool.submit(work, item))
        if len(pending) > INGEST_THREADS:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def _batches(files: list[tuple[Path, str]]) -> list[list[tuple[Path, str]]]:
    """Consecutive files grouped to about BATCH_BYTES: small files are mapped together,
    since each mapping has a fixed cost."""
    batches: list[list[tuple[Path, str]]] = [[]]
    size = 0
    for path, name in files:
        if size >= BATCH_BYTES:
            batches.append([])
            size = 0
        batches[-1].append((path, name))
        size += path.stat().st_size
    return [batch for batch in batches if batch]


def _read_batch(
    batch: list[tuple[Path, str]], source: SourceDeclaration
) -> tuple[int, pl.DataFrame, pl.DataFrame]:
    raws = [
        read_file(path, name, source).with_columns(pl.lit(name).alias("_file"))
        for path, name in batch
    ]
    raw = raws[0] if len(raws) == 1 else pl.concat(raws, how="diagonal_relaxed")
    return raw.height, *to_records(raw, source)


def to_records(raw: pl.DataFrame, source: SourceDeclaration) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Map raw rows (of one or more files, named in `_file`) to canonical records;
    return (good records, bad-row events)."""
    fields = source.fields

    def column(name: str | None) -> pl.Expr:
        if name is None or name not in raw.columns:
            return pl.lit(None, dtype=pl.String)
        return pl.col(name).cast(pl.String)

    def series(name: str | None) -> pl.Series:
        return raw.with_columns(column(name).alias("_series"))["_series"]

    text = normalize_text(series(fields.text))
    location = pl.concat_str([pl.col("_file"), pl.lit(":"), pl.col("_location").cast(pl.String)])
    timestamp_raw = series(fields.timestamp)
    frame = raw.select(
        pl.col("_error"),
        pl.col("_file"),
        pl.col("_location"),
        location.alias("location"),
        text.alias("text"),
        column(fields.id).alias("_id"),
        column(fields.group).alias("group"),
        timestamp_raw.alias("_timestamp_raw"),
        parse_timestamps(timestamp_raw, fields.timestamp_format).alias("timestamp"),
        column(fields.label).alias("label"),
        _metadata_json(raw, fields.metadata).alias("metadata"),
    )
    error = (
        pl.when(pl.col("_error").is_not_null())
        .then(pl.col("_error"))
        .when(pl.col("text").is_null())
        .then(pl.lit(reasons.MISSING_TEXT))
        .when(pl.col("text") == "")
        .then(pl.lit(reasons.EMPTY_TEXT))
        .when(pl.col("_timestamp_raw").is_not_null() & pl.col("timestamp").is_null())
        .then(pl.lit(reasons.UNPARSEABLE_TIMESTAMP))
    )
    by_position = record_key(source.name, pl.col("_file"), pl.col("_location").cast(pl.String))
    key = (
        pl.when(pl.col("_id").is_not_null() & pl.col("_error").is_null())
        .then(record_key(source.name, pl.col("_id")))
        .otherwise(by_position)
    )
    # Bad rows are identified by position: their id field cannot be trusted, and an id
    # shared with a good row would give one identity two terminal events.
    frame = frame.with_columns(error.alias("_error")).with_columns(key.alias("_key"))
    frame = frame.with_columns(
        xxh3_128_hex(frame["_key"]).alias("record_id"), pl.lit(source.name).alias("source")
    )
    bad = frame.filter(pl.col("_error").is_not_null())
    good = frame.filter(pl.col("_error").is_null())
    content_hash = xxh3_128_hex(good["text"])
    good = good.with_columns(
        content_hash.alias("source_content_hash"),
        content_hash.alias("content_hash"),
        pl.lit(source.license).alias("license"),
        pl.lit(source.consent).alias("consent"),
    ).select(RECORD_SCHEMA.names())
    evidence = pl.struct(
        pl.col("_file").alias("file"),
        pl.col("_location").alias(
            "line" if source.format in ("jsonl", "debian_changelog") else "row"
        ),
    )
    bad_events = ledger.events(
        bad, stage=STAGE, action=reasons.DROPPED, reason=pl.col("_error"), evidence=evidence
    )
    return good, bad_events


def parse_timestamps(value: pl.Series, fmt: str | None) -> pl.Series:
    """Parse timestamps to UTC: a given format, else ISO 8601, RFC 2822, a date or epoch
    seconds. Times without a zone are taken as UTC. Each format after the first is tried
    only on the rows still unparsed: real columns mostly hold one format."""
    parsed = pl.Series(value.name, [None] * len(value), dtype=pl.Datetime("us", "UTC"))
    for attempt in [*((fmt,) if fmt else _TIMESTAMP_FORMATS), *([] if fmt else ["epoch"])]:
        todo = (parsed.is_null() & value.is_not_null()).arg_true()
        if todo.len() == 0:
            break
        parsed = parsed.scatter(todo, _parse_as(value.gather(todo), attempt))
    return parsed


def _parse_as(value: pl.Series, attempt: str) -> pl.Series:
    if attempt == "epoch":
        # 9 to 11 digits: 1973 to 5138; fewer are more likely a year or a mistake
        seconds = value.str.extract(r"^(-?[0-9]{9,11}(?:\.[0-9]+)?)$").cast(pl.Float64)
        return (seconds * 1_000_000).cast(pl.Int64).cast(pl.Datetime("us", "UTC"))
    parsed = value.str.to_datetime(attempt, strict=False, time_unit="us")
    # formats with a zone parse to UTC already; the rest are naive and taken as UTC
    if "%z" not in attempt and "%#z" not in attempt:
        parsed = parsed.dt.replace_time_zone("UTC")
    return parsed.cast(pl.Datetime("us", "UTC"))


def _metadata_json(raw: pl.DataFrame, names: list[str]) -> pl.Expr:
    if not names:
        return pl.lit(None, dtype=pl.String)
    present = [
        pl.col(name).cast(pl.String)
        if name in raw.columns
        else pl.lit(None, dtype=pl.String).alias(name)
        for name in sorted(names)
    ]
    return pl.struct(present).struct.json_encode()


def _repeated_ids(records: pl.LazyFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Records whose id came earlier in their source (files in name order, then lines):
    return their (record_id, location) and their `duplicate_source_id` events.

    A repeat shares its id with the first occurrence; the ledger needs one id per input
    record, so the repeat is identified by position instead, like a record without an id.
    """
    ids = records.select("record_id", "source", "location").collect()
    repeats = ids.filter(~pl.col("record_id").is_first_distinct())
    if repeats.height == 0:
        return repeats.select("record_id", "location"), ledger.empty()
    firsts = ids.filter(pl.col("record_id").is_first_distinct()).select(
        "record_id", pl.col("location").alias("first_seen_at")
    )
    repeats = repeats.join(firsts, on="record_id", how="left", maintain_order="left")
    by_position = pl.concat_str(
        pl.col("source"),
        pl.col("location").str.replace(r":([0-9]+)$", KEY_SEPARATOR + "$1"),
        separator=KEY_SEPARATOR,
    )
    identified = repeats.with_columns(
        xxh3_128_hex(repeats.select(by_position).to_series()).alias("record_id"),
        pl.col("record_id").alias("first_record_id"),
    )
    events = ledger.events(
        identified,
        stage=STAGE,
        action=reasons.DROPPED,
        reason=reasons.DUPLICATE_SOURCE_ID,
        evidence=pl.struct("location", "first_seen_at", "first_record_id"),
    )
    return repeats.select("record_id", "location"), events


class _PartWriter:
    """Buffers records and writes Parquet parts of about PART_ROWS rows."""

    def __init__(self, out_dir: Path):
        self.out_dir, self.buffer, self.rows, self.parts = out_dir, [], 0, 0

    def add(self, records: pl.DataFrame, bad_events: pl.DataFrame) -> pl.DataFrame:
        """Buffer good records; hand the bad rows' events back to the caller."""
        if records.height:
            self.buffer.append(records)
            self.rows += records.height
        if self.rows >= PART_ROWS:
            self.flush()
        return bad_events

    def flush(self) -> None:
        if not self.buffer:
            return
        pl.concat(self.buffer).write_parquet(
            self.out_dir / f"part-{self.parts:05d}.parquet", **INTERMEDIATE_PARQUET
        )
        self.buffer, self.rows, self.parts = [], 0, self.parts + 1

    def remove(self, unwanted: pl.DataFrame) -> None:
        """Rewrite the parts holding any of `unwanted` (record_id, location) without them."""
        if unwanted.height == 0:
            return
        for part in sorted(self.out_dir.glob("part-*.parquet")):
            records = pl.read_parquet(part)
            kept = records.join(
                unwanted, on=["record_id", "location"], how="anti", maintain_order="left"
            )
            if kept.height != records.height:
                kept.write_parquet(part, **INTERMEDIATE_PARQUET)

    def close(self) -> None:
        """Write what is buffered; an input without a single good record still leaves one
        (empty) part, so every later stage finds a file to read."""
        if self.parts == 0 and not self.buffer:
            self.buffer.append(pl.DataFrame(schema=RECORD_SCHEMA))
        self.flush()

    def scan(self) -> pl.LazyFrame:
        return pl.scan_parquet(self.out_dir / "part-*.parquet")
