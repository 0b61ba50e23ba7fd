"""The Prefect server `thresher` runs against on the embedded default (flows/server.py): one per
Prefect home, started in the background on first need even while both cores are busy, reused
by later runs, stopped by `thresher server stop` or after its idle timeout; temporary servers
whose run was killed are stopped by the next run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from prefect_services import QUIET_ENV, describe, survivors

from flows import server

BIN = Path(sys.executable).parent


def _user_env(home: Path, **extra: str) -> dict[str, str]:
    """A user's shell: no PREFECT_API_URL, every process marked by its PREFECT_HOME."""
    kept = {key: value for key, value in os.environ.items() if not key.startswith("PREFECT_")}
    return kept | QUIET_ENV | {"PREFECT_HOME": str(home)} | extra


def _thresher(env: dict[str, str], *args, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [BIN / "thresher", *map(str, args)], env=env, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


def _state(home: Path) -> dict:
    return json.loads((home / "thresher-server" / "server.json").read_text())


@pytest.mark.services
def test_runs_on_a_loaded_machine_start_one_server_and_reuse_it_until_it_is_stopped(tmp_path):
    home = tmp_path / "prefect-home"
    env = _user_env(home)
    assert _thresher(env, "init", tmp_path / "project").returncode == 0
    config = tmp_path / "project" / "thresher.yaml"
    burners = [  # both cores busy, at the run's own priority, while the server starts
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)
    ]
    try:
        first = _thresher(env, "run", "--config", config, "--json")
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    assert first.returncode == 0, first.stderr[-3000:]
    assert "starting a Prefect server for" in first.stderr
    summary = json.loads(first.stdout)
    assert summary["published"] == 39 and summary["created"]
    started = _state(home)
    assert summary["paths"]["prefect"].startswith(started["ui_url"])

    # the next run reuses it (no start), shows where it is, and keeps its summary on stdout
    forced = _thresher(env, "run", "--config", config, "--force")
    assert forced.returncode == 0, forced.stderr[-3000:]
    assert "starting a Prefect server" not in forced.stderr
    assert "ingested gate: done in" in forced.stderr and "contamination: started" in forced.stderr
    assert forced.stdout.startswith(f"dataset {summary['name']}  hash {summary['dataset_hash']}")
    assert _state(home)["pid"] == started["pid"]

    status = json.loads(_thresher(env, "server", "status", "--json").stdout)
    assert status["running"] and status["pid"] == started["pid"] and status["clients"] == []
    stopped = _thresher(env, "server", "stop")
    assert stopped.returncode == 0 and f"pid {started['pid']}" in stopped.stdout
    assert (
        not psutil.pid_exists(started["pid"])
        or psutil.Process(started["pid"]).status() == psutil.STATUS_ZOMBIE
    )
    assert _thresher(env, "server", "status").returncode == 1

    # a server nobody uses stops by itself after its idle timeout
    idle = _user_env(home, THRESHER_SERVER_IDLE_TIMEOUT="3")
    assert _thresher(idle, "server", "start").returncode == 0
    pid = _state(home)["pid"]
    deadline = time.monotonic() + 60
    while psutil.pid_exists(pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not psutil.pid_exists(pid), "the idle server did not stop"
    assert not (home / "thresher-server" / "server.json").exists()
    left = survivors(home)
    assert not left, describe(left)


def test_the_next_run_stops_a_temporary_server_whose_run_was_killed(tmp_path, monkeypatch):
    """Prefect stops its temporary server only at a clean exit: one left by a killed process
    (adopted by init) is stopped; one whose run is alive, or of another Prefect home, is not."""
    home = tmp_path / "home"
    monkeypatch.setenv("PREFECT_HOME", str(home))
    imitation = f"import sys, time; time.sleep(120)  # {server.TEMPORARY_SERVER_APP}"
    command = [sys.executable, "-c", imitation, server.TEMPORARY_SERVER_APP]
    ephemeral = {**os.environ, "PREFECT__SERVER_EPHEMERAL": "1"}
    # orphaned: its parent (a shell standing in for the killed run) exits at once
    subprocess.run(
        ["sh", "-c", f'"$0" "$@" >/dev/null 2>&1 & echo $! > {tmp_path / "orphan"}', *command],
        env=ephemeral, check=True,
    )  # fmt: skip
    orphan = int((tmp_path / "orphan").read_text())
    alive_run = subprocess.Popen(command, env=ephemeral)  # its run (this test) is alive
    elsewhere = subprocess.run(
        ["sh", "-c", '"$0" "$@" >/dev/null 2>&1 & echo $!', *command],
        env={**ephemeral, "PREFECT_HOME": str(tmp_path / "other")}, capture_output=True,
        text=True, check=True,
    )  # fmt: skip
    other = int(elsewhere.stdout)
    try:
        deadline = time.monotonic() + 10
        while psutil.Process(orphan).ppid() == os.getpid() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert server.sweep_orphaned_temporary_servers() == [orphan]
        assert (
            not psutil.pid_exists(orphan) or psutil.Process(orphan).status() == psutil.STATUS_ZOMBIE
        )
        assert alive_run.poll() is None and psutil.pid_exists(other)
    finally:
        alive_run.kill()
        alive_run.wait()
        psutil.Process(other).kill()


def test_the_api_url_a_user_chose_wins_over_a_background_server(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = _user_env(home)
    probe = [sys.executable, "-c", "from flows.server import ensure_server; print(ensure_server())"]

    def chosen(**extra: str) -> str:
        found = subprocess.run(probe, env=env | extra, capture_output=True, text=True, check=True)
        return found.stdout.strip()

    (home / "profiles.toml").write_text(
        'active = "team"\n[profiles.team]\nPREFECT_API_URL = "http://prefect.example:4200/api"\n'
    )
    assert chosen() == "http://prefect.example:4200/api"  # the active profile's
    assert chosen(PREFECT_API_URL="http://127.0.0.1:9/api") == "http://127.0.0.1:9/api"
    assert not (home / "thresher-server").exists()  # nothing started
