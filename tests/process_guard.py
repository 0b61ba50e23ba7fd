"""Services a test starts stop with the test process, however it ends (finished, crashed, or
killed with SIGKILL, which runs no clean-up): a guard process, in a session of its own so that
a Ctrl-C meant for the tests does not reach it, waits on a pipe from the test process and,
when the pipe closes, kills the service's process group. A service started with
`start_new_session=True` leads its group, which its own children (Chromium's, Prefect's)
join."""

from __future__ import annotations

import subprocess
import sys

GUARD = """
import os, signal, sys
sys.stdin.read()
try:
    os.killpg(int(sys.argv[1]), signal.SIGKILL)
except (ProcessLookupError, PermissionError):
    pass
"""


class ProcessGuard:
    """Kills process group `group` when `release()` is called or this process ends."""

    def __init__(self, group: int):
        self._guard = subprocess.Popen(
            [sys.executable, "-c", GUARD, str(group)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def release(self) -> None:
        """The service is stopped: kill what may be left of its group, and end the guard."""
        if self._guard.stdin and not self._guard.stdin.closed:
            self._guard.stdin.close()
            self._guard.wait(timeout=30)
