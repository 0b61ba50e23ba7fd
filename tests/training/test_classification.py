"""Fine-tuning MiniLM on real SMS Spam: a small budget beats the majority class by far.

The run is the demo's (tests/conftest.py `demo_run`): the curate flow publishes the SMS Spam
Collection beside Debian changelogs, and the train flow fine-tunes MiniLM to tell spam from
ham on the version's SMS records (60 steps of 16, lr 1e-4, max_length 64, validation every 20
steps). Measured: test accuracy 0.991 on the 441 SMS test messages, macro F1 0.972; the
majority class (ham) is about 87% of them. About a minute on 2 idle CPU cores.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from flows.cli import app


@pytest.fixture(scope="module")
def classified(demo_run) -> tuple[dict, Path]:
    """The demo's training run: (its run manifest, its run folder)."""
    run_dir = Path(demo_run.trained["run_dir"])
    return json.loads((run_dir / "run_manifest.json").read_text()), run_dir


def test_minilm_separates_spam_from_ham(demo_run, classified):
    manifest, _ = classified
    test = manifest["metrics"]["test"]
    version = demo_run.workdir / "datasets" / "thresher-demo" / demo_run.summary["dataset_hash"]
    shards = json.loads((version / "manifest.json").read_text())["shards"]
    test_split = pl.read_parquet([version / s["path"] for s in shards if s["split"] == "test"])
    labels = test_split.filter(pl.col("source") == "sms-spam")["label"]  # train: sources
    majority = labels.value_counts()["count"].max() / len(labels)
    assert test["examples"] == len(labels) == manifest["dataset"]["records"]["test"]
    assert manifest["dataset"]["records"]["test_skipped"] == test_split.height - len(labels)
    assert len(labels) >= 100
    assert test["accuracy"] >= 0.95
    assert test["accuracy"] > majority + 0.03  # the baseline is about 0.87
    assert test["macro_f1"] >= 0.85 and set(test["f1_per_label"]) == {"0", "1"}
    assert test["loss"] < 0.3
    assert manifest["metrics"]["test_evaluations"] == 1


def test_the_manifest_names_the_model_tokenizer_and_labels(classified):
    manifest, run_dir = classified
    assert manifest["objective"] == "classification"
    assert manifest["base_model"]["name"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert len(manifest["base_model"]["digest"]) == 64
    tokenizer = manifest["tokenizer"]
    assert (tokenizer["kind"], tokenizer["vocab_size"], tokenizer["max_length"]) == (
        "minilm",
        30522,
        64,
    )
    assert len(tokenizer["digest"]) == 64 and tokenizer["special_tokens"]["cls_token"] == "[CLS]"
    # the demo's SMS source labels the messages by the collection's `spam` column: 0 or 1
    assert manifest["labels"] == ["0", "1"]
    # only the SMS records are eligible: the changelogs of the train split are skipped
    records = manifest["dataset"]["records"]
    assert records["train"] >= 3000 and records["train_skipped"] > 0
    assert sum(records["skipped_by"]["train"].values()) == records["train_skipped"]
    assert manifest["packages"]["packages"] > 10
    assert (run_dir / "packages.txt").exists()
    curves = run_dir / "loss_curves.png"
    assert curves.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and curves.stat().st_size > 5000
    validation = [e for e in manifest["metrics"]["history"] if "validation_loss" in e]
    assert [e["step"] for e in validation] == [20, 40, 60]
    assert {"validation_accuracy", "validation_macro_f1"} <= validation[0].keys()


def test_catalog_show_lists_the_run(demo_run, classified):
    manifest, run_dir = classified
    shown = CliRunner().invoke(
        app,
        [
            "catalog",
            "show",
            demo_run.summary["dataset_hash"],
            "-w",
            str(demo_run.workdir),
            "--json",
        ],
        catch_exceptions=False,
    )
    assert shown.exit_code == 0, shown.stderr
    (run,) = json.loads(shown.stdout)["training_runs"]
    assert (run["run_id"], run["status"], run["objective"]) == (
        manifest["run_id"],
        "completed",
        "classification",
    )
    assert run["best_step"] == manifest["metrics"]["best_step"]
    assert run["test_metrics"]["accuracy"] == manifest["metrics"]["test"]["accuracy"]
    assert run["manifest_path"] == str(run_dir / "run_manifest.json")


def test_the_plan_heads_the_manifest_and_its_projection_holds(demo_run, classified):
    manifest, _ = classified
    plan = manifest["plan"]
    assert list(manifest)[:3] == ["run_id", "status", "plan"]
    assert plan["dataset"]["hash"] == demo_run.summary["dataset_hash"]
    assert plan["records"]["train"] == manifest["dataset"]["records"]["train"]
    assert plan["steps"]["total"] == manifest["metrics"]["steps"] == 60
    parameters = plan["parameters"]
    assert parameters["method"] == "full fine-tuning: encoder and head"
    assert parameters["trainable"] == parameters["total"]
    assert 22_000_000 < parameters["total"] < 23_000_000  # all-MiniLM-L6-v2 and a 2-label head
    assert plan["objective"].startswith("classification: predict the label (2 labels: 0, 1)")
    # the steps timed before the run foretell the run's own: loosely, as the machine is shared
    taken = manifest["metrics"]["measured"]
    assert 1 / 3 < taken["seconds_per_step"] / plan["measured"]["seconds_per_step"] < 3
    assert 1 / 3 < taken["wall_seconds"] / plan["projected"]["wall_seconds"] < 3
    assert plan["over_budget"] == []
    page = Path(demo_run.trained["report"]).read_text()
    assert '<h2 id="training">Training</h2>' in page and manifest["run_id"] in page
