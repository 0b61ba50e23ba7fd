"""`thresher secrets scan`: formats, exit codes, JSON lines, bad rows, no secret in output."""

from __future__ import annotations

import json
import random

import polars as pl
import pytest
from credential_factory import secret_sample
from typer.testing import CliRunner

from flows.secrets_cli import secrets_app

runner = CliRunner()


@pytest.fixture
def samples():
    rng = random.Random(42)
    return {kind: secret_sample(kind, rng) for kind in ("github_token", "stripe_key", "jwt")}


def _scan(*args: str):
    return runner.invoke(secrets_app, ["scan", *map(str, args)])


def _json_lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


def _assert_no_secret_in(result, samples) -> None:
    for sample in samples.values():
        assert sample.value not in result.stdout
        assert sample.value not in result.stderr


def test_jsonl_with_findings_exits_1_and_counts_bad_rows_in_the_index(tmp_path, samples):
    github, stripe = samples["github_token"], samples["stripe_key"]
    lines = [
        json.dumps({"text": "clean text"}),
        "{not json",
        json.dumps({"text": github.text}),
        json.dumps({"other": 1}),
        json.dumps({"text": None}),
        json.dumps({"text": stripe.text}),
    ]
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(lines) + "\n")

    result = _scan(path, "--json")

    assert result.exit_code == 1
    assert _json_lines(result.stdout) == [
        {
            "index": 2,
            "findings": [{"type": "github_token", "start": github.start, "end": github.end}],
        },
        {
            "index": 5,
            "findings": [{"type": "stripe_key", "start": stripe.start, "end": stripe.end}],
        },
    ]
    assert f"{path}: bad row 1: not valid JSON" in result.stderr
    assert f"{path}: bad row 3: no field 'text'" in result.stderr
    assert "scanned 6 rows (2 bad)" in result.stderr
    assert "github_token 1, stripe_key 1" in result.stderr
    _assert_no_secret_in(result, samples)


def test_plain_text_counts_lines_and_a_clean_file_exits_0(tmp_path, samples):
    clean = tmp_path / "notes.txt"
    clean.write_text("nothing to see\nstill nothing\n")
    assert _scan(clean, "--json").exit_code == 0
    assert _scan(clean, "--json").stdout == ""

    jwt = samples["jwt"]
    dirty = tmp_path / "config.env"
    dirty.write_text(f"A=1\n\n{jwt.text}\n")
    result = _scan(dirty, "--json")
    assert result.exit_code == 1
    assert _json_lines(result.stdout) == [
        {"index": 2, "findings": [{"type": "jwt", "start": jwt.start, "end": jwt.end}]}
    ]


def test_csv_and_parquet_with_a_text_field(tmp_path, samples):
    github = samples["github_token"]
    frame = pl.DataFrame({"id": [1, 2, 3], "body": ["a", github.text, None]})
    expected = [
        {
            "index": 1,
            "findings": [{"type": "github_token", "start": github.start, "end": github.end}],
        }
    ]
    for path in (tmp_path / "rows.csv", tmp_path / "rows.parquet"):
        frame.write_csv(path) if path.suffix == ".csv" else frame.write_parquet(path)
        result = _scan(path, "--text-field", "body", "--json")
        assert (result.exit_code, _json_lines(result.stdout)) == (1, expected), path


def test_human_output_shows_type_row_offsets_and_a_4_character_lead_only(tmp_path, samples):
    stripe = samples["stripe_key"]
    path = tmp_path / "app.py"
    path.write_text(f"import stripe\n{stripe.text}\n")

    result = _scan(path)

    assert result.exit_code == 1
    row = next(line for line in result.stdout.splitlines() if "stripe_key" in line)
    cells = [cell.strip() for cell in row.strip("│ ").split("│")]
    assert cells == ["1", "stripe_key", str(stripe.start), str(stripe.end), "sk_l…"]
    _assert_no_secret_in(result, samples)


def test_several_files_name_their_file(tmp_path, samples):
    github = samples["github_token"]
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text("clean\n")
    second.write_text(github.text + "\n")
    result = _scan(first, second, "--json")
    assert result.exit_code == 1
    assert [(line["path"], line["index"]) for line in _json_lines(result.stdout)] == [
        (str(second), 0)
    ]


def test_missing_file_exits_2_naming_it(tmp_path):
    result = _scan(tmp_path / "nope.jsonl")
    assert result.exit_code == 2
    assert f"{tmp_path / 'nope.jsonl'}: no such file" in result.stderr


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".jsonl"])
def test_missing_text_field_exits_2_naming_file_and_field(tmp_path, suffix):
    path = tmp_path / f"rows{suffix}"
    frame = pl.DataFrame({"body": ["a", "b"]})
    if suffix == ".csv":
        frame.write_csv(path)
    elif suffix == ".parquet":
        frame.write_parquet(path)
    else:
        frame.write_ndjson(path)

    result = _scan(path)

    assert result.exit_code == 2
    assert f"{path}: no field 'text'" in result.stderr
    assert "--text-field" in result.stderr
