"""Work-folder faults: a work folder that is a file, read-only or on a full disk stops `thresher
run` (and `thresher demo`) with exit 2 and one paragraph naming the folder and what to do, no
traceback; a run left `running` because its disk filled up, or its files were lost, is marked
failed by the next run (flows/work_folder.py, flows/lost_runs.py).

Tests run as root here, which writes in a folder whatever its mode: where the chmod does not
stop a write, the folder's refusal is injected at `os.open`, as the kernel would give it. A full
disk is injected the same way (and at the Parquet writes and the catalog's SQL during a run),
never made by filling a real file system."""

from __future__ import annotations

import errno
import io
import json
import logging
import os
import shutil
import socket
import sqlite3
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import polars as pl
import psutil
import pytest
from helpers import SMS_SOURCE, run_json, sms_rows, thresher, write_jsonl, write_project
from sqlalchemy.exc import OperationalError

from data_catalog import failures
from data_catalog.catalog import Catalog, now
from flows import work_folder
from flows.lost_runs import sweep_interrupted_runs
from flows.run_plan import OWNER_FILE
from pipeline.config import RunConfig

DISK_FULL = "database or disk is full"


def refuse_writes_in(monkeypatch, folder: Path, code: int) -> None:
    """Opening a file for writing in `folder` fails with `code`, as the kernel says it."""
    real_open = os.open

    def refused(path, flags, *args, **kwargs):
        if Path(path).parent == folder and flags & (os.O_WRONLY | os.O_RDWR):
            raise OSError(code, os.strerror(code), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refused)


def assert_explained(result, *expected: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "unexpected" not in result.stderr
    for text in expected:
        assert text in result.stderr, result.stderr


def test_a_work_folder_that_is_a_file_is_named_before_anything_runs(tmp_path):
    config = write_project(tmp_path, [SMS_SOURCE])
    (tmp_path / "work").write_text("not a folder")
    result = thresher("run", "--config", config)
    assert_explained(
        result, f"the work folder {tmp_path / 'work'} is a file", f"point workdir in {config}"
    )

    demo = tmp_path / "demo"  # the demo's work folder is DIRECTORY/work
    demo.write_text("not a folder either")
    result = thresher("demo", demo, "--quiet")
    assert_explained(
        result, f"{demo} (on the way to {demo / 'work'}) is a file", "the demo's DIRECTORY argument"
    )


def test_a_read_only_work_folder_is_named_before_anything_runs(tmp_path, monkeypatch):
    config = write_project(tmp_path, [SMS_SOURCE])
    workdir = tmp_path / "work"
    workdir.mkdir(mode=0o555)
    try:
        (workdir / "probe").write_text("")  # root: the mode does not stop it
        refuse_writes_in(monkeypatch, workdir, errno.EACCES)
    except PermissionError:
        pass
    result = thresher("run", "--config", config)
    assert_explained(
        result,
        f"cannot write in the work folder {workdir} (permission denied)",
        f"point workdir in {config} at a folder you can write in",
    )
    assert not (workdir / "catalog.db").exists()


def test_a_work_folder_on_a_full_disk_is_named_before_anything_runs(tmp_path, monkeypatch):
    config = write_project(tmp_path, [SMS_SOURCE])
    workdir = tmp_path / "work"
    workdir.mkdir()
    refuse_writes_in(monkeypatch, workdir, errno.ENOSPC)
    result = thresher("run", "--config", config)
    assert_explained(
        result, f"no space left on the device holding {workdir}: ", " free there; free some"
    )
    assert list(workdir.iterdir()) == []


def sqlite_full() -> OperationalError:
    """What SQLAlchemy raises when SQLite cannot grow its file."""
    return OperationalError("UPDATE runs", {}, sqlite3.OperationalError(DISK_FULL))


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (OSError(errno.ENOSPC, "No space left on device", "{w}/runs/r/a.parquet"),
         "no space left on the device holding {w}/runs/r/a.parquet: "),
        (sqlite_full(), "no space left on the device holding {w}/catalog.db: "),
        (pl.exceptions.ComputeError("parquet: underlying IO error: No space left on device "
                                    "(os error 28)"), "no space left on the device holding {w}: "),
        (OSError(errno.EROFS, "Read-only file system", "{w}/runs"),
         "cannot write in the work folder {w} (read-only file system)"),
        (OperationalError("INSERT", {}, sqlite3.OperationalError("attempt to write a readonly "
                                                                 "database")),
         "cannot write in the work folder {w} (permission denied)"),
        (PermissionError(errno.EACCES, "Permission denied", "/elsewhere/source.jsonl"), None),
        (ValueError("a bug"), None),
    ],
)  # fmt: skip
def test_faults_met_mid_run_are_explained_from_anywhere_in_the_chain(tmp_path, error, expected):
    workdir = str(tmp_path / "work")
    if isinstance(error, OSError) and error.filename:
        error.filename = error.filename.format(w=workdir)
    try:
        try:
            raise error
        except Exception as cause:
            raise RuntimeError("the run failed") from cause
    except RuntimeError as wrapped:
        found = work_folder.explain(wrapped, workdir)
    if expected is None:
        assert found is None
    else:
        assert found.startswith(expected.format(w=workdir)) and "run again" in found


def test_the_sweep_fails_lost_runs_and_leaves_live_and_young_ones(tmp_path, monkeypatch):
    """Runs `running` in the catalog: one whose owner (this process) is alive, one whose owner
    file is missing but that started moments ago, one whose owner file was lost, one whose run
    folder was lost, and another dataset's. Then the same with a shared catalog."""
    cfg = RunConfig(name="t", workdir=str(tmp_path / "work"), sources=[])
    catalog = Catalog.open(cfg.workdir)
    runs = tmp_path / "work" / "runs"
    me = {"host": socket.gethostname(), "pid": os.getpid(),
          "started": psutil.Process().create_time(), "flow_run_id": None}  # fmt: skip
    long_ago = now() - timedelta(minutes=5)
    for run_id, name, started, folder, owner in [
        ("live", "t", long_ago, True, True),
        ("young", "t", now(), True, False),
        ("lost-owner", "t", long_ago, True, False),
        ("lost-folder", "t", long_ago, False, False),
        ("other-dataset", "u", long_ago, False, False),
    ]:
        catalog.start_run(run_id, name, "c" * 64, started_at=started)
        if folder:
            (runs / run_id).mkdir(parents=True)
        if owner:
            (runs / run_id / OWNER_FILE).write_text(json.dumps(me))
    sweep_interrupted_runs(cfg, catalog)
    status = {run["run_id"]: (run["status"], run["error"]) for run in catalog.runs()}
    assert status["live"] == status["young"] == status["other-dataset"] == ("running", None)
    assert status["lost-owner"][0] == status["lost-folder"][0] == "failed"
    assert "its process is gone and its owner file was lost" in status["lost-owner"][1]
    assert "its process is gone and its run folder was lost" in status["lost-folder"][1]
    alerted = {row["flow_run_id"] for row in failures.failures(catalog)}
    assert alerted == {"lost-owner", "lost-folder"}

    shared = Catalog.open(cfg.workdir, url=f"sqlite:///{tmp_path / 'shared.db'}")
    shared.start_run("elsewhere", "t", "c" * 64, started_at=long_ago)
    sweep_interrupted_runs(cfg, shared)  # its folder may be on another machine
    assert [run["status"] for run in shared.runs()] == ["running"]


@contextmanager
def prefect_console():
    """What Prefect's console handler prints meanwhile."""
    from prefect.logging.handlers import PrefectConsoleHandler

    shown = io.StringIO()
    handlers = [h for h in logging.getLogger().handlers if isinstance(h, PrefectConsoleHandler)]
    with pytest.MonkeyPatch.context() as patch:
        for handler in handlers:
            patch.setattr(handler.console, "file", shown)
        yield shown


@contextmanager
def full_disk(workdir: Path):
    """From now on the disk under `workdir` is full: Parquet files and the catalog's writes
    (the run's row, the failure's record) fail as they do then."""
    write_parquet = pl.DataFrame.write_parquet

    def no_space(self, file, *args, **kwargs):
        if str(file).startswith(str(workdir)):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(file))
        return write_parquet(self, file, *args, **kwargs)

    def sql_full(*args, **kwargs):
        raise sqlite_full()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pl.DataFrame, "write_parquet", no_space)
        patch.setattr(Catalog, "finish_run", sql_full)
        patch.setattr(failures, "record", sql_full)
        yield


@pytest.mark.usefixtures("prefect_server")
def test_a_disk_full_mid_run_is_explained_and_its_stuck_run_failed_by_the_next(tmp_path, sms_spam):
    """A run fills the disk as it ingests and cannot even finish its catalog row; its run
    folder is then lost too. The next run marks it failed."""
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, 60))
    config = write_project(tmp_path, [SMS_SOURCE], gates={"enabled": False})
    workdir = (tmp_path / "work").resolve()
    with full_disk(workdir), prefect_console() as console:
        result = thresher("run", "--config", config, "--quiet")
    assert_explained(result, f"no space left on the device holding {workdir}", "free some")
    shown = console.getvalue()
    assert "Traceback" not in shown and "could not record or send the failure alert" not in shown
    assert shown.count("not recorded in the catalog") == 1  # the alert's one line
    (stuck,) = Catalog.open(workdir).runs()
    assert stuck["status"] == "running"
    assert (workdir / "runs" / stuck["run_id"] / OWNER_FILE).exists()  # for the sweep

    shutil.rmtree(workdir / "runs" / stuck["run_id"])
    run_json(config)
    stuck, done = Catalog.open(workdir).runs()
    assert stuck["status"] == "failed" and done["status"] == "succeeded"
    assert "its process is gone and its run folder was lost" in stuck["error"]
