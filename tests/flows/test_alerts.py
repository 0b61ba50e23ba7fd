"""Failure alerts: a failed or crashed run is recorded in the catalog and sent to a webhook or
a command (flows/alerts.py, attached as Prefect state hooks)."""

from __future__ import annotations

import json
import sys
import uuid
from types import SimpleNamespace

import pytest
from helpers import SMS_SOURCE, sms_rows, webhook_receiver, write_jsonl, write_project
from prefect.client.schemas.objects import FlowRun
from prefect.states import Crashed
from typer.testing import CliRunner

from data_catalog import failures
from data_catalog.catalog import Catalog
from flows import alerts
from flows.alerts import ALERT_WEBHOOK_ENV, on_failure, report_failure
from flows.cli import app
from pipeline.core.errors import DataError

AWS_KEY = "AKIA" + "Z7XQ4MBN2VRC6TLE"  # built here so no scanner flags this file


@pytest.fixture
def receiver():
    with webhook_receiver() as found:
        yield found.url, found.received


@pytest.mark.usefixtures("prefect_server")
def test_a_failed_run_is_recorded_and_posted_to_the_webhook(tmp_path, sms_spam, receiver):
    url, received = receiver
    write_jsonl(tmp_path / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, 50))
    missing = {**SMS_SOURCE, "name": "later", "location": "data/not-there-*.jsonl"}
    config = write_project(tmp_path, [SMS_SOURCE, missing], alerts={"webhook": url})
    result = CliRunner().invoke(app, ["run", "--config", str(config)])
    assert result.exit_code == 2
    (alert,) = received
    assert alert["event"] == "thresher.run.failed" and alert["flow"] == "curate"
    assert alert["state"] == "Failed" and alert["dataset"] == "test-set"
    assert "data/not-there-*.jsonl" in alert["reason"] and alert["config_path"] == str(config)

    listed = CliRunner().invoke(
        app, ["catalog", "failures", "--config", str(config), "--json"], catch_exceptions=False
    )
    (row,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert row["flow_run_id"] == alert["flow_run_id"] and row["alerts"] == {"webhook": "HTTP 204"}
    assert row["reason"] == alert["reason"]
    (run,) = Catalog.open(tmp_path / "work").runs()
    assert run["status"] == "failed" and "not-there" in run["error"]


def crashed_run(config_path: str, message: str) -> tuple[FlowRun, object]:
    run = FlowRun(id=uuid.uuid4(), name="brave-otter", flow_id=uuid.uuid4(),
                  parameters={"config_path": config_path})  # fmt: skip
    return run, Crashed(message=message)


def test_a_crash_runs_the_command_with_the_alert_and_masks_secrets(tmp_path, sms_spam):
    delivered = tmp_path / "alert.json"
    command = [sys.executable, "-c", f"import sys; open({str(delivered)!r}, 'wb').write(sys.stdin.buffer.read())"]  # fmt: skip
    config = write_project(tmp_path, [SMS_SOURCE], alerts={"command": command})
    run, state = crashed_run(str(config), f"Execution was aborted; last log: key={AWS_KEY}")
    report = report_failure("curate", run, state)
    assert report["alerts"] == {"command": "exit 0"}
    sent = json.loads(delivered.read_text())
    assert sent["event"] == "thresher.run.crashed" and sent["state"] == "Crashed"
    assert AWS_KEY not in delivered.read_text() and "<SECRET:aws_access_key_id>" in sent["reason"]
    (row,) = failures.failures(Catalog.open(tmp_path / "work"))
    assert row["state"] == "Crashed" and AWS_KEY not in row["reason"]
    assert row["flow_run_id"] == str(run.id) and row["dataset"] == "test-set"


def test_a_missing_config_alerts_the_worker_default_and_an_unreachable_hook_is_recorded(
    tmp_path, monkeypatch
):
    monkeypatch.setenv(ALERT_WEBHOOK_ENV, "http://127.0.0.1:9/nobody-listens")
    monkeypatch.setenv("THRESHER_WORKDIR", str(tmp_path / "work"))
    missing = tmp_path / "configs" / "nightly.yaml"
    run, state = crashed_run(str(missing), f"ConfigError: {missing}: no such file")
    report = report_failure("curate", run, state)
    assert report["dataset"] is None and str(missing) in report["reason"]
    assert report["alerts"]["webhook"].startswith("error: URLError")
    (row,) = failures.failures(Catalog.open(tmp_path / "work"))
    assert row["config_path"] == str(missing) and row["alerts"] == report["alerts"]
    report_failure("curate", run, state)  # a hook that runs twice records the run once
    assert len(failures.failures(Catalog.open(tmp_path / "work"))) == 1


@pytest.mark.usefixtures("prefect_server")
def test_a_failing_subflow_is_reported_once_by_the_flow_that_called_it(
    tmp_path, sms_spam, receiver
):
    from prefect import flow

    from flows.curate import curate

    url, received = receiver
    missing = {**SMS_SOURCE, "location": "data/not-there-*.jsonl"}
    config = write_project(tmp_path, [missing], alerts={"webhook": url})

    @flow(name="outer", on_failure=[on_failure])
    def outer(config_path: str) -> None:
        curate(config_path)

    with pytest.raises(DataError):
        outer(str(config))
    assert [alert["flow"] for alert in received] == ["outer"]
    (row,) = failures.failures(Catalog.open(tmp_path / "work"))
    assert row["flow"] == "outer" and "not-there" in row["reason"]


def test_a_broken_alert_does_not_raise_from_the_hook(tmp_path, monkeypatch, caplog):
    def broken(*args):
        raise RuntimeError("the catalog is down")

    monkeypatch.setattr(alerts, "report_failure", broken)
    run, state = crashed_run(str(tmp_path / "x.yaml"), "boom")
    on_failure(SimpleNamespace(name="curate"), run, state)  # returns: the failure stays visible
    assert "could not record or send the failure alert" in caplog.text
