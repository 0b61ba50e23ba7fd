"""A throwaway PostgreSQL server for tests: Debian's binaries, a temporary data folder.

`running_postgres()` starts one (initdb, then `pg_ctl start` on a free loopback port, trust
authentication for the user `thresher`), yields it, and always stops it and removes its
folders. initdb refuses to run as root: as root, every command runs as the `postgres` user.
"""

from __future__ import annotations

import atexit
import itertools
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

PG_ROOT = Path("/usr/lib/postgresql")
USER = "thresher"

# Runs beside the tests: when its stdin closes (the test process ended, however it ended,
# even killed) it stops the server immediately and removes its folder.
WATCHDOG = """
import shutil, subprocess, sys
sys.stdin.read()
command, root = sys.argv[1:-1], sys.argv[-1]
subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=60, check=False)
shutil.rmtree(root, ignore_errors=True)
"""


class PostgresUnavailable(RuntimeError):
    """The PostgreSQL server binaries are not installed, or the server did not start."""


def find_binaries() -> Path:
    """The bin folder of the highest installed PostgreSQL version."""
    found = [
        path.parent
        for path in PG_ROOT.glob("*/bin/pg_ctl")
        if re.fullmatch(r"\d+", path.parent.parent.name) and (path.parent / "initdb").exists()
    ]
    if not found:
        raise PostgresUnavailable(
            f"no PostgreSQL server binaries under {PG_ROOT}/*/bin: `make test` installs "
            "Debian's postgresql, or run `apt-get install postgresql`"
        )
    return max(found, key=lambda path: int(path.parent.name))


def free_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class PostgresServer:
    """One server in a temporary folder. `start()`, then `create_database()`, then `stop()`."""

    def __init__(self, binaries: Path | None = None):
        self.binaries = binaries or find_binaries()
        self.root = Path(tempfile.mkdtemp(prefix="thresher-pg-"))
        self.data = self.root / "data"
        self.sockets = self.root / "sockets"
        self.log = self.root / "server.log"
        self.port: int | None = None
        self._as_postgres = os.geteuid() == 0
        self._databases = itertools.count(1)
        self._stopped = False
        self._watchdog: subprocess.Popen | None = None

    # commands ------------------------------------------------------------------------------

    def _command(self, program: str, *args: str) -> list[str]:
        command = [str(self.binaries / program), *args]
        if self._as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        return command

    def _run(self, program: str, *args: str, timeout: float = 60) -> None:
        command = self._command(program, *args)
        result = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if result.returncode != 0:
            raise PostgresUnavailable(
                f"{' '.join(command)} failed ({result.returncode}): "
                f"{(result.stderr or result.stdout).strip()}\n{self._log_tail()}"
            )

    def _log_tail(self) -> str:
        try:
            return "server log:\n" + "\n".join(self.log.read_text().splitlines()[-20:])
        except OSError:
            return ""

    # life cycle ----------------------------------------------------------------------------

    def start(self) -> PostgresServer:
        stop = self._command("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        self._watchdog = subprocess.Popen(
            [sys.executable, "-c", WATCHDOG, *stop, str(self.root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # not stopped with the tests by Ctrl-C: it cleans up after
        )
        self.sockets.mkdir()
        if self._as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
            shutil.chown(self.sockets, "postgres", "postgres")
        self._run(
            "initdb",
            *("-D", str(self.data), "-A", "trust", "-U", USER),
            *("--no-sync", "--encoding", "UTF8", "--locale", "C"),
        )
        # a test server: durability off, and only loopback and the private socket folder
        settings = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        for attempt in range(3):  # another process may take the free port before the server
            self.port = free_port()
            options = f"-k {self.sockets} -p {self.port} -h 127.0.0.1 {settings}"
            try:
                self._run(
                    "pg_ctl",
                    *("-D", str(self.data), "-l", str(self.log), "-o", options),
                    *("-w", "-t", "60", "start"),
                    timeout=90,
                )
                break
            except PostgresUnavailable:
                self._kill_postmaster()
                if attempt == 2:
                    raise
        return self

    def stop(self) -> None:
        """Stop the server (fast shutdown; killed if it does not stop) and remove its folders."""
        if self._stopped:
            return
        self._stopped = True
        try:
            if (self.data / "postmaster.pid").exists():
                self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "30", "stop")
        except (PostgresUnavailable, subprocess.TimeoutExpired):
            self._kill_postmaster()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
            if self._watchdog is not None:  # nothing left for it to do: let it end
                self._watchdog.stdin.close()
                self._watchdog.wait(timeout=60)

    def _kill_postmaster(self) -> None:
        """Kill the server this object started, by the pid in its own data folder."""
        try:
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return
        try:  # SIGQUIT: immediate shutdown, the postmaster takes its children with it
            os.kill(pid, signal.SIGQUIT)
        except ProcessLookupError:
            return
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)

    # databases -----------------------------------------------------------------------------

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{USER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, prefix: str = "catalog") -> str:
        """A new empty database; returns its SQLAlchemy URL."""
        import psycopg

        name = f"{prefix}_{os.getpid()}_{next(self._databases)}"
        with psycopg.connect(
            host="127.0.0.1", port=self.port, user=USER, dbname="postgres", autocommit=True
        ) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


@contextmanager
def running_postgres(server: PostgresServer | None = None) -> Iterator[PostgresServer]:
    """A started server, stopped and removed when the block ends, however it ends."""
    server = server or PostgresServer()
    atexit.register(server.stop)  # also when the block is never left normally
    try:
        server.start()
        yield server
    finally:
        server.stop()
        atexit.unregister(server.stop)
