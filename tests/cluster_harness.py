"""A user's cluster that shares only object storage, for tests: a loopback S3 server (moto)
and Dask workers to which chosen folders look empty.

A real cluster's machines share no disk with the machine that starts a run: whatever a step
reads or writes must go through the object store. Workers here run in mount namespaces of
their own, where each hidden folder has an empty tmpfs mounted over it, so a step that
touches the run's local files fails here as it would there. The network is not isolated:
the workers still reach the scheduler and the S3 server on loopback.

Every process is started in a process group of its own, guarded (tests/process_guard.py)
so that it dies with the test process, and killed when its block ends.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
from prefect_services import Service, alive, free_port

BIN = Path(sys.executable).parent  # moto_server and dask of this environment
# Credentials moto accepts (any), and the settings each client reads: botocore (boto3, and
# s3fs through aiobotocore) AWS_ENDPOINT_URL when it makes a client; polars' native reader
# AWS_ENDPOINT_URL and AWS_ALLOW_HTTP; fsspec FSSPEC_S3_ENDPOINT_URL, but only when it is
# imported (so in a process's environment from its start, as the workers' are).
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@dataclass(frozen=True)
class S3Server:
    endpoint: str  # http://127.0.0.1:PORT

    @property
    def env(self) -> dict[str, str]:
        """What a process needs in its environment to use this server as its S3."""
        return {
            **CREDENTIALS,
            "AWS_ENDPOINT_URL": self.endpoint,
            "FSSPEC_S3_ENDPOINT_URL": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
        }

    def bucket(self, name: str) -> str:
        """Create bucket `name`; its URL, s3://name."""
        import boto3

        s3 = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            region_name=CREDENTIALS["AWS_DEFAULT_REGION"],
        )
        s3.create_bucket(Bucket=name)
        return f"s3://{name}"


@contextlib.contextmanager
def s3_server(timeout: float = 20) -> Iterator[S3Server]:
    """`moto_server` on a free loopback port, in memory, for the duration of the block."""
    port = free_port()
    server = S3Server(f"http://127.0.0.1:{port}")
    with tempfile.TemporaryDirectory(prefix="moto-") as logs:
        command = [BIN / "moto_server", "-H", "127.0.0.1", "-p", str(port)]
        moto = _start("moto_server", command, Path(logs) / "moto.log", dict(os.environ))
        try:
            _wait_until(lambda: _answers(server.endpoint), [moto], timeout, "moto_server answers")
            yield server
        finally:
            _kill_all([moto])


@contextlib.contextmanager
def blind_dask_cluster(
    hidden: list[Path], env: dict[str, str], workers: int = 2, logs: Path | None = None
) -> Iterator[str]:
    """A Dask scheduler and `workers` single-threaded workers, each in a process of its own
    to which every folder of `hidden` looks empty; yields the scheduler's address once all
    workers have joined. `env` goes on top of this process's environment (an S3Server's
    `env`, say). Logs go to `logs` (kept: read them when a test fails), or to a temporary
    folder."""
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    # The project is installed (editable) in this environment: the workers import it as this
    # process does. Not tests/ on their PYTHONPATH: its flows/ and pipeline/ folders would
    # shadow the project's packages there (as namespace packages).
    run_env = {**os.environ, **env}
    namespace = _mount_namespace(hidden)
    services: list[Service] = []
    with contextlib.ExitStack() as stack:
        if logs is None:
            logs = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dask-")))
        logs.mkdir(parents=True, exist_ok=True)
        stack.callback(_kill_all, services)  # before the logs' folder goes
        scheduler = [BIN / "dask", "scheduler", "--host", "127.0.0.1", "--port", str(port)]
        # --no-dashboard still serves /health and /metrics, on 0.0.0.0:8787 by default
        scheduler += ["--no-dashboard", "--dashboard-address", "127.0.0.1:0"]
        services.append(_start("scheduler", scheduler, logs / "scheduler.log", run_env))
        for n in range(workers):
            worker = [BIN / "dask", "worker", address, "--name", f"blind-{n}", "--nthreads", "1"]
            worker += ["--nworkers", "1", "--no-dashboard"]
            command = [*namespace, "bash", "-c", _hiding(hidden, ["exec", *map(str, worker)])]
            services.append(_start(f"worker-{n}", command, logs / f"worker-{n}.log", run_env))
        _wait_for_workers(address, workers, services)
        yield address


def _mount_namespace(hidden: list[Path]) -> list[str]:
    """The `unshare` arguments under which the workers can mount over `hidden`: a private
    mount namespace as root; otherwise, also a user namespace in which this user is root
    (where the kernel allows unprivileged ones). Tried once here, on the real folders, so
    that a refusal is one clear error, not workers that never join."""
    missing = [str(folder) for folder in hidden if not Path(folder).is_dir()]
    if missing:
        raise NotADirectoryError(f"no folder to hide at {', '.join(missing)}")
    private = ["--mount", "--propagation", "private"]
    tries = [["unshare", *private]] if os.geteuid() == 0 else []
    tries.append(["unshare", "--user", "--map-root-user", *private])
    refusals = []
    for namespace in tries:
        script = _hiding(hidden, ["true"])
        probe = subprocess.run(
            [*namespace, "bash", "-c", script], capture_output=True, text=True, timeout=30
        )
        if probe.returncode == 0:
            return namespace
        refusals.append(f"{shlex.join(namespace)}: {probe.stderr.strip()}")
    raise RuntimeError(
        "cannot hide folders from the workers (a mount namespace is needed: run as root, or "
        "where unprivileged user namespaces are allowed):\n" + "\n".join(refusals)
    )


def _hiding(hidden: list[Path], command: list[str]) -> str:
    """A shell script that mounts an empty tmpfs over each hidden folder, then runs
    `command`."""
    mounts = [shlex.join(["mount", "-t", "tmpfs", "none", str(folder)]) for folder in hidden]
    return " && ".join([*mounts, shlex.join(command)])


def _start(name: str, command: list, log: Path, env: dict[str, str]) -> Service:
    """`command` in a process group of its own, its output to `log`. Its working directory
    is /: one inside a hidden folder would still show the folder's files to relative paths,
    a mount over it notwithstanding."""
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [str(part) for part in command],
            env=env,
            cwd="/",
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    return Service(name, process, log)


def _kill_all(services: list[Service]) -> None:
    """SIGKILL to each service's process group and descendants, newest first (the workers
    before their scheduler), then wait until none runs. A zombie counts as gone: orphans
    (a nanny's worker) are PID 1's to reap, which may take it a second or two."""
    doomed = []
    while services:
        service = services.pop()
        tree = service.tree()  # before its leader dies and its children are re-parented
        with contextlib.suppress(ProcessLookupError):
            os.killpg(service.pid, signal.SIGKILL)
        for process in tree:
            with contextlib.suppress(psutil.Error):
                process.kill()
        doomed.append((service, tree))
    deadline = time.monotonic() + 10
    for service, tree in doomed:
        with contextlib.suppress(subprocess.TimeoutExpired):
            service.process.wait(10)
        while any(map(alive, tree)) and time.monotonic() < deadline:
            time.sleep(0.05)
        service.guard.release()


def _wait_for_workers(address: str, count: int, services: list[Service]) -> None:
    from distributed import Client

    _wait_until(lambda: _listens(address), services, 30, "the Dask scheduler listens")
    with Client(address, timeout=10) as client:

        def joined() -> bool:
            with contextlib.suppress(TimeoutError):
                client.wait_for_workers(count, timeout=1)
                return True
            return False

        _wait_until(joined, services, 60, f"{count} Dask workers join")


def _wait_until(done: Callable[[], bool], services: list[Service], timeout: float, what: str):
    """Poll `done` until it holds; fail at once, with its log, if a service exits first,
    and with every log after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not done():
        for service in services:
            if service.process.poll() is not None:
                raise RuntimeError(
                    f"{service.name} exited {service.process.returncode} before {what}:\n"
                    f"{service.log_tail()}"
                )
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- {s.name}:\n{s.log_tail(2000)}" for s in services)
            raise TimeoutError(f"not within {timeout:.0f} s: {what}\n{tails}")
        time.sleep(0.1)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1):
            return True
    except urllib.error.HTTPError:
        return True  # an answer all the same
    except OSError:
        return False


def _listens(address: str) -> bool:
    host, port = address.removeprefix("tcp://").rsplit(":", 1)
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex((host, int(port))) == 0
