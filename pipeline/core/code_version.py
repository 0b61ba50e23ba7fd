"""Which code ran: the package version and, in a git checkout, the commit and a dirty flag."""

from __future__ import annotations

import functools
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

_CHECKOUT = Path(__file__).parent


@dataclass(frozen=True)
class CodeState:
    version: str
    commit: str | None  # None outside a git checkout (an installed wheel)
    dirty: bool | None

    def __str__(self) -> str:
        if self.commit is None:
            return self.version
        return f"{self.version}+g{self.commit[:12]}{'.dirty' if self.dirty else ''}"


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(_CHECKOUT), *args],
        capture_output=True,
        text=True,
        timeout=5,
        check=True,
    ).stdout.strip()


@functools.cache
def code_state() -> CodeState:
    """The code this process runs: read once, when first asked (a checkout edited later is
    not the code that was loaded)."""
    try:
        version = metadata.version("thresher")
    except metadata.PackageNotFoundError:  # run from a source tree on sys.path, not installed
        version = "unknown"
    try:
        commit = _git("rev-parse", "HEAD")
        dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return CodeState(version, None, None)
    return CodeState(version, commit, dirty)


def code_version() -> str:
    """Package version, plus the git commit when running from a checkout."""
    return str(code_state())
