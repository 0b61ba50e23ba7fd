"""CLI behaviour that needs no flow run: config validation and error exits."""

from __future__ import annotations

import json

import pytest
from helpers import SMS_SOURCE, write_project
from typer.testing import CliRunner

from flows.cli import app, main

runner = CliRunner()


def test_config_validate_accepts_a_good_config(tmp_path):
    config = write_project(tmp_path, [SMS_SOURCE])
    result = runner.invoke(app, ["config", "validate", str(config), "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["sources"] == ["sms"]


def test_config_validate_explains_a_bad_config_and_exits_2(tmp_path):
    config = write_project(
        tmp_path, [{**SMS_SOURCE, "format": "xml"}], split={"fractions": {"train": 2}}
    )
    result = runner.invoke(app, ["config", "validate", str(config)])
    assert result.exit_code == 2
    assert "sources[0] (sms).format: Input should be" in result.stderr
    assert "split.fractions: fractions must add up to 1" in result.stderr


def test_catalog_commands_without_a_catalog_exit_2(tmp_path):
    result = runner.invoke(app, ["catalog", "list", "--workdir", str(tmp_path / "none")])
    assert result.exit_code == 2 and "no catalog at" in result.stderr


def test_run_with_a_bad_config_exits_2_naming_the_field(tmp_path):
    config = write_project(tmp_path, [{**SMS_SOURCE, "consent": "assumed"}])
    result = runner.invoke(app, ["run", "--config", str(config)])
    assert result.exit_code == 2
    assert f"{config}:" in result.stderr and "sources[0] (sms).consent" in result.stderr
    assert not (tmp_path / "work").exists()  # nothing ran


def test_an_unexpected_error_exits_2_with_a_message(tmp_path, monkeypatch, capsys):
    (tmp_path / "catalog.db").write_bytes(b"this is not a database")
    monkeypatch.setattr("sys.argv", ["thresher", "catalog", "list", "--workdir", str(tmp_path)])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    assert "unexpected DatabaseError" in capsys.readouterr().err


def test_version_names_the_package_version_and_the_commit():
    from pipeline.core.code_version import code_state

    result = runner.invoke(app, ["--version"])
    state = code_state()
    assert result.exit_code == 0
    assert result.stdout.startswith(f"thresher {state.version}")
    if state.commit:
        assert f"(commit {state.commit[:12]}" in result.stdout


def test_tables_off_a_terminal_keep_every_column_whole(tmp_path, monkeypatch):
    """A table printed to a file or pipe is as wide as it needs (COLUMNS unset)."""
    from rich.table import Table

    from flows.cli_common import stdout

    monkeypatch.delenv("COLUMNS", raising=False)
    table = Table("name", "path")
    table.add_row("x", "/a/" + "very-long-folder-name/" * 12 + "manifest.json")
    with stdout.capture() as captured:
        stdout.print(table)
    assert "manifest.json" in captured.get() and "…" not in captured.get()
    monkeypatch.setenv("COLUMNS", "60")  # as the user asks
    with stdout.capture() as captured:
        stdout.print(table)
    assert max(len(line) for line in captured.get().splitlines()) <= 60
