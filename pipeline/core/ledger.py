"""The ledger: an append-only event log of what happened to every record in a run.

Each stage returns its events; the run writes them as Parquet parts under the run folder and
joins them into `ledger.parquet` at the end. Every record ends with exactly one terminal
event (published, dropped or quarantined), which `check_accounting` enforces.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import polars_hash as plh

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
    ordered.select(LEDGER_SCHEMA.names()).cast(LEDGER_SCHEMA).write_parquet(str(path))
    return path


def consolidate(ledger_dir: Location, target: Path, keep_parts: bool = False) -> Path:
    """Join the parts of a run into one ledger file, in stage order, each stage's events in
    record-id order (a record's own events in the order its stage wrote them), whatever the
    parts the stage ran in; remove the parts (unless kept for a run that resumes this one).
    Each part is in record-id order (`write_part`): a stage's parts are merged, so no step
    holds a whole stage."""
    by_stage: dict[str, list[pl.LazyFrame]] = {}
    for part in sorted(ledger_dir.glob("*.parquet"), key=lambda part: part.name):
        # named <stage number>-<stage>[-<part>]
        by_stage.setdefault(part.name.split("-", 1)[0], []).append(pl.scan_parquet(str(part)))
    stages = []
    for parts in by_stage.values():
        merged = parts[0]
        for part in parts[1:]:
            merged = merged.merge_sorted(part, key="record_id")
        stages.append(merged)
    frame = pl.concat(stages) if stages else empty().lazy()
    frame.sink_parquet(target, compression="zstd")
    if not keep_parts:
        storage.remove_tree(ledger_dir)
    return target


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
    terminal = ledger.filter(pl.col("terminal"))
    ended, ids = pl.col("terminal"), _id_hashes()
    summary = ledger.select(  # one pass over the ledger
        ended.sum().alias("events"),
        pl.col("record_id").filter(ended).n_unique().alias("records"),
        *[(ended & (pl.col("action") == a)).sum().alias(a) for a in reasons.TERMINAL_ACTIONS],
        ids.filter(ended).bitwise_xor().alias("ended_ids"),
        ids.filter(pl.col("action") == reasons.GENERATED).bitwise_xor().alias("made_ids"),
    ).collect()
    totals = summary.row(0, named=True)
    expected = records_in + generated
    if totals["events"] != totals["records"]:
        repeated = (
            terminal.group_by("record_id")
            .agg(pl.len().alias("n"))
            .filter(pl.col("n") > 1)
            .head(5)
            .collect()["record_id"]
            .to_list()
        )
        raise AccountingError(
            f"{totals['events'] - totals['records']} record(s) have more than one terminal event "
            f"(e.g. {', '.join(repeated)}): a stage emitted a terminal event for a record it kept"
        )
    if totals["records"] != expected:
        raise AccountingError(
            f"accounting does not balance: {records_in} records in + {generated} generated = "
            f"{expected}, but {totals['published']} published + {totals['dropped']} dropped + "
            f"{totals['quarantined']} quarantined = {totals['records']}; a stage lost or "
            "invented records — look at the last stage that ran"
        )
    named = (totals["ended_ids"] or 0) ^ (totals["made_ids"] or 0)  # empty: null
    if ids_in is not None and named != ids_in:
        raise AccountingError(
            f"the {totals['records']} records with a fate are not the records read in and "
            "generated, though as many: a stage lost records and a later one made some "
            "up — compare the stages' record ids around the last one that changed"
        )
    return {action: totals[action] for action in reasons.TERMINAL_ACTIONS}


def ids_digest(frame: pl.LazyFrame) -> int:
    """The XOR of the xxh3-64 of every record_id in `frame`: a digest of a set of ids (each
    once) that parts compute apart and combine with `^`, in bounded memory."""
    return int(frame.select(_id_hashes().bitwise_xor()).collect().item() or 0)


def _id_hashes() -> pl.Expr:
    return plh.col("record_id").nchash.xxh3_64()
