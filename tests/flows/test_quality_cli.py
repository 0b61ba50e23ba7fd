"""`thresher quality scan` and `thresher quality explain`: JSON lines, decisions by profile and
language, exit codes, and no record text in the output."""

from __future__ import annotations

import json
import pydoc_data.topics
from pathlib import Path

import pytest
import yaml
from helpers import german_message, write_jsonl
from typer.testing import CliRunner

from flows.cli import app

runner = CliRunner()


def python_prose() -> str:
    """Real English prose shipped with CPython: the first five paragraphs of the language
    reference on exceptions, one line each."""
    body = pydoc_data.topics.topics["exceptions"].split("\n\n")[1:]
    paragraphs = [" ".join(p.split()) for p in body if p.strip() and not p.startswith(" ")]
    return "\n".join(paragraphs[:5])


@pytest.fixture
def mixed(tmp_path, sms_spam) -> Path:
    """Real prose, a real SMS (English, 16 words) and a German message, as jsonl."""
    sms = sms_spam["text"][6]
    assert sms.startswith("Even my brother is not like to speak with me.")
    rows = [{"body": python_prose()}, {"body": sms}, {"body": german_message()[0]}]
    return write_jsonl(tmp_path / "mixed.jsonl", rows)


def scan(*args) -> tuple[int, list[dict], str]:
    result = runner.invoke(app, ["quality", "scan", *map(str, args), "--json"])
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    return result.exit_code, lines, result.stderr


def test_scan_json_lines_by_profile(mixed):
    code, lines, stderr = scan(mixed, "--text-field", "body", "--profile", "short_messages")
    assert code == 0, stderr
    assert [line["index"] for line in lines] == [0, 1, 2]
    for line in lines:
        assert {"index", "profile", "language", "language_score", "reason"} <= set(line)
        assert "text" not in line and "removed" not in line
        assert line["profile"] == "short_messages" and line["reason"] is None
    assert [line["language"] for line in lines] == ["en", "en", "de"]
    assert "3 record(s): 0 would be dropped" in stderr

    code, lines, stderr = scan(mixed, "--text-field", "body", "--profile", "prose")
    assert code == 1
    assert [line["reason"] for line in lines] == [None, "gopher_short_doc", "gopher_short_doc"]
    assert lines[0]["words"] >= 250 and lines[1]["words"] == 16
    assert {line["profile"] for line in lines} == {"prose"}
    assert "3 record(s): 2 would be dropped" in stderr


def test_scan_languages(mixed):
    code, lines, _ = scan(
        mixed, "--text-field", "body", "--profile", "short_messages", "--languages", "en"
    )
    assert code == 1
    assert [line["reason"] for line in lines] == [None, None, "language_not_allowed"]
    assert lines[2]["language"] == "de" and lines[2]["language_score"] >= 0.9
    code, lines, _ = scan(
        mixed, "--text-field", "body", "--profile", "short_messages", "--languages", "en,de"
    )
    assert code == 0 and {line["reason"] for line in lines} == {None}


def test_scan_table_output_shows_decisions_not_text(mixed):
    result = runner.invoke(
        app, ["quality", "scan", str(mixed), "--text-field", "body"], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 1
    assert "gopher_short_doc" in result.stdout and "kept" in result.stdout
    assert "brother" not in result.stdout and "Exceptions" not in result.stdout


def test_scan_errors_exit_2(tmp_path, mixed):
    missing = tmp_path / "nowhere.jsonl"
    code, lines, stderr = scan(missing)
    assert code == 2 and lines == [] and str(missing) in stderr.replace("\n", "")

    code, _, stderr = scan(mixed, "--profile", "web")
    assert code == 2 and "--profile must be one of" in stderr

    csv = tmp_path / "messages.csv"
    csv.write_text("body\nhello there\n")
    code, lines, stderr = scan(csv)  # the default --text-field is "text"
    assert code == 2 and lines == [] and "no field 'text'" in stderr


def test_scan_a_jsonl_without_the_text_field_exits_2(mixed):
    code, lines, stderr = scan(mixed)  # the rows hold "body", not "text"
    assert code == 2 and lines == []
    assert "'text'" in stderr and "--text-field" in stderr


def test_explain_prints_decisions_per_source_without_text(sms_project):
    result = runner.invoke(
        app, ["quality", "explain", "--config", str(sms_project), "--sample", "5", "--json"]
    )
    assert result.exit_code == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["source"] for line in lines] == ["sms"] * 5 + ["changelogs"] * 5
    for line in lines:
        assert {"record_id", "source", "profile", "reason", "language"} <= set(line)
        assert "text" not in line and "removed" not in line
        assert line["profile"] == "short_messages"  # the default: nothing dropped for length
    assert len({line["record_id"] for line in lines}) == 10
    assert "10 record(s)" in result.stderr
    # the first five SMS of the fixture are kept; no text of theirs is printed
    assert "jurong" not in result.stdout and "Joking wif u oni" not in result.stdout
    assert not (sms_project.parent / "work").exists()  # nothing published or written

    one = runner.invoke(
        app,
        ["quality", "explain", "--config", str(sms_project), "--source", "changelogs",
         "--sample", "3", "--json"],
    )  # fmt: skip
    assert one.exit_code == 0
    assert [json.loads(line)["source"] for line in one.stdout.splitlines()] == ["changelogs"] * 3

    none = runner.invoke(app, ["quality", "explain", "--config", str(sms_project), "--source", "x"])
    assert none.exit_code == 2 and "no source 'x'" in none.stderr


def test_explain_with_a_prose_profile_drops_the_sms(sms_project):
    config = yaml.safe_load(sms_project.read_text())
    config["quality"] = {"profiles": {"sms": "prose"}}
    sms_project.write_text(yaml.safe_dump(config, sort_keys=False))
    result = runner.invoke(
        app, ["quality", "explain", "-c", str(sms_project), "--sample", "5", "--json"]
    )
    assert result.exit_code == 0
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    sms = [line for line in lines if line["source"] == "sms"]
    assert [line["profile"] for line in sms] == ["prose"] * 5
    assert all(line["reason"] is not None for line in sms)
    changelogs = [line for line in lines if line["source"] == "changelogs"]
    assert {line["profile"] for line in changelogs} == {"short_messages"}


def test_candidates_on_the_command_line_and_unknown_codes_in_a_run_config(mixed):
    """`--candidates` restricts the answer; a code py3langid does not know stops `scan` and a
    run (before it reads anything), naming the field and the codes it knows."""
    from flows.run_plan import _check_languages
    from pipeline.config import RunConfig
    from pipeline.core.errors import ConfigError

    code, lines, _ = scan(
        mixed, "--text-field", "body", "--profile", "short_messages", "--candidates", "en,de"
    )
    assert code == 0 and [line["language"] for line in lines] == ["en", "en", "de"]
    bad = runner.invoke(
        app, ["quality", "scan", str(mixed), "--text-field", "body", "--candidates", "en,qq"]
    )
    assert bad.exit_code == 2 and "unknown language code(s) qq" in bad.output
    cfg = RunConfig(name="c", sources=[], quality={"language": {"candidates": ["en", "qq"]}})
    with pytest.raises(
        ConfigError, match=r"quality.language.candidates: unknown .* qq; py3langid knows"
    ):
        _check_languages(cfg)
    _check_languages(RunConfig(name="c", sources=[], quality={"language": {"allow": ["en"]}}))
