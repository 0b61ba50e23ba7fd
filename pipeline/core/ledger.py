"""The ledger: an append-only event log of what happened to every record in a run.

Each stage returns its events; the run writes them as Parquet parts under the run folder and
joins them into `ledger.parquet` at the end. Every record ends with exactly one terminal
event (published, dropped or quarantined), which `check_accounting` enforces.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl
import polars_hash as plh
from polars.io.plugins import register_io_source

from pipeline.core import reasons, storage
from pipeline.core.errors import AccountingError
from pipeline.core.schema import LEDGER_SCHEMA
from pipeline.core.storage import Location


def events(
    frame: pl.DataFrame | pl.LazyFrame,
    *,
    stage: str,
    action: str,
    reason: str | pl.Expr | None,
    evidence: pl.Expr | None = None,
) -> pl.DataFrame:
    """Build ledger events for every row of `frame` (which has record_id and source).

    `evidence` is an expression over the frame giving a struct or JSON string per row.
    """
    if evidence is None:
        evidence_expr = pl.lit(None, dtype=pl.String)
    else:
        evidence_expr = evidence.struct.json_encode() if _is_struct(frame, evidence) else evidence
    reason_expr = reason if isinstance(reason, pl.Expr) else pl.lit(reason, dtype=pl.String)
    built = frame.lazy().select(
        pl.col("record_id"),
        pl.col("source"),
        pl.lit(stage).alias("stage"),
        pl.lit(action).alias("action"),
        reason_expr.cast(pl.String).alias("reason"),
        evidence_expr.cast(pl.String).alias("evidence"),
        pl.lit(action in reasons.TERMINAL_ACTIONS).alias("terminal"),
    )
    return built.collect()


def _is_struct(frame: pl.DataFrame | pl.LazyFrame, expr: pl.Expr) -> bool:
    return frame.lazy().select(expr).collect_schema().dtypes()[0] == pl.Struct


def empty() -> pl.DataFrame:
    return pl.DataFrame(schema=LEDGER_SCHEMA)


def write_part(events_frame: pl.DataFrame, ledger_dir: Location, part: str) -> Location:
    """Write a stage's events in record_id order (a record's own events keep the order the
    stage gave them), so that the ledger never depends on the order rows arrived in. The
    folder may be on object storage (a run's remote scratch)."""
    ledger_dir.mkdir(parents=True, exist_ok=True)
    path = ledger_dir / f"{part}.parquet"
    ordered = events_frame.sort("record_id", maintain_order=True)
    ordered.select(LEDGER_SCHEMA.names()).cast(LEDGER_SCHEMA).write_parquet(
        str(path),
        row_group_size=16_384,  # `consolidate` reads a part a slice at a time
    )
    return path


def consolidate(ledger_dir: Location, target: Path, keep_parts: bool = False) -> Path:
    """Join the parts of a run into one ledger file, in stage order, each stage's events in
    record-id order (a record's own events in the order its stage wrote them), whatever the
    parts the stage ran in; remove the parts (unless kept for a run that resumes this one).
    Each part is in record-id order (`write_part`): a stage's parts are merged a batch of
    each at a time, so no step holds a whole stage."""
    by_stage: dict[str, list[Location]] = {}
    for part in sorted(ledger_dir.glob("*.parquet"), key=lambda part: part.name):
        # named <stage number>-<stage>[-<part>]
        by_stage.setdefault(part.name.split("-", 1)[0], []).append(part)

    def merged_stages(*_pushdowns: object) -> Iterator[pl.DataFrame]:
        for parts in by_stage.values():
            yield from _merged(parts)

    register_io_source(merged_stages, schema=LEDGER_SCHEMA).sink_parquet(target, compression="zstd")
    if not keep_parts:
        storage.remove_tree(ledger_dir)
    return target


MERGE_ROWS = 262_144  # events held at once across a stage's parts, at least 4,096 a part


def _merged(parts: list[Location]) -> Iterator[pl.DataFrame]:
    """The events of parts that are each in record-id order, in record-id order: a k-way
    merge holding one slice of each part (polars' merge_sorted held a whole stage, 2.7 GB for
    one of 5M events in 20 parts). A record's events are all in one part."""
    scans = [pl.scan_parquet(str(part)) for part in parts]  # local or object storage
    batch = max(4_096, MERGE_ROWS // len(parts))
    held, read = [empty() for _ in parts], [0 for _ in parts]
    unread = set(range(len(parts)))
    while True:
        for i in sorted(unread):
            if held[i].height == 0:  # polars reads the row group holding the slice
                held[i] = scans[i].slice(read[i], batch).collect()
                read[i] += held[i].height
                if held[i].height < batch:
                    unread.discard(i)
        if not unread and not any(frame.height for frame in held):
            return
        # every row up to the smallest last id held by a part with more to read is final
        bound = min((held[i]["record_id"][-1] for i in unread), default=None)
        ready = []
        for i, frame in enumerate(held):
            cut = (
                frame.height if bound is None else frame["record_id"].search_sorted(bound, "right")
            )
            ready.append(frame[:cut])
            held[i] = frame[cut:]
        yield pl.concat(ready).sort("record_id", maintain_order=True)


def counts_by_reason(ledger: pl.LazyFrame, terminal: bool) -> dict[str, dict[str, int]]:
    """{action: {reason: events}} for the terminal events, or for the edits and moves."""
    counted = (
        ledger.filter(pl.col("terminal") == terminal)
        .group_by("action", "reason")
        .agg(pl.len().alias("events"))
        .sort("action", "events", "reason", descending=[False, True, False])
        .collect()
    )
    by_action: dict[str, dict[str, int]] = {}
    for action, reason, events in counted.iter_rows():
        by_action.setdefault(action, {})[reason or action] = events
    return by_action


def check_accounting(
    ledger: pl.LazyFrame, records_in: int, generated: int = 0, ids_in: int | None = None
) -> dict[str, int]:
    """Fail loudly unless in + generated = published + dropped + quarantined, once per record.
    With `ids_in`, the `ids_digest` of every record read in, the terminal events must name
    exactly those records and the generated ones: equal counts do not hide a record lost by
    one stage and another made up by a later one."""
    ended, ids = pl.col("terminal"), _id_hashes()
    # without the ids read in, only counting the distinct ids (a set in memory) shows a
    # repeated fate
    distinct = pl.col("record_id").filter(ended).n_unique().alias("records")
    summary = ledger.select(  # one streaming pass over the ledger
        ended.sum().alias("events"),
        *[(ended & (pl.col("action") == a)).sum().alias(a) for a in reasons.TERMINAL_ACTIONS],
        ids.filter(ended).bitwise_xor().alias("ended_ids"),
        ids.filter(pl.col("action") == reasons.GENERATED).bitwise_xor().alias("made_ids"),
        *([] if ids_in is not None else [distinct]),
    ).collect()
    totals = summary.row(0, named=True)
    expected = records_in + generated
    named = (totals["ended_ids"] or 0) ^ (totals["made_ids"] or 0)  # empty: null
    # With the ids read in, equal counts and equal digests mean one fate per record: a
    # repeated or missing fate changes an id's parity in the XOR, and the fates could only
    # balance by missing some record (2^-64 for a collision of xxh3-64 digests aside).
    balanced = totals["events"] == expected and totals.get("records", expected) == expected
    if balanced and (ids_in is None or named == ids_in):
        return {action: totals[action] for action in reasons.TERMINAL_ACTIONS}
    repeated = (
        ledger.filter(ended)
        .group_by("record_id")
        .agg(pl.len().alias("n"))
        .filter(pl.col("n") > 1)
        .sort("record_id")
        .collect()
    )
    if repeated.height:
        raise AccountingError(
            f"{repeated['n'].sum() - repeated.height} record(s) have more than one terminal "
            f"event (e.g. {', '.join(repeated['record_id'].head(5))}): a stage emitted a "
            "terminal event for a record it kept"
        )
    if totals["events"] != expected:
        raise AccountingError(
            f"accounting does not balance: {records_in} records in + {generated} generated = "
            f"{expected}, but {totals['published']} published + {totals['dropped']} dropped + "
            f"{totals['quarantined']} quarantined = {totals['events']}; a stage lost or "
            "invented records — look at the last stage that ran"
        )
    raise AccountingError(
        f"the {totals['events']} records with a fate are not the records read in and "
        "generated, though as many: a stage lost records and a later one made some "
        "up — compare the stages' record ids around the last one that changed"
    )


def ids_digest(frame: pl.LazyFrame) -> int:
    """The XOR of the xxh3-64 of every record_id in `frame`: a digest of a set of ids (each
    once) that parts compute apart and combine with `^`, in bounded memory."""
    return int(frame.select(_id_hashes().bitwise_xor()).collect().item() or 0)


def _id_hashes() -> pl.Expr:
    return plh.col("record_id").nchash.xxh3_64()
