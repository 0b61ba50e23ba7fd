"""`thresher secrets scan`: formats, exit codes, JSON lines, bad rows, no secret in output."""

from __future__ import annotations

import gzip
import json
import random

import polars as pl
import pytest
from credential_factory import secret_sample
from typer.testing import CliRunner

from flows import secrets_cli
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


def test_a_directory_exits_2_saying_it_is_one_and_that_files_are_taken(tmp_path):
    (tmp_path / "data.jsonl").write_text('{"text": "clean"}\n')
    result = _scan(tmp_path)
    assert result.exit_code == 2
    assert f"{tmp_path}: is a directory" in result.stderr
    assert "takes files" in result.stderr
    assert "no such file" not in result.stderr


def test_a_directory_among_files_exits_2_before_any_scan(tmp_path, samples):
    found = tmp_path / "found.txt"
    found.write_text(samples["github_token"].text + "\n")
    result = _scan(found, tmp_path)
    assert result.exit_code == 2
    assert f"{tmp_path}: is a directory" in result.stderr
    assert "scanned" not in result.stderr


@pytest.mark.parametrize(
    ("text", "summary"),
    [
        ("", "scanned 0 rows (0 bad)"),
        ("one line\n", "scanned 1 row (0 bad)"),
        ("one\ntwo\n", "scanned 2 rows (0 bad)"),
    ],
)
def test_the_summary_says_row_or_rows(tmp_path, text, summary):
    path = tmp_path / "notes.txt"
    path.write_text(text)
    result = _scan(path)
    assert result.exit_code == 0
    assert summary in result.stderr


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


def test_a_csv_field_of_200_kb_is_scanned_and_so_are_the_rows_after_it(tmp_path, samples):
    path = tmp_path / "big.csv"
    path.write_text(f'text\nclean\n"{"a" * 200_000}"\n{samples["github_token"].text}\n')

    result = _scan(path, "--json")

    assert result.exit_code == 1
    assert [row["index"] for row in _json_lines(result.stdout)] == [2]


def test_an_unreadable_gzip_file_exits_2_naming_it(tmp_path):
    path = tmp_path / "notes.txt.gz"
    path.write_bytes(gzip.compress(b"clean line\n" * 100)[:40])  # cut short
    result = _scan(path)
    assert result.exit_code == 2
    assert f"error: {path}: not a readable .gz file" in result.stderr


def test_a_private_key_file_is_found_at_its_first_line(tmp_path):
    key = secret_sample("private_key", random.Random(3)).value
    path = tmp_path / "id_rsa"
    path.write_text(key + "\n")

    result = _scan(path, "--json")

    assert result.exit_code == 1
    assert _json_lines(result.stdout) == [
        {"index": 0, "findings": [{"type": "private_key", "start": 0, "end": len(key)}]}
    ]
    assert f"scanned {key.count(chr(10)) + 1} rows" in result.stderr


def _text_with_keys(rng: random.Random) -> tuple[str, list[dict]]:
    """Lines of filler with private keys and tokens; the expected JSON lines."""
    lines, expected = [], []
    for block in range(6):
        lines += [f"filler {block} {n} " + "x" * rng.randint(0, 60) for n in range(25)]
        if block % 2:
            key = secret_sample("private_key", rng).value
            lead = "key: " if block == 3 else ""
            start = len(lead)
            finding = {"type": "private_key", "start": start, "end": start + len(key)}
            expected.append({"index": len(lines), "findings": [finding]})
            lines += (lead + key).split("\n")
        else:
            token = secret_sample("github_token", rng)
            finding = {"type": "github_token", "start": token.start, "end": token.end}
            expected.append({"index": len(lines), "findings": [finding]})
            lines.append(token.text)
    return "\r\n".join(lines) + "\r\n", expected


@pytest.mark.parametrize("chunk_bytes", [200, 1_000, 3_000, 8 * 2**20])
def test_plain_text_is_scanned_in_chunks_of_lines_and_reported_by_line(
    tmp_path, monkeypatch, chunk_bytes
):
    """Multi-line keys are found wherever the chunks end (the next chunk starts with the
    previous one's last lines); each finding is reported once, at the line it starts on."""
    monkeypatch.setattr(secrets_cli, "CHUNK_BYTES", chunk_bytes)
    monkeypatch.setattr(secrets_cli, "CHUNK_OVERLAP_BYTES", 4_000)
    text, expected = _text_with_keys(random.Random(8))
    path = tmp_path / "notes.md"
    path.write_bytes(text.encode())

    result = _scan(path, "--json")

    assert (result.exit_code, _json_lines(result.stdout)) == (1, expected)
    assert f"scanned {text.count(chr(10))} rows" in result.stderr


def test_a_broken_jsonl_line_is_a_bad_row_and_its_raw_text_is_scanned(tmp_path, samples):
    github = samples["github_token"]
    raw = '{"text": "' + github.text + '", broken'
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"text": "clean"}) + "\n" + raw + "\n[1, 2]\n")

    result = _scan(path, "--json")

    assert result.exit_code == 1
    start = raw.index(github.value)
    finding = {"type": "github_token", "start": start, "end": start + len(github.value)}
    assert _json_lines(result.stdout) == [{"index": 1, "findings": [finding], "raw": True}]
    assert f"{path}: bad row 1: not valid JSON" in result.stderr
    assert f"{path}: bad row 2: not a JSON object" in result.stderr
    assert "scanned 3 rows (2 bad)" in result.stderr
    _assert_no_secret_in(result, samples)


@pytest.mark.parametrize("name", ["rows.jsonl.gz", "rows.csv.gz", "notes.txt.gz", "log.gz"])
def test_gzip_files_are_read_by_their_inner_suffix(tmp_path, samples, name):
    github = samples["github_token"]
    if name.startswith("rows.jsonl"):
        content, index = json.dumps({"text": "a"}) + "\n" + json.dumps({"text": github.text}), 1
    elif name.startswith("rows.csv"):
        content, index = f"id,text\n1,clean\n2,{github.text}\n", 1
    else:
        content, index = f"clean\n\n{github.text}\n", 2
    path = tmp_path / name
    path.write_bytes(gzip.compress(content.encode()))

    result = _scan(path, "--json")

    finding = {"type": "github_token", "start": github.start, "end": github.end}
    assert (result.exit_code, _json_lines(result.stdout)) == (
        1,
        [{"index": index, "findings": [finding]}],
    )


def _raw_finding(raw: str, sample) -> dict:
    start = raw.index(sample.value)
    return {"type": sample.kind, "start": start, "end": start + len(sample.value)}


def test_every_bad_jsonl_row_has_its_raw_line_scanned_and_a_finding_exits_1(tmp_path, samples):
    """No text field, a list or a number as the text: bad rows, but never unscanned."""
    github, stripe, jwt = samples["github_token"], samples["stripe_key"], samples["jwt"]
    lines = [
        json.dumps({"text": "clean"}),
        json.dumps({"body": github.text}),  # no field 'text'
        json.dumps({"text": ["a", stripe.text]}),  # a list
        json.dumps({"text": 12, "note": jwt.text}),  # a number
        json.dumps({"text": "still clean"}),
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(lines) + "\n")

    result = _scan(path, "--json")

    assert result.exit_code == 1
    assert _json_lines(result.stdout) == [
        {"index": 1, "findings": [_raw_finding(lines[1], github)], "raw": True},
        {"index": 2, "findings": [_raw_finding(lines[2], stripe)], "raw": True},
        {"index": 3, "findings": [_raw_finding(lines[3], jwt)], "raw": True},
    ]
    assert f"{path}: bad row 1: no field 'text'" in result.stderr
    assert f"{path}: bad row 2: field 'text' is not a string" in result.stderr
    assert f"{path}: bad row 3: field 'text' is not a string" in result.stderr
    assert "scanned 5 rows (3 bad)" in result.stderr
    _assert_no_secret_in(result, samples)


def test_a_csv_row_with_the_wrong_number_of_fields_has_its_raw_lines_scanned(tmp_path, samples):
    github, stripe = samples["github_token"], samples["stripe_key"]
    rows = [
        "1,clean",
        f"2,clean,{github.text}",  # three fields
        f'3,"two\nlines",{stripe.text}',  # three fields over two lines
        "4,clean",
    ]
    path = tmp_path / "rows.csv"
    path.write_text("id,text\r\n" + "\r\n".join(rows) + "\r\n")

    result = _scan(path, "--json")

    assert result.exit_code == 1
    assert _json_lines(result.stdout) == [
        {"index": 1, "findings": [_raw_finding(rows[1], github)], "raw": True},
        {"index": 2, "findings": [_raw_finding(rows[2], stripe)], "raw": True},
    ]
    assert f"{path}: bad row 1: 3 fields, the header has 2" in result.stderr
    assert f"{path}: bad row 2: 3 fields, the header has 2" in result.stderr
    assert "scanned 4 rows (2 bad)" in result.stderr
    _assert_no_secret_in(result, samples)


def test_a_parquet_text_column_that_is_not_text_has_its_rows_scanned_as_json(tmp_path, samples):
    github = samples["github_token"]
    frame = pl.DataFrame({"id": [1, 2, 3], "body": [["a"], ["b", github.text], None]})
    path = tmp_path / "rows.parquet"
    frame.write_parquet(path)

    result = _scan(path, "--text-field", "body", "--json")

    raw = json.dumps({"id": 2, "body": ["b", github.text]}, separators=(",", ":"))
    assert result.exit_code == 1
    assert _json_lines(result.stdout) == [
        {"index": 1, "findings": [_raw_finding(raw, github)], "raw": True}
    ]
    assert f"{path}: bad row 0: field 'body' is not a string" in result.stderr
    assert f"{path}: bad row 1: field 'body' is not a string" in result.stderr
    assert "scanned 3 rows (2 bad)" in result.stderr  # a null is not a bad row
    _assert_no_secret_in(result, samples)


def test_a_raw_finding_alone_exits_1_and_is_shown_as_a_raw_row(tmp_path, samples):
    stripe = samples["stripe_key"]
    line = json.dumps({"body": stripe.text})
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"text": "clean"}) + "\n" + line + "\n")

    result = _scan(path)

    assert result.exit_code == 1
    row = next(line for line in result.stdout.splitlines() if "stripe_key" in line)
    cells = [cell.strip() for cell in row.strip("│ ").split("│")]
    finding = _raw_finding(line, stripe)
    assert cells == [
        "1 (raw row)",
        "stripe_key",
        str(finding["start"]),
        str(finding["end"]),
        "sk_l…",
    ]
    _assert_no_secret_in(result, samples)
