"""The quality stage: each source's filter profile, language identification, C4 line
removals, and the Gopher, C4, FineWeb and encoding rules; every drop names its rule, the
measured value and the bound.

Every record's language is identified on its text as the stage gets it (before any line is
removed), whatever its profile, among `language.candidates` when they are given (unless it
is surely in a language they leave out), and kept as the `language` and `language_score`
columns the shards publish. Profiles: `prose` applies everything; `short_messages` the
encoding rules, lorem ipsum and the language when identified with `min_confidence` (texts
under `language.min_words` words are not judged by it; an uncertain language drops only
prose), never a rule about length; `code` the encoding rules; `none` nothing. Order of the drops: encoding, then language, then C4 and FineWeb, then
Gopher (on the text after line removals).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline.config import QualityConfig
from pipeline.config.quality import LanguageConfig, LineRules
from pipeline.core import ledger, reasons
from pipeline.core.identity import xxh3_128_hex
from pipeline.core.normalize import normalize_text
from pipeline.core.schema import LANGUAGE_COLUMNS
from pipeline.stage import RunContext, StageResult, add_counts
from pipeline.text.gopher import gopher_decisions, gopher_signals, rules
from pipeline.text.langid import identify
from pipeline.text.line_rules import apply_line_rules

__all__ = ["gopher_decisions", "measure", "merge_stats", "quality"]

STAGE = "quality"
NEAREST = 3  # drops listed per rule, those measured closest to its bound
_ENCODING_ONLY = {
    "c4_terminal_punctuation": False,
    "c4_min_words_per_line": None,
    "c4_max_word_length": None,
    "c4_javascript": False,
    "c4_policy": False,
    "c4_curly_braces": False,
    "fineweb_line_punct_ratio": None,
    "fineweb_short_line_ratio": None,
    "fineweb_char_duplicates_ratio": None,
    "fineweb_new_line_ratio": None,
}


def profile_rules(cfg: QualityConfig) -> dict[str, LineRules | None]:
    """The line rules each profile applies (None: none)."""
    encoding = cfg.lines.model_copy(update={**_ENCODING_ONLY, "c4_lorem_ipsum": False})
    return {
        "prose": cfg.lines,
        "short_messages": cfg.lines.model_copy(update=_ENCODING_ONLY),
        "code": encoding,
        "none": None,
    }


def measure(records: pl.DataFrame, cfg: QualityConfig) -> pl.DataFrame:
    """Per record (record_id, source, text in): profile, language, score, the text after
    line removals, the removals, every measured quantity, and `reason` (null: it passes)."""
    profiles = records.select(
        "record_id",
        pl.col("source")
        .replace_strict(cfg.profiles, default=cfg.default_profile, return_dtype=pl.String)
        .alias("profile"),
    )
    parts = []
    for profile, line_rules in profile_rules(cfg).items():
        chosen = records.join(profiles.filter(pl.col("profile") == profile), on="record_id")
        if chosen.height == 0:
            continue
        if line_rules is None:
            measured = _unfiltered(chosen)
        else:
            lined = apply_line_rules(
                chosen.select("record_id", "text"), line_rules, line_removals=profile == "prose"
            ).rename({"reason": "line_reason"})
            measured = chosen.select("record_id", "profile").join(
                lined, on="record_id", maintain_order="left"
            )
        if profile == "prose":
            gopher = gopher_signals(measured.lazy(), cfg.gopher, all_records=False)
            measured = measured.hstack(gopher.drop("record_id"))  # same rows, same order
        parts.append(measured)
    if not parts:  # no records
        parts.append(_unfiltered(records.with_columns(profile=pl.lit("none"))))
    measured = pl.concat(parts, how="diagonal_relaxed").join(
        _languages(records, cfg.language), on="record_id", how="left", maintain_order="left"
    )
    return measured.with_columns(_reason(cfg, gopher="words" in measured.columns).alias("reason"))


def _unfiltered(records: pl.DataFrame) -> pl.DataFrame:
    return records.select(
        "record_id", "profile", "text", pl.lit(0, pl.UInt32).alias("removed_lines"),
        pl.lit(None, pl.List(pl.String)).alias("removed"),
        pl.lit(None, pl.String).alias("line_reason"),
    )  # fmt: skip


def _languages(records: pl.DataFrame, cfg: LanguageConfig) -> pl.DataFrame:
    """record_id, language, language_score, and whether the language may decide the record
    (`judged`: at least `min_words` words), identified on the text as the stage got it,
    before any line is removed, whatever the profile."""
    found = identify(records["text"], cfg.candidates, cfg.outside)
    words = records["text"].str.count_matches(r"\S+").fill_null(0)
    has_words = pl.when(words > 0)  # a blank text has no language (py3langid abstains)
    return found.select(
        records["record_id"],
        has_words.then(pl.col("language")).alias("language"),
        has_words.then(pl.col("language_score")).alias("language_score"),
        (words >= cfg.min_words).alias("judged"),
    )


def _reason(cfg: QualityConfig, gopher: bool) -> pl.Expr:
    language = cfg.language
    decided = pl.when(pl.col("line_reason").is_in(["mojibake", "invalid_characters"])).then(
        pl.col("line_reason")
    )
    if language.allow is not None:
        known = pl.col("language").is_not_null() & pl.col("judged")
        known = known & pl.col("profile").is_in(["prose", "short_messages"])
        sure = known & (pl.col("language_score") >= language.min_confidence)
        # informal short texts defeat language identification: only prose is dropped for it
        decided = decided.when(known & ~sure & (pl.col("profile") == "prose")).then(
            pl.lit(reasons.LANGUAGE_UNCERTAIN)
        )
        decided = decided.when(sure & ~pl.col("language").is_in(language.allow)).then(
            pl.lit(reasons.LANGUAGE_NOT_ALLOWED)
        )
    decided = decided.when(pl.col("line_reason").is_not_null()).then(pl.col("line_reason"))
    if gopher:  # some records are prose
        decided = decided.when(pl.col("profile") == "prose").then(_gopher_reason(cfg))
    return decided.otherwise(pl.lit(None, pl.String))


def _gopher_reason(cfg: QualityConfig) -> pl.Expr:
    decided = pl.when(pl.lit(False)).then(pl.lit(None, pl.String))
    for name, (quantity, bound, below) in rules(cfg.gopher).items():
        broken = quantity < bound if below else quantity > bound
        decided = decided.when(broken.fill_null(False)).then(pl.lit(name))
    return decided.otherwise(pl.lit(None, pl.String))


def _line_rule_bounds(cfg: QualityConfig) -> dict[str, tuple[str, float | None]]:
    lines = cfg.lines
    return {
        "mojibake": ("mojibake_ratio", lines.max_mojibake_ratio),
        "invalid_characters": ("control_ratio", lines.max_control_char_ratio),
        "fineweb_line_punct": ("line_punct_ratio", lines.fineweb_line_punct_ratio),
        "fineweb_short_lines": ("short_line_ratio", lines.fineweb_short_line_ratio),
        "fineweb_char_duplicates": ("char_duplicates_ratio", lines.fineweb_char_duplicates_ratio),
        "fineweb_list_like": ("new_line_ratio", lines.fineweb_new_line_ratio),
    }


def _evidence(cfg: QualityConfig, columns: list[str]) -> pl.Expr:
    """What a dropped record measured against which bound."""
    value = pl.when(pl.col("reason").is_in(reasons.LANGUAGE_REASONS)).then(pl.col("language_score"))
    bound = pl.when(pl.col("reason").is_in(reasons.LANGUAGE_REASONS)).then(
        pl.lit(cfg.language.min_confidence)
    )
    for name, (quantity, threshold, _) in (rules(cfg.gopher) if "words" in columns else {}).items():
        value = value.when(pl.col("reason") == name).then(quantity.cast(pl.Float64))
        bound = bound.when(pl.col("reason") == name).then(pl.lit(float(threshold)))
    for name, (column, threshold) in _line_rule_bounds(cfg).items():
        if column in columns and threshold is not None:
            value = value.when(pl.col("reason") == name).then(pl.col(column).cast(pl.Float64))
            bound = bound.when(pl.col("reason") == name).then(pl.lit(float(threshold)))
    return pl.struct(
        "profile",
        "language",
        pl.col("language_score").round(4).alias("score"),
        value.otherwise(None).round(4).alias("value"),
        bound.otherwise(None).alias("bound"),
    )


def quality(frame: pl.LazyFrame, cfg: QualityConfig, ctx: RunContext) -> StageResult:
    records = frame.select("record_id", "source", "text").collect()
    measured = measure(records, cfg).join(
        records.select("record_id", "source"), on="record_id", maintain_order="left"
    )
    dropped = measured.filter(pl.col("reason").is_not_null()).with_columns(
        _evidence(cfg, measured.columns).alias("_evidence")
    )
    edited = measured.filter(pl.col("reason").is_null() & (pl.col("removed_lines") > 0))
    edited = edited.with_columns(normalize_text(edited["text"]))  # as ingest leaves text
    edits = edited.select(
        "record_id",
        pl.col("text").alias("_text"),
        xxh3_128_hex(edited["text"]).alias("_hash"),
    )
    languages = measured.select("record_id", *LANGUAGE_COLUMNS)  # published with the record
    kept = (
        frame.drop(LANGUAGE_COLUMNS, strict=False)
        .join(dropped.lazy().select("record_id"), on="record_id", how="anti", maintain_order="left")
        .join(edits.lazy(), on="record_id", how="left", maintain_order="left")
        .join(languages.lazy(), on="record_id", how="left", maintain_order="left")
        .with_columns(
            pl.coalesce("_text", "text").alias("text"),
            pl.coalesce("_hash", "content_hash").alias("content_hash"),
        )
        .drop("_text", "_hash")
    )
    events = pl.concat(
        [
            ledger.empty(),
            ledger.events(
                edited, stage=STAGE, action=reasons.EDITED, reason=reasons.LINES_REMOVED,
                evidence=pl.struct(pl.col("removed").alias("rules")),
            ),
            ledger.events(
                dropped, stage=STAGE, action=reasons.DROPPED, reason=pl.col("reason"),
                evidence=pl.col("_evidence"),
            ),
        ]
    )  # fmt: skip
    return StageResult(frame=kept, events=events, stats=_stats(measured, dropped))


def _stats(measured: pl.DataFrame, dropped: pl.DataFrame) -> dict:
    def count(frame: pl.DataFrame, *columns: str) -> dict[str, int]:
        rows = frame.group_by(columns).len().sort(columns).iter_rows()
        return {":".join(str(v) for v in row[:-1]): row[-1] for row in rows}

    # per rule, the drops measured closest to its bound: what a user tunes it by (ids, not text)
    nearest = (
        dropped.unnest("_evidence", separator=".")
        .filter(pl.col("_evidence.value").is_not_null())
        .sort((pl.col("_evidence.value") - pl.col("_evidence.bound")).abs(), "record_id")
        .group_by("reason", maintain_order=True)
        .head(NEAREST)
    )
    boundary: dict[str, list] = {}
    for row in nearest.iter_rows(named=True):
        boundary.setdefault(row["reason"], []).append(
            {"record_id": row["record_id"], "source": row["source"],
             "value": row["_evidence.value"], "bound": row["_evidence.bound"]}
        )  # fmt: skip
    return {
        "dropped_by_source_and_reason": count(dropped, "source", "reason"),
        "nearest_to_bound": dict(sorted(boundary.items())),
        "languages": count(measured.filter(pl.col("language").is_not_null()), "language"),
        "languages_by_source": count(
            measured.filter(pl.col("language").is_not_null()), "source", "language"
        ),
        "records_with_lines_removed": measured.filter(pl.col("removed_lines") > 0).height,
        "lines_removed": int(measured["removed_lines"].sum()),
    }


def _distance(drop: dict) -> tuple[float, str]:
    return abs(drop["value"] - drop["bound"]), drop["record_id"]


def merge_stats(parts: list[dict]) -> dict:
    """The stats of the whole input from its parts': counts add up, and each rule's nearest
    drops are the nearest of all parts' nearest, in the same order as one call gives."""
    nearest: dict[str, list] = {}
    for part in parts:
        for reason, drops in part["nearest_to_bound"].items():
            nearest.setdefault(reason, []).extend(drops)
    merged = add_counts(
        [{k: v for k, v in part.items() if k != "nearest_to_bound"} for part in parts]
    )
    merged["nearest_to_bound"] = {
        reason: sorted(drops, key=_distance)[:NEAREST] for reason, drops in sorted(nearest.items())
    }
    return merged


def summary_lines(stats: dict[str, Any]) -> list[str]:
    """The stage's stats as `thresher run` says them."""
    languages = sorted(stats["languages"].items(), key=lambda item: -item[1])[:3]
    judged = ", ".join(f"{code} {n}" for code, n in languages) or "not judged"
    dropped = sum(stats["dropped_by_source_and_reason"].values())
    return [
        f"quality: dropped {dropped}, {stats['lines_removed']} line(s) removed from "
        f"{stats['records_with_lines_removed']} record(s); languages {judged}"
    ]
