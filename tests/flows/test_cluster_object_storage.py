"""A user's cluster that shares only object storage with the machine that starts a run: a
loopback S3 server, a Dask scheduler and two workers to which the project's folder (its
data, work folder and run folders) looks empty (tests/cluster_harness.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import s3fs
import yaml
from cluster_harness import blind_dask_cluster, s3_server
from distributed import Client
from helpers import sms_rows, write_jsonl
from typer.testing import CliRunner

from data_catalog.catalog import Catalog
from flows.cli import app

pytestmark = [pytest.mark.services, pytest.mark.usefixtures("prefect_server")]
PART_ROWS = 280  # about 800 records: several parts on each worker, in every step


def thresher(*args) -> object:
    return CliRunner().invoke(app, [str(a) for a in args])


def run(config: Path) -> dict:
    result = thresher("run", "--config", config, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def variant(config: Path, name: str, **changes) -> Path:
    settings = yaml.safe_load(config.read_text()) | changes
    path = config.with_name(f"{name}.yaml")
    path.write_text(yaml.safe_dump(settings, sort_keys=False))
    return path


def test_a_cluster_sharing_only_object_storage_publishes_what_the_local_runner_does(
    sms_project, sms_spam, tmp_path, monkeypatch
):
    project = sms_project.parent
    rows = sms_rows(sms_spam, 0, 600)
    rows.append({**rows[3], "id": "sms-copy-of-3", "sender": "copy"})  # exact dedup's pair
    write_jsonl(project / "data" / "sms-1.jsonl", rows)
    settings = yaml.safe_load(sms_project.read_text())
    with s3_server() as s3:
        for name, value in s3.env.items():
            monkeypatch.setenv(name, value)
        s3fs.S3FileSystem.clear_instance_cache()  # none made before the endpoint was set
        lake = s3.bucket("lake")
        store = s3fs.S3FileSystem()
        # the same files here and in the bucket, each named from its location's fixed part
        here, there = [], []
        for source in settings["sources"]:
            pattern = Path(project, source["location"])
            fixed = next(folder for folder in pattern.parents if "*" not in str(folder))
            for file in sorted(fixed.glob(str(pattern.relative_to(fixed)))):
                store.put_file(str(file), f"lake/{source['name']}/{file.relative_to(fixed)}")
            here.append({**source, "location": str(pattern)})
            there.append(
                {**source, "location": f"{lake}/{source['name']}/{pattern.relative_to(fixed)}"}
            )
        local = run(variant(sms_project, "local", workdir="./work-local", sources=here))

        remote = variant(
            sms_project,
            "remote",
            workdir="./work-remote",
            sources=there,
            publish={**settings["publish"], "location": f"{lake}/datasets"},
        )
        with blind_dask_cluster([project], s3.env, logs=tmp_path / "cluster-logs") as address:
            on_cluster = yaml.safe_load(remote.read_text()) | {
                "runner": {
                    "kind": "dask",
                    "address": address,
                    "part_rows": PART_ROWS,
                    "scratch": f"{lake}/scratch",
                }
            }
            # without runner.scratch, the workers are told what they cannot see
            without = dict(on_cluster, runner=dict(on_cluster["runner"], scratch=None))
            remote.write_text(yaml.safe_dump(without, sort_keys=False))
            blind = thresher("run", "--config", remote)
            assert blind.exit_code != 0
            assert "cannot see the run's folder" in blind.stderr
            assert "runner.scratch on object storage" in " ".join(blind.stderr.split())
            remote.write_text(yaml.safe_dump(on_cluster, sort_keys=False))
            summary = run(remote)
            with Client(address, timeout=10) as client:
                ran = client.run_on_scheduler(
                    lambda dask_scheduler: {
                        name: prefix.state_counts["memory"]
                        for name, prefix in dask_scheduler.task_prefixes.items()
                    }
                )

        # every step ran on the workers, which saw none of the project's files
        steps = ("read", "finish", "part", "keys", "reduce", "exchange", "decide", "build")
        assert all(ran.get(f"{step}_task", 0) > 0 for step in (*steps, "route", "shard")), ran
        # where the files are and who ran the steps is not what the version is
        assert summary["dataset_hash"] == local["dataset_hash"]
        assert summary["reasons"] == local["reasons"] and summary["dedup"] == local["dedup"]
        assert summary["dedup"]["exact"]["dropped"] >= 1
        assert summary["steps"]["govern"]["parts"] > 2  # several parts, on both workers
        version = f"{lake}/datasets/test-set/{summary['dataset_hash']}"
        assert summary["paths"]["version"] == version
        assert store.exists(f"{version.removeprefix('s3://')}/manifest.json")
        # the run's intermediate files were only in the bucket, and are gone
        assert not store.exists(f"lake/scratch/test-set/{summary['run_id']}")
        run_dir = project / "work-remote" / "runs" / summary["run_id"]
        assert not (run_dir / "stages").exists() and not (run_dir / "ledger-parts").exists()
        workdir = project / "work-remote"
        assert Catalog.open(workdir).latest("test-set").path == version
        verified = thresher("catalog", "verify", summary["dataset_hash"][:12], "--workdir", workdir)
        assert verified.exit_code == 0, verified.stderr
        assert "all match" in verified.stderr
