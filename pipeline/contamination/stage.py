"""Contamination: training (and validation) records that repeat this run's test split or a
protected evaluation set are dropped or quarantined with reason `contaminated_eval`.

Four methods (pipeline/text/eval_index.py), each with its own action: exact content hash, shared
normalized word n-grams, MinHash similarity and embedding cosine. A record matched by a
method whose action is `drop` is dropped; one matched only by quarantining methods waits
for a reviewer. Its evidence names the strongest match of a deciding method: the evaluation
set ("test" for this run's test split), the item, the method, the score and the matched
words. A reviewer's approval lets the record pass on later runs while its content and its
matches stay the same; a rejection drops it. Records of the test split are never checked: they are what is protected.

The stage is an `Indexed` one: `build_index` builds the indexes of the test split and the
protected sets once, and `check` checks one part against them, so the runner spreads the parts
over tasks; `merge_stats` gives the parts' figures of one call on every record.
"""

from __future__ import annotations

import pickle
import shutil
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.config import ContaminationConfig
from pipeline.core import ledger, reasons
from pipeline.core.identity import xxh3_128_hex
from pipeline.core.progress import progress
from pipeline.core.schema import review_decisions
from pipeline.review import review_items_of, with_review_hash
from pipeline.stage import Indexed, RunContext, StageResult, add_counts
from pipeline.text.embeddings import cache_dir
from pipeline.text.eval_index import (
    MATCH_SCHEMA,
    METHODS,
    ContaminationIndex,
    ignore_common,
    strongest,
)
from pipeline.text.secrets import masked_secrets

STAGE = "contamination"
TEST_SPLIT = "test"  # the evaluation-set name the run's own test split gets in evidence
EXAMPLES = 20  # record ids listed per evaluation set in the stats
ITEM_TEXT_SHOWN = 2000  # characters of the matched evaluation text a reviewer sees
_SHOWN = ["text", "metadata", "group", "label", "license", "consent"]
# records matched at once: a batch's matches grow with the records and with how often they
# repeat the test split (10M spine records: a part task held 5.1 GB with batches of 500,000,
# 2.9 GB with these)
CHECK_BATCH = 100_000
INDEX_FILE = "indexes.pickle"  # [(evaluation set name, ContaminationIndex)]


def build_index(
    frame: pl.LazyFrame, cfg: ContaminationConfig, ctx: RunContext, folder: Path
) -> None:
    """The indexes every part is checked against, built once into `folder`: this run's test
    split (read from the stage's whole input) and every protected evaluation set."""
    targets = _targets(frame, cfg, ctx, cache_dir(ctx.config.workdir))
    _ignore_common(frame, cfg, ctx, [index for _, index in targets], folder)
    with (folder / INDEX_FILE).open("wb") as file:
        pickle.dump(targets, file, protocol=pickle.HIGHEST_PROTOCOL)


class _Targets(list):
    """[(name, index)], weakly referenceable."""


_LOADED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_LOADING = threading.Lock()


def _load_targets(folder: Path) -> _Targets:
    """The indexes in `folder`, unpickled once per process while some part uses them: the local
    runner's part threads share one copy (each unpickled its own: 6.6 GB at 10M), freed when
    the last of them is done. The checks only read them."""
    path = folder / INDEX_FILE
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    with _LOADING:
        targets = _LOADED.get(key)
        if targets is None:
            targets = _Targets(pickle.loads(path.read_bytes()))
            _LOADED[key] = targets
        return targets


def check(
    frame: pl.LazyFrame, cfg: ContaminationConfig, ctx: RunContext, folder: Path
) -> StageResult:
    """Check the records of the `cfg.check` splits against the indexes in `folder`, batch by
    batch (at most CHECK_BATCH records at a time, read back from a work file): memory holds
    the indexes, one batch and its matches, the dropped records' evidence and the quarantined
    records (for the review queue), never every record. Its stats are a part's (see
    `merge_stats`)."""
    started = time.perf_counter()
    embedding_cache = cache_dir(ctx.config.workdir)
    targets = _load_targets(folder)
    work = Path(tempfile.mkdtemp(prefix="contamination-work-", dir=folder))
    try:
        checked = work / "checked.parquet"
        frame.filter(pl.col("split").is_in(cfg.check)).select(
            "record_id", "source", "text", "content_hash", "source_content_hash", *_SHOWN[1:]
        ).sink_parquet(checked, compression="lz4")
        n_checked = pl.scan_parquet(checked).select(pl.len()).collect().item()
        found, drops, quarantines = [], [], []
        size = min(ctx.config.runner.part_rows, CHECK_BATCH)
        for offset in range(0, max(n_checked, 1), size):
            batch = pl.scan_parquet(checked).slice(offset, size).collect()
            matches = _batch_matches(batch, targets, embedding_cache)
            ids = batch["record_id"].gather(matches["row"])
            found.append(matches.select("eval_set", "item_id", "method").with_columns(ids))
            flagged = _decide(matches, batch, cfg)
            # a dropped record's event needs only its evidence; a quarantined one's review
            # item needs its columns and the matched text
            drops.append(flagged.filter(pl.col("action") == "drop").select(_DROP_COLUMNS))
            quarantined = flagged.filter(pl.col("action") == "quarantine")
            quarantines.append(_with_item_text(quarantined, targets))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    matched = pl.concat([_MATCHED, *found])
    per_set = {name: _part_figures(index, matched, name) for name, index in targets}
    dropped = pl.concat(drops).sort("record_id")
    quarantined, approvals, rejections = _reviewed(
        pl.concat(quarantines).sort("record_id"), ctx.review_decisions
    )
    removed = pl.concat([f.select("record_id") for f in (dropped, quarantined, rejections)])
    kept = frame.join(removed.lazy(), on="record_id", how="anti", maintain_order="left")
    events = pl.concat(
        [
            ledger.empty(),
            *_flag_events(dropped, quarantined),
            _approval_events(approvals),
            _rejection_events(rejections),
        ]
    )
    stats = {
        "checked": n_checked,
        "eval_sets": per_set,
        "dropped": dropped.height,
        "quarantined": quarantined.height,
        "approved": approvals.height,
        "rejected": rejections.height,
        "seconds": round(time.perf_counter() - started, 3),
    }
    return StageResult(
        frame=kept, events=events, stats=stats, review_items=_review_items(quarantined)
    )


def merge_stats(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The stats of one call on every record from the parts': counts add up; an evaluation
    set's contaminated items are the union of the parts' (bitmaps over its items), and its
    examples the first record ids of all."""
    sets = [part["eval_sets"] for part in parts]
    merged = add_counts([{k: v for k, v in part.items() if k != "eval_sets"} for part in parts])
    merged["eval_sets"] = {name: _set_figures([found[name] for found in sets]) for name in sets[0]}
    return merged


contamination = Indexed(build=build_index, check=check, merge=merge_stats)


_MATCHED = pl.DataFrame(
    schema={
        "eval_set": pl.String,
        "item_id": pl.String,
        "method": pl.String,
        "record_id": pl.String,
    }
)
_DROP_COLUMNS = ["record_id", "source", "eval_set", "item_id", "method", "score", "span", "methods"]
_EMPTY_MATCHES = pl.DataFrame(schema={**MATCH_SCHEMA, "eval_set": pl.String})


def _ignore_common(
    frame: pl.LazyFrame, cfg: ContaminationConfig, ctx: RunContext, indexes: list, folder: Path
) -> None:
    """Count the item n-grams the checked records hold (their text written to a work file
    once, then read back CHECK_BATCH records at a time) and make the common ones
    (boilerplate) evidence only of a whole copy."""
    check = cfg.methods.ngram
    if check is None or check.ignore_common_in_training is None or not indexes:
        return
    work = folder / "checked-text.parquet"
    frame.filter(pl.col("split").is_in(cfg.check)).select("text").sink_parquet(
        work, compression="lz4"
    )
    total = pl.scan_parquet(work).select(pl.len()).collect().item()
    size = min(ctx.config.runner.part_rows, CHECK_BATCH)

    def batches():
        with progress("contamination: common n-grams", total) as advance:
            for start in range(0, total, size):
                texts = pl.scan_parquet(work).slice(start, size).collect()["text"]
                yield texts
                advance(texts.len())

    try:
        ignore_common(indexes, batches())
    finally:
        work.unlink(missing_ok=True)


def _targets(
    frame: pl.LazyFrame, cfg: ContaminationConfig, ctx: RunContext, embedding_cache: Path
) -> list[tuple[str, ContaminationIndex]]:
    """(name, index) of this run's test split, when checked against, and of every
    protected evaluation set."""
    targets = []
    if cfg.against_test:
        # in record_id order: ties between items follow record ids. Test records are items
        # as they stand: their text and content hash are final
        items = (
            frame.filter(pl.col("split") == "test")
            .select(pl.col("record_id").alias("item_id"), "text", "content_hash")
            .collect()
            .sort("item_id")
        )
        index = ContaminationIndex.build(items, cfg.methods, None, embedding_cache)
        targets.append((TEST_SPLIT, index))
    for eval_set in ctx.eval_sets:
        index = ContaminationIndex.build(
            eval_set.items, cfg.methods, eval_set.folder, embedding_cache
        )
        targets.append((eval_set.name, index))
    return targets


def _batch_matches(
    batch: pl.DataFrame, targets: list[tuple[str, ContaminationIndex]], embedding_cache: Path
) -> pl.DataFrame:
    """Every match of a batch's records, per evaluation set: (row, item_id, method, score,
    span, eval_set), `row` a record's position in the batch."""
    found = []
    probe = batch.select("text", "content_hash")
    for name, index in targets:
        if not (batch.height and index.items.height):
            continue
        matches = index.matches(probe, embedding_cache)
        found.append(matches.with_columns(pl.lit(name).alias("eval_set")))
    return pl.concat([_EMPTY_MATCHES, *found], how="diagonal_relaxed")


def _with_item_text(
    flagged: pl.DataFrame, targets: list[tuple[str, ContaminationIndex]]
) -> pl.DataFrame:
    """`item_text`: the text of each flagged record's evidence item, for its review item (only
    these rows get it: a batch's matches are many more, and an item's text may be long)."""
    found = [flagged.clear().with_columns(pl.lit(None, pl.String).alias("item_text"))]
    for name, index in targets:
        mine = flagged.filter(pl.col("eval_set") == name)
        if mine.height:
            texts = index.items.select("item_id", pl.col("text").alias("item_text"))
            found.append(mine.join(texts, on="item_id", how="left", maintain_order="left"))
    return pl.concat(found)


def _part_figures(index: ContaminationIndex, matched: pl.DataFrame, name: str) -> dict:
    """One part's figures of one evaluation set, from every batch's matches (eval_set,
    item_id, method, record_id): records per method, the items matched (any method, and per
    method) as bitmaps over the index's items, and the part's first record ids."""
    matches = matched.filter(pl.col("eval_set") == name)
    position = {
        "item_id": index.items["item_id"],
        "at": pl.int_range(index.items.height, eager=True),
    }
    numbered = matches.join(pl.DataFrame(position), on="item_id", how="left")

    def bitmap(items: pl.Series) -> bytes:
        bits = np.zeros(index.items.height, dtype=bool)
        bits[items.to_numpy()] = True
        return np.packbits(bits).tobytes()

    by_method = {
        method: {"records": group["record_id"].n_unique(), "items": bitmap(group["at"])}
        for (method,), group in numbered.group_by("method", maintain_order=True)
    }
    return {
        "items": index.items.height,
        "matched": bitmap(numbered["at"]),
        "records": matches["record_id"].n_unique(),
        "by_method": by_method,
        "examples": matches["record_id"].unique().sort().head(EXAMPLES).to_list(),
        "ignored_ngrams": {
            key: index.stats.get("ngram", {}).get(key, 0)
            for key in ("common_in_training", "common_in_items")
        },
    }


def _set_figures(parts: list[dict]) -> dict:
    """The figures of one evaluation set for the run report, from its parts' figures."""

    def count(bitmaps: list[bytes]) -> int:
        union = np.bitwise_or.reduce([np.frombuffer(b, dtype=np.uint8) for b in bitmaps])
        return int(np.unpackbits(union).sum())

    methods = [m for m in METHODS if any(m in part["by_method"] for part in parts)]
    by_method = {}
    for method in methods:
        found = [part["by_method"][method] for part in parts if method in part["by_method"]]
        by_method[method] = {
            "records": sum(entry["records"] for entry in found),
            "items": count([entry["items"] for entry in found]),
        }
    return {
        "items": parts[0]["items"],
        "contaminated_items": count([part["matched"] for part in parts]),
        "records": sum(part["records"] for part in parts),
        "by_method": by_method,
        "examples": sorted(r for part in parts for r in part["examples"])[:EXAMPLES],
        "ignored_ngrams": parts[0]["ignored_ngrams"],  # one index: the same in every part
    }


def _decide(matches: pl.DataFrame, checked: pl.DataFrame, cfg: ContaminationConfig) -> pl.DataFrame:
    """One row per flagged record: its action (drop wins over quarantine) and, as evidence,
    the strongest match among those of a method with that action."""
    actions = {
        method: (setting if isinstance(setting, str) else setting.action)
        for method, setting in cfg.methods
        if setting is not None
    }
    matches = matches.with_columns(
        pl.col("method").replace_strict(actions, default=None).alias("action")
    )
    decided = matches.group_by("row").agg(
        pl.when((pl.col("action") == "drop").any())
        .then(pl.lit("drop"))
        .otherwise(pl.lit("quarantine"))
        .first()
        .alias("action"),
        pl.col("method").unique().sort().alias("methods"),
        # every match, for the review hash: an approval holds for exactly these
        pl.concat_str("eval_set", "item_id", "method", separator=":")
        .unique()
        .sort()
        .str.join("\x1e")
        .alias("matched"),
    )
    deciding = matches.join(decided.select("row", "action"), on=["row", "action"], how="semi")
    best = strongest(deciding.drop("action")).select(
        "row", "eval_set", "item_id", "method", "score", "span"
    )
    numbered = checked.with_row_index("row").with_columns(pl.col("row").cast(pl.UInt32))
    return decided.join(best, on="row").join(numbered, on="row").sort("row")


def _reviewed(
    flagged: pl.DataFrame, decisions: pl.DataFrame | None
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Split quarantine flags into those still flagged, those a reviewer approved for this
    content and these matches, and those a reviewer rejected. The review hash covers every
    match (evaluation set, item, method): an approval does not carry over to a new match."""
    match = pl.concat_str("review_hash", "matched", separator="\x1f")
    flagged = with_review_hash(flagged)
    flagged = flagged.with_columns(
        xxh3_128_hex(flagged.select(match).to_series()).alias("review_hash")
    )
    decisions = (
        review_decisions(decisions)
        .filter(pl.col("reason") == reasons.CONTAMINATED_EVAL)
        .rename({"item_id": "review_item"})
        .drop("label")
    )
    key = ["record_id", "source_content_hash", "review_hash"]
    quarantine = flagged.filter(pl.col("action") == "quarantine")
    approved = quarantine.join(decisions.filter(pl.col("status") == "approved"), on=key)
    rejected = quarantine.join(decisions.filter(pl.col("status") == "rejected"), on=key)
    decided = pl.concat([approved.select("record_id"), rejected.select("record_id")])
    return flagged.join(decided, on="record_id", how="anti"), approved, rejected


def _evidence_fields() -> list[pl.Expr]:
    return [
        pl.col("eval_set"),
        pl.col("item_id").alias("item"),
        pl.col("method"),
        pl.col("score").round(4),
        pl.col("span"),
        pl.col("methods"),
    ]


def _evidence() -> pl.Expr:
    return pl.struct(*_evidence_fields())


def _flag_events(dropped: pl.DataFrame, quarantined: pl.DataFrame) -> list[pl.DataFrame]:
    return [
        ledger.events(
            flagged,
            stage=STAGE,
            action=ledger_action,
            reason=reasons.CONTAMINATED_EVAL,
            evidence=_evidence(),
        )
        for flagged, ledger_action in (
            (dropped, reasons.DROPPED),
            (quarantined, reasons.QUARANTINED),
        )
    ]


def _approval_events(approved: pl.DataFrame) -> pl.DataFrame:
    return ledger.events(
        approved,
        stage=STAGE,
        action=reasons.APPROVED,
        reason=reasons.REVIEW_APPROVED,
        evidence=pl.struct(
            pl.col("review_item").alias("item"),
            "reviewer",
            pl.lit(reasons.CONTAMINATED_EVAL).alias("flag"),
        ),
    )


def _rejection_events(rejected: pl.DataFrame) -> pl.DataFrame:
    return ledger.events(
        rejected,
        stage=STAGE,
        action=reasons.DROPPED,
        reason=reasons.REVIEW_REJECTED,
        evidence=pl.struct(pl.col("review_item").alias("item"), "reviewer"),
    )


def _review_items(quarantined: pl.DataFrame) -> pl.DataFrame:
    """Items with the matched evaluation text beside the record. Secrets are masked as
    everywhere a reviewer looks: a record a reviewer let through as a secret false positive
    still holds what the scanner flagged, and evaluation sets are not scanned on the way in."""
    item_text = masked_secrets(quarantined["item_text"].str.slice(0, ITEM_TEXT_SHOWN))
    shown = quarantined.with_columns(item_text).with_columns(
        pl.struct(*_evidence_fields(), pl.col("item_text")).struct.json_encode().alias("evidence")
    )
    return review_items_of(shown, reasons.CONTAMINATED_EVAL)


def summary_lines(stats: dict[str, Any]) -> list[str]:
    """What the check found per evaluation set, as `thresher run` says it."""

    def ignored(ngrams: dict[str, int]) -> str:
        total = sum(ngrams.values())
        return f" ({total:,} boilerplate n-gram(s) ignored)" if total else ""

    per_set = ", ".join(
        f"{name}: {figures['contaminated_items']} of {figures['items']} items matched by "
        f"{figures['records']} record(s)" + ignored(figures.get("ignored_ngrams", {}))
        for name, figures in stats["eval_sets"].items()
        if figures["items"]
    )
    return [
        f"contamination: {stats['checked']} records checked; {per_set or 'no evaluation set'}"
        f"; dropped {stats['dropped']}, quarantined {stats['quarantined']}"
    ]
