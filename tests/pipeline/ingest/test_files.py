"""The reader every command shares (pipeline/ingest/files.py, pipeline/ingest/field_rows.py):
compression, format by suffix, streamed batches, whole columns and bad-row reports."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma

import polars as pl
import pyarrow as pa
import pytest

from pipeline.ingest import field_rows, files
from pipeline.ingest.field_rows import field_batches, read_column
from pipeline.ingest.files import ReadError


def _rows(path, text_field="text", **chunks):
    """(index, text) of every row, and the bad rows, over all batches."""
    texts, bad, raw = [], [], {}
    for batch in field_batches(path, text_field, **chunks):
        texts += [(batch.first + offset, text) for offset, text in enumerate(batch.texts)]
        bad += batch.bad_rows
        raw |= {batch.first + offset: text for offset, text in batch.raw.items()}
    return texts, bad, raw


LINES = [
    json.dumps({"text": "first message", "id": 1}),
    "{not json",
    json.dumps({"text": "third, after a broken line"}),
    json.dumps(["a", "list"]),
    json.dumps({"text": "fifth\nwith a line break"}),
]


def _compress(data: bytes, suffix: str) -> bytes:
    if suffix == ".zst":
        return pa.compress(data, codec="zstd", asbytes=True)
    return {".gz": gzip, ".bz2": bz2, ".xz": lzma}[suffix].compress(data)


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz", ".zst"])
def test_a_compressed_jsonl_file_streams_the_same_rows_as_the_plain_one(
    tmp_path, monkeypatch, suffix
):
    content = ("\n".join(LINES) + "\n").encode()
    plain, packed = tmp_path / "rows.jsonl", tmp_path / f"rows.jsonl{suffix}"
    plain.write_bytes(content)
    packed.write_bytes(_compress(content, suffix))
    monkeypatch.setattr(field_rows, "BATCH_ROWS", 2)  # several batches

    assert files.format_of(packed) == files.format_of(plain) == "jsonl"
    assert (
        list(files.Lines(packed)) == list(files.Lines(plain)) == [line.encode() for line in LINES]
    )
    assert _rows(packed) == _rows(plain)
    texts, bad, raw = _rows(packed)
    assert texts == [
        (0, "first message"),
        (1, None),
        (2, "third, after a broken line"),
        (3, None),
        (4, "fifth\nwith a line break"),
    ]
    assert bad == [(1, "not valid JSON"), (3, "not a JSON object")]
    assert raw == {1: "{not json", 3: '["a", "list"]'}
    whole = [read_column(path, "text", "--text-field") for path in (packed, plain)]
    assert [(rows.texts, rows.bad) for rows in whole] == [([text for _, text in texts], bad)] * 2


def test_an_invalid_json_line_is_reported_with_its_file_and_line(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(LINES) + "\n")

    _, bad, _ = _rows(path)
    assert [files.bad_row(path, index, why) for index, why in bad] == [
        f"{path}: bad row 1: not valid JSON",  # the 0-based line
        f"{path}: bad row 3: not a JSON object",
    ]
    column = read_column(path, "text", "--text-field")
    assert column.bad == [(1, "not valid JSON"), (3, "not a JSON object")]
    assert column.texts[2] == "third, after a broken line"


def test_a_malformed_csv_row_is_reported_with_its_row_and_raw_lines(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text('id,text\r\n1,clean\r\n2,"two\nlines",extra\r\n3,last\r\n')

    texts, bad, raw = _rows(path)

    assert texts == [(0, "clean"), (1, None), (2, "last")]
    assert [files.bad_row(path, index, why) for index, why in bad] == [
        f"{path}: bad row 1: 3 fields, the header has 2"
    ]
    assert raw == {1: '2,"two\nlines",extra'}


def test_a_csv_field_over_the_csv_modules_default_limit_is_read_with_the_rows_after_it(tmp_path):
    path = tmp_path / "big.csv"
    path.write_text(f'text\nclean\n"{"a" * 200_000}"\nafter\n')
    texts, bad, _ = _rows(path)
    assert texts == [(0, "clean"), (1, "a" * 200_000), (2, "after")]
    assert bad == []


def test_decompression_past_the_cap_stops_with_an_error_naming_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "EXPANSION_FLOOR_BYTES", 1 << 20)
    bomb = tmp_path / "notes.txt.gz"
    bomb.write_bytes(gzip.compress(b"\0" * (8 << 20)))  # 8 MiB from 8 KiB: 1,000 times
    with pytest.raises(ReadError) as error:
        list(field_batches(bomb, "text"))
    message = str(error.value)
    assert message.startswith(f"{bomb}: expands past ")
    assert "ingest.max_expansion_ratio" in message
    with files.open_binary(bomb, max_expansion_ratio=2000) as handle:  # a raised cap lets it
        assert len(handle.read()) == 8 << 20


def test_line_blocks_set_long_lines_aside_unread_and_keep_the_numbering(tmp_path):
    lines = [b"a" * 10, b"b" * 100, b"c" * 5, b"d" * 300, b"e" * 7]
    path = tmp_path / "lines"
    path.write_bytes(b"\n".join(lines))  # no newline after the last
    with path.open("rb") as handle:
        blocks = list(files.line_blocks(handle, 64, 50, b"{}"))
    numbered = []
    for block in blocks:
        numbered += list(
            enumerate(block.data.split(b"\n")[: block.data.count(b"\n") + 1], block.first)
        )
    kept = [(number, line) for number, line in numbered if line]
    assert kept == [(1, b"a" * 10), (2, b"{}"), (3, b"c" * 5), (4, b"{}"), (5, b"e" * 7)]
    assert sorted(n for block in blocks for n in block.too_long) == [2, 4]


def test_plain_text_is_lines_in_chunks_that_carry_the_last_lines(tmp_path):
    path = tmp_path / "notes.txt.gz"
    lines = [f"line {n}" for n in range(10)]
    path.write_bytes(gzip.compress(("\r\n".join(lines) + "\r\n").encode()))

    batches = list(field_batches(path, "text", chunk_bytes=20, overlap_bytes=10))

    assert [text for batch in batches for text in batch.texts] == lines
    assert [batch.first for batch in batches] == [0, 3, 6, 9]
    assert [batch.carried for batch in batches] == [[], ["line 2"], ["line 5"], ["line 8"]]


def test_a_missing_field_names_the_fields_the_file_has(tmp_path):
    path = tmp_path / "rows.parquet"
    pl.DataFrame({"body": ["a"], "id": [1]}).write_parquet(path)
    with pytest.raises(ReadError, match="no field 'text' \\(fields: body, id\\); pass the field"):
        list(field_batches(path, "text"))
    with pytest.raises(ReadError, match="no field 'text' \\(fields: body, id\\); pass the right"):
        read_column(path, "text", "--text-field")
    assert files.field_names(path, "parquet") == ["body", "id"]

    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text('{"body": "a"}\n{"body": "b"}\n')
    with pytest.raises(ReadError, match="no row has a field 'text'; pass the right one with -t"):
        read_column(jsonl, "text", "-t")


def test_whole_columns_read_a_json_array_a_bom_and_blank_text_lines(tmp_path):
    array = tmp_path / "items.json"
    array.write_text(json.dumps([{"id": 7, "text": "a"}, {"id": 8, "text": "b"}]))
    assert read_column(array, "text", "--text-field").texts == ["a", "b"]
    assert read_column(array, "id", "--id-field", numbers_as_text=True).texts == ["7", "8"]

    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b'\xef\xbb\xbf{"text": "x"}\n\n{"text": "[not an array]"}\n')
    assert read_column(bom, "text", "--text-field").texts == ["x", "[not an array]"]

    txt = tmp_path / "lines.txt.gz"
    txt.write_bytes(gzip.compress("\ufeffone\r\n\n  \ntwo\n".encode()))
    rows = read_column(txt, "text", "--text-field")
    assert (rows.texts, rows.blank) == (["one", None, None, "two"], 2)


def test_a_cut_gzip_file_is_a_read_error_naming_it(tmp_path):
    path = tmp_path / "rows.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"text": "a"}\n' * 100)[:30])
    for read in (
        lambda: read_column(path, "text", "--text-field"),
        lambda: list(field_batches(path, "text")),
    ):
        with pytest.raises(
            ReadError, match=f"{path}: not a readable .gz file .*Compressed file ended"
        ):
            read()
