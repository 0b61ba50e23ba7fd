"""The curate stages, in the order a run takes them: the one list the flow (flows/curate.py)
runs, `thresher dedup` finds its methods in, and the ledger numbers its parts by. Adding a
stage is a line here (README: "Adding a stage")."""

from __future__ import annotations

from dataclasses import replace

from pipeline.augment import augment, synthetic
from pipeline.contamination import stage as contamination
from pipeline.dedup import boilerplate, duplicates
from pipeline.dedup.exact import exact_dedup
from pipeline.dedup.near import near_dedup
from pipeline.dedup.semantic import semantic_dedup
from pipeline.govern.stage import govern
from pipeline.ingest.stage import ingest
from pipeline.publish.stage import publish
from pipeline.quality import stage as quality
from pipeline.split import stage as split
from pipeline.stage import ReportSection, Stage

# the audit report's section of every dedup method
DUPLICATES = ReportSection("duplicates", "Duplicates")
CURATE_STAGES: tuple[Stage, ...] = tuple(
    replace(stage, number=number)
    for number, stage in enumerate(
        (
            Stage("ingest", "sources", ingest, kind="source", gate_after="ingested"),
            Stage(
                "govern", "policy", govern, gate_after="governed", quarantined="review_items",
                report_section=ReportSection("governance", "Governance"),
                adds=("text", "metadata", "group", "license", "consent", "content_hash"),
            ),
            Stage(
                "quality", "quality", quality.quality, merge=quality.merge_stats,
                summary_at=("quality",), lines=quality.summary_lines,
                report_section=ReportSection("text", "The text"),
                adds=("text", "content_hash", "language", "language_score"),
            ),
            Stage(
                "exact_dedup", "dedup", exact_dedup, runs="by_key",
                adds=("cluster_id", "label"), summary_at=("dedup", "exact"),
                lines=duplicates.summary_lines("exact dedup", always=True), report_section=DUPLICATES,
            ),
            Stage(
                "near_dedup", "dedup", near_dedup, runs="by_key", adds=("cluster_id",),
                summary_at=("dedup", "minhash"), lines=duplicates.summary_lines("near dedup"),
                report_section=DUPLICATES,
            ),
            Stage(
                "boilerplate", "dedup", boilerplate.boilerplate, runs="by_key",
                adds=("text", "content_hash"), summary_at=("dedup", "boilerplate"),
                lines=boilerplate.summary_lines, report_section=DUPLICATES,
            ),
            Stage(
                "semantic_dedup", "dedup", semantic_dedup, runs="by_key", adds=("cluster_id",),
                summary_at=("dedup", "semantic"), lines=duplicates.summary_lines("semantic dedup"),
                report_section=DUPLICATES,
            ),
            Stage(
                "split", "split", split.split, runs="by_key", adds=("split",),
                checks=("no_leakage",), summary_at=("split",), lines=split.summary_lines,
                summary_keys=("cutoffs", "cutoffs_frozen", "locked", "moved", "dropped", "warnings"),
                report_section=ReportSection("splits", "Splits"),
            ),
            Stage(
                "synthetic", "synthetic", synthetic.synthetic, runs="by_key", adds=("split",),
                checks=("no_leakage",), summary_at=("synthetic",), lines=synthetic.summary_lines,
                report_section=ReportSection("labels", "Labels, synthetic data and fields"),
            ),
            Stage(
                "augment", "augment", augment.augment, runs="by_key", adds=("augmented_from",),
                checks=("no_leakage",), summary_at=("augment",), lines=augment.summary_lines,
            ),
            Stage(
                "contamination", "contamination", contamination.contamination,
                summary_at=("contamination",), quarantined="quarantined",
                lines=contamination.summary_lines,
                report_section=ReportSection("contamination", "Contamination"),
            ),
            Stage("publish", "publish", publish, kind="sink", gate_after="published"),
        ),
        start=1,
    )
)  # fmt: skip
STAGES = {stage.name: stage for stage in CURATE_STAGES}
# the stages between ingest and publishing, in order: each reads the one before
RECORD_STAGES = tuple(stage.name for stage in CURATE_STAGES if stage.kind == "records")
# the audit report's sections that show what stages did, each once, in the order of the first
# stage naming it (tests/flows/test_report_flow.py checks that their anchors differ)
REPORT_SECTIONS = tuple(
    dict.fromkeys(stage.report_section for stage in CURATE_STAGES if stage.report_section)
)
