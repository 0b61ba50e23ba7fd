"""Failure alerts: a failed or crashed flow run is recorded in the catalog with its reason and
announced to the configured webhook (a JSON POST) or command (the same JSON on stdin).

Attached to the flows as Prefect `on_failure` / `on_crashed` state hooks. The run config's
`alerts:` section names the receivers; a worker can set THRESHER_ALERT_WEBHOOK and
THRESHER_ALERT_COMMAND for runs whose config does not (or cannot be read: a missing file is
a failure worth hearing about too). The catalog is the config's, else $THRESHER_WORKDIR's
(`thresher deploy` sets it for the deployments). A run killed outright (SIGKILL) runs no
hook: the next run's sweep finds it and alerts then.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import urllib.error
import urllib.request
from typing import Any

ALERT_WEBHOOK_ENV = "THRESHER_ALERT_WEBHOOK"
ALERT_COMMAND_ENV = "THRESHER_ALERT_COMMAND"
MAX_REASON = 2000


def on_failure(flow, flow_run, state) -> None:
    """Prefect state hook (failed or crashed): record the failure, then alert."""
    from prefect.logging import get_logger

    if flow_run.parent_task_run_id is not None:
        return  # a subflow: the flow that called it fails too and reports once, for both
    try:
        report_failure(flow.name, flow_run, state)
    except Exception:  # a broken alert must not hide the failure it reports
        get_logger("thresher.alerts").exception("could not record or send the failure alert")


def report_failure(flow_name: str, flow_run, state) -> dict[str, Any]:
    from pipeline.config import load_run_config

    config_path = flow_run.parameters.get("config_path")
    try:
        cfg = load_run_config(config_path) if config_path else None
    except Exception:
        cfg = None
    alert = {
        "event": f"thresher.run.{state.name.lower()}",
        "flow": flow_name,
        "flow_run_id": str(flow_run.id),
        "flow_run_name": flow_run.name,
        "deployment": _deployment_name(),
        "state": state.name,
        "reason": state.message or state.name,
        "config_path": config_path,
        "dataset": cfg.name if cfg else None,
    }
    workdir = cfg.workdir if cfg else os.environ.get("THRESHER_WORKDIR")
    return _deliver(alert, cfg, lambda: _catalog(workdir), workdir)


def report_interrupted(cfg, catalog, flow_run_id: str, reason: str) -> dict[str, Any]:
    """Alert for a run found killed after the fact (no state hook ran for it)."""
    alert = {
        "event": "thresher.run.crashed",
        "flow": "curate",
        "flow_run_id": str(flow_run_id),
        "flow_run_name": None,
        "deployment": None,
        "state": "Crashed",
        "reason": reason,
        "config_path": None,
        "dataset": cfg.name,
    }
    return _deliver(alert, cfg, lambda: catalog, cfg.workdir)


def _catalog(workdir: str | None):
    from data_catalog.catalog import CATALOG_URL_ENV, Catalog

    if workdir is None and not os.environ.get(CATALOG_URL_ENV):
        return None  # not a catalog made up in whatever folder the worker runs from
    return Catalog.open(workdir or "work")


def _deliver(alert: dict[str, Any], cfg, catalog_of, workdir: str | None) -> dict[str, Any]:
    """Send the alert to the config's receivers (else the worker's), record it in the catalog
    (`catalog_of()`), return it. A work folder that cannot take the record (the full disk the
    run may have failed on) costs the record, said in one line, not the alert."""
    from prefect.logging import get_logger

    from data_catalog import failures
    from flows.work_folder import explain
    from pipeline.config import AlertsConfig
    from pipeline.text.secrets import masked_text

    alert = {**alert, "reason": masked_text(alert["reason"])[:MAX_REASON]}
    alerts = cfg.alerts if cfg else AlertsConfig()
    answers = notify(
        alert,
        webhook=alerts.webhook or os.environ.get(ALERT_WEBHOOK_ENV),
        command=alerts.command or shlex.split(os.environ.get(ALERT_COMMAND_ENV, "")),
        timeout=alerts.timeout_s,
    )
    try:
        catalog = catalog_of()
        if catalog is None:
            get_logger("thresher.alerts").warning(
                "failure of flow run %s not recorded: no config and no THRESHER_WORKDIR or "
                "THRESHER_CATALOG_URL name a catalog",
                alert["flow_run_id"],
            )
        else:
            fields = {k: v for k, v in alert.items() if k != "event"}
            failures.record(catalog, **fields, alerts=answers)
    except Exception as error:
        if (fault := explain(error, workdir)) is None:
            raise
        get_logger("thresher.alerts").error(
            "failure of flow run %s not recorded in the catalog: %s",
            alert["flow_run_id"],
            re.split(r": |; ", fault, maxsplit=1)[0],  # what, not what to do: the run says it
        )
    return {**alert, "alerts": answers}


def notify(
    alert: dict[str, Any], webhook: str | None, command: list[str] | None, timeout: float
) -> dict[str, str]:
    """Send the alert to each receiver; return what each answered (never raises)."""
    body = json.dumps(alert).encode()
    answers = {}
    if webhook and not webhook.startswith(("http://", "https://")):
        answers["webhook"] = "error: not an http(s) URL"  # the URL itself may hold a token
        webhook = None
    if webhook:
        request = urllib.request.Request(
            webhook, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                answers["webhook"] = f"HTTP {response.status}"
        except urllib.error.HTTPError as error:
            answers["webhook"] = f"HTTP {error.code}"
        except OSError as error:
            answers["webhook"] = f"error: {type(error).__name__}: {error}"
        except ValueError as error:  # its message quotes the URL
            answers["webhook"] = f"error: {type(error).__name__}"
    if command:
        try:
            done = subprocess.run(command, input=body, timeout=timeout, capture_output=True)
            answers["command"] = f"exit {done.returncode}"
        except (OSError, subprocess.TimeoutExpired) as error:
            answers["command"] = f"error: {type(error).__name__}: {error}"
    return answers


def _deployment_name() -> str | None:
    try:
        from prefect.runtime import deployment

        return deployment.name
    except Exception:
        return None
