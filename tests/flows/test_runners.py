"""Governance mapped over parts: on threads and on a real Dask cluster, the same version."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from distributed import Client, LocalCluster
from helpers import sms_rows, write_jsonl
from typer.testing import CliRunner

from flows.cli import app

pytestmark = pytest.mark.usefixtures("prefect_server")


def run_with(config: Path, runner: dict, workdir: str) -> dict:
    settings = yaml.safe_load(config.read_text())
    settings.update(runner=runner, workdir=workdir)
    variant = config.with_name(f"{workdir.strip('./')}.yaml")
    variant.write_text(yaml.safe_dump(settings))
    result = CliRunner().invoke(app, ["run", "--config", str(variant), "--json"])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_parts_on_threads_and_on_dask_publish_the_same_version(sms_project, sms_spam):
    with_key = {**sms_rows(sms_spam, 700, 701)[0], "id": "sms-with-key"}
    with_key["text"] = "the deploy key is AKIA" + "Z7XQ4MBN2VRC6TLE" + " keep it safe"
    write_jsonl(sms_project.parent / "data" / "sms-9.jsonl", [with_key])  # queued for review
    whole = run_with(sms_project, {"kind": "local"}, "./work-whole")
    parts = run_with(sms_project, {"kind": "local", "part_rows": 97, "workers": 2}, "./work-parts")
    assert parts["dataset_hash"] == whole["dataset_hash"]
    assert parts["reasons"] == whole["reasons"] and parts["changes"] == whole["changes"]
    assert parts["review"] == whole["review"] and whole["review"]["queued_new"] > 0
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        on_dask = run_with(
            sms_project, {"kind": "dask", "address": cluster.scheduler_address, "part_rows": 97},
            "./work-dask",
        )  # fmt: skip
        ran = client.run_on_scheduler(
            lambda dask_scheduler: {
                name: prefix.state_counts["memory"]  # tasks that finished with a result
                for name, prefix in dask_scheduler.task_prefixes.items()
            }
        )
    assert on_dask["dataset_hash"] == whole["dataset_hash"]
    assert on_dask["reasons"] == whole["reasons"]
    records = whole["records_in"] - whole["reasons"]["dropped"].get("duplicate_source_id", 0)
    parts_expected = -(-records // 97)
    assert ran == {"govern_part_task": parts_expected}
