"""Sources and published versions on fsspec filesystems: memory:// and file:// URLs."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import fsspec
import numpy as np
import pytest
from helpers import SMS_SOURCE, sms_rows, write_jsonl, write_project
from typer.testing import CliRunner
from upath import UPath

from data_catalog import failures
from data_catalog.catalog import Catalog, open_version
from flows.cli import app
from flows.lost_runs import sweep_interrupted_runs
from pipeline.config import load_run_config
from pipeline.core.errors import ConfigError
from training.data import SplitStream

pytestmark = pytest.mark.usefixtures("prefect_server")
runner = CliRunner()


def thresher(*args) -> object:
    return runner.invoke(app, [str(a) for a in args])


def run(config: Path, *options: str) -> dict:
    result = thresher("run", "--config", config, "--json", *options)
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
        runner={"workers": 1},  # the memory store is this process's
    )
    expected = run(on_disk)
    summary = run(remote)
    pooled = write_project(
        tmp_path / "pooled", [{**SMS_SOURCE, "location": "memory://bucket/in/sms*.jsonl"}]
    )
    with pytest.raises(ConfigError, match=r"memory://bucket/in/sms\*.jsonl is in this process's"):
        load_run_config(pooled)  # a pool of two processes by default: they cannot see it
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
    stream = SplitStream(version, "train", [])
    examples = stream.examples(np.arange(len(stream)))
    expected_texts = version.split("train").select("text").collect()["text"].to_list()
    assert len(stream) == version.manifest["split_counts"]["train"] > 0
    assert [example.text for example in examples] == expected_texts

    verified = thresher("catalog", "verify", summary["dataset_hash"][:12], "--workdir", workdir)
    assert verified.exit_code == 0, verified.stderr
    assert "all match" in verified.stderr

    # with nothing changed (the bucket's objects too), nothing is done; forced, the run reads
    # its parent from the bucket and rebuilds the same version
    assert run(remote)["unchanged_since"] == summary["run_id"]
    again = run(remote, "--force")
    assert again["dataset_hash"] == summary["dataset_hash"] and not again["created"]

    shard = UPath(version_url) / version.manifest["shards"][0]["path"]
    shard.write_bytes(shard.read_bytes()[:-10] + b"0123456789")
    tampered = thresher("catalog", "verify", summary["dataset_hash"][:12], "--workdir", workdir)
    assert tampered.exit_code == 1
    assert f"{version.manifest['shards'][0]['path']}: sha256 mismatch" in tampered.stderr

    ref = summary["dataset_hash"][:12]
    withdrawn = thresher("catalog", "withdraw", ref, "--reason", "tampered", "--workdir", workdir)
    assert withdrawn.exit_code == 0, withdrawn.stderr
    assert json.loads((UPath(version_url) / "WITHDRAWN.json").read_text())["reason"] == "tampered"
    purged = thresher("catalog", "purge", ref, "--workdir", workdir)
    assert purged.exit_code == 0, purged.stderr
    assert not (UPath(version_url) / "data").exists()
    assert (UPath(version_url) / "manifest.json").exists()  # the record of what it was stays


def test_the_sweep_removes_a_partial_copy_of_a_killed_run(tmp_path, sms_spam, memory_bucket):
    """A run killed while uploading its version leaves part of it in the bucket, no catalog
    row: the next run's sweep removes it, marks the run failed and records the crash."""
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, 50))
    config = write_project(
        tmp_path, [SMS_SOURCE], publish={"location": "memory://bucket/v"}, runner={"workers": 1}
    )
    cfg = load_run_config(config)
    catalog = Catalog.open(cfg.workdir)
    run_id = "20261130T000000Z-dead00"
    catalog.start_run(run_id, cfg.name, "0" * 64)
    run_dir = Path(cfg.workdir) / "runs" / run_id
    (run_dir / "stages").mkdir(parents=True)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    owner = {"host": socket.gethostname(), "pid": int(gone.stdout), "started": 1.0,
             "flow_run_id": "3f1f0c3e-0000-4000-8000-000000000001"}  # fmt: skip
    (run_dir / "owner.json").write_text(json.dumps(owner))
    staging = Path(cfg.workdir) / "datasets" / cfg.name / f".staging-{run_id}"
    (staging / "data").mkdir(parents=True)
    manifest = {"name": cfg.name, "dataset_hash": "ab" * 32}
    (staging / "manifest.json").write_text(json.dumps(manifest))
    partial = UPath(f"memory://bucket/v/{cfg.name}/{'ab' * 32}")
    (partial / "data" / "train" / "part-00000.parquet").write_bytes(b"half a shard")

    sweep_interrupted_runs(cfg, catalog)

    assert not partial.exists() and not staging.exists() and not (run_dir / "stages").exists()
    (run,) = catalog.runs()
    assert run["status"] == "failed" and run["error"].startswith("interrupted")
    (failure,) = failures.failures(catalog)
    assert failure["flow_run_id"] == owner["flow_run_id"] and failure["state"] == "Crashed"


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
    assert sorted(p.name for p in folder.iterdir()) == [
        "data",
        "gates.json",
        "ledger.parquet",
        "manifest.json",
    ]
    workdir = tmp_path / "project" / "work"
    verified = thresher("catalog", "verify", summary["dataset_hash"], "--workdir", workdir)
    assert verified.exit_code == 0, verified.stderr
    withdrawn = thresher(
        "catalog", "withdraw", summary["dataset_hash"], "--reason", "test", "--workdir", workdir
    )
    assert withdrawn.exit_code == 0, withdrawn.stderr
    assert (folder / "WITHDRAWN.json").exists()
