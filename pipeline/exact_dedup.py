"""Exact dedup: one record per normalized text (`content_hash`).

Keep rule (deterministic): a record published in the parent version always wins, so adding
data never removes a published record; then the rules of `dedup.keep` in order:
`earliest_timestamp` (records without one come last), `longest_text`, and always
`lowest_record_id` as the final tie-break. Every other copy is dropped with reason
`exact_duplicate` and evidence naming the kept record.
"""

from __future__ import annotations

import polars as pl

from pipeline import ledger, reasons
from pipeline.config import DedupConfig
from pipeline.stage import RunContext, StageResult

STAGE = "exact_dedup"

_SORT_KEYS = {
    "earliest_timestamp": (pl.col("timestamp"), False),
    "longest_text": (pl.col("_text_length"), True),
    "lowest_record_id": (pl.col("record_id"), False),
}


def keep_order(rules: list[str]) -> tuple[list[pl.Expr], list[bool]]:
    """Sort keys (and descending flags) that put the record to keep first."""
    rules = [*dict.fromkeys([*rules, "lowest_record_id"])]
    keys = [_SORT_KEYS[rule] for rule in rules]
    return [key for key, _ in keys], [descending for _, descending in keys]


def exact_dedup(frame: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext) -> StageResult:
    if not cfg.exact:
        return StageResult(frame=frame, events=ledger.empty(), stats={"exact_duplicates": 0})
    keys, descending = keep_order(cfg.keep)
    columns = [pl.col("record_id", "source", "content_hash", "timestamp")]
    if "longest_text" in cfg.keep:  # read the text only when a rule needs it
        columns.append(pl.col("text").str.len_chars().alias("_text_length"))
    # only texts that occur more than once need a keep decision
    candidates = frame.select(columns).filter(pl.col("content_hash").is_duplicated())
    if ctx.parent_splits is not None:
        published = ctx.parent_splits.select("record_id", pl.lit(True).alias("_published"))
        candidates = candidates.join(published, on="record_id", how="left")
        keys, descending = [pl.col("_published").fill_null(False), *keys], [True, *descending]
    ranked = (
        candidates.sort(keys, descending=descending, nulls_last=True)
        .with_columns(pl.col("record_id").first().over("content_hash").alias("kept_record_id"))
        .filter(pl.col("record_id") != pl.col("kept_record_id"))
        .select("record_id", "source", "kept_record_id")
        .collect()
    )
    events = ledger.events(
        ranked,
        stage=STAGE,
        action=reasons.DROPPED,
        reason=reasons.EXACT_DUPLICATE,
        evidence=pl.struct(pl.col("kept_record_id").alias("duplicate_of")),
    )
    kept = frame.join(ranked.lazy().select("record_id"), on="record_id", how="anti")
    return StageResult(frame=kept, events=events, stats={"exact_duplicates": ranked.height})
