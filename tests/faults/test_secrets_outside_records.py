"""Fault suite, secrets outside the scanned fields: a credential in a source file's name is
masked wherever the name is shown or stored (location column, evidence, inputs.json, errors);
one in a stored config value is refused, and one quoted by a config error is masked."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import polars as pl
import yaml
from credential_factory import secret_sample
from helpers import SMS_SOURCE
from typer.testing import CliRunner

from data_catalog.catalog import Catalog
from flows.cli import app
from flows.unchanged import fingerprint
from pipeline.config import RunConfig, SourceDeclaration, config_hash, load_run_config
from pipeline.ingest.stage import ingest
from pipeline.stage import RunContext

KEY = secret_sample("aws_access_key_id", random.Random(51)).value
PASSWORD = "".join(random.Random(51).choices(string.ascii_letters + string.digits, k=14))
DATABASE_URL = "postgresql://app:" + PASSWORD + "@db.internal:5432/tickets"  # made at run time


def project(root: Path, **source_overrides) -> Path:
    (root / "data").mkdir()
    rows = [{"id": f"m{n}", "text": f"message number {n} is here"} for n in range(1, 4)]  # fmt: skip
    (root / "data" / f"creds-{KEY}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + "{broken\n")  # fmt: skip
    source = {**SMS_SOURCE, "location": "data/*.jsonl", **source_overrides}
    config = {"name": "leaky", "workdir": "./work", "sources": [source]}
    (root / "thresher.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return root / "thresher.yaml"


def test_a_credential_in_a_file_name_is_masked_where_the_name_is_shown(tmp_path):
    config = project(tmp_path)
    cfg = load_run_config(config)
    ctx = RunContext(run_id="r", run_dir=tmp_path / "work", config=cfg, config_hash=config_hash(cfg))  # fmt: skip
    result = ingest(cfg.source_list, ctx, tmp_path / "work" / "ingested")
    records = result.frame.collect()
    assert records.height == 3
    shown = records["location"].to_list() + result.events["evidence"].to_list()
    assert all(KEY not in value for value in shown)
    assert records["location"][0].startswith("data/creds-<SECRET:aws_access_key_id>.jsonl#")
    assert '"file":"data/creds-<SECRET:aws_access_key_id>.jsonl#' in result.events["evidence"][0]
    facts = json.dumps(fingerprint(cfg, Catalog.open(tmp_path / "work")))
    assert KEY not in facts and "creds-<SECRET:aws_access_key_id>.jsonl#" in facts
    # the identity still hashes the real name: unchanged for names without a credential
    plain = RunConfig(name="p", workdir=str(tmp_path / "w2"), sources=[SourceDeclaration(**{**SMS_SOURCE, "location": "data/*.jsonl", "base_dir": str(tmp_path)})])  # fmt: skip
    again = ingest(plain.source_list, RunContext(run_id="r", run_dir=tmp_path / "w2", config=plain, config_hash=""), tmp_path / "w2" / "i")  # fmt: skip
    assert again.frame.collect()["record_id"].to_list() == records["record_id"].to_list()


def test_a_file_name_quoted_by_an_error_is_masked(tmp_path):
    project(tmp_path)
    path = tmp_path / "data" / f"creds-{KEY}.jsonl"
    result = CliRunner().invoke(
        app, ["dedup", str(path), "--text-field", "nope", "--output", str(tmp_path / "out")]
    )
    said = "".join((result.stdout + result.stderr).split())
    assert result.exit_code == 2 and KEY not in said
    assert "creds-<SECRET:aws_access_key_id>.jsonl:norowhasafield'nope'" in said


def test_a_credential_in_a_stored_config_value_is_refused_and_masked(tmp_path):
    config = project(tmp_path, owner=DATABASE_URL)
    for command in (
        ["config", "validate", str(config)],
        ["run", "--config", str(config), "--quiet"],
    ):
        result = CliRunner().invoke(app, command)
        assert result.exit_code == 2
        said = " ".join((result.stdout + result.stderr).split())
        assert PASSWORD not in said
        assert "sources[0].owner holds a credential (connection_string_password)" in said
    assert not (tmp_path / "work" / "runs").exists()


def test_a_credential_quoted_by_a_config_error_is_masked(tmp_path):
    config = project(tmp_path, consent=DATABASE_URL)  # not an allowed value: the error quotes it
    result = CliRunner().invoke(app, ["config", "validate", str(config)])
    assert result.exit_code == 2
    said = result.stdout + result.stderr
    assert PASSWORD not in said and "<SECRET:connection_string_password>" in said


def test_alert_webhooks_are_not_stored_so_they_may_hold_tokens(tmp_path):
    config = project(tmp_path)
    data = yaml.safe_load(config.read_text())
    data["alerts"] = {"webhook": f"https://hooks.example.com/services/{KEY}"}
    config.write_text(yaml.safe_dump(data))
    result = CliRunner().invoke(app, ["config", "validate", str(config)])
    assert result.exit_code == 0, result.stderr


def test_masked_names_stay_apart():
    from pipeline.ingest.stage import shown_names

    other = secret_sample("aws_access_key_id", random.Random(52)).value
    names = [f"a-{KEY}.txt", f"a-{other}.txt", "plain.txt"]
    shown = shown_names(names)
    assert shown["plain.txt"] == "plain.txt"
    assert len(set(shown.values())) == 3 and not any(KEY in s or other in s for s in shown.values())
    assert (
        pl.Series(list(shown.values())).str.starts_with("a-<SECRET:aws_access_key_id>.txt#").sum()
        == 2
    )
