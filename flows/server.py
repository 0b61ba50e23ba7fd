"""The Prefect server `thresher` runs its flows against when no PREFECT_API_URL is set.

Prefect's default, a temporary server started by every process, costs each run 5–25 s of
start-up, fails outright when a busy machine keeps it from answering in time, and outlives a
run that is killed. Instead, one server per Prefect home (PREFECT_HOME, ~/.prefect: the same
SQLite database the temporary servers use) is started in the background on first need, and
reused by every later run, command and local Dask worker. It serves the Prefect UI, and it
stops once nothing has used it for `THRESHER_SERVER_IDLE_TIMEOUT` seconds (30 minutes), or
with `thresher server stop`. Starting waits up to `THRESHER_SERVER_START_TIMEOUT` seconds
(300: a fresh database's migrations take ~20 s on a quiet 2-core machine, several times
that on a loaded one).

Its state lives in <PREFECT_HOME>/thresher-server/: `server.json` (pid, address), `server.log`,
`clients/` (one file per `thresher` process using it: a live one keeps it from idling out) and
`lock` (held while a server is found or started, so concurrent runs share one).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.core.errors import ThresherError
from pipeline.core.locks import file_lock

IDLE_TIMEOUT_ENV = "THRESHER_SERVER_IDLE_TIMEOUT"
START_TIMEOUT_ENV = "THRESHER_SERVER_START_TIMEOUT"
DEFAULT_IDLE_TIMEOUT = 1800
DEFAULT_START_TIMEOUT = 300
# The command line of Prefect's temporary server (prefect.server.api.server.SubprocessASGIServer)
TEMPORARY_SERVER_APP = "prefect.server.api.server:create_app"


class ServerError(ThresherError):
    pass


def prefect_home() -> Path:
    return Path(os.environ.get("PREFECT_HOME", "~/.prefect")).expanduser()


def state_dir() -> Path:
    return prefect_home() / "thresher-server"


def configured_api_url() -> str | None:
    """The Prefect API the user chose: PREFECT_API_URL in the environment, in Prefect's
    settings when Prefect is already loaded (a test harness), or in the active profile."""
    if url := os.environ.get("PREFECT_API_URL"):
        return url
    if "prefect.settings" in sys.modules:
        from prefect.settings import PREFECT_API_URL

        return PREFECT_API_URL.value()
    profiles = prefect_home() / "profiles.toml"
    if not profiles.exists():
        return None
    try:
        found = tomllib.loads(profiles.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return None
    active = os.environ.get("PREFECT_PROFILE") or found.get("active", "ephemeral")
    return found.get("profiles", {}).get(active, {}).get("PREFECT_API_URL")


def _seconds(env: str, default: int) -> float:
    value = os.environ.get(env)
    try:
        return float(value) if value else default
    except ValueError:
        raise ServerError(f"{env}={value!r} is not a number of seconds") from None


def ensure_server(say: Callable[[str], None] = lambda _: None, use: bool = True) -> str:
    """The API URL flows of this process report to: the user's, or this Prefect home's
    background server, started when none runs. Sets PREFECT_API_URL for this process (before
    Prefect is imported) and its children, and (with `use`) registers this process as a user
    of it: it does not idle out while this process lives."""
    if url := configured_api_url():
        if not _healthy(url, timeout=10):
            raise ServerError(
                f"the Prefect server at {url} (PREFECT_API_URL) does not answer: start it, or "
                "unset PREFECT_API_URL and thresher runs a local one for you"
            )
        return url
    folder = state_dir()
    with file_lock(folder / "lock"):
        state = recorded_server()
        if state is None:
            state = _start(folder, say)
        elif not _healthy(state["api_url"], timeout=5):
            _wait_until_healthy(state, say)  # busy, or still starting for a run that died
        if use:
            _register_client(folder)
    os.environ["PREFECT_API_URL"] = state["api_url"]
    return state["api_url"]


def recorded_server() -> dict[str, Any] | None:
    """The background server's recorded state while its process lives (a stale file goes)."""
    state_file = state_dir() / "server.json"
    try:
        state = json.loads(state_file.read_text())
    except (OSError, ValueError):
        return None
    if not _alive(state["pid"], state["started"]):
        state_file.unlink(missing_ok=True)
        return None
    return state


def running_server() -> dict[str, Any] | None:
    """The background server's state when its process lives and answers, else None. Never
    stops it: a server slow to answer on a busy machine may be serving a run."""
    state = recorded_server()
    return state if state is not None and _healthy(state["api_url"], timeout=10) else None


def _wait_until_healthy(state: dict[str, Any], say: Callable[[str], None]) -> None:
    timeout = _seconds(START_TIMEOUT_ENV, DEFAULT_START_TIMEOUT)
    say(f"waiting for the Prefect server at {state['ui_url']} (pid {state['pid']}) to answer")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(state["pid"], state["started"]):
            raise ServerError(
                f"the Prefect server (pid {state['pid']}) exited before it answered; see "
                f"{state['log']}, then run again"
            )
        if _healthy(state["api_url"], timeout=5):
            return
        time.sleep(0.5)
    raise ServerError(
        f"the Prefect server at {state['ui_url']} (pid {state['pid']}) does not answer within "
        f"{timeout:.0f} s (log: {state['log']}): allow it longer ({START_TIMEOUT_ENV}=900), or "
        "stop it (`thresher server stop --force`) and run again"
    )


def _start(folder: Path, say: Callable[[str], None]) -> dict[str, Any]:
    timeout = _seconds(START_TIMEOUT_ENV, DEFAULT_START_TIMEOUT)
    idle = _seconds(IDLE_TIMEOUT_ENV, DEFAULT_IDLE_TIMEOUT)
    log_path = folder / "server.log"
    state_file = folder / "server.json"
    say(f"starting a Prefect server for {prefect_home()} (once: later runs reuse it)")
    started_at = time.monotonic()
    for _attempt in range(3):  # another program may take the free port before the server does
        port = _free_port()
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "flows.server", str(port), str(idle)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # owned by the Prefect home, not by this run
                env={
                    **os.environ,
                    "PREFECT_SERVER_API_HOST": "127.0.0.1",
                    "PREFECT_SERVER_API_PORT": str(port),
                    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                    "DO_NOT_TRACK": "1",
                },
            )
        state = {
            "pid": process.pid,
            "started": _start_ticks(process.pid),  # with the pid, which process it is
            "started_at": time.time(),
            "api_url": f"http://127.0.0.1:{port}/api",
            "ui_url": f"http://127.0.0.1:{port}",
            "idle_timeout": idle,
            "log": str(log_path),
        }
        # recorded at once: a run killed while it starts leaves a server the next run finds
        state_file.write_text(json.dumps(state) + "\n")
        next_note = 10.0
        try:
            while time.monotonic() - started_at < timeout and process.poll() is None:
                if _healthy(state["api_url"], timeout=2):
                    waited = time.monotonic() - started_at
                    say(f"Prefect server ready at {state['ui_url']} in {waited:.0f} s")
                    return state
                if time.monotonic() - started_at > next_note:
                    say(
                        f"still starting the Prefect server ({time.monotonic() - started_at:.0f} s)"
                    )
                    next_note += 10
                time.sleep(0.2)
        except BaseException:  # interrupted (Ctrl-C): no half-started server is left behind
            _terminate(process.pid, state["started"])
            state_file.unlink(missing_ok=True)
            raise
        state_file.unlink(missing_ok=True)
        if process.poll() is None:  # still starting when the time ran out
            _terminate(process.pid, state["started"])
            raise ServerError(
                f"the Prefect server did not answer within {timeout:.0f} s (log: {log_path}). "
                f"On a busy machine, allow it longer ({START_TIMEOUT_ENV}=900), or run a server "
                "yourself (`prefect server start`) and set "
                "PREFECT_API_URL=http://127.0.0.1:4200/api"
            )
    raise ServerError(
        f"the Prefect server exited while starting (code {process.returncode}); see {log_path}, "
        "or run a server yourself (`prefect server start`) and set "
        "PREFECT_API_URL=http://127.0.0.1:4200/api"
    )


def stop_server(force: bool = False) -> dict[str, Any] | None:
    """Stop the background server; its state, or None when none ran. Refuses while `thresher`
    processes use it, unless forced: their runs would fail."""
    folder = state_dir()
    with file_lock(folder / "lock"):
        state = recorded_server()
        if state is None:
            return None
        users = clients()
        if users and not force:
            raise ServerError(
                f"{len(users)} thresher process(es) use the Prefect server (pid "
                f"{', '.join(map(str, users))}); stop it anyway with `thresher server stop --force`"
            )
        _terminate(state["pid"], state["started"])
        (folder / "server.json").unlink(missing_ok=True)
        return state


def clients() -> list[int]:
    """The live `thresher` processes registered as users of the background server."""
    live = []
    for entry in (state_dir() / "clients").glob("*"):
        try:
            pid, started = int(entry.name), int(entry.read_text())
        except (OSError, ValueError):
            entry.unlink(missing_ok=True)
            continue
        if _alive(pid, started):
            live.append(pid)
        else:
            entry.unlink(missing_ok=True)
    return sorted(live)


def _register_client(folder: Path) -> None:
    entry = folder / "clients" / str(os.getpid())
    entry.parent.mkdir(exist_ok=True)
    entry.write_text(str(_start_ticks(os.getpid())))
    atexit.register(entry.unlink, missing_ok=True)


def sweep_orphaned_temporary_servers() -> list[int]:
    """Stop Prefect temporary servers of this Prefect home whose starting process is gone (it
    was killed: Prefect stops them only at a clean exit). Their starter is always a Python
    process; once it dies they are adopted by init or a non-Python subreaper."""
    import psutil

    home = str(prefect_home())
    stopped = []
    for process in psutil.process_iter(["pid", "cmdline", "ppid", "uids"]):
        try:
            if TEMPORARY_SERVER_APP not in (process.info["cmdline"] or []):
                continue
            if process.info["uids"].real != os.getuid():
                continue
            environ = process.environ()
            if environ.get("PREFECT__SERVER_EPHEMERAL") != "1":
                continue
            if str(Path(environ.get("PREFECT_HOME", "~/.prefect")).expanduser()) != home:
                continue
            parent = process.parent()
            if parent is not None and parent.pid != 1 and "python" in Path(parent.exe()).name:
                continue  # its run is alive
            process.terminate()
            stopped.append(process.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    deadline = time.monotonic() + 5
    while any(_running(pid) for pid in stopped) and time.monotonic() < deadline:
        time.sleep(0.1)
    return stopped


def _healthy(api_url: str, timeout: float) -> bool:
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=timeout) as response:
            return response.status == 200
    except Exception:  # noqa: BLE001 — refused, timed out, reset, malformed: not answering
        return False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()


def _start_ticks(pid: int) -> int:
    """When a process started, in clock ticks since boot: with its pid, who it is (a later
    process may get the same pid). A wall-clock start time would move with a clock step."""
    return int(_proc_stat(pid)[19])


def _running(pid: int) -> bool:
    fields = _proc_stat(pid)
    return fields is not None and fields[0] != "Z"  # a zombie has stopped


def _alive(pid: int, started: int) -> bool:
    fields = _proc_stat(pid)
    return fields is not None and fields[0] != "Z" and int(fields[19]) == started


def _terminate(pid: int, started: int) -> None:
    if not _alive(pid, started):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    while _alive(pid, started):  # a zombie counts as stopped: its parent reaps it
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            return
        time.sleep(0.1)


def serve(port: int, idle_timeout: float) -> None:
    """The background server's process: Prefect's API and UI on 127.0.0.1:port, stopped once
    no registered client lives and no request came for `idle_timeout` seconds."""
    import uvicorn
    from prefect.server.api.server import create_app

    app = create_app(final=True)
    last_used = time.monotonic()

    async def counting(scope, receive, send):
        nonlocal last_used
        if scope["type"] == "http" and not scope["path"].endswith("/health"):
            last_used = time.monotonic()
        await app(scope, receive, send)

    server = uvicorn.Server(
        uvicorn.Config(counting, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )

    def stop_when_idle() -> None:
        nonlocal last_used
        while not server.should_exit:
            time.sleep(min(5.0, idle_timeout / 4))
            if clients():
                last_used = time.monotonic()
            elif time.monotonic() - last_used > idle_timeout:
                # decided under the lock a run takes to pick a server: none picks this one
                # as it goes, and none that just picked it is left without it
                with file_lock(state_dir() / "lock"):
                    if clients() or time.monotonic() - last_used <= idle_timeout:
                        continue
                    _forget(os.getpid())
                    print(f"idle for {idle_timeout:.0f} s: stopping", flush=True)
                    server.should_exit = True

    threading.Thread(target=stop_when_idle, daemon=True).start()
    server.run()
    _forget(os.getpid())


def _forget(pid: int) -> None:
    """Remove the state file if it names this server."""
    state_file = state_dir() / "server.json"
    try:
        if json.loads(state_file.read_text())["pid"] == pid:
            state_file.unlink()
    except (OSError, ValueError, KeyError):
        pass


if __name__ == "__main__":
    serve(int(sys.argv[1]), float(sys.argv[2]))
