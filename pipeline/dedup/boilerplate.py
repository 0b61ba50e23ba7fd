"""Boilerplate: segments repeated across many documents, removed from all of them.

License headers, cookie banners, signatures and navigation repeat verbatim in thousands of
documents. Document-level dedup keeps them (the documents differ elsewhere), yet a model trained
on them learns to recite them. So each text is cut into segments (`paragraph`: blocks between
blank lines, a whitespace-only line being blank; `line`: each line), a segment is compared by
its normalized form (stripped, whitespace runs made one space, case kept) and counted once per
distinct document (`content_hash`, so copies of one text that exact dedup kept count once), and
one found in more than `max_documents` documents is removed everywhere. Segments shorter than
`min_chars` are never boilerplate.

Kept segments stay byte for byte and are joined again by a blank line (or a newline; in line
mode, blank lines left adjacent become one, and none start or end the text); the edited text
gets a new `content_hash`, `source_content_hash` stays. An edit's evidence holds
the count of segments removed, their characters, and up to 10 of their hashes (16 hex digits)
with the documents holding each, never their text. A text left empty is dropped with reason
`only_boilerplate`.

It runs by key (pipeline/stage.py's ByKey): each part lists its distinct (segment key,
document) pairs, each key partition counts the documents of its keys, the flagged segments
are gathered (they are few), and each part is edited by them. A task holds one part's texts,
or one partition's keys: never the whole dataset.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline.config import BoilerplateConfig, DedupConfig
from pipeline.core import ledger, reasons
from pipeline.core.identity import xxh3_128_hex
from pipeline.stage import ByKey, Decided, RunContext, StageResult

STAGE = "boilerplate"
MAX_EVIDENCE_HASHES = 10
TOP = 5
# a maximal run of non-blank lines (leftmost-first: a match starts at the start of a line)
_PARAGRAPH = r"[^\n]*\S[^\n]*(?:\n[^\n]*\S[^\n]*)*"
_BLANK_RUN = r"\n(?:[^\S\n]*\n)+"  # line mode: blank lines between kept lines become one
_BLANK_ENDS = r"^(?:[^\S\n]*\n)+|(?:\n[^\S\n]*)+$"  # and none start or end the text
KEY_SCHEMA = {"_key": pl.String, "content_hash": pl.String, "_chars": pl.UInt32}
FLAGGED_SCHEMA = {"_key": pl.String, "documents": pl.UInt32, "chars": pl.UInt32}


def _keys(frame: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext) -> pl.DataFrame:
    """Each distinct (segment key, document) of a part, with the segment's length."""
    if cfg.boilerplate is None:
        return pl.DataFrame(schema=KEY_SCHEMA)
    documents = frame.select("content_hash", "text").unique("content_hash").collect()
    return (
        _segments(documents, cfg.boilerplate)
        .filter(pl.col("_key").is_not_null())
        .select("_key", "content_hash", "_chars")
        .unique(["_key", "content_hash"])
        .cast(KEY_SCHEMA)
    )


def _count(keys: pl.LazyFrame, cfg: DedupConfig) -> pl.DataFrame:
    """The segments of one key partition found in more than max_documents documents."""
    if cfg.boilerplate is None:
        return pl.DataFrame(schema=FLAGGED_SCHEMA)
    return (
        keys.group_by("_key")
        .agg(
            pl.col("content_hash").n_unique().alias("documents"),
            pl.col("_chars").first().alias("chars"),
        )
        .filter(pl.col("documents") > cfg.boilerplate.max_documents)
        .collect()
    )


def _decide(
    flagged: pl.LazyFrame, records: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext
) -> Decided:
    """Every partition's boilerplate segments, and the stats only the whole can tell."""
    flagged = flagged.sort("_key").collect()
    top = flagged.sort(["documents", "chars", "_key"], descending=[True, True, False]).head(TOP)
    return Decided(
        flagged,
        {
            "boilerplate_segments": flagged.height,
            "top": [
                {"hash": key[:16], "documents": documents, "chars": chars}
                for key, documents, chars in top.select("_key", "documents", "chars").iter_rows()
            ],
        },
    )


def _apply(
    frame: pl.LazyFrame, flagged: pl.LazyFrame, cfg: DedupConfig, ctx: RunContext
) -> StageResult:
    """Remove the flagged segments from a part's texts: its records, events and counts."""
    stats = {"edited": 0, "dropped": 0, "chars_removed": 0}
    flagged = flagged.collect()  # a few thousand hashes
    if cfg.boilerplate is None or flagged.is_empty():
        return StageResult(frame=frame, events=ledger.empty(), stats=stats)
    documents = frame.select("content_hash", "text").unique("content_hash").collect()
    segments = _segments(documents, cfg.boilerplate)
    changed = _changed(segments.join(flagged, on="_key", how="left"), cfg.boilerplate)
    changed = changed.with_columns(xxh3_128_hex(changed["_text"]).alias("_hash"))
    empty = pl.col("_text").str.strip_chars() == ""
    evidence = pl.struct("segments", "chars_removed", "hashes", "documents")
    records = (
        frame.select("record_id", "source", "content_hash")
        .join(changed.lazy(), on="content_hash", how="inner")
        .sort("record_id")
        .collect()
    )
    dropped, edited = records.filter(empty), records.filter(~empty)
    events = pl.concat(
        [
            ledger.empty(),
            ledger.events(
                edited, stage=STAGE, action=reasons.EDITED, reason=reasons.BOILERPLATE_REMOVED,
                evidence=evidence,
            ),
            ledger.events(
                dropped, stage=STAGE, action=reasons.DROPPED, reason=reasons.ONLY_BOILERPLATE,
                evidence=evidence,
            ),
        ]
    )  # fmt: skip
    edits = changed.filter(~empty).select("content_hash", "_text", "_hash").lazy()
    kept = (
        frame.filter(~pl.col("content_hash").is_in(changed.filter(empty)["content_hash"].implode()))
        .join(edits, on="content_hash", how="left", maintain_order="left")
        .with_columns(
            pl.coalesce("_text", "text").alias("text"),
            pl.coalesce("_hash", "content_hash").alias("content_hash"),
        )
        .drop("_text", "_hash")
    )
    stats.update(
        edited=edited.height,
        dropped=dropped.height,
        chars_removed=int(records["chars_removed"].sum()),
    )
    return StageResult(frame=kept, events=events, stats=stats)


# keys per part, document counts per key partition, the flagged set, edits per part
boilerplate = ByKey(keys=_keys, reduce=_count, decide=_decide, apply=_apply)


def _segments(documents: pl.DataFrame, settings: BoilerplateConfig) -> pl.DataFrame:
    """One row per segment of each distinct text, in order: content_hash, _position,
    _segment (as in the text), and its normalized form's length (_chars) and hash (_key; null
    when too short to count)."""
    if settings.segment == "paragraph":
        split = pl.col("text").str.extract_all(_PARAGRAPH)
    else:
        split = pl.col("text").str.split("\n")
    segments = (
        documents.select("content_hash", split.alias("_segment"))
        .with_columns(pl.int_ranges(pl.col("_segment").list.len()).alias("_position"))
        .explode("_segment", "_position")
        .filter(pl.col("_segment").is_not_null())
        .with_columns(
            # runs of whitespace become one space; the pattern leaves lone spaces alone, which
            # is most of them (bench/README.md: a quarter of the stage's time)
            pl.col("_segment")
            .str.strip_chars()
            .str.replace_all(r"\s{2,}|[^\S ]", " ")
            .alias("_normalized")
        )
    )
    keys = xxh3_128_hex(segments["_normalized"])
    return segments.with_columns(pl.col("_normalized").str.len_chars().alias("_chars")).select(
        "content_hash",
        "_position",
        "_segment",
        "_chars",
        pl.when(pl.col("_chars") >= settings.min_chars).then(keys).alias("_key"),
    )


def _changed(segments: pl.DataFrame, settings: BoilerplateConfig) -> pl.DataFrame:
    """Per distinct text holding boilerplate: its new text and the evidence of the edit."""
    removed = pl.col("documents").is_not_null()
    separator = "\n\n" if settings.segment == "paragraph" else "\n"
    touched = segments.filter(removed.any().over("content_hash")).sort("content_hash", "_position")
    text = pl.col("_segment").filter(~removed).str.join(separator)
    if settings.segment == "line":  # no run of blank lines where removed lines sat between
        text = text.str.replace_all(_BLANK_RUN, "\n\n").str.replace_all(_BLANK_ENDS, "")
    changed = touched.group_by("content_hash", maintain_order=True).agg(
        text.alias("_text"),
        removed.sum().cast(pl.Int64).alias("segments"),
        pl.col("_segment")
        .filter(removed)
        .str.len_chars()
        .sum()
        .cast(pl.Int64)
        .alias("chars_removed"),
    )
    listed = (
        touched.filter(removed)
        .unique(["content_hash", "_key"], keep="first", maintain_order=True)
        .group_by("content_hash", maintain_order=True)
        .agg(
            pl.col("_key").head(MAX_EVIDENCE_HASHES).str.slice(0, 16).alias("hashes"),
            pl.col("documents").head(MAX_EVIDENCE_HASHES).alias("documents"),
        )
    )
    return changed.join(listed, on="content_hash", how="left", maintain_order="left")


def summary_lines(stats: dict[str, Any]) -> list[str]:
    """The stage's stats as `thresher run` says them (nothing when it removed nothing)."""
    if not (stats.get("edited") or stats.get("dropped")):
        return []
    return [
        f"boilerplate: {stats['boilerplate_segments']} repeated segment(s) removed from "
        f"{stats['edited']} record(s); {stats['dropped']} left empty, dropped"
    ]
