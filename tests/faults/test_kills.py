"""Fault suite, kills and full disks: `thresher run` killed with SIGKILL (the process alone, not
its group) at random points and at the commit, two runs started together, and a disk that
fills up while a version is published. Afterwards every catalogued version verifies and has
its report, killed runs are marked failed, nothing a run made outlives it, and no staging
folder or text-holding intermediate file is left."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from helpers import SMS_SOURCE, sms_rows, thresher, write_jsonl, write_project
from process_guard import ProcessGuard

from data_catalog.catalog import Catalog
from flows.report import REPORT_HTML, REPORT_JSON, report_folder

pytestmark = pytest.mark.services  # starts `thresher` processes

BIN = Path(sys.executable).parent
FAULT_INJECTION = Path(__file__).resolve().parents[1] / "fault_injection"
RUN_TIMEOUT = 180  # a guard; a run here takes about 8 s


def run_env(**extra: str) -> dict[str, str]:
    """The session's Prefect server, fault injection loaded, and `extra`."""
    from prefect.settings import PREFECT_API_URL

    path = os.pathsep.join(filter(None, [str(FAULT_INJECTION), os.environ.get("PYTHONPATH")]))
    return os.environ | {"PREFECT_API_URL": PREFECT_API_URL.value(), "PYTHONPATH": path} | extra


def start_run(config: Path, **extra: str) -> subprocess.Popen:
    """`thresher run`, leading a group of its own that is killed with the tests anyway."""
    process = subprocess.Popen(
        [BIN / "thresher", "run", "--config", config, "--json", "--quiet"],
        cwd=config.parent, env=run_env(**extra), stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    process.guard = ProcessGuard(process.pid)
    return process


def finish(process: subprocess.Popen) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=RUN_TIMEOUT)
    process.guard.release()
    return process.returncode, out, err


def kill_alone(process: subprocess.Popen) -> list[psutil.Process]:
    """SIGKILL the run's own process (not its group, as an out-of-memory killer does); return
    what it had started, to check that none of it lives on."""
    try:
        started = psutil.Process(process.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        started = []
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=30)
    return started


def wait_for(path: Path, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + RUN_TIMEOUT
    while not path.exists():
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline, f"the run never reached {path.name}"
        time.sleep(0.1)


def wait_for_workers(process: subprocess.Popen, count: int) -> None:
    """Until the run has started `count` worker processes (its cluster's)."""
    deadline = time.monotonic() + RUN_TIMEOUT
    while len(psutil.Process(process.pid).children(recursive=True)) < count:
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the run's Dask workers never started"
        time.sleep(0.1)


def leftovers(workdir: Path) -> list[Path]:
    """Staging folders, text-holding intermediate files and half-written reports."""
    patterns = ["datasets/*/.staging-*", "runs/*/stages", "runs/*/ledger-parts", "reports/*/.*"]
    found = [path for pattern in patterns for path in workdir.glob(pattern)]
    return [path for path in found if path.name != ".lock"]  # the reports' lock file


def test_kills_a_full_disk_and_runs_at_once_leave_every_version_whole_with_its_report(
    tmp_path, sms_spam, prefect_server
):
    """One work folder through four runs killed with SIGKILL, a run whose disk fills up while
    it publishes, and two runs started together: one story, so that the suite pays for one
    folder's runs."""
    rng = random.Random(24)
    rows = sms_rows(sms_spam, 0, 300)
    data = tmp_path / "data" / "sms-1.jsonl"
    workdir = tmp_path / "work"
    config = write_project(tmp_path, [SMS_SOURCE])
    on_dask = tmp_path / "on-dask.yaml"  # the same dataset, on a temporary Dask cluster
    on_dask.write_text(config.read_text() + "runner: {kind: dask, workers: 2}\n")
    # where each run dies: a random moment, just before the commit, just after it (before
    # its report), and on a temporary Dask cluster once its workers are up
    kills = ["random", "before commit", "after commit", "on dask"]
    survivors = []
    for number, where in enumerate(kills):
        write_jsonl(data, rows[: 200 + number])  # new input: each run makes a new version
        if where == "random":
            run = start_run(config)
            time.sleep(rng.uniform(0.5, 6.0))  # a run takes about 8 s, 3 of them to start
        elif where == "on dask":
            run = start_run(on_dask)
            wait_for_workers(run, 2)
        else:
            marker = tmp_path / f"held-{number}"
            hold = f"THRESHER_HOLD_{where.upper().replace(' ', '_')}"
            run = start_run(config, **{hold: str(marker)})
            wait_for(marker, run)
        started = kill_alone(run)
        survivors += [p for p in started if p.is_running()]
    _, alive = psutil.wait_procs(survivors, timeout=10)  # they learn their parent is gone
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]

    # the disk fills up as the second shard is written
    write_jsonl(data, rows[:250])
    versions_before = Catalog.open(workdir).versions()
    code, out, err = finish(start_run(config, THRESHER_FULL_DISK_AT_WRITE="2"))
    assert code == 2 and out == "", err[-3000:]
    assert "error: no space left on the device holding " in err
    full = err.split("holding ", 1)[1].split(":", 1)[0]
    assert "/.staging-" in full and full.endswith(".parquet")  # the shard being written
    assert Catalog.open(workdir).versions() == versions_before  # no partial version
    assert list(workdir.glob("datasets/*/.staging-*")) == []

    # space freed: two runs started together both succeed, on one version with its report
    results = [finish(run) for run in [start_run(config), start_run(config)]]
    assert [code for code, _, _ in results] == [0, 0], [err[-2000:] for _, _, err in results]
    summaries = [json.loads(out) for _, out, _ in results]
    (dataset_hash,) = {summary["dataset_hash"] for summary in summaries}
    assert any(summary["resumed_from"] for summary in summaries)  # the full disk's run

    catalog = Catalog.open(workdir)
    versions = catalog.versions()
    assert len(versions) == len(versions_before) + 1 >= 2
    for version in versions:  # the killed run's missing report was written by a later run
        folder = report_folder(workdir, version.name, version.dataset_hash)
        assert {path.name for path in folder.iterdir()} >= {
            REPORT_JSON, REPORT_HTML, "data_docs", "croissant.json", "datasheet.md"
        }  # fmt: skip
        report = json.loads((folder / REPORT_JSON).read_text())
        assert report["dataset_hash"] == version.dataset_hash
        verify = thresher("catalog", "verify", version.dataset_hash, "--workdir", workdir)
        assert verify.exit_code == 0, verify.stderr
    shutil.rmtree(folder)  # `catalog verify` writes a missing report too
    verify = thresher("catalog", "verify", version.dataset_hash, "--workdir", workdir)
    assert verify.exit_code == 0 and "wrote its missing report" in verify.stderr
    assert (folder / REPORT_JSON).is_file() and (folder / REPORT_HTML).is_file()
    runs = catalog.runs()  # a run killed while it started has no row yet
    assert "running" not in [run["status"] for run in runs]
    assert [run["status"] for run in runs[-2:]] == ["succeeded"] * 2
    failed = [run for run in runs if run["status"] == "failed"]
    interrupted = [run for run in failed if "interrupted: its process ended" in run["error"]]
    # before commit, after commit and on Dask each kill a run with a row; a random moment may
    # come before the row is written
    assert len(interrupted) >= 3 and len(failed) == len(interrupted) + 1  # + the full disk
    assert leftovers(workdir) == []


GUARDED = """
import subprocess, sys
sys.path.insert(0, sys.argv[1])
from process_guard import ProcessGuard
service = subprocess.Popen(["sleep", "300"], start_new_session=True)
guard = ProcessGuard(service.pid)
print(service.pid, flush=True)
sys.stdin.read()
"""


def test_a_service_a_test_started_dies_when_the_test_process_is_killed():
    """What keeps Chromium, PostgreSQL's and Prefect's servers from outliving a killed test
    run (tests/process_guard.py)."""
    tests = Path(__file__).resolve().parents[1]
    test_process = subprocess.Popen(
        [sys.executable, "-c", GUARDED, str(tests)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    service = psutil.Process(int(test_process.stdout.readline()))
    assert service.is_running()
    test_process.kill()  # SIGKILL: no clean-up of its own runs
    test_process.wait()
    service.wait(timeout=10)
    assert not service.is_running()
