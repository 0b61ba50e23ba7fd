"""Sources and published versions on fsspec filesystems: memory:// and file:// URLs."""

from __future__ import annotations

import json
from pathlib import Path

import fsspec
import numpy as np
import pytest
from helpers import SMS_SOURCE, sms_rows, write_jsonl, write_project
from typer.testing import CliRunner
from upath import UPath

from data_catalog.catalog import Catalog, open_version
from flows.cli import app
from training.data import SplitStream

pytestmark = pytest.mark.usefixtures("prefect_server")
runner = CliRunner()


def thresher(*args) -> object:
    return runner.invoke(app, [str(a) for a in args])


def run(config: Path) -> dict:
    result = thresher("run", "--config", config, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture
def memory_bucket():
    memory = fsspec.filesystem("memory")
    memory.rm("/bucket", recursive=True) if memory.exists("/bucket") else None
    yield UPath("memory://bucket")
    memory.rm("/bucket", recursive=True) if memory.exists("/bucket") else None


def test_sources_and_versions_in_memory_storage(tmp_path, sms_spam, memory_bucket):
    rows = sms_rows(sms_spam, 0, 300)
    local = write_jsonl(tmp_path / "local" / "data" / "sms-1.jsonl", rows)
    (memory_bucket / "in" / "sms-1.jsonl").write_bytes(Path(local).read_bytes())
    on_disk = write_project(
        tmp_path / "local", [{**SMS_SOURCE, "location": str(Path(local).parent / "sms*.jsonl")}]
    )
    remote = write_project(
        tmp_path / "remote",
        [{**SMS_SOURCE, "location": "memory://bucket/in/sms*.jsonl"}],
        publish={"location": "memory://bucket/datasets"},
    )
    expected = run(on_disk)
    summary = run(remote)
    # where the files are is not what the version is
    assert summary["dataset_hash"] == expected["dataset_hash"]
    version_url = f"memory://bucket/datasets/test-set/{summary['dataset_hash']}"
    assert summary["paths"]["version"] == version_url
    assert (UPath(version_url) / "manifest.json").exists()
    workdir = tmp_path / "remote" / "work"
    assert not (workdir / "datasets" / "test-set" / summary["dataset_hash"]).exists()
    assert not list((workdir / "datasets").glob("test-set/.staging-*"))

    version = open_version(workdir, "test-set")  # re-hashes the remote shards
    published = sum(frame.collect().height for frame in version.splits.values())
    assert published == summary["published"]
    assert Catalog.open(workdir).latest("test-set").path == version_url
    # the training stage reads its examples from the bucket too
    stream = SplitStream(version, "train", None)
    examples = stream.examples(np.arange(len(stream)))
    expected_texts = version.split("train").select("text").collect()["text"].to_list()
    assert len(stream) == version.manifest["split_counts"]["train"] > 0
    assert [example.text for example in examples] == expected_texts

    verified = thresher("catalog", "verify", summary["dataset_hash"][:12], "--workdir", workdir)
    assert verified.exit_code == 0, verified.stderr
    assert "all match" in verified.stderr

    # the next run reads its parent from the bucket and rebuilds the same version
    again = run(remote)
    assert again["dataset_hash"] == summary["dataset_hash"] and not again["created"]

    shard = UPath(version_url) / version.manifest["shards"][0]["path"]
    shard.write_bytes(shard.read_bytes()[:-10] + b"0123456789")
    tampered = thresher("catalog", "verify", summary["dataset_hash"][:12], "--workdir", workdir)
    assert tampered.exit_code == 1
    assert f"{version.manifest['shards'][0]['path']}: sha256 mismatch" in tampered.stderr


def test_file_urls_for_sources_and_versions(tmp_path, sms_spam):
    data = tmp_path / "data"
    write_jsonl(data / "sms-1.jsonl", sms_rows(sms_spam, 0, 200))
    store = tmp_path / "store"
    config = write_project(
        tmp_path / "project",
        [{**SMS_SOURCE, "location": f"file://{data}/sms*.jsonl"}],
        publish={"location": f"file://{store}"},
    )
    summary = run(config)
    folder = store / "test-set" / summary["dataset_hash"]
    assert summary["paths"]["version"] == str(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["data", "ledger.parquet", "manifest.json"]
    workdir = tmp_path / "project" / "work"
    verified = thresher("catalog", "verify", summary["dataset_hash"], "--workdir", workdir)
    assert verified.exit_code == 0, verified.stderr
    withdrawn = thresher(
        "catalog", "withdraw", summary["dataset_hash"], "--reason", "test", "--workdir", workdir
    )
    assert withdrawn.exit_code == 0, withdrawn.stderr
    assert (folder / "WITHDRAWN.json").exists()
