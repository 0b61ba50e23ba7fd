"""Fault suite, bombs: a decompression bomb (as a run source, a Debian changelog, an evaluation
set) and a YAML alias bomb are refused with an error naming the file, by a child process under
a memory limit, whose peak stays far below what the bomb expands to."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import SMS_SOURCE, write_project

from data_catalog.catalog import Catalog

pytestmark = pytest.mark.services  # starts `thresher` processes

BIN = Path(sys.executable).parent
ADDRESS_SPACE = 2_500 << 20  # what each child may map: a run needs about 1.3 GB of it
EXPANDS_TO = 4 << 30  # each bomb: 64 gzip members of 64 MiB of zeros, 4 MiB on disk
BOMB_CONFIG = """name: bomb
sources: []
unknown_key:
  a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
""" + "".join(
    f"  {level}: &{level} [{', '.join([f'*{previous}'] * 9)}]\n"
    for previous, level in zip("abcdefgh", "bcdefghi", strict=True)
)


@pytest.fixture(scope="module")
def bomb_member() -> bytes:
    return gzip.compress(b"\0" * (64 << 20), compresslevel=9)


def write_bomb(path: Path, member: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(member * (EXPANDS_TO // (64 << 20)))  # a valid multi-member gzip file
    return path


# The child's peak is measured by a small launcher: the kernel's ru_maxrss of a child forked
# from this test process starts at this process's own peak (torch and models loaded).
LAUNCHER = """
import os, resource, sys
limit, command = int(sys.argv[1]), sys.argv[2:]
child = os.fork()
if child == 0:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    os.execv(command[0], command)
_, status, usage = os.wait4(child, 0)
print(usage.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def limited(command: list, cwd: Path, env: dict[str, str]) -> tuple[int, str, float]:
    """Run `command` under the address-space limit: (exit code, stderr, peak RSS in MB)."""
    run = subprocess.run(
        [sys.executable, "-c", LAUNCHER, str(ADDRESS_SPACE), *map(str, command)],
        cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    return run.returncode, run.stderr, int(run.stdout.split()[-1]) / 1024


def run_env() -> dict[str, str]:
    """The session's Prefect server, and Thresher's own code before anything installed."""
    from prefect.settings import PREFECT_API_URL

    return {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), "COLUMNS": "400"}


CHANGELOG = {
    "name": "changelogs", "location": "debian/*/changelog.Debian.gz",
    "format": "debian_changelog", "license": "GPL-2.0-or-later", "consent": "public-release",
    "owner": "Debian",
}  # fmt: skip


def test_a_decompression_bomb_source_stops_the_run_naming_it_in_bounded_memory(
    tmp_path, bomb_member, prefect_server
):
    bomb = write_bomb(tmp_path / "data" / "sms-1.jsonl.gz", bomb_member)
    config = write_project(tmp_path, [{**SMS_SOURCE, "location": "data/sms*.jsonl.gz"}])

    code, stderr, peak_mb = limited(
        [BIN / "thresher", "run", "--config", config, "--quiet"], tmp_path, run_env()
    )

    assert code == 2, stderr
    assert f"{bomb}: expands past 4" in stderr  # the cap: 100 times its ~4 MB
    assert "ingest.max_expansion_ratio" in stderr
    assert "MemoryError" not in stderr
    assert peak_mb < 1_200, peak_mb  # of 4,096 MB the bomb expands to
    catalog = Catalog.open(tmp_path / "work")
    assert catalog.versions() == []
    assert [run["status"] for run in catalog.runs()] == ["failed"]


def test_a_changelog_bomb_is_refused_by_ingest_in_bounded_memory(tmp_path, bomb_member):
    """Through `thresher quality explain`, which ingests as a run does, without Prefect."""
    bomb = write_bomb(tmp_path / "debian" / "zlib" / "changelog.Debian.gz", bomb_member)
    config = write_project(tmp_path, [CHANGELOG])
    command = [BIN / "thresher", "quality", "explain", "--config", config]
    code, stderr, peak_mb = limited(command, tmp_path, {**os.environ, "COLUMNS": "400"})
    assert code == 2, stderr
    assert f"{bomb}: expands past 4" in stderr and "MemoryError" not in stderr
    assert peak_mb < 1_200, peak_mb


def test_an_evaluation_set_bomb_and_a_yaml_alias_bomb_are_refused_in_bounded_memory(
    tmp_path, bomb_member
):
    lines = gzip.compress((b"\0" * ((1 << 20) - 1) + b"\n") * 64, compresslevel=9)
    bomb = write_bomb(tmp_path / "eval.jsonl.gz", lines)  # lines of 1 MiB: the cap stops it
    command = [BIN / "thresher", "eval", "register", "humaneval", bomb, "--workdir", "work"]
    code, stderr, peak_mb = limited(command, tmp_path, {**os.environ, "COLUMNS": "400"})
    assert code == 2, stderr
    assert f"{bomb}: expands past 4" in stderr and "MemoryError" not in stderr
    assert peak_mb < 600, peak_mb

    config = tmp_path / "bomb.yaml"
    config.write_text(BOMB_CONFIG)
    assert len(yaml.compose(BOMB_CONFIG).value) == 3  # it is valid YAML
    command = [BIN / "thresher", "run", "--config", config]
    code, stderr, peak_mb = limited(command, tmp_path, {**os.environ, "COLUMNS": "400"})
    assert code == 2
    assert f"{config}: its aliases (*name) expand to 490,329,070 values" in stderr
    assert peak_mb < 300, peak_mb  # the walk it replaced took a minute and 3.2 GB
