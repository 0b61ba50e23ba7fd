"""The audit report's figures from a ledger: outcomes and funnel (also of a run that stopped),
blocked types, duplicate clusters across dedup stages, masked excerpts, version diffs."""

from __future__ import annotations

import json
import random

import polars as pl
import pytest
from credential_factory import secret_sample

from pipeline.core.schema import LEDGER_SCHEMA
from pipeline.report import audit


def ledger(*rows: tuple) -> pl.LazyFrame:
    """(record_id, stage, action, reason, evidence dict or None, terminal) rows."""
    return pl.LazyFrame(
        [
            (
                rid,
                "src",
                stage,
                action,
                reason,
                json.dumps(evidence) if evidence else None,
                terminal,
            )
            for rid, stage, action, reason, evidence, terminal in rows
        ],
        schema=LEDGER_SCHEMA,
        orient="row",
    )


def dedup(kept: str, method: str, cluster: str) -> dict:
    return {"duplicate_of": kept, "method": method, "similarity": 0.9, "cluster_id": cluster}


def test_outcomes_and_funnel_of_a_finished_and_of_a_stopped_run():
    events = ledger(
        ("a", "ingest", "dropped", "empty_text", None, True),
        ("b", "govern", "quarantined", "secret_detected", None, True),
        ("c", "exact_dedup", "dropped", "exact_duplicate", dedup("d", "exact", "c"), True),
        ("d", "publish", "published", None, {"split": "train"}, True),
        ("e", "publish", "published", None, {"split": "test"}, True),
        # a variant of d the augmentation stage made, dropped, and one it made and published
        ("v", "augment", "generated", "augmented", {"augmented_from": "d"}, False),
        ("v", "augment", "dropped", "augmentation_drifted", None, True),
        ("w", "augment", "generated", "augmented", {"augmented_from": "d"}, False),
        ("w", "publish", "published", None, {"split": "train"}, True),
    )
    assert audit.outcomes(events) == {
        "records_in": 5, "generated": 2, "published": 3, "dropped": 3, "quarantined": 1,
    }  # fmt: skip
    funnel = {row["stage"]: row for row in audit.funnel(events)}
    assert funnel["records in"]["records"] == 5 and funnel["govern"]["records"] == 3
    assert funnel["augment"] == {"stage": "augment", "records": 3, "removed": 1, "added": 2}
    assert funnel["contamination"]["records"] == 3

    stopped = ledger(("a", "ingest", "dropped", "empty_text", None, True))
    assert audit.outcomes(stopped, records_in=7) == {
        "records_in": 7, "generated": 0, "published": 0, "dropped": 1, "quarantined": 0,
        "unfinished": 6,
    }  # fmt: skip
    assert audit.funnel(stopped, records_in=7) == [
        {"stage": "records in", "records": 7, "removed": 0, "added": 0},
        {"stage": "ingest", "records": 6, "removed": 1, "added": 0},
    ]


def test_blocked_types_count_terminal_and_edit_evidence_but_no_values():
    events = ledger(
        ("a", "govern", "quarantined", "secret_detected",
         {"flags": ["secret_detected"], "detail": {"types": ["github_token", "jwt"]}}, True),
        ("b", "govern", "dropped", "secret_detected",
         {"flags": ["secret_detected"], "detail": {"types": ["github_token"]}}, True),
        ("c", "govern", "edited", "personal_data_redacted", {"types": ["email", "phone"]}, False),
        ("d", "govern", "quarantined", "personal_data",
         {"flags": ["personal_data"], "detail": {"types": ["credit_card"]}}, True),
        ("e", "govern", "dropped", "license_not_allowed",  # its license decided first
         {"flags": ["license_not_allowed", "secret_detected"], "detail": None,
          "secrets": ["github_token", "slack_token"]}, True),
    )  # fmt: skip
    assert audit.blocked_types(events) == {
        "secrets": {"github_token": 3, "jwt": 1, "slack_token": 1},
        "personal_data": {"credit_card": 1, "email": 1, "phone": 1},
    }


@pytest.mark.parametrize("part_rows", [1_000_000, 1])  # one partition; one per record
def test_a_cluster_merged_by_a_later_stage_counts_once_with_its_final_id(part_rows, monkeypatch):
    monkeypatch.setattr(audit, "CLUSTER_PART_ROWS", part_rows)
    # c is an exact duplicate of b; b is then a near duplicate of a, which is published; d's
    # kept record e was dropped later for another reason: d stays in the cluster it logged
    events = ledger(
        ("c", "exact_dedup", "dropped", "exact_duplicate", dedup("b", "exact", "b"), True),
        ("d", "exact_dedup", "dropped", "exact_duplicate", dedup("e", "exact", "e"), True),
        ("b", "near_dedup", "dropped", "near_duplicate", dedup("a", "minhash", "a"), True),
        ("e", "contamination", "dropped", "contaminated_eval", None, True),
        ("a", "publish", "published", None, None, True),
        ("x", "publish", "published", None, None, True),
    )
    published = pl.LazyFrame(
        {"record_id": ["a", "x"], "cluster_id": ["a", "x"], "text": ["kept text", "alone"]}
    )
    clusters = audit.dedup_clusters(events, published)
    assert clusters["clusters"] == 1 and clusters["size_histogram"] == {3: 1}
    assert clusters["dropped_by_method"] == {"exact": 2, "minhash": 1}
    [example] = clusters["examples"]
    assert example["published"] == [{"record_id": "a", "text": "kept text"}]
    assert [d["record_id"] for d in example["dropped"]] == ["b", "c"]
    # a record a deletion request names is never shown, even in a version built before it
    withheld = audit.dedup_clusters(events, published, withheld=pl.col("record_id") == "a")
    assert withheld["examples"][0]["published"] == [{"record_id": "a", "text": audit.WITHHELD}]
    assert withheld["size_histogram"] == clusters["size_histogram"]  # counts stay


def test_length_histograms_and_drops_by_source():
    counts = audit.length_histogram(pl.Series([0, 1, 2, 3, 4, 7, 8, 100, 2**21]))
    assert counts[:8] == [1, 1, 2, 2, 1, 0, 0, 1] and counts[-1] == 1 and sum(counts) == 9
    assert len(counts) == len(audit.LENGTH_EDGES)
    ledger = pl.LazyFrame(
        {
            "source": ["a", "a", "a", "b", "b"],
            "action": ["dropped", "dropped", "quarantined", "published", "dropped"],
            "reason": ["exact_duplicate", "exact_duplicate", "secret_detected", None, "too_short"],
            "terminal": [True] * 5,
        }
    )
    assert audit.drops_by_source(audit.terminal_counts(ledger)) == {
        "a": {"exact_duplicate (dropped)": 2, "secret_detected (quarantined)": 1},
        "b": {"too_short (dropped)": 1},
    }


def test_reason_examples_show_redacted_evidence_and_leave_out_forgotten_records():
    token = secret_sample("github_token", random.Random(3)).value
    ledger = pl.LazyFrame(
        {
            "record_id": ["r3", "r1", "r2", "r4", "r5"],
            "source": ["a"] * 5,
            "stage": ["quality"] * 4 + ["contamination"],
            "action": ["dropped"] * 4 + ["published"],
            "reason": ["too_short"] * 3 + ["contaminated_eval", None],
            "evidence": [
                '{"value": 3}',
                '{"value": 1}',
                '{"value": 2}',
                f'{{"span": "push with {token} now"}}',
                None,
            ],  # fmt: skip
            "terminal": [True] * 5,
        }
    )
    examples = audit.reason_examples(ledger, per_reason=2, withheld=pl.col("record_id") == "r1")
    assert [e["record_id"] for e in examples["too_short (dropped)"]] == ["r2", "r3"]
    [hit] = examples["contaminated_eval (dropped)"]
    assert "<SECRET:github_token>" in hit["evidence"] and token not in hit["evidence"]
    assert set(examples) == {"too_short (dropped)", "contaminated_eval (dropped)"}


def test_an_excerpt_masks_a_secret_that_runs_past_the_excerpt():
    sample = secret_sample("private_key", random.Random(5))
    text = "deploy key follows\n" + sample.text * 3
    excerpt = audit.redacted_excerpt(text)
    assert "<SECRET:private_key>" in excerpt
    assert sample.value[40:60] not in excerpt
    assert len(excerpt) <= audit.EXAMPLE_CHARS + 1


def test_version_diff_counts_added_removed_and_moved():
    before = pl.LazyFrame({"record_id": ["a", "b", "c"], "split": ["train", "test", "train"]})
    after = pl.LazyFrame({"record_id": ["a", "b", "d"], "split": ["train", "train", "test"]})
    diff = audit.version_diff(before, after)
    assert (diff["added"], diff["removed"], diff["moved"], diff["unchanged"]) == (1, 1, 1, 1)
    assert diff["moves"] == {"test -> train": 1}
    assert diff["examples"] == {"added": ["d"], "removed": ["c"], "moved": ["b"]}
    assert audit.version_diff(None, after) == {"parent": None}
