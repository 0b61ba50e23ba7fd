"""Field-level leakage: fields known after the outcome never reach records, and a field that
predicts the label on its own is found."""

from __future__ import annotations

import json

import polars as pl
import pytest
from helpers import SMS_SOURCE, sms_rows, write_jsonl, write_project

from pipeline.config import FieldLeakageConfig, RunConfig, SourceDeclaration, config_hash
from pipeline.core.errors import ConfigError
from pipeline.ingest.stage import ingest
from pipeline.split.field_leakage import field_lists, single_feature_check
from pipeline.stage import RunContext

FIELDS = {**SMS_SOURCE["fields"], "metadata": ["channel", "resolution"]}


def train_split(sms_spam: pl.DataFrame, metadata) -> pl.DataFrame:
    """500 real SMS records of the train split with the metadata `metadata(row, i)` gives."""
    rows = sms_rows(sms_spam, 0, 500)
    return pl.DataFrame(
        {
            "record_id": [row["id"] for row in rows],
            "label": [row["label"] for row in rows],
            "metadata": [json.dumps(metadata(row, i)) for i, row in enumerate(rows)],
        }
    )


def test_a_planted_outcome_column_is_flagged_and_honest_ones_are_not(sms_spam):
    def metadata(row, i):
        return {
            # written when the message was classified: the label in other words
            "resolution": "blocked" if row["label"] == "spam" else "delivered",
            "channel": ["sms", "mms", "rcs"][i % 3],  # unrelated to the label
            "message_id": f"m-{i}",  # unique per record: fits itself, predicts nothing
            "carrier": "acme",  # constant
        }

    checked = single_feature_check(train_split(sms_spam, metadata), FieldLeakageConfig())
    by_field = {entry["field"]: entry for entry in checked}
    assert sorted(by_field) == ["carrier", "channel", "message_id", "resolution"]
    assert by_field["resolution"] == {
        "field": "resolution", "records": 500, "values": 2, "balanced_accuracy": 1.0, "leaks": True,
    }  # fmt: skip
    # a field that says nothing predicts the majority label: balanced accuracy 1/2
    assert by_field["carrier"]["balanced_accuracy"] == 0.5
    assert by_field["message_id"]["balanced_accuracy"] == 0.5
    assert by_field["message_id"]["values"] == 500
    assert 0.35 < by_field["channel"]["balanced_accuracy"] < 0.65
    assert [entry["field"] for entry in checked if entry["leaks"]] == ["resolution"]


def test_a_nearly_perfect_column_crosses_the_bound_and_a_weaker_one_does_not(sms_spam):
    frame = train_split(sms_spam, lambda row, i: {"flag": row["label"]})
    spam = frame.filter(pl.col("label") == "spam").height
    # flip the flag of 1 in 10 spam records: spam recall falls to 0.9, ham's stays 1.0
    flipped = frame.with_columns(
        pl.when((pl.col("label") == "spam") & (pl.int_range(pl.len()) % 10 == 0))
        .then(pl.lit('{"flag": "ham"}'))
        .otherwise(pl.col("metadata"))
        .alias("metadata")
    )
    wrong = flipped.filter(pl.col("metadata").str.contains('"ham"') & (pl.col("label") == "spam"))
    expected = (1.0 + (spam - wrong.height) / spam) / 2
    [entry] = single_feature_check(flipped, FieldLeakageConfig(max_accuracy=0.95))
    assert entry["balanced_accuracy"] == pytest.approx(expected, abs=1e-4)
    assert entry["leaks"] is (expected > 0.95)
    [strict] = single_feature_check(flipped, FieldLeakageConfig(max_accuracy=0.9))
    assert strict["leaks"] is True


def test_too_few_records_or_one_label_are_not_judged(sms_spam):
    frame = train_split(sms_spam, lambda row, i: {"flag": row["label"]})
    assert single_feature_check(frame.head(10), FieldLeakageConfig(min_records=20)) == []
    ham = frame.filter(pl.col("label") == "ham")
    assert single_feature_check(ham, FieldLeakageConfig()) == []


def test_fields_known_after_the_outcome_never_reach_records(tmp_path, sms_spam):
    rows = [
        {**row, "channel": "sms", "resolution": "blocked" if row["label"] == "spam" else "ok"}
        for row in sms_rows(sms_spam, 0, 40)
    ]
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", rows)
    source = SourceDeclaration(
        **{**SMS_SOURCE, "fields": FIELDS},
        known_after_outcome=["resolution"],
        base_dir=str(tmp_path),
    )
    cfg = RunConfig(name="t", sources=[source])
    ctx = RunContext(run_id="r", run_dir=tmp_path, config=cfg, config_hash=config_hash(cfg))
    records = ingest([source], ctx, tmp_path / "in").frame.collect()
    assert records.height == 40
    assert {json.dumps(json.loads(m)) for m in records["metadata"]} == {'{"channel": "sms"}'}
    assert field_lists([source]) == {
        "published": {"sms": ["channel"]},
        "excluded": {"sms": ["resolution"]},
    }


def test_known_after_outcome_cannot_name_the_label_field(tmp_path):
    with pytest.raises(ValueError, match="only metadata fields can be excluded"):
        SourceDeclaration(**{**SMS_SOURCE, "fields": FIELDS}, known_after_outcome=["label"])


@pytest.mark.parametrize(
    ("feature", "message"),
    [
        ("resolution", "source sms declares it known_after_outcome"),
        ("colour", "no trained source publishes a metadata field of this name"),
    ],
)
def test_a_training_config_asking_for_an_excluded_or_unknown_field_is_refused(
    tmp_path, feature, message
):
    from pipeline.config import load_run_config

    source = {**SMS_SOURCE, "fields": FIELDS, "known_after_outcome": ["resolution"]}
    path = write_project(tmp_path, [source], train={"features": ["channel", feature]})
    with pytest.raises(ConfigError, match=message) as error:
        load_run_config(path)
    assert f"thresher.yaml:{_line_of(path, feature)}: train.features: {feature!r}" in str(
        error.value
    )
    ok = write_project(tmp_path / "ok", [source], train={"features": ["channel"]})
    assert load_run_config(ok).train.features == ["channel"]


def _line_of(path, text: str) -> int:
    """The line of the last list item `text` (train: comes after sources)."""
    lines = path.read_text().splitlines()
    return max(i for i, line in enumerate(lines, 1) if line.strip() == f"- {text}")
