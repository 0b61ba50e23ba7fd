"""Format readers: one input file in, one raw frame out.

A raw frame has `_location` (1-based line for jsonl and changelogs, 1-based data row for
csv and parquet, 1 for a text file), `_error` (a reason code, null for a good row) and one
column per input field, kept as read. Readers never raise for a bad row; they raise
DataError only when the whole file cannot be used, naming the file and what to do.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
from pathlib import Path

import numpy as np
import orjson
import polars as pl

from pipeline import reasons
from pipeline.config import FieldMapping, SourceDeclaration
from pipeline.debian_changelog import decode_lossy, read_debian_changelog
from pipeline.errors import DataError

# The text must be a JSON string; the other mapped roles may be any JSON scalar. Values of
# another JSON type would otherwise be silently turned into strings by the fast reader.
_STRING_ONLY = ("text",)


def read_file(path: Path, name: str, source: SourceDeclaration) -> pl.DataFrame:
    """Read one file; `name` is its stable relative name (the id of a text file)."""
    reader = {
        "jsonl": _read_jsonl,
        "csv": _read_csv,
        "parquet": _read_parquet,
        "text": _read_text,
        "debian_changelog": read_debian_changelog,
    }[source.format]
    return reader(path, name, source)


def _mapped(fields: FieldMapping) -> dict[str, str]:
    """Canonical role -> input field name, for the roles this source maps."""
    roles = {"text": fields.text, "id": fields.id, "group": fields.group}
    roles |= {"timestamp": fields.timestamp, "label": fields.label}
    return {role: name for role, name in roles.items() if name}


def _read_jsonl(path: Path, name: str, source: SourceDeclaration) -> pl.DataFrame:
    """polars reads the file whole; a file with a blank line, a line that is not a JSON
    object or bytes that are not UTF-8 is read line by line instead, so each bad line can
    be named."""
    data = path.read_bytes().removeprefix(codecs.BOM_UTF8)
    if source.encoding.lower().replace("-", "").replace("_", "") == "utf8":
        try:
            frame = pl.read_ndjson(
                io.BytesIO(data), schema=dict.fromkeys(_wanted(source.fields), pl.String)
            )
        except pl.exceptions.PolarsError:
            frame = None  # invalid JSON or UTF-8 on some line: find it line by line
        lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
        if frame is not None and frame.height == lines:  # no blank lines: row n is line n
            frame = frame.with_columns(
                pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("_location"),
                pl.lit(None, dtype=pl.String).alias("_error"),
            )
            return _flag_wrong_types(frame, data, source.fields)
    return _read_jsonl_by_line(data, source)


def _flag_wrong_types(frame: pl.DataFrame, data: bytes, fields: FieldMapping) -> pl.DataFrame:
    """polars renders any JSON value as a string. Values that may not have been a JSON
    string (text) or scalar (the other roles) are rechecked from their own lines."""
    mapped = _mapped(fields)
    looks_wrong = [
        pl.col(name).str.contains(_NOT_A_STRING if role in _STRING_ONLY else r"^[\[{]")
        for role, name in mapped.items()
    ]
    suspects = frame.select(pl.any_horizontal(looks_wrong).fill_null(False)).to_series().arg_true()
    if suspects.len() == 0:
        return frame
    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == ord("\n")).tolist() + [len(data)]
    starts = [0] + [end + 1 for end in ends[:-1]]
    wrong = [
        row
        for row in suspects.to_list()
        if _wrong_type(orjson.loads(data[starts[row] : ends[row]]), mapped)
    ]
    if not wrong:
        return frame
    return frame.with_columns(frame["_error"].scatter(wrong, reasons.WRONG_TYPE))


# How a JSON number, boolean, object or array looks once rendered as a string.
_NOT_A_STRING = r"^(?:[\[{]|-?[0-9]|true$|false$)"


def _wrong_type(value: dict, mapped: dict[str, str]) -> bool:
    for role, field in mapped.items():
        allowed = (str,) if role in _STRING_ONLY else (str, int, float, bool)
        if value.get(field) is not None and not isinstance(value[field], allowed):
            return True
    return False


def _wanted(fields: FieldMapping) -> list[str]:
    return list(dict.fromkeys([*_mapped(fields).values(), *fields.metadata]))


def _read_jsonl_by_line(data: bytes, source: SourceDeclaration) -> pl.DataFrame:
    mapped = _mapped(source.fields)
    wanted = _wanted(source.fields)
    rows = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        row: dict = {"_location": number, "_error": None}
        try:
            line = raw.decode(source.encoding)
        except UnicodeDecodeError:
            rows.append(row | {"_error": reasons.INVALID_UTF8})
            continue
        if not line.strip():
            continue  # blank lines are not records
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            rows.append(row | {"_error": reasons.INVALID_JSON})
            continue
        if not isinstance(value, dict):
            rows.append(row | {"_error": reasons.WRONG_TYPE})
            continue
        if _wrong_type(value, mapped):
            row["_error"] = reasons.WRONG_TYPE
        rows.append(row | {field: _as_text(value.get(field)) for field in wanted})
    schema = {"_location": pl.Int64, "_error": pl.String} | dict.fromkeys(wanted, pl.String)
    return pl.DataFrame(rows, schema=schema)


def _as_text(value) -> str | None:
    """A JSON value as the fast reader renders it: strings as they are, the rest as JSON."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _stringify(frame: pl.DataFrame) -> pl.DataFrame:
    """Every input field as a string (JSON for nested values); location and error as they are."""
    casts = []
    for name, dtype in frame.schema.items():
        if name in ("_location", "_error") or dtype == pl.String:
            continue
        if dtype.is_nested():
            casts.append(pl.col(name).map_elements(_nested_json, return_dtype=pl.String))
        elif dtype == pl.Boolean:
            casts.append(
                pl.col(name).replace_strict({True: "true", False: "false"}, return_dtype=pl.String)
            )
        else:
            casts.append(pl.col(name).cast(pl.String))
    return frame.with_columns(casts) if casts else frame


def _nested_json(value) -> str:
    return json.dumps(
        value.to_list() if isinstance(value, pl.Series) else value, ensure_ascii=False
    )


def _read_csv(path: Path, name: str, source: SourceDeclaration) -> pl.DataFrame:
    text, valid = decode_lossy(path.read_bytes(), source.encoding)
    text = text.removeprefix("\ufeff")
    try:
        frame = pl.read_csv(io.StringIO(text), infer_schema=False, raise_if_empty=False)
        frame = frame.with_columns(
            pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("_location"),
            pl.lit(None, dtype=pl.String).alias("_error"),
        )
    except pl.exceptions.PolarsError:  # a row that does not fit the header: find it row by row
        frame = _read_csv_by_row(text)
    _require_columns(path, frame, source)
    if not valid:  # rows holding a replacement character came from bytes that were not text
        fields = [column for column in frame.columns if column not in ("_location", "_error")]
        has_replacement = pl.any_horizontal(pl.col(fields).str.contains("\ufffd", literal=True))
        frame = frame.with_columns(
            pl.when(pl.col("_error").is_null() & has_replacement)
            .then(pl.lit(reasons.INVALID_UTF8))
            .otherwise(pl.col("_error"))
            .alias("_error")
        )
    return frame


def _read_csv_by_row(text: str) -> pl.DataFrame:
    """Rows whose field count differs from the header's are `malformed_row`; a quote left
    open swallows the rest of the file, which becomes one last malformed row."""
    reader = csv.reader(io.StringIO(text), strict=True)
    header = next(reader, [])
    rows: list[dict] = []
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error:
            rows.append({"_location": len(rows) + 1, "_error": reasons.MALFORMED_ROW})
            break
        if not row:
            continue  # blank lines are not records
        if len(row) != len(header):
            rows.append({"_location": len(rows) + 1, "_error": reasons.MALFORMED_ROW})
            continue
        values = {key: value or None for key, value in zip(header, row, strict=True)}
        rows.append({"_location": len(rows) + 1, "_error": None} | values)
    schema = {"_location": pl.Int64, "_error": pl.String} | dict.fromkeys(header, pl.String)
    return pl.DataFrame(rows, schema=schema)


def _read_parquet(path: Path, name: str, source: SourceDeclaration) -> pl.DataFrame:
    try:
        frame = pl.read_parquet(path)
    except Exception as error:
        raise DataError(
            f"{path}: not a readable Parquet file ({error}); fix or remove the file"
        ) from None
    _require_columns(path, frame, source)
    text_type = frame.schema[source.fields.text]
    if text_type != pl.String:
        raise DataError(
            f"{path}: column {source.fields.text!r} holds {text_type}, not text; "
            f"map `fields.text` of source {source.name!r} to a string column"
        )
    timestamp = source.fields.timestamp
    if timestamp and frame.schema[timestamp] in (pl.Datetime, pl.Date):
        # already typed: render as ISO 8601 in UTC so one parser handles every format
        frame = frame.with_columns(_as_iso_utc(pl.col(timestamp), frame.schema[timestamp]))
    frame = _stringify(frame)
    return frame.with_columns(
        pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("_location"),
        pl.lit(None, dtype=pl.String).alias("_error"),
    )


def _as_iso_utc(column: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    if dtype == pl.Date:
        column, dtype = column.cast(pl.Datetime("us")), pl.Datetime("us")
    in_utc = (
        column.dt.replace_time_zone("UTC")  # times without a zone are taken as UTC
        if dtype.time_zone is None
        else column.dt.convert_time_zone("UTC")
    )
    return in_utc.dt.to_string("%Y-%m-%dT%H:%M:%S%.f%z")


def _require_columns(path: Path, frame: pl.DataFrame, source: SourceDeclaration) -> None:
    wanted = list(_mapped(source.fields).values()) + source.fields.metadata
    missing = [name for name in wanted if name not in frame.columns]
    if missing:
        raise DataError(
            f"{path}: source {source.name!r} maps column(s) {', '.join(missing)} that the file "
            f"does not have (it has: {', '.join(frame.columns)}); fix `fields` in the declaration"
        )


def _read_text(path: Path, name: str, source: SourceDeclaration) -> pl.DataFrame:
    text, valid = decode_lossy(path.read_bytes(), source.encoding)
    return pl.DataFrame(
        {
            "_location": [1],
            "_error": [None if valid else reasons.INVALID_UTF8],
            "text": [text if valid else None],
            "path": [name],
        },
        schema={"_location": pl.Int64, "_error": pl.String, "text": pl.String, "path": pl.String},
    )
