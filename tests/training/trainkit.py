"""Helpers for the training tests: publish a real version of N SMS messages and write a run
config with a given `train:` section beside it.

Most tests train a tiny causal LM (`TINY`): a byte-level BPE of 300 tokens and a one-block
transformer of width 32, a few milliseconds a step on one CPU thread. It measures nothing
before the run (`probe_steps: 0`: 0.2 s a run saved); the tests of the plan measure.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml
from helpers import SMS_SOURCE, stage_version

from data_catalog.catalog import Catalog

TINY: dict[str, Any] = {
    "objective": "causal_lm",
    "tokenizer": {"kind": "bpe", "vocab_size": 300, "max_length": 32},
    "model": {"d_model": 32, "layers": 1, "heads": 2, "dropout": 0.1},
    "batch_size": 8,
    "threads": 1,
    "device": "cpu",
    "max_steps": 20,
    "eval_every": 10,
    "checkpoint_every": 10,
    "log_every": 1,
    "early_stopping": None,
    "probe_steps": 0,  # the plan's measured steps: tests/training/test_plan.py turns them on
}


def tiny(**changes: Any) -> dict[str, Any]:
    """The tiny causal LM train section with `changes` applied (nested dicts merged)."""
    section = copy.deepcopy(TINY)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(section.get(key), dict):
            section[key] = {**section[key], **value}
        else:
            section[key] = value
    return section


@dataclass
class Project:
    root: Path
    config: Path
    catalog: Catalog
    dataset_hash: str

    @property
    def workdir(self) -> Path:
        return self.root / "work"

    @property
    def version_path(self) -> Path:
        return self.catalog.version_path(self.catalog.version(self.dataset_hash))

    def write_config(self, train: dict[str, Any] | None, name: str = "config.yaml") -> Path:
        return write_config(self.root, train, name)


def publish_sms(root: Path, sms_spam, messages: int, run_id: str = "run-1") -> tuple[Catalog, str]:
    """Ingest, split and commit the first `messages` SMS messages as a version of `sms`."""
    staged, cfg = stage_version(root, sms_spam, name="sms", stop=messages, run_id=run_id)
    catalog = Catalog.open(root / "work")
    version, _ = catalog.commit(staged, cfg.source_list)
    return catalog, version.dataset_hash


def write_config(root: Path, train: dict[str, Any] | None, name: str = "thresher.yaml") -> Path:
    """A run config for dataset `sms` in `root` (workdir ./work) with this train section.

    SMS_SOURCE's location (data/sms*.jsonl) is relative to the YAML's folder, where
    stage_version wrote the messages."""
    config: dict[str, Any] = {"name": "sms", "workdir": "./work", "sources": [SMS_SOURCE]}
    if train is not None:
        config["train"] = train
    path = root / name
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def sms_project(root: Path, sms_spam, messages: int, train: dict[str, Any] | None) -> Project:
    catalog, dataset_hash = publish_sms(root, sms_spam, messages)
    return Project(root, write_config(root, train), catalog, dataset_hash)


def weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, map_location="cpu", weights_only=True)["model"]


def same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def run_manifest(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "run_manifest.json").read_text())
