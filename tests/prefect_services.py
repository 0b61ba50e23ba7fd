"""A real Prefect server and process workers for tests, and the guarantee that none of their
processes outlives the test that started them.

`prefect server start` runs with its own temporary PREFECT_HOME (SQLite), so every process
started here, and every process those start (a worker's flow-run supervisor and engine, which
Prefect puts in a session of their own), carries that PREFECT_HOME in its environment:
`survivors(home)` finds them all by it, whatever process group they ended up in.

Stopping follows what Prefect needs: workers before the server,
each signalled twice (a worker ignores the first SIGTERM/SIGINT), then SIGKILL for whatever of
its process tree is left after a timeout.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from process_guard import ProcessGuard

PREFECT = str(Path(sys.executable).parent / "prefect")  # the real CLI of this environment
POOL = "thresher"
QUIET_ENV = {
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "HF_HUB_OFFLINE": "1",
}


def user_env(home: Path, **extra: str) -> dict[str, str]:
    """A user's shell: no PREFECT_API_URL (`thresher` starts its background server), and
    every process marked by its PREFECT_HOME."""
    kept = {key: value for key, value in os.environ.items() if not key.startswith("PREFECT_")}
    return kept | QUIET_ENV | {"PREFECT_HOME": str(home)} | extra


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Service:
    """One started process (server or worker), the leader of its own process group."""

    name: str
    process: subprocess.Popen
    log: Path

    def __post_init__(self) -> None:
        self.guard = ProcessGuard(self.pid)  # killed with the tests, even by SIGKILL

    @property
    def pid(self) -> int:
        return self.process.pid

    def tree(self) -> list[psutil.Process]:
        """The process and everything it started, still alive."""
        try:
            root = psutil.Process(self.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def log_tail(self, chars: int = 6000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""

    def kill(self) -> None:
        """SIGKILL at once: the process, its group and every descendant, even those Prefect
        started in sessions of their own (a flow run's supervisor and engine)."""
        _kill_all([*self.tree(), *_group(self.pid)])
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)
        self.guard.release()

    def stop(self, timeout: float = 15) -> None:
        """SIGINT, then SIGTERM (a worker ignores the first), then SIGKILL for what is left
        after `timeout` seconds; descendants in other sessions included."""
        if self.process.poll() is not None:
            _kill_all([*self.tree(), *_group(self.pid)])  # a leader gone, its children may not be
            self.guard.release()
            return
        tree = self.tree()  # before the leader exits and its children get re-parented
        for number, sig in enumerate((signal.SIGINT, signal.SIGTERM)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, sig)
            try:
                self.process.wait(timeout if number else 1.5)
                break
            except subprocess.TimeoutExpired:
                continue
        tree = [p for p in tree + self.tree() + _group(self.pid) if alive(p)]
        if tree:
            _, left = psutil.wait_procs(tree, timeout=3)
            _kill_all(left)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)
        self.guard.release()


@dataclass
class PrefectServer:
    home: Path  # PREFECT_HOME: the SQLite database, and the mark of every process we start
    port: int
    service: Service
    workers: list[Service] = field(default_factory=list)  # running, in start order
    started: int = 0  # workers started so far: names and log files stay unique

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def env(self, **extra: str) -> dict[str, str]:
        """The environment for a CLI, worker or flow process talking to this server."""
        return {
            **os.environ,
            **QUIET_ENV,
            "PREFECT_HOME": str(self.home),
            "PREFECT_API_URL": self.api_url,
            "PREFECT_LOGGING_COLORS": "false",
            **extra,
        }

    def prefect(self, *args: str, timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
        """Run the real `prefect` CLI against this server."""
        env = self.env(**kwargs.pop("env", {}))
        return subprocess.run(
            [PREFECT, *map(str, args)],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            **kwargs,
        )

    def start_worker(
        self,
        pool: str = POOL,
        name: str | None = None,
        env: dict[str, str] | None = None,
        query_seconds: float = 1,
    ) -> Service:
        """`prefect worker start --pool POOL --type process --name NAME-<n>`, polling every
        `query_seconds`, in its own process group; returns once it has started."""
        self.started += 1
        name = f"{name or 'worker'}-{self.started}"
        log = self.home / f"{name}.log"
        worker_env = self.env(
            PREFECT_WORKER_QUERY_SECONDS=str(query_seconds),
            PREFECT_WORKER_PREFETCH_SECONDS="1",
            PREFECT_WORKER_HEARTBEAT_SECONDS="30",
            **(env or {}),
        )
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [PREFECT, "worker", "start", "--pool", pool, "--type", "process", "--name", name],
                env=worker_env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        worker = Service(name, process, log)
        self.workers.append(worker)
        _wait_for(
            lambda: process.poll() is not None or "started!" in worker.log_tail(20000),
            60,
            f"worker {name} did not start",
        )
        if process.poll() is not None:
            raise RuntimeError(f"worker {name} exited {process.returncode}:\n{worker.log_tail()}")
        return worker

    def stop_workers(self) -> None:
        while self.workers:
            self.workers.pop().stop()

    def stop(self) -> None:
        """Workers first, then the server."""
        self.stop_workers()
        self.service.stop(timeout=20)


def start_server(home: Path, timeout: float = 120, **env: str) -> PrefectServer:
    """`prefect server start --host 127.0.0.1 --port <free> --no-ui` with PREFECT_HOME=home,
    in its own process group; returns once /api/health answers."""
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = home / "server.log"
    server_env = {
        **os.environ,
        **QUIET_ENV,
        "PREFECT_HOME": str(home),
        "PREFECT_LOGGING_COLORS": "false",
        **env,
    }
    server_env.pop("PREFECT_API_URL", None)
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port), "--no-ui"],
            env=server_env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    server = PrefectServer(home, port, Service("server", process, log))
    try:
        _wait_for(
            lambda: process.poll() is not None or _healthy(server.api_url),
            timeout,
            "the Prefect server did not answer /api/health",
        )
        if process.poll() is not None:
            raise RuntimeError(f"prefect server exited {process.returncode}:\n{_tail(log)}")
    except BaseException:
        server.stop()
        raise
    return server


@contextlib.contextmanager
def running_server(home: Path, timeout: float = 120, **env: str) -> Iterator[PrefectServer]:
    """A server (and the workers started from it) for the duration of the block; on the way
    out, whatever happened inside, stop them all and prove that nothing marked with `home`
    survives."""
    server = None
    try:
        server = start_server(home, timeout, **env)
        yield server
    finally:
        if server is not None:
            server.stop()
        left = survivors(home)
        _kill_all(left)
        assert not left, f"processes outlived the Prefect server: {describe(left)}"


def survivors(home: Path) -> list[psutil.Process]:
    """Live processes whose environment has PREFECT_HOME=home: everything started here."""
    marked = []
    for process in psutil.process_iter(["pid"]):
        if process.pid == os.getpid():
            continue
        try:
            if process.environ().get("PREFECT_HOME") == str(home) and alive(process):
                marked.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return marked


def describe(processes: list[psutil.Process]) -> str:
    shown = []
    for process in processes:
        try:
            shown.append(f"{process.pid} {' '.join(process.cmdline())[:160]}")
        except psutil.Error:
            shown.append(str(process.pid))
    return "; ".join(shown)


def _group(pgid: int) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["pid"]):
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            if os.getpgid(process.pid) == pgid:
                found.append(process)
    return found


def alive(process: psutil.Process) -> bool:
    """Running and not a zombie (a killed process nobody reaped yet counts as gone)."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _kill_all(processes: list[psutil.Process]) -> None:
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(processes, timeout=5)


def _healthy(api_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _wait_for(condition, timeout: float, message: str, every: float = 0.25) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{message} within {timeout:.0f} s")
        time.sleep(every)


def _tail(path: Path, chars: int = 6000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else ""
