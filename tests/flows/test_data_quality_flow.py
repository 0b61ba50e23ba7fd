"""Data quality beyond cleaning, end to end through `thresher run`: a label conflict reaches
the review queue and the adjudicated label is published; synthetic records carry their
generator, stay out of validation and test and are capped; augmented variants stay in
train and balance the ledger; fields known after the outcome are never published and a
training config cannot ask for them; a planted leaking field is reported."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest
from helpers import SMS_SOURCE, run_json, sms_rows, thresher, write_jsonl, write_project

from data_catalog.catalog import Catalog
from pipeline.config.train import TrainConfig
from pipeline.core import ledger, reasons
from pipeline.core.errors import DataError
from pipeline.publish.reader import read_version
from training.data import check_features, open_training_version

pytestmark = pytest.mark.usefixtures("prefect_server")

SMS_FIELDS = {**SMS_SOURCE["fields"], "metadata": ["channel", "handled_by", "resolution"]}
SYNTHETIC_SHARE = 0.05


def support_rows(sms_spam: pl.DataFrame) -> tuple[list[dict], str]:
    """400 real SMS messages with metadata, plus a copy of a message the collection holds
    twice (both ham) under a flipped label; returns the rows and that text."""
    rows = sms_rows(sms_spam, 0, 400)
    for index, row in enumerate(rows):
        row["channel"] = ["sms", "mms"][index % 2]
        # planted: filled in by the moderation team after a message was classified
        row["handled_by"] = "abuse-desk" if row["label"] == "spam" else "inbox"
        row["resolution"] = "blocked" if row["label"] == "spam" else "delivered"
    texts = [row["text"] for row in rows]
    repeated = next(text for text in texts if texts.count(text) == 2)
    assert {row["label"] for row in rows if row["text"] == repeated} == {"ham"}
    flipped = {**rows[0], "id": "relabelled-copy", "text": repeated, "label": "spam"}
    return [*rows, flipped], repeated


def generated_rows() -> list[dict]:
    """Messages a template generator wrote, declared as such."""
    prizes = ["a cruise", "a phone", "cash", "a voucher", "tickets", "a laptop"]
    return [
        {
            "id": f"gen-{n}",
            "text": f"Congratulations! You have won {prizes[n % 6]} (ref {n:03d}). "
            f"Reply WIN to {80000 + n} to claim before Friday.",
            "label": "spam",
            "sender": f"generator-batch-{n // 4}",
        }
        for n in range(60)
    ]


@pytest.fixture
def project(tmp_path: Path, sms_spam: pl.DataFrame) -> tuple[Path, str]:
    rows, repeated = support_rows(sms_spam)
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", rows)
    write_jsonl(tmp_path / "data" / "generated.jsonl", generated_rows())
    sms = {**SMS_SOURCE, "fields": SMS_FIELDS, "known_after_outcome": ["resolution"]}
    generated = {
        **SMS_SOURCE,
        "name": "generated",
        "location": "data/generated.jsonl",
        "fields": {"text": "text", "id": "id", "label": "label", "group": "sender"},
        "synthetic": {"generator": "prize-templates@v2", "parameters": {"templates": 1}},
    }
    config = write_project(
        tmp_path,
        [sms, generated],
        synthetic={"max_share": {"train": SYNTHETIC_SHARE}},
        augment={"fraction": 0.1, "seed": 7},
    )
    return config, repeated


def test_data_quality_end_to_end(project, tmp_path):
    config, repeated = project
    first = run_json(config)
    version = Path(first["paths"]["version"])
    events = pl.read_parquet(version / "ledger.parquet")
    records = pl.concat(
        frame.collect() for frame in read_version(version, verify=True).splits.values()
    )

    # label conflict: all three copies held, one item showing every label and source
    conflicted = events.filter(pl.col("reason") == reasons.LABEL_CONFLICT)
    assert conflicted.height == 3 and set(conflicted["action"]) == {reasons.QUARANTINED}
    assert repeated not in records["text"].to_list()
    catalog = Catalog.open(tmp_path / "work")
    from data_catalog import review_queue

    [item] = review_queue.items(catalog, reason=reasons.LABEL_CONFLICT)
    members = json.loads(item["evidence"])["members"]
    assert sorted(m["label"] for m in members) == ["ham", "ham", "spam"]
    assert {m["source"] for m in members} == {"sms"}
    # the rate's base: the sms records (all labelled) that reached exact dedup
    before_dedup = events.filter(
        pl.col("terminal") & pl.col("stage").is_in(["ingest", "govern", "quality"])
    )
    labelled = 401 - before_dedup.filter(pl.col("source") == "sms").height
    assert first["label_conflicts"]["sms"] == {
        "labelled": labelled, "conflicting": 3, "rate": round(3 / labelled, 6),
    }  # fmt: skip
    assert first["label_conflicts"]["generated"]["conflicting"] == 0

    # synthetic: marked, in train only, capped at the share of the real train records
    made = records.filter(pl.col("source") == "generated")
    assert made["synthetic"].all() and set(made["generator"]) == {"prize-templates@v2"}
    assert not records.filter(pl.col("source") == "sms")["synthetic"].any()
    assert set(made["split"]) == {"train"}
    # the cap counts the train split when the synthetic stage ran (before augmentation)
    train = first["synthetic"]["share"]["train"]
    real_train = train["records"] - train["synthetic"]
    allowed = math.floor(SYNTHETIC_SHARE * real_train / (1 - SYNTHETIC_SHARE) + 1e-9)
    assert made.height == train["synthetic"] == allowed
    assert made.height / records.filter(pl.col("split") == "train").height <= SYNTHETIC_SHARE
    capped = events.filter(pl.col("reason") == reasons.SYNTHETIC_CAP)
    held_out = events.filter((pl.col("reason") == reasons.SYNTHETIC_HELD_OUT) & pl.col("terminal"))
    assert made.height + capped.height + held_out.height == 60

    # augmentation: variants in train only, each from a train record, and the ledger balances
    variants = records.filter(pl.col("augmented_from").is_not_null())
    assert variants.height == first["augment"]["kept"] > 0
    assert set(variants["split"]) == {"train"}
    origins = records.filter(pl.col("record_id").is_in(variants["augmented_from"].implode()))
    assert set(origins["split"]) == {"train"} and not origins["synthetic"].any()
    generated = events.filter(pl.col("action") == reasons.GENERATED).height
    assert generated == first["generated"] == first["augment"]["generated"]
    counts = ledger.check_accounting(events.lazy(), first["records_in"], generated)
    assert counts["published"] == records.height

    # fields: the outcome field is gone, the planted one is reported
    fields = {key for m in records["metadata"].drop_nulls() for key in json.loads(m)}
    assert fields == {"channel", "handled_by"}
    manifest = json.loads((version / "manifest.json").read_text())
    assert manifest["fields"]["excluded"] == {"sms": ["resolution"]}
    [warning] = first["fields"]["leakage_warnings"]
    assert "'handled_by'" in warning
    checked = {f["field"]: f for f in manifest["fields"]["single_feature_check"]}
    assert checked["handled_by"]["leaks"] and not checked["channel"]["leaks"]
    report = json.loads(Path(first["paths"]["report"]).with_suffix(".json").read_text())
    assert report["splits"]["train"]["synthetic"] == allowed
    assert report["splits"]["validation"]["synthetic"] == 0
    assert report["data_quality"]["synthetic_sources"]["generated"]["generator"] == (
        "prize-templates@v2"
    )
    html = Path(first["paths"]["report"]).read_text()
    assert "Leakage warning" in html and "handled_by" in html

    # a training config cannot ask for the excluded field, nor for one that does not exist
    opened = open_training_version(tmp_path / "work", "test-set", "latest")
    check_features(opened, TrainConfig(features=["channel"]))
    for feature, message in (("resolution", "known_after_outcome"), ("colour", "not a field")):
        with pytest.raises(DataError, match=message):
            check_features(opened, TrainConfig(features=[feature]))

    # adjudication: the reviewer's label is what the next run publishes
    approved = thresher(
        "review", "approve", item["id"], "--label", "spam", "--reviewer", "ana",
        "--note", "a prize scam copy", "--workdir", tmp_path / "work",
    )  # fmt: skip
    assert approved.exit_code == 0, approved.stderr
    second = run_json(config)
    published = pl.concat(
        frame.collect() for frame in read_version(Path(second["paths"]["version"])).splits.values()
    ).filter(pl.col("text") == repeated)
    assert published.select("record_id", "label").rows() == [(item["record_id"], "spam")]
    later = pl.read_parquet(Path(second["paths"]["version"]) / "ledger.parquet")
    [edit] = later.filter(pl.col("reason") == reasons.LABEL_ADJUDICATED).iter_rows(named=True)
    assert edit["record_id"] == item["record_id"] and not edit["terminal"]
    assert json.loads(edit["evidence"])["to"] == "spam"
