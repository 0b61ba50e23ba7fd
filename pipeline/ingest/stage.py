"""Ingest: read every declared source into the canonical record schema.

Files are read one at a time and written as Parquet parts under the run folder, so memory
follows the batch size, not the number of files; a file larger than a part is cut into
pieces that separate parts read (pipeline/ingest/pieces.py). Bad rows never stop the run:
each gets a terminal `dropped` event naming its file and line (or row). Within a source, a
repeated id keeps its first occurrence; later ones are dropped as `duplicate_source_id`.
"""

from __future__ import annotations

import tempfile
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

import polars as pl
import xxhash

from pipeline.config import IngestConfig, SourceDeclaration
from pipeline.core import ledger, reasons, spill
from pipeline.core.identity import declared_id_key, record_key, xxh3_128_hex
from pipeline.core.normalize import normalize_text
from pipeline.core.progress import progress
from pipeline.core.schema import RECORD_SCHEMA
from pipeline.core.storage import Location, files, is_local
from pipeline.ingest.encoding import repair_encoding
from pipeline.ingest.pieces import Piece, file_pieces
from pipeline.ingest.readers import DEFAULT_LIMITS, read_file_frames
from pipeline.ingest.source_files import source_files
from pipeline.ingest.timestamps import parse_timestamps
from pipeline.stage import RunContext, StageResult
from pipeline.text.secrets import masked_secrets

STAGE = "ingest"
TimestampBounds = tuple[datetime, datetime]  # the oldest and newest time kept, both allowed
PART_ROWS = 250_000
BATCH_BYTES = 16 << 20
INGEST_THREADS = 2
# Run-folder files are read once and deleted: write speed matters more than size.
INTERMEDIATE_PARQUET = {"compression": "uncompressed", "statistics": False}
REPAIRS = "repairs"  # the subfolder holding each part's encoding repairs, for `finish`
REPEATS = "repeats"  # the subfolder where `finish` keeps the repeated ids it found
ID_PARTITION_ROWS = 500_000  # ids `finish` holds at once to find the repeated ones
_REPAIRS = pl.Schema(
    {
        "record_id": pl.String,
        "source": pl.String,
        "location": pl.String,
        "steps": pl.List(pl.String),
    }
)


class InputFile(NamedTuple):
    """A file to read: whole, or one piece of it."""

    path: Path
    name: str  # its stable name (pipeline/ingest/source_files.py)
    bytes: int  # its size, or the piece's share of it
    piece: Piece | None = None


@dataclass(frozen=True)
class IngestPart:
    """Consecutive batches of one source's files (or pieces of a large file): one task's
    share of ingest."""

    number: int  # its place in file order: its Parquet parts are named by it
    source: str
    batches: tuple[tuple[InputFile, ...], ...]
    bytes: int = 0  # the size of its files, as planned


def plan_parts(
    sources: list[SourceDeclaration],
    part_bytes: int,
    listed: dict[str, list[tuple[Location, str]]] | None = None,
) -> list[IngestPart]:
    """Every source's files in batches of about BATCH_BYTES (or `part_bytes`, if less),
    consecutive batches grouped into parts of about `part_bytes` (a part holds at least one
    batch), in file order. A larger file that can be cut is cut into pieces of about
    `part_bytes` (pipeline/ingest/pieces.py), which fall in different parts: as many tasks
    read it. `listed`: each source's files (`source_files`), when the caller listed them."""
    parts: list[IngestPart] = []
    for source in sources:
        group, size = [], 0
        files = listed[source.name] if listed is not None else source_files(source)
        for batch in _batches(
            _input_files(source, files, part_bytes), min(BATCH_BYTES, part_bytes)
        ):
            group.append(tuple(batch))
            size += sum(file.bytes for file in batch)
            if size >= part_bytes:
                parts.append(IngestPart(len(parts), source.name, tuple(group), size))
                group, size = [], 0
        if group:
            parts.append(IngestPart(len(parts), source.name, tuple(group), size))
    return parts


def read_part(
    part: IngestPart,
    source: SourceDeclaration,
    out_dir: Location,
    limits: IngestConfig = DEFAULT_LIMITS,
    timestamp_bounds: TimestampBounds | None = None,
) -> tuple[int, pl.DataFrame]:
    """Read a part's files into `out_dir` as Parquet files named by the part's number (a
    retry rewrites them), its encoding repairs into `out_dir/repairs/` for `finish`; its
    input rows and its bad rows' events. A record timed outside `timestamp_bounds` (the
    ingested gate's, `GatesConfig.timestamp_bounds`) is a bad row."""
    out_dir.mkdir(parents=True, exist_ok=True)
    repairs_file = out_dir / REPAIRS / f"{part.number:05d}.parquet"
    for stale in [*out_dir.glob(f"part-{part.number:05d}-*.parquet"), repairs_file]:
        if stale.exists():
            stale.unlink()
    writer = _PartWriter(out_dir, f"part-{part.number:05d}")
    rows_in, bad_rows, repairs = 0, [ledger.empty()], [_REPAIRS.to_frame()]
    for batch in part.batches:
        for read, records, bad, repaired in _read_batch(
            list(batch), source, limits.for_source(source), timestamp_bounds
        ):
            rows_in += read
            writer.add(records)
            bad_rows.append(_compacted(bad))
            repairs.append(_compacted(repaired))
    writer.close()
    repaired = pl.concat(repairs)
    if repaired.height:
        repairs_file.parent.mkdir(exist_ok=True)
        repaired.write_parquet(str(repairs_file))
    return rows_in, pl.concat(bad_rows)


def _compacted(frame: pl.DataFrame) -> pl.DataFrame:
    """A copy of a few rows of a batch that holds only their strings: polars' string views
    would keep the whole batch's alive (hundreds of MB over a large file's batches)."""
    return pl.from_arrow(frame.to_arrow()) if frame.height else frame.clear()


def finish(out_dir: Location) -> pl.DataFrame:
    """Drop the records whose id came earlier in their source from the parts in `out_dir`
    (read in file order); their `duplicate_source_id` events, and the `edited` events of the
    encoding repairs of the records kept. An input without a single file still leaves one
    (empty) part, so every later stage finds a file to read.

    The repeats found are saved before any part is rewritten without them, and a retry
    reads them back: the parts it finds may already have lost theirs."""
    writer = _PartWriter(out_dir, "part-00000")
    if not any(out_dir.glob("part-*.parquet")):
        writer.close()
    found = out_dir / REPEATS
    if (found / "repeats.parquet").exists():
        repeats = pl.read_parquet(str(found / "repeats.parquet"))
        events = pl.read_parquet(str(found / "events.parquet"))
    else:
        repeats, events = _repeated_ids(writer.scan())
        found.mkdir(parents=True, exist_ok=True)
        events.write_parquet(str(found / "events.parquet"))
        repeats.write_parquet(str(found / "repeats.parquet"))  # last: the pair is written
    writer.remove(repeats)
    # the repairs of the records kept (a repeat shares its first occurrence's id, not its
    # location); read again on a retry, so it gives the same edits
    files = sorted((out_dir / REPAIRS).glob("*.parquet"), key=lambda file: file.name)
    repaired = pl.concat([_REPAIRS.to_frame(), *(pl.read_parquet(str(f)) for f in files)])
    if repaired.height:
        at = ["record_id", "location"]
        kept = (  # streamed against the repairs: every record's id and location held 2.7 GB at 10M
            writer.scan().select(at).join(repaired.lazy().select(at), on=at, how="semi")
        ).collect(engine="streaming")
        repaired = repaired.join(kept, on=at, how="semi", maintain_order="left")
    edits = ledger.events(
        repaired, stage=STAGE, action=reasons.EDITED, reason=reasons.ENCODING_REPAIRED,
        evidence=pl.struct("steps"),
    )  # fmt: skip
    return pl.concat([edits, events])


def ingest(
    sources: list[SourceDeclaration],
    ctx: RunContext,
    out_dir: Location,
    limits: IngestConfig = DEFAULT_LIMITS,
) -> StageResult:
    """Read all sources into `out_dir` as Parquet parts; return a scan of them.

    Files are read and mapped in batches of about BATCH_BYTES on a few threads (polars and
    most of the reading release the GIL); results are written in file order, so the
    output does not depend on the thread count. The curate flow runs the same parts as
    tasks on its runner instead (flows/curate.py). Timestamps are bounded as the gates
    config bounds them for a run starting now.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    bounds = ctx.config.gates.timestamp_bounds(datetime.now(UTC))
    declared = {source.name: source for source in sources}
    parts = plan_parts(sources, BATCH_BYTES)
    per_source = {source.name: {"records_in": 0} for source in sources}
    bad_rows: list[pl.DataFrame] = []
    with (
        progress("ingest", len(parts)) as advance,
        ThreadPoolExecutor(max_workers=INGEST_THREADS) as pool,
    ):
        read = _in_order(
            pool,
            lambda part: read_part(part, declared[part.source], out_dir, limits, bounds),
            parts,
        )
        for part, (rows_in, bad) in zip(parts, read, strict=True):
            per_source[part.source]["records_in"] += rows_in
            bad_rows.append(bad)
            advance(1)
    events = pl.concat([*bad_rows, finish(out_dir)])
    return StageResult(
        frame=pl.scan_parquet(out_dir / "part-*.parquet"),
        events=events,
        stats=ingest_stats(per_source, events, parts),
    )


def ingest_stats(
    per_source: dict[str, dict[str, int]], events: pl.DataFrame, parts: list[IngestPart] = ()
) -> dict:
    """records_in, bad_rows and encoding_repaired, in all and per source, from the rows read
    and the events (ingest's drops and edits); and a warning for each source whose files (of
    `parts`) hold bytes but gave no record."""
    dropped = events.filter(pl.col("action") == reasons.DROPPED)
    for source_name, count in dropped.group_by("source").len().iter_rows():
        per_source[source_name]["bad_rows"] = count
    for source_name, count in (
        events.filter(pl.col("action") == reasons.EDITED).group_by("source").len().iter_rows()
    ):
        per_source[source_name]["encoding_repaired"] = count
    records_in = sum(counts["records_in"] for counts in per_source.values())
    sizes: dict[str, int] = {}
    for part in parts:
        sizes[part.source] = sizes.get(part.source, 0) + part.bytes
    warnings = [
        f"source {name!r}: its files hold {sizes[name]:,} bytes but gave no record "
        f"({counts['records_in']:,} rows read, {counts.get('bad_rows', 0):,} dropped at ingest; "
        "see the report's drop reasons)"
        for name, counts in per_source.items()
        if sizes.get(name) and counts["records_in"] - counts.get("bad_rows", 0) <= 0
    ]
    return {
        "records_in": records_in,
        "bad_rows": dropped.height,
        "encoding_repaired": events.height - dropped.height,
        "sources": per_source,
        "warnings": warnings,
    }


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


def _input_files(
    source: SourceDeclaration, files: list[tuple[Location, str]], part_bytes: int
) -> list[InputFile]:
    """A source's files in order, those larger than `part_bytes` in pieces where they can be."""
    inputs = []
    for path, name in files:
        size = path.stat().st_size
        pieces = file_pieces(path, source, size, part_bytes)
        inputs += [InputFile(path, name, share, piece) for piece, share in pieces] or [
            InputFile(path, name, size)
        ]
    return inputs


def _batches(files: list[InputFile], batch_bytes: int) -> list[list[InputFile]]:
    """Consecutive files grouped to about `batch_bytes`: small files are mapped together,
    since each mapping has a fixed cost."""
    batches: list[list[InputFile]] = [[]]
    size = 0
    for file in files:
        if size >= batch_bytes:
            batches.append([])
            size = 0
        batches[-1].append(file)
        size += file.bytes
    return [batch for batch in batches if batch]


def _read_batch(
    batch: list[InputFile],
    source: SourceDeclaration,
    limits: IngestConfig,
    bounds: TimestampBounds | None,
) -> Iterator[tuple[int, pl.DataFrame, pl.DataFrame, pl.DataFrame]]:
    """(rows read, good records, bad-row events, encoding repairs) for about BATCH_BYTES of
    raw rows at a time: small files are mapped together, a large one in several pieces."""
    pending: list[pl.DataFrame] = []
    size = 0
    for file in batch:
        for raw in read_file_frames(file.path, file.name, source, limits, file.piece):
            pending.append(raw.with_columns(pl.lit(file.name).alias("_file")))
            size += raw.estimated_size()
            if size >= BATCH_BYTES:
                yield _mapped(pending, source, limits, bounds)
                pending, size = [], 0
    if pending:
        yield _mapped(pending, source, limits, bounds)


def _mapped(
    raws: list[pl.DataFrame],
    source: SourceDeclaration,
    limits: IngestConfig,
    bounds: TimestampBounds | None,
) -> tuple[int, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    raw = raws[0] if len(raws) == 1 else pl.concat(raws, how="diagonal_relaxed")
    records = to_records(raw, source, limits.max_text_chars, limits.repair_encoding, bounds)
    return raw.height, *records


def to_records(
    raw: pl.DataFrame,
    source: SourceDeclaration,
    max_text_chars: int = DEFAULT_LIMITS.max_text_chars,
    repair: bool = DEFAULT_LIMITS.repair_encoding,
    timestamp_bounds: TimestampBounds | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Map raw rows (of one or more files, named in `_file`) to canonical records;
    return (good records, bad-row events, encoding repairs). A text over `max_text_chars`
    (once normalized and repaired, as the gate counts it) is a bad row, its length in the
    evidence. With `repair`, encoding damage is repaired (pipeline/ingest/encoding.py):
    `source_content_hash` is the hash of the text as the source gave it, normalized,
    `content_hash` the repaired text's, and the repairs name the records and ftfy's steps
    (`finish` turns them into `edited` events). A repair that leaves no text is `empty_text`.
    A time outside `timestamp_bounds` is `timestamp_out_of_range`, its value (cut short) and
    the bounds in the evidence."""
    shown = shown_names(raw["_file"].unique().to_list())
    raw = raw.with_columns(pl.col("_file").replace_strict(shown).alias("_shown_file"))
    fields = source.fields

    def column(name: str | None) -> pl.Expr:
        if name is None or name not in raw.columns:
            return pl.lit(None, dtype=pl.String)
        return pl.col(name).cast(pl.String)

    def series(name: str | None) -> pl.Series:
        return raw.with_columns(column(name).alias("_series"))["_series"]

    given = series(fields.text)
    as_given = normalize_text(given)  # what source_content_hash is taken of
    text, steps = repair_encoding(given, as_given) if repair else (as_given, None)
    location = pl.concat_str(
        [pl.col("_shown_file"), pl.lit(":"), pl.col("_location").cast(pl.String)]
    )
    timestamp_raw = series(fields.timestamp)
    frame = raw.select(
        pl.col("_error"),
        pl.col("_file"),
        pl.col("_shown_file"),
        pl.col("_location"),
        location.alias("location"),
        text.alias("text"),
        as_given.alias("_as_given"),
        (steps if steps is not None else pl.lit(None, pl.List(pl.String))).alias("_steps"),
        column(fields.id).alias("_id"),
        column(fields.group).alias("group"),
        timestamp_raw.alias("_timestamp_raw"),
        parse_timestamps(timestamp_raw, fields.timestamp_format).alias("timestamp"),
        column(fields.label).alias("label"),
        column(fields.license).fill_null(source.license).alias("license"),
        column(fields.consent).fill_null(source.consent).alias("consent"),
        _metadata_json(raw, source.metadata_fields).alias("metadata"),
        pl.lit(source.synthetic is not None).alias("synthetic"),
        pl.lit(source.synthetic.generator if source.synthetic else None, pl.String).alias(
            "generator"
        ),
        pl.lit(None, pl.String).alias("augmented_from"),
    )
    error = (
        pl.when(pl.col("_error").is_not_null())
        .then(pl.col("_error"))
        .when(pl.col("text").is_null())
        .then(pl.lit(reasons.MISSING_TEXT))
        .when(pl.col("text") == "")
        .then(pl.lit(reasons.EMPTY_TEXT))
        .when(pl.col("text").str.len_chars() > max_text_chars)
        .then(pl.lit(reasons.TEXT_TOO_LONG))
        .when(_out_of_range(timestamp_bounds))
        .then(pl.lit(reasons.TIMESTAMP_OUT_OF_RANGE))
        .when(pl.col("_timestamp_raw").is_not_null() & pl.col("timestamp").is_null())
        .then(pl.lit(reasons.UNPARSEABLE_TIMESTAMP))
    )
    by_position = record_key(source.name, pl.col("_file"), pl.col("_location").cast(pl.String))
    key = (
        pl.when(pl.col("_id").is_not_null() & pl.col("_error").is_null())
        .then(declared_id_key(source.name, pl.col("_id")))
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
    good = good.with_columns(
        xxh3_128_hex(good["_as_given"]).alias("source_content_hash"),
        xxh3_128_hex(good["text"]).alias("content_hash"),
    )
    repairs = good.filter(pl.col("_steps").is_not_null()).select(
        "record_id", "source", "location", pl.col("_steps").alias("steps")
    )
    good = good.select(RECORD_SCHEMA.names())
    where = [
        pl.col("_shown_file").alias("file"),
        pl.col("_location").alias(
            "line" if source.format in ("jsonl", "debian_changelog") else "row"
        ),
    ]
    bounds = [
        pl.lit(when.isoformat()).alias(name)
        for name, when in zip(("earliest", "latest"), timestamp_bounds, strict=True)
    ] if timestamp_bounds else []  # fmt: skip
    evidence = (
        pl.when((pl.col("_error") == reasons.TEXT_TOO_LONG) & pl.col("text").is_not_null())
        .then(pl.struct(*where, pl.col("text").str.len_chars().alias("chars")).struct.json_encode())
        .when(pl.col("_error") == reasons.TIMESTAMP_OUT_OF_RANGE)
        .then(
            pl.struct(
                *where, pl.col("_timestamp_raw").str.slice(0, 32).alias("value"), *bounds
            ).struct.json_encode()
        )
        .otherwise(pl.struct(*where).struct.json_encode())
    )
    bad_events = ledger.events(
        bad, stage=STAGE, action=reasons.DROPPED, reason=pl.col("_error"), evidence=evidence
    )
    return good, bad_events, repairs


def _out_of_range(bounds: TimestampBounds | None) -> pl.Expr:
    """A time outside the bounds, or a number too long to be epoch seconds (more than 11
    digits: 5138 and after; milliseconds perhaps), which parse_timestamps leaves unparsed."""
    if bounds is None:
        return pl.lit(False)
    earliest, latest = bounds
    number = pl.col("_timestamp_raw").str.strip_chars().cast(pl.Float64, strict=False)
    return ~pl.col("timestamp").is_between(pl.lit(earliest), pl.lit(latest)) | (
        pl.col("timestamp").is_null() & (number.abs() >= 1e11)
    )


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


def shown_names(names: list[str]) -> dict[str, str]:
    """How each file name appears in `location` and evidence: as it is, or with the secrets
    it holds masked (`creds-<SECRET:aws_access_key_id>.txt`) and a digest of the whole name
    after it, so that two masked names stay apart (identities of repeats are read from
    locations). Record ids still hash the real name."""
    masked = masked_secrets(pl.Series(names, dtype=pl.String)).to_list()
    return {
        name: shown if shown == name else f"{shown}#{xxhash.xxh3_64_hexdigest(name.encode())[:8]}"
        for name, shown in zip(names, masked, strict=True)
    }


def _repeated_ids(records: pl.LazyFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Records whose id came earlier in their source (files in name order, then lines):
    return their (record_id, location) and their `duplicate_source_id` events.

    A repeat shares its id with the first occurrence; the ledger needs one id per input
    record, so the repeat is identified by position instead, like a record without an id.
    """
    ids = records.select("record_id", "source", "location").with_row_index("_order")
    parts = spill.partitions_for(ids.select(pl.len()).collect().item(), ID_PARTITION_ROWS)
    with tempfile.TemporaryDirectory(prefix="thresher-ids-") as scratch:
        # a record's id and its repeats share a partition: each holds a few ids of the run
        partition = spill.by_hash(ids, "record_id", parts, Path(scratch))
        repeats = pl.concat(_repeats_in(partition(part).collect()) for part in range(parts))
    repeats = repeats.sort("_order").drop("_order")
    if repeats.height == 0:
        return repeats.select("record_id", "location"), ledger.empty()
    file_and_line = pl.col("location").str.extract_groups(r"^(?<file>.*):(?<line>[0-9]+)$")
    by_position = record_key(
        pl.col("source"), file_and_line.struct.field("file"), file_and_line.struct.field("line")
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


def _repeats_in(ids: pl.DataFrame) -> pl.DataFrame:
    """The repeats among ids in read order (`_order`), with where each id was first seen."""
    ids = ids.sort("_order")
    first = pl.col("record_id").is_first_distinct()
    firsts = ids.filter(first).select("record_id", pl.col("location").alias("first_seen_at"))
    return ids.filter(~first).join(firsts, on="record_id", how="left", maintain_order="left")


def _write_whole(frame: pl.DataFrame, path: Location) -> None:
    """Replace a file whole: on a local disk through a rename; an object store's write is."""
    if not is_local(path):
        frame.write_parquet(str(path), **INTERMEDIATE_PARQUET)
        return
    partial = path.with_name(f".{path.name}.partial")
    frame.write_parquet(partial, **INTERMEDIATE_PARQUET)
    partial.replace(path)


class _PartWriter:
    """Buffers records and writes Parquet parts of about PART_ROWS rows, named
    `<prefix>-NNNNN.parquet`."""

    def __init__(self, out_dir: Location, prefix: str):
        self.out_dir, self.prefix = out_dir, prefix
        self.buffer, self.rows, self.parts = [], 0, 0

    def add(self, records: pl.DataFrame) -> None:
        if records.height:
            self.buffer.append(records)
            self.rows += records.height
        if self.rows >= PART_ROWS:
            self.flush()

    def flush(self) -> None:
        if not self.buffer:
            return
        pl.concat(self.buffer).write_parquet(
            str(self.out_dir / f"{self.prefix}-{self.parts:05d}.parquet"), **INTERMEDIATE_PARQUET
        )
        self.buffer, self.rows, self.parts = [], 0, self.parts + 1

    def remove(self, unwanted: pl.DataFrame) -> None:
        """Rewrite the parts holding any of `unwanted` (record_id, location) without them."""
        if unwanted.height == 0:
            return
        for part in sorted(self.out_dir.glob("part-*.parquet"), key=lambda part: part.name):
            records = pl.read_parquet(str(part))
            kept = records.join(
                unwanted, on=["record_id", "location"], how="anti", maintain_order="left"
            )
            if kept.height != records.height:  # whole: a retry finds it or the old one
                _write_whole(kept, part)

    def close(self) -> None:
        """Write what is buffered; a writer that wrote nothing leaves one empty part."""
        if self.parts == 0 and not self.buffer:
            self.buffer.append(pl.DataFrame(schema=RECORD_SCHEMA))
        self.flush()

    def scan(self) -> pl.LazyFrame:
        return pl.scan_parquet(files(self.out_dir, "part-*.parquet"))
