"""`thresher dedup`: clusters.parquet and kept.parquet over real SMS messages, exit codes."""

from __future__ import annotations

import bz2
import json
import lzma
import re

import polars as pl
import pytest
from helpers import write_jsonl
from typer.testing import CliRunner

from flows import dedup_cli
from flows.cli import app
from pipeline.core.identity import record_id_of
from pipeline.core.normalize import normalize_text
from pipeline.ingest.encoding import repair_encoding

runner = CliRunner()
CLUSTER_SCHEMA = {
    "index": pl.Int64,
    "record_id": pl.String,
    "cluster_id": pl.Int64,
    "kept": pl.Boolean,
    "duplicate_of": pl.Int64,
    "similarity": pl.Float64,
    "method": pl.String,
    "error": pl.String,
    "location": pl.String,
}


def _dedup(*args):
    return runner.invoke(app, ["dedup", *map(str, args)])


def _clusters(out) -> pl.DataFrame:
    return pl.read_parquet(out / "clusters.parquet")


def _first_of_each_text(texts: list[str]) -> list[int | None]:
    """For each text, the index of its first exact (normalized) copy; None for a first."""
    first: dict[str, int] = {}
    normalized = normalize_text(pl.Series(texts, dtype=pl.String)).to_list()
    return [None if first.setdefault(t, i) == i else first[t] for i, t in enumerate(normalized)]


def _expected_clusters(duplicate_of: list[int | None]) -> list[int]:
    return [i if of is None else of for i, of in enumerate(duplicate_of)]


def _shingles(text: str, n: int = 5) -> set[tuple[str, ...]]:
    words = text.lower().split()
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


@pytest.fixture
def sms_texts(sms_spam: pl.DataFrame) -> list[str]:
    """The first 600 real messages: 19 of them are copies of 9 texts once whitespace is
    normalized (2 of the 9 differ in whitespace only)."""
    return sms_spam["text"].head(600).to_list()


@pytest.fixture
def near_copies(sms_spam: pl.DataFrame) -> tuple[list[str], list[int | None]]:
    """12 long, distinct real messages, then edited copies of 8 of them (a word inserted,
    the last word deleted, the last word's case changed, runs of spaces, a word appended);
    returns (texts, the index each row duplicates or None)."""
    long = (
        sms_spam.filter(pl.col("text").str.split(" ").list.len() >= 40)
        .unique("text", keep="first", maintain_order=True)
        .head(12)["text"]
        .to_list()
    )
    shingles = [_shingles(text) for text in long]
    for i, a in enumerate(shingles):  # the originals are not near duplicates of each other
        for b in shingles[i + 1 :]:
            assert len(a & b) / len(a | b) < 0.3
    words = [text.split(" ") for text in long]
    edits = [
        (0, " ".join(words[0][:-1] + ["really", words[0][-1]])),  # insertion
        (1, " ".join(words[1][:-1])),  # deletion
        (2, " ".join(words[2][:-1] + [words[2][-1].upper()])),  # case
        (3, long[3].replace(" ", "   ", 3)),  # whitespace
        (5, long[5] + " ok"),  # appended
        (7, " ".join(words[7][:-1])),
        (9, long[9] + " see you"),
        (11, "  " + long[11].replace(" ", "\t", 2)),
    ]
    texts = long + [text for _, text in edits]
    return texts, [None] * len(long) + [of for of, _ in edits]


def test_exact_on_real_sms_duplicates(tmp_path, sms_texts):
    path = write_jsonl(tmp_path / "sms.jsonl", [{"text": text} for text in sms_texts])

    result = _dedup(path, "--method", "exact", "--output", tmp_path / "out", "--json")

    assert result.exit_code == 0, result.output
    clusters = _clusters(tmp_path / "out")
    expected = _first_of_each_text(sms_texts)
    assert sum(of is not None for of in expected) == 10
    assert dict(clusters.schema) == CLUSTER_SCHEMA
    assert clusters["index"].to_list() == list(range(600))
    assert clusters["duplicate_of"].to_list() == expected
    assert clusters["kept"].to_list() == [of is None for of in expected]
    assert clusters["cluster_id"].to_list() == _expected_clusters(expected)
    dropped = clusters.filter(~pl.col("kept"))
    assert dropped["method"].to_list() == ["exact"] * 10
    assert dropped["similarity"].to_list() == [1.0] * 10
    assert clusters["error"].null_count() == 600
    assert clusters["location"][:3].to_list() == ["sms.jsonl:1", "sms.jsonl:2", "sms.jsonl:3"]

    kept = pl.read_parquet(tmp_path / "out" / "kept.parquet")
    assert kept.height == 590
    assert kept.columns[0] == "index" and kept.columns[-1] == "cluster_id"
    assert kept["index"].to_list() == [i for i, of in enumerate(expected) if of is None]
    given = pl.Series(sms_texts)
    ingested = repair_encoding(given, normalize_text(given))[0].to_list()
    assert kept["text"].to_list() == [ingested[i] for i in kept["index"]]  # as ingest leaves it
    assert kept["record_id"].to_list() == clusters.filter("kept")["record_id"].to_list()

    summary = json.loads(result.stdout)
    assert summary["rows"] == 600 and summary["bad_rows"] == 0 and summary["kept"] == 590
    assert summary["dropped"] == {"exact": 10}
    assert summary["clusters"] == 9 and summary["largest_cluster"] == 3
    assert "600 rows (0 bad), 590 kept, dropped: exact 10" in result.stderr


def test_csv_and_parquet_inputs_with_an_id_field(tmp_path, sms_texts):
    frame = pl.DataFrame({"msg_id": [f"m{i}" for i in range(200)], "body": sms_texts[:200]})
    frame.write_csv(tmp_path / "sms.csv")
    frame.write_parquet(tmp_path / "sms.parquet")
    (tmp_path / "sms.csv.xz").write_bytes(lzma.compress((tmp_path / "sms.csv").read_bytes()))
    (tmp_path / "sms.parquet.bz2").write_bytes(
        bz2.compress((tmp_path / "sms.parquet").read_bytes())
    )
    expected = _first_of_each_text(sms_texts[:200])
    assert sum(of is not None for of in expected) > 0

    for name in ("sms.csv", "sms.parquet", "sms.csv.xz", "sms.parquet.bz2"):
        out = tmp_path / name.replace(".", "-")
        args = ("--text-field", "body", "--id-field", "msg_id", "--method", "exact")
        result = _dedup(tmp_path / name, *args, "--output", out)

        assert result.exit_code == 0, result.output
        clusters = _clusters(out)
        assert clusters["duplicate_of"].to_list() == expected
        assert clusters["record_id"].to_list() == [record_id_of("sms", f"m{i}") for i in range(200)]
        assert clusters["location"][-1] == f"{name}:200"  # the 1-based data row
        kept = pl.read_parquet(out / "kept.parquet")
        assert kept.height == expected.count(None)


def test_a_repeated_id_is_a_bad_row(tmp_path, sms_texts):
    rows = [{"id": "a", "text": sms_texts[0]}, {"id": "a", "text": sms_texts[1]}]
    path = write_jsonl(tmp_path / "ids.jsonl", rows + [{"id": "b", "text": sms_texts[2]}])

    result = _dedup(path, "--id-field", "id", "--method", "exact", "--output", tmp_path / "out")

    assert result.exit_code == 2
    clusters = _clusters(tmp_path / "out")
    assert clusters["error"].to_list() == [None, "duplicate_source_id", None]
    assert clusters["kept"].to_list() == [True, False, True]
    assert clusters["record_id"].n_unique() == 3
    assert f"{path}: line 2: duplicate_source_id" in result.stderr


def test_bad_jsonl_lines_exit_2_and_the_outputs_are_still_written(tmp_path, sms_texts):
    lines = [
        json.dumps({"text": sms_texts[0]}),
        "{not json",
        "",  # a blank line is not a row
        json.dumps({"text": sms_texts[0]}),
        json.dumps({"text": 42}),
        json.dumps({"text": sms_texts[1]}),
    ]
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(lines) + "\n")

    result = _dedup(path, "--method", "exact", "--output", tmp_path / "out")

    assert result.exit_code == 2
    clusters = _clusters(tmp_path / "out")
    assert clusters["index"].to_list() == [0, 1, 2, 3, 4]
    assert clusters["location"].to_list() == [f"data.jsonl:{n}" for n in (1, 2, 4, 5, 6)]
    assert clusters["error"].to_list() == [None, "invalid_json", None, "wrong_type", None]
    assert clusters["kept"].to_list() == [True, False, False, False, True]
    assert clusters["duplicate_of"].to_list() == [None, None, 0, None, None]
    assert clusters["cluster_id"].to_list() == [0, 1, 0, 3, 4]
    assert clusters["method"].to_list() == [None, None, "exact", None, None]
    assert pl.read_parquet(tmp_path / "out" / "kept.parquet")["index"].to_list() == [0, 4]
    assert f"{path}: line 2: invalid_json" in result.stderr
    assert f"{path}: line 5: wrong_type" in result.stderr
    assert "5 rows (2 bad), 2 kept" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.jsonl"], r"missing.jsonl: no such file"),
        (["data.txt"], r"data.txt: unknown format '.txt'"),
        (
            ["data.csv", "--text-field", "body", "--method", "exact"],
            r"no field 'body' \(fields: text\).*--text-field",
        ),
        (
            ["data.jsonl", "--text-field", "body", "--method", "exact"],
            r"no row has a field 'body'; .*--text-field",
        ),
        (
            ["data.jsonl", "--id-field", "msg_id", "--method", "exact"],
            r"no row has a field 'msg_id'; .*--id-field",
        ),
        (["data.jsonl", "--minhash-threshold", "1.5"], r"--minhash-threshold 1.5: .*less than"),
        (["data.jsonl", "--method", "exact", "--output", "data.csv"], r"cannot create"),
    ],
)
def test_errors_exit_2_with_a_message(tmp_path, monkeypatch, sms_texts, args, message):
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "data.jsonl", [{"text": text} for text in sms_texts[:3]])
    pl.DataFrame({"text": sms_texts[:3]}).write_csv(tmp_path / "data.csv")
    (tmp_path / "data.txt").write_text(sms_texts[0])

    result = _dedup(*args, *(["--output", "out"] if "--output" not in args else []))

    assert result.exit_code == 2
    assert re.search(message, result.stderr.replace("\n", " ")), result.stderr


def test_minhash_finds_edited_copies_of_real_messages(tmp_path, near_copies):
    texts, expected = near_copies
    path = write_jsonl(tmp_path / "near.jsonl", [{"text": text} for text in texts])

    result = _dedup(path, "--minhash-threshold", "0.7", "--output", tmp_path / "out", "--json")

    assert result.exit_code == 0, result.output
    clusters = _clusters(tmp_path / "out")
    assert clusters["index"].to_list() == list(range(len(texts)))
    assert clusters["duplicate_of"].to_list() == expected
    assert clusters["cluster_id"].to_list() == _expected_clusters(expected)
    dropped = clusters.filter(~pl.col("kept"))
    assert set(dropped["method"]) == {"minhash"}
    assert dropped["similarity"].is_between(0.7, 1.0).all()
    kept = pl.read_parquet(tmp_path / "out" / "kept.parquet")
    assert kept["index"].to_list() == list(range(12))
    summary = json.loads(result.stdout)
    assert summary["dropped"] == {"minhash": 8} and summary["clusters"] == 8


def test_all_points_a_chain_at_the_row_finally_kept(tmp_path, monkeypatch, near_copies):
    monkeypatch.delitem(dedup_cli.METHODS, "semantic")  # no model: exact, then minhash
    texts, _ = near_copies
    edited = texts[0] + " ok"
    rows = [texts[0], edited, texts[1], edited]  # 3: exact copy of 1, a near copy of 0
    path = write_jsonl(tmp_path / "chain.jsonl", [{"text": text} for text in rows])

    result = _dedup(path, "--method", "all", "--output", tmp_path / "out")

    assert result.exit_code == 0, result.output
    clusters = _clusters(tmp_path / "out")
    assert clusters["duplicate_of"].to_list() == [None, 0, None, 0]
    assert clusters["method"].to_list() == [None, "minhash", None, "exact"]
    assert clusters["similarity"][3] == 1.0  # its own drop: a copy of row 1
    assert clusters["cluster_id"].to_list() == [0, 0, 2, 0]


def test_semantic_on_a_small_input(tmp_path, near_copies):
    texts, _ = near_copies
    rows = [texts[0], texts[1], texts[0] + " ok"]
    path = write_jsonl(tmp_path / "small.jsonl", [{"text": text} for text in rows])

    result = _dedup(path, "--method", "semantic", "--output", tmp_path / "out")

    assert result.exit_code == 0, result.output
    clusters = _clusters(tmp_path / "out")
    assert clusters["duplicate_of"].to_list() == [None, None, 0]
    assert clusters["method"][2] == "semantic"


def test_keep_longest_keeps_the_longer_copy_and_names_the_cluster_by_its_first_row(
    tmp_path, near_copies
):
    texts, _ = near_copies
    rows = [texts[0], texts[1], texts[0] + " see you soon"]
    path = write_jsonl(tmp_path / "keep.jsonl", [{"text": text} for text in rows])

    result = _dedup(path, "--keep", "longest", "--output", tmp_path / "out")

    assert result.exit_code == 0, result.output
    clusters = _clusters(tmp_path / "out")
    assert clusters["kept"].to_list() == [False, True, True]
    assert clusters["duplicate_of"].to_list() == [2, None, None]
    assert clusters["cluster_id"].to_list() == [0, 1, 0]
    assert pl.read_parquet(tmp_path / "out" / "kept.parquet")["cluster_id"].to_list() == [1, 0]
