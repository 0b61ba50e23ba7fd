"""The deployments of prefect.yaml on a real Prefect server, run by real process workers.

One server for the module (tests/prefect_services.py), `thresher deploy` run once, every run
triggered with the real `prefect deployment run` CLI and followed through the API. The
server's scheduler service is off: the 15-minute interval of release-approved/on-approval would
otherwise start runs of its own in the middle of these tests (the schedules themselves are
registered all the same, and checked).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import string
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

import polars as pl
import pytest
from helpers import (
    SMS_SOURCE,
    WebhookReceiver,
    sms_rows,
    webhook_receiver,
    write_jsonl,
    write_project,
)
from prefect_services import PrefectServer, Service, alive, running_server

from data_catalog import failures, review_queue
from data_catalog.catalog import Catalog, open_version

REPOSITORY = Path(__file__).resolve().parents[2]
THRESHER = str(Path(sys.executable).parent / "thresher")
FAULT_INJECTION = REPOSITORY / "tests" / "fault_injection"
NAME = "test-set"
RUN_TIMEOUT = 120  # seconds from `prefect deployment run` to a final state; ~12 s measured

pytestmark = pytest.mark.services  # a Prefect server and process workers of its own


@dataclass(frozen=True)
class Project:
    root: Path
    config: Path

    @property
    def workdir(self) -> Path:
        return self.root / "work"

    def catalog(self) -> Catalog:
        return Catalog.open(self.workdir)


def sms_project(root: Path, sms_spam: pl.DataFrame) -> Project:
    write_jsonl(root / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, 150))
    return Project(root, write_project(root, [SMS_SOURCE]))


@pytest.fixture(scope="module")
def project(tmp_path_factory, sms_spam) -> Project:
    """The project the deployments were registered with (THRESHER_CONFIG)."""
    return sms_project(tmp_path_factory.mktemp("deployed"), sms_spam)


@pytest.fixture(scope="module")
def prefect(tmp_path_factory, project: Project):
    """A real server with the deployments registered by `thresher deploy`; stopped with its
    workers at the end of the module, and no process of theirs left (running_server)."""
    home = tmp_path_factory.mktemp("prefect-home")
    with running_server(home, PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED="false") as server:
        deployed = subprocess.run(
            [THRESHER, "deploy", "--config", str(project.config)],
            env=server.env(),
            cwd=REPOSITORY,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert deployed.returncode == 0, deployed.stdout + deployed.stderr
        yield server


@pytest.fixture(scope="module")
def receiver():
    """A local webhook receiver for the alerts of failed runs."""
    with webhook_receiver() as found:
        yield found


@pytest.fixture
def worker(prefect: PrefectServer, project: Project, receiver: WebhookReceiver):
    """The plain worker of the pool, started once and kept for the next tests; it sends the
    alerts of failed runs to `receiver`, and records them in the project's catalog when a
    run's config cannot be read."""

    def running() -> Service:
        for found in prefect.workers:
            if found.name.startswith("plain") and found.process.poll() is None:
                return found
        alerts = {"THRESHER_ALERT_WEBHOOK": receiver.url, "THRESHER_WORKDIR": str(project.workdir)}
        return prefect.start_worker(name="plain", env=alerts)

    return running


@contextlib.contextmanager
def api(server: PrefectServer):
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    # get_client() is called once the settings point at this server
    with (
        temporary_settings({PREFECT_API_URL: server.api_url}),
        get_client(sync_client=True) as client,
    ):
        yield client


def trigger(server: PrefectServer, config: Path, deployment: str = "curate/nightly") -> UUID:
    """`prefect deployment run DEPLOYMENT --param config_path=CONFIG`; the flow run's id."""
    started = server.prefect(
        "deployment", "run", deployment, "--param", f"config_path={config}", cwd=REPOSITORY
    )
    assert started.returncode == 0, started.stdout + started.stderr
    found = re.search(r"UUID: ([0-9a-f-]{36})", started.stdout)
    assert found, started.stdout
    return UUID(found[1])


def wait_final(server: PrefectServer, flow_run_id: UUID, timeout: float = RUN_TIMEOUT):
    """The flow run once it reached a final state, read through the API."""
    deadline = time.monotonic() + timeout
    with api(server) as client:
        while True:
            run = client.read_flow_run(flow_run_id)
            if run.state is not None and run.state.is_final():
                return run
            if time.monotonic() > deadline:
                pytest.fail(f"flow run {flow_run_id} still {run.state_name}{logs(server)}")
            time.sleep(0.5)


def logs(server: PrefectServer) -> str:
    return "".join(f"\n--- {w.name} ---\n{w.log_tail(4000)}" for w in server.workers)


def test_nightly_run_through_the_cli_publishes_a_version(prefect, project, worker):
    worker()
    run = wait_final(prefect, trigger(prefect, project.config))

    assert run.state.is_completed(), f"{run.state}{logs(prefect)}"
    assert run.parameters == {"config_path": str(project.config)}
    catalog = project.catalog()
    latest = catalog.latest(NAME)
    assert latest is not None
    (row,) = catalog.runs(NAME)
    assert row["status"] == "succeeded" and row["dataset_hash"] == latest.dataset_hash
    with api(prefect) as client:
        deployment = client.read_deployment_by_name("curate/nightly")
    (schedule,) = deployment.schedules
    assert (schedule.schedule.cron, schedule.schedule.timezone) == ("0 2 * * *", "UTC")
    assert schedule.active
    assert deployment.parameters == {"config_path": str(project.config)}  # THRESHER_CONFIG
    assert deployment.work_pool_name == "thresher"


def test_a_run_with_a_missing_config_fails_names_the_path_and_alerts(
    prefect, project, worker, receiver
):
    worker()
    missing = project.root / "no-such-run.yaml"
    versions = len(project.catalog().versions())

    run = wait_final(prefect, trigger(prefect, missing))

    assert run.state.is_failed(), f"{run.state}{logs(prefect)}"
    assert f"{missing}: no such file" in run.state.message
    assert len(project.catalog().versions()) == versions
    # the on_failure hook runs after the state is final: wait for its POST and catalog row
    deadline = time.monotonic() + 30
    while not (recorded := failures.failures(project.catalog())):
        if time.monotonic() > deadline:
            pytest.fail(f"no failure recorded; alerts received: {receiver.received}{logs(prefect)}")
        time.sleep(0.25)
    (alert,) = receiver.received
    assert alert["flow_run_id"] == str(run.id) and alert["flow"] == "curate"
    assert alert["event"] == "thresher.run.failed" and alert["state"] == "Failed"
    assert f"{missing}: no such file" in alert["reason"]
    assert alert["config_path"] == str(missing) and alert["deployment"] == "nightly"
    listed = subprocess.run(
        [THRESHER, "catalog", "failures", "--workdir", str(project.workdir), "--json"],
        env=prefect.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stdout + listed.stderr
    (failure,) = map(json.loads, listed.stdout.splitlines())
    assert failure["flow_run_id"] == str(run.id) and failure["state"] == "Failed"
    assert f"{missing}: no such file" in failure["reason"]
    assert failure["alerts"] == {"webhook": "HTTP 204"}
    assert len(recorded) == 1


def test_a_worker_killed_before_the_commit_leaves_no_version_and_the_next_run_recovers(
    prefect, worker, tmp_path, sms_spam
):
    other = sms_project(tmp_path / "other", sms_spam)  # the deployment with its own config
    marker = tmp_path / "holding-before-commit"
    prefect.stop_workers()  # only the held worker may take the run
    held = prefect.start_worker(
        name="held",
        env={
            "THRESHER_HOLD_BEFORE_COMMIT": str(marker),
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(FAULT_INJECTION), os.environ.get("PYTHONPATH")])
            ),
        },
    )
    killed_run = trigger(prefect, other.config)
    deadline = time.monotonic() + RUN_TIMEOUT
    while not marker.exists():
        if held.process.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"the held run never reached the commit{logs(prefect)}")
        time.sleep(0.25)
    holding = json.loads(marker.read_text())
    tree = held.tree()
    assert holding["pid"] in {p.pid for p in tree}  # the flow run is the worker's descendant

    held.kill()  # SIGKILL: the worker, its group, the flow run's supervisor and engine
    prefect.workers.remove(held)

    assert not [p for p in tree if alive(p)]
    catalog = other.catalog()
    assert catalog.versions() == [] and catalog.latest(NAME) is None
    staging = Path(holding["staging"])
    assert (
        staging.name.startswith(".staging-") and staging.parent == other.workdir / "datasets" / NAME
    )
    assert list((staging / "data").rglob("*.parquet")), "the shards were written"
    (row,) = catalog.runs(NAME)
    assert row["status"] == "running" and staging.name == f".staging-{row['run_id']}"
    killed_dir = other.workdir / "runs" / row["run_id"]
    assert (killed_dir / "stages").is_dir() and (killed_dir / "owner.json").exists()
    with api(prefect) as client:  # nobody is left to report the end of the killed run
        assert client.read_flow_run(killed_run).state.is_running()

    worker()
    run = wait_final(prefect, trigger(prefect, other.config))

    assert run.state.is_completed(), f"{run.state}{logs(prefect)}"
    latest = catalog.latest(NAME)
    assert latest is not None and catalog.version_path(latest).exists()
    assert not staging.exists()
    assert not list((other.workdir / "datasets" / NAME).glob(".staging-*"))
    assert not (killed_dir / "stages").exists() and not (killed_dir / "owner.json").exists()
    killed, rerun = catalog.runs(NAME)
    assert killed["run_id"] == row["run_id"]
    assert killed["status"] == "failed"
    assert killed["error"].startswith("interrupted: its process ended (run ")
    assert rerun["status"] == "succeeded" and rerun["dataset_hash"] == latest.dataset_hash
    # no state hook ran for the killed run: the sweep that found it recorded it, as crashed
    (failure,) = failures.failures(catalog)
    assert failure["flow_run_id"] == str(killed_run) and failure["state"] == "Crashed"
    assert failure["reason"] == killed["error"] and failure["dataset"] == NAME


def fake_aws_key_id(seed: int = 7) -> str:
    rng = random.Random(seed)
    return "AKIA" + "".join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(16))


def test_an_approval_event_runs_release_approved_and_publishes_the_record(
    prefect, project, worker, sms_spam
):
    worker()
    key = fake_aws_key_id()
    flagged = {**sms_rows(sms_spam, 200, 201)[0], "id": "sms-with-key"}
    flagged["text"] = f"new laptop, the deploy key is {key} do not share it"
    write_jsonl(project.root / "data" / "sms-2.jsonl", [flagged])
    queued = wait_final(prefect, trigger(prefect, project.config))
    assert queued.state.is_completed(), f"{queued.state}{logs(prefect)}"
    catalog = project.catalog()
    before = catalog.latest(NAME)
    (item,) = [
        i
        for i in review_queue.items(catalog, status="pending", reason="secret_detected")
        if i["dataset"] == NAME
    ]
    with api(prefect) as client:
        release = client.read_deployment_by_name("release-approved/on-approval")
        assert client.read_flow_runs(deployment_filter=_deployment(release.id)) == []

    approved = subprocess.run(
        [THRESHER, "review", "approve", str(item["id"]), "--reviewer", "r", "--note", "ok"]
        + ["--workdir", str(project.workdir)],
        env=prefect.env(),
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert approved.returncode == 0, approved.stdout + approved.stderr

    deadline = time.monotonic() + 60
    with api(prefect) as client:
        while not (runs := client.read_flow_runs(deployment_filter=_deployment(release.id))):
            if time.monotonic() > deadline:
                pytest.fail(f"no release-approved run was created by the automation{logs(prefect)}")
            time.sleep(0.5)
    (created,) = runs
    assert created.created_by.type == "AUTOMATION" and not created.auto_scheduled
    assert created.parameters == {"config_path": str(project.config)}
    run = wait_final(prefect, created.id)

    assert run.state.is_completed(), f"{run.state}{logs(prefect)}"
    latest = catalog.latest(NAME)
    assert latest.dataset_hash != before.dataset_hash and latest.parent_hash == before.dataset_hash
    assert catalog.runs(NAME)[-1]["dataset_hash"] == latest.dataset_hash
    published = pl.concat(
        frame.collect() for frame in open_version(project.workdir, NAME).splits.values()
    )
    assert published.filter(pl.col("text").str.contains(key, literal=True)).height == 1
    assert review_queue.item(catalog, item["id"])["status"] == "approved"


def _deployment(deployment_id: UUID):
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    return DeploymentFilter(id=DeploymentFilterId(any_=[deployment_id]))
