"""A run trains only on a published version whose every shard still matches its manifest."""

from __future__ import annotations

import json

import pytest

from data_catalog import training_runs
from pipeline.core.errors import DataError
from pipeline.core.storage import file_sha256
from training.run import train


def shard_paths(project, split=None) -> list[str]:
    shards = json.loads((project.version_path / "manifest.json").read_text())["shards"]
    return [s["path"] for s in shards if split is None or s["split"] == split]


def no_training_runs(project) -> bool:
    runs = project.workdir / "training"
    return not runs.exists() or not any(runs.iterdir())


@pytest.mark.parametrize("split", ["train", "test"])
def test_a_corrupted_shard_stops_the_run_before_any_step(project, split, capfd):
    (corrupted,) = shard_paths(project, split)
    with open(project.version_path / corrupted, "ab") as handle:
        handle.write(b"\0")  # one byte more: the parquet still reads, the sha256 differs
    with pytest.raises(DataError, match="failed verification") as error:
        train(project.config)
    assert f"{corrupted}: sha256 mismatch" in str(error.value)
    assert [p for p in shard_paths(project) if p in str(error.value)] == [corrupted]
    assert no_training_runs(project)
    assert training_runs.runs(project.catalog) == []
    assert "step 1" not in capfd.readouterr().err


def test_a_missing_shard_stops_the_run(project):
    (removed,) = shard_paths(project, "validation")
    (project.version_path / removed).unlink()
    with pytest.raises(DataError, match=f"{removed}: missing"):
        train(project.config)
    assert no_training_runs(project)


def test_a_withdrawn_version_is_refused(project):
    project.catalog.withdraw(project.dataset_hash, "a deletion request")
    with pytest.raises(DataError, match="withdrawn") as latest:
        train(project.config)  # latest: no published version is left
    with pytest.raises(DataError, match=r"withdrawn .*\(a deletion request\)"):
        train(project.config, dataset=project.dataset_hash)
    with pytest.raises(DataError, match=r"withdrawn .*\(a deletion request\)"):
        train(project.config, dataset=project.dataset_hash[:12])
    assert "no published version" in str(latest.value)
    assert no_training_runs(project)
    assert training_runs.runs(project.catalog) == []


def test_an_unknown_dataset_hash_fails_clearly(project):
    with pytest.raises(DataError, match="no version 'deadbeef' in the catalog"):
        train(project.config, dataset="deadbeef")
    assert no_training_runs(project)


def test_a_dataset_hash_prefix_selects_the_version(project):
    result = train(project.config, dataset=project.dataset_hash[:10])
    assert result.manifest["dataset"]["hash"] == project.dataset_hash
    assert result.manifest["dataset"]["shards_verified"] == len(shard_paths(project))
    recorded = result.manifest["dataset"]["manifest_sha256"]
    assert recorded == file_sha256(project.version_path / "manifest.json")
