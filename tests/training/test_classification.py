"""Fine-tuning MiniLM on real SMS Spam: a small budget beats the majority class by far.

Measured on a version of the first 1500 messages (1122 train, 210 validation, 168 test):
40 steps of 16, lr 1e-4, max_length 64 restore the step-20 weights (validation loss 0.082)
and reach test accuracy 0.982 (165 of 168), macro F1 0.963; the majority class (ham) is
145 of the 168 test messages (0.863). About 60 s on 2 idle CPU cores.
"""

from __future__ import annotations

import json

import polars as pl
import pytest
from trainkit import sms_project
from typer.testing import CliRunner

from flows.cli import app
from training.run import train

CLASSIFY = {
    "objective": "classification",
    "max_steps": 40,
    "batch_size": 16,
    "lr": 1.0e-4,
    "tokenizer": {"kind": "minilm", "max_length": 64},
    "eval_every": 20,
    "checkpoint_every": 1000,
    "early_stopping": None,
    "log_every": 10,
    "threads": 2,
    "device": "cpu",
}


@pytest.fixture(scope="module")
def classified(tmp_path_factory, sms_spam):
    project = sms_project(tmp_path_factory.mktemp("spam"), sms_spam, 1500, CLASSIFY)
    return project, train(project.config)


def test_minilm_separates_spam_from_ham(classified):
    project, result = classified
    test = result.manifest["metrics"]["test"]
    labels = pl.read_parquet(
        [
            project.version_path / shard["path"]
            for shard in json.loads((project.version_path / "manifest.json").read_text())["shards"]
            if shard["split"] == "test"
        ]
    )["label"]
    majority = labels.value_counts()["count"].max() / len(labels)
    assert test["examples"] == len(labels) == result.manifest["dataset"]["records"]["test"]
    assert len(labels) >= 100
    assert test["accuracy"] >= 0.95
    assert test["accuracy"] > majority + 0.03  # the baseline is 0.863
    assert test["macro_f1"] >= 0.85 and set(test["f1_per_label"]) == {"ham", "spam"}
    assert test["loss"] < 0.3
    assert result.manifest["metrics"]["test_evaluations"] == 1


def test_the_manifest_names_the_model_tokenizer_and_labels(classified):
    project, result = classified
    manifest = result.manifest
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
    # helpers.sms_rows labels the messages ham / spam
    assert manifest["labels"] == ["ham", "spam"]
    assert manifest["dataset"]["records"]["train_skipped"] == 0
    assert manifest["dataset"]["records"]["train"] >= 1000
    assert manifest["packages"]["packages"] > 10
    assert (result.run_dir / "packages.txt").exists()
    curves = result.run_dir / "loss_curves.png"
    assert curves.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and curves.stat().st_size > 5000
    validation = [e for e in manifest["metrics"]["history"] if "validation_loss" in e]
    assert [e["step"] for e in validation] == [20, 40]
    assert {"validation_accuracy", "validation_macro_f1"} <= validation[0].keys()


def test_catalog_show_lists_the_run(classified):
    project, result = classified
    shown = CliRunner().invoke(
        app,
        ["catalog", "show", project.dataset_hash, "-w", str(project.workdir), "--json"],
        catch_exceptions=False,
    )
    assert shown.exit_code == 0, shown.stderr
    (run,) = json.loads(shown.stdout)["training_runs"]
    assert (run["run_id"], run["status"], run["objective"]) == (
        result.run_id,
        "completed",
        "classification",
    )
    assert run["best_step"] == result.manifest["metrics"]["best_step"]
    assert run["test_metrics"]["accuracy"] == result.manifest["metrics"]["test"]["accuracy"]
    assert run["manifest_path"] == str(result.manifest_path)
