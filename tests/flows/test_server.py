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
import urllib.request
from pathlib import Path

import psutil
import pytest
from prefect_services import describe, free_port, survivors, user_env

from flows import server

BIN = Path(sys.executable).parent


def _thresher(env: dict[str, str], *args, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [BIN / "thresher", *map(str, args)], env=env, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


def _state(home: Path) -> dict:
    return json.loads((home / "thresher-server" / "server.json").read_text())


@pytest.mark.services
def test_a_run_on_a_loaded_machine_starts_the_server_that_later_commands_reuse_until_idle(
    tmp_path,
):
    home = tmp_path / "prefect-home"
    env = user_env(home, THRESHER_SERVER_IDLE_TIMEOUT="4")
    assert _thresher(env, "init", tmp_path / "project").returncode == 0
    config = tmp_path / "project" / "thresher.yaml"
    # every core busy, at the run's own priority, while the server starts on a fresh database
    # (what timed out before); the flow then runs on a quiet machine.
    # The suite's other workers keep a core busy each: burners make up the rest.
    others = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) - 1
    burning = max(1, (os.cpu_count() or 2) - others)
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(burning)]
    run = subprocess.Popen(
        [BIN / "thresher", "run", "--config", config, "--json"], env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    said = []
    try:
        for line in run.stderr:
            said.append(line)
            if "Prefect server ready" in line:
                break
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    out, rest = run.communicate(timeout=600)
    first = subprocess.CompletedProcess(run.args, run.returncode, out, "".join(said) + rest)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "starting a Prefect server for" in first.stderr
    assert "ingested gate: done in" in first.stderr and "contamination: started" in first.stderr
    summary = json.loads(first.stdout)
    # all 40: the one with a cp1252 apostrophe read as a C1 control is repaired at ingest
    assert summary["published"] == 40 and summary["created"]
    started = _state(home)
    assert summary["paths"]["prefect"].startswith(started["ui_url"])
    # the Prefect UI's story of the run: task runs named for what they do, two artifacts
    flow_run = summary["paths"]["prefect"].rsplit("/", 1)[1]
    only_this_run = {"flow_runs": {"id": {"any_": [flow_run]}}}
    names = {run["name"] for run in _api(started, "task_runs/filter", only_this_run)}
    assert {"ingest", "gate-ingested", "govern", "gate-governed", "near_dedup", "publish"} <= names
    assert {"gate-published", "commit", "report"} <= names
    artifacts = {a["key"]: a for a in _api(started, "artifacts/filter", only_this_run)}
    assert set(artifacts) == {"sms-sample-summary", "sms-sample-drops"}
    assert summary["dataset_hash"] in artifacts["sms-sample-summary"]["data"]
    assert json.loads(artifacts["sms-sample-drops"]["data"]) == [
        {"outcome": "none", "reason": "", "records": 0}
    ]

    # the next command that needs it reuses it; nobody uses it now, so it stops by itself
    again = _thresher(env, "server", "start", "--json")
    assert again.returncode == 0 and "starting" not in again.stderr
    status = json.loads(again.stdout)
    assert status["pid"] == started["pid"] and status["clients"] == []
    deadline = time.monotonic() + 60
    while _alive(started["pid"]) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _alive(started["pid"]), "the idle server did not stop"
    assert not (home / "thresher-server" / "server.json").exists()
    assert _thresher(env, "server", "status").returncode == 1
    left = survivors(home)
    assert not left, describe(left)


def _api(state: dict, path: str, body: dict) -> list[dict]:
    request = urllib.request.Request(
        f"{state['api_url']}/{path}", data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


HEALTH = """
import http.server, sys
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/api/health" else 404)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
"""


def test_server_stop_refuses_while_a_run_uses_the_server_unless_forced(tmp_path):
    """`thresher server status` and `stop` against a stand-in that answers /api/health as
    the background server does: stopping it while a thresher process is registered as its
    user would fail that run."""
    home = tmp_path / "home"
    env = user_env(home)
    port = free_port()
    stand_in = subprocess.Popen([sys.executable, "-c", HEALTH, str(port)])
    user = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        folder = home / "thresher-server"
        (folder / "clients").mkdir(parents=True)
        url = f"http://127.0.0.1:{port}"
        state = {"pid": stand_in.pid, "started": server._start_ticks(stand_in.pid),
                 "started_at": time.time(), "api_url": f"{url}/api", "ui_url": url,
                 "idle_timeout": 60, "log": "x"}  # fmt: skip
        (folder / "server.json").write_text(json.dumps(state))
        (folder / "clients" / str(user.pid)).write_text(str(server._start_ticks(user.pid)))
        (folder / "clients" / "999999").write_text("1.0")  # a user long gone: forgotten
        deadline = time.monotonic() + 10
        while _thresher(env, "server", "status").returncode != 0 and time.monotonic() < deadline:
            time.sleep(0.2)  # the stand-in starts listening
        status = json.loads(_thresher(env, "server", "status", "--json").stdout)
        assert status["running"] and status["clients"] == [user.pid]
        refused = _thresher(env, "server", "stop")
        assert refused.returncode == 1 and f"(pid {user.pid})" in refused.stderr
        assert stand_in.poll() is None
        stopped = _thresher(env, "server", "stop", "--force")
        assert stopped.returncode == 0 and f"pid {stand_in.pid}" in stopped.stdout
        assert stand_in.wait(timeout=10) is not None
        assert not (folder / "server.json").exists()
        assert _thresher(env, "server", "stop").stdout.startswith("no Prefect server was running")
    finally:
        for process in (stand_in, user):
            process.kill()
            process.wait()


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
    env = user_env(home)
    probe = [sys.executable, "-c", "from flows.server import configured_api_url as c; print(c())"]

    def chosen(**extra: str) -> str:
        found = subprocess.run(probe, env=env | extra, capture_output=True, text=True, check=True)
        return found.stdout.strip()

    assert chosen() == "None"
    (home / "profiles.toml").write_text(
        'active = "team"\n[profiles.team]\nPREFECT_API_URL = "http://prefect.example:4200/api"\n'
    )
    assert chosen() == "http://prefect.example:4200/api"  # the active profile's
    assert chosen(PREFECT_API_URL="http://127.0.0.1:9/api") == "http://127.0.0.1:9/api"
    # a chosen server that does not answer is named, and no local one is started instead
    down = subprocess.run(
        [sys.executable, "-c", "from flows.server import ensure_server; ensure_server()"],
        env=env | {"PREFECT_API_URL": "http://127.0.0.1:9/api"}, capture_output=True, text=True,
    )  # fmt: skip
    assert down.returncode != 0
    assert (
        "the Prefect server at http://127.0.0.1:9/api (PREFECT_API_URL) does not answer"
        in down.stderr
    )
    assert not (home / "thresher-server").exists()


def test_a_server_still_starting_for_a_run_that_died_is_waited_for_not_started_again(tmp_path):
    """The state is recorded as soon as the server process exists: a run killed while the
    server starts leaves one that the next run finds and waits for."""
    home = tmp_path / "home"
    port = free_port()
    slow = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(1.5)\n" + HEALTH, str(port)]
    )
    try:
        folder = home / "thresher-server"
        folder.mkdir(parents=True)
        url = f"http://127.0.0.1:{port}"
        state = {"pid": slow.pid, "started": server._start_ticks(slow.pid),
                 "started_at": time.time(), "api_url": f"{url}/api", "ui_url": url,
                 "idle_timeout": 60, "log": "x"}  # fmt: skip
        (folder / "server.json").write_text(json.dumps(state))
        probe = "from flows.server import ensure_server; print(ensure_server(print))"
        found = subprocess.run(
            [sys.executable, "-c", probe], env=user_env(home), capture_output=True, text=True,
            timeout=60, check=True,
        )  # fmt: skip
        said = found.stdout.splitlines()
        assert said[0] == f"waiting for the Prefect server at {url} (pid {slow.pid}) to answer"
        assert said[-1] == f"{url}/api"
        assert "starting a Prefect server" not in found.stdout
        assert json.loads((folder / "server.json").read_text())["pid"] == slow.pid
    finally:
        slow.kill()
        slow.wait()
