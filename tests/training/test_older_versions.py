"""A version published before the shards gained `language` and `language_score` (issue 27)
stays openable, verifiable and trainable: it is published here with the schema of that time."""

from __future__ import annotations

import polars as pl
from trainkit import sms_project, tiny

import pipeline.publish.stage
from data_catalog import open_version
from pipeline.core.schema import LANGUAGE_COLUMNS, PUBLISHED_SCHEMA
from training.run import train


def test_a_version_without_language_columns_opens_verifies_and_trains(
    tmp_path, sms_spam, monkeypatch
):
    before = pl.Schema({k: v for k, v in PUBLISHED_SCHEMA.items() if k not in LANGUAGE_COLUMNS})
    monkeypatch.setattr(pipeline.publish.stage, "PUBLISHED_SCHEMA", before)
    project = sms_project(tmp_path, sms_spam, 200, tiny(max_steps=4))
    monkeypatch.undo()

    version = open_version(project.workdir, "sms", project.dataset_hash, verify=True)
    assert [column["name"] for column in version.manifest["schema"]] == before.names()
    train_split = version.split("train").collect()
    assert train_split.columns == before.names() and train_split.height > 100
    result = train(project.write_config(tiny(max_steps=4)))
    assert result.manifest["dataset"]["hash"] == project.dataset_hash
    assert result.manifest["metrics"]["test"]
