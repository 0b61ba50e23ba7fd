"""`thresher deploy`: register the deployments of prefect.yaml with a Prefect server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from flows.cli_common import fail, stderr
from pipeline.core.errors import ThresherError

POOL = "thresher"
REPOSITORY = Path(__file__).resolve().parents[1]


def deploy(
    config: Annotated[
        Path,
        typer.Option(
            "--config", "-c", envvar="THRESHER_CONFIG", help="The run config the deployments use."
        ),
    ],
    prefect_file: Annotated[
        Path | None,
        typer.Option("--prefect-file", help="Default: ./prefect.yaml, else the repository's."),
    ] = None,
) -> None:
    """Register curate/nightly, release-approved/on-approval and train/latest with the
    Prefect server at PREFECT_API_URL, creating the process work pool `thresher` if needed.
    Then start a worker: `prefect worker start --pool thresher`."""
    from pipeline.config import load_run_config

    if not os.environ.get("PREFECT_API_URL"):
        fail(
            "set PREFECT_API_URL to your Prefect server (e.g. http://127.0.0.1:4200/api; "
            "start one with `prefect server start`)"
        )
    try:
        cfg = load_run_config(config)  # a bad config fails here, not at 2 a.m.
    except ThresherError as error:
        fail(str(error))
    found = prefect_file or next(
        (p for p in (Path.cwd() / "prefect.yaml", REPOSITORY / "prefect.yaml") if p.exists()), None
    )
    if found is None or not found.exists():
        fail(f"no prefect.yaml at {found or Path.cwd()}; pass --prefect-file PATH")
    found = found.resolve()
    env = {
        **os.environ,
        "THRESHER_HOME": str(found.parent),
        "THRESHER_CONFIG": str(config.resolve()),
        # the catalog that failures of runs whose config cannot be read are recorded in
        "THRESHER_WORKDIR": cfg.workdir,
    }
    prefect = [sys.executable, "-m", "prefect"]
    has_pool = _run([*prefect, "work-pool", "inspect", POOL], env, quiet=True) == 0
    if not has_pool and _run([*prefect, "work-pool", "create", POOL, "--type", "process"], env):
        fail(f"could not create the work pool {POOL!r} at {env['PREFECT_API_URL']}")
    command = [*prefect, "--no-prompt", "deploy", "--all", "--prefect-file", str(found)]
    if _run(command, env, cwd=found.parent) != 0:
        fail(f"`prefect deploy --all` failed for {found} (its output is above)")
    stderr.print(
        f"deployed {found} with config {env['THRESHER_CONFIG']}; start a worker: "
        f"prefect worker start --pool {POOL}"
    )


def _run(command: list[str], env: dict[str, str], cwd: Path | None = None, quiet=False) -> int:
    output = subprocess.DEVNULL if quiet else None
    return subprocess.run(command, env=env, cwd=cwd, stdout=output, stderr=output).returncode
