"""`thresher dedup`: find duplicate rows of one jsonl, csv or parquet file (by its suffix).

The file is read as one source (name: a slug of the file stem) with the readers and the
record mapping of ingest, and the dedup stages of the `curate` flow run over its records:
`exact` (same normalized text), `minhash` (near duplicates, the default) or `semantic`
(embeddings; slow: about 4 ms a row on a CPU, plus loading the model), or `all` of them in
that order, each over the rows the previous one kept. Thresholds go through the run-config
validation, so a bad one is explained as `thresher config validate` would.

Outputs, in `--output DIR`:
- `clusters.parquet`: one row per input row, in input order. `index` (int64) is the 0-based
  position among all input rows, bad rows included (a jsonl line is a row; blank lines are
  not); `location` is `file:N`, N the 1-based line (jsonl) or data row (csv, parquet).
  `record_id` as ingest computes it; `kept` (bool); `duplicate_of` (int64, the index of the
  kept row the row duplicates; null for kept and bad rows); `similarity` and `method` (of the
  row's own drop; null for kept and bad rows); `cluster_id` (int64, the smallest index of the
  row's duplicate cluster: the kept row and every row pointing at it; a singleton's own
  index); `error` (the reason code of a row that cannot be read, e.g. `invalid_json`; null
  for good rows). A bad row is not kept, is its own cluster and is listed on stderr.
- `kept.parquet`: the kept rows as canonical records (record_id, source, location, text as
  normalized, hashes, ...) with `index` first and `cluster_id` last, in input order.

Chains across methods (with `all`): a row dropped by `exact` as a copy of X, where X is then
dropped by `minhash` as a near duplicate of Y, gets `duplicate_of` = Y, the row finally kept,
so every cluster is one kept row and the rows pointing at it; its `method` and `similarity`
stay those of its own drop (exact, 1.0 to X). Within one method a cluster keeps one row
(`--keep first`: the first row; `--keep longest`: the longest text, then the first).

`DIR/.thresher` is the run's work folder: the stages' scratch files, and the semantic
method's embedding cache (kept, so a second run over the same texts does not embed again);
it is removed when nothing is left in it. With `--id-field`, a row repeating an earlier
row's id is a bad row (`duplicate_source_id`), as in ingest.

Exit 0 clean; 2 on error, or when some rows cannot be read (the outputs are still written).
The summary goes to stderr; with `--json` it is also printed as one JSON object on stdout.
"""

from __future__ import annotations

import contextlib
import re
import time
from pathlib import Path
from typing import Annotated, Any, Literal

import polars as pl
import typer

from flows.cli_common import JsonOption, emit, fail, stderr
from pipeline.core.terminal import printable
from pipeline.ingest.files import (
    COMPRESSED_SUFFIXES,
    SUFFIX_FORMATS,
    compression_of,
    format_of,
    inner_suffix,
)

# method -> its stage in the registry (pipeline/stage.py), run in this order by `all`
METHODS = {"exact": "exact_dedup", "minhash": "near_dedup", "semantic": "semantic_dedup"}
KEEP_RULES = {"first": ["earliest_timestamp"], "longest": ["longest_text", "earliest_timestamp"]}
OPTIONS = {"dedup.minhash.threshold": "--minhash-threshold"}
OPTIONS |= {"dedup.semantic.threshold": "--semantic-threshold"}
COLUMNS = ["index", "record_id", "cluster_id", "kept", "duplicate_of", "similarity", "method"]
COLUMNS += ["error", "location"]
SHOWN_BAD_ROWS = 20


def dedup(
    input: Annotated[
        Path, typer.Argument(metavar="INPUT", help="A .jsonl, .csv or .parquet file.")
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="Folder for the outputs.")],
    text_field: Annotated[str, typer.Option(help="Field holding the text.")] = "text",
    id_field: Annotated[
        str | None, typer.Option(help="Field holding a unique id (stable record_ids).")
    ] = None,
    method: Annotated[
        Literal["exact", "minhash", "semantic", "all"],
        typer.Option(help="semantic (and all) embed every row: slow on a CPU."),
    ] = "minhash",
    minhash_threshold: Annotated[
        float | None, typer.Option(help="Jaccard similarity of a near duplicate [0.8].")
    ] = None,
    semantic_threshold: Annotated[
        float | None, typer.Option(help="Cosine similarity of a semantic duplicate [0.92].")
    ] = None,
    keep: Annotated[
        Literal["first", "longest"], typer.Option(help="Which row of a cluster is kept.")
    ] = "first",
    as_json: JsonOption = False,
) -> None:
    """Find exact, near (MinHash) or semantic duplicates in one file; write clusters.parquet
    (one row per input row) and kept.parquet. Exit 0 clean, 2 on error or unreadable rows."""
    from pipeline.config import config_hash
    from pipeline.core.errors import ThresherError
    from pipeline.stage import RunContext

    started = time.perf_counter()
    methods = [name for name in METHODS if method in (name, "all")]
    thresholds = {"minhash": minhash_threshold, "semantic": semantic_threshold}
    for name, value in thresholds.items():
        if value is not None and name not in methods:
            stderr.print(f"note: --{name}-threshold is ignored with --method {method}")
    if not input.is_file():
        what = "is a directory" if input.is_dir() else "no such file"
        fail(f"{input}: {what}; give the path of a .jsonl, .csv or .parquet file")
    fmt = format_of(input)
    if fmt is None:
        fail(
            f"{input}: unknown format {inner_suffix(input)!r}; dedup reads "
            f"{', '.join(SUFFIX_FORMATS)} files, each also compressed ({', '.join(COMPRESSED_SUFFIXES)})"
        )
    cfg = _run_config(input, fmt, text_field, id_field, methods, output, keep, thresholds)
    stages = {name: _stage(name) for name in methods}
    try:
        output.mkdir(parents=True, exist_ok=True)
        (output / ".thresher").mkdir(exist_ok=True)
    except OSError as error:
        fail(f"{output}: cannot create the output folder ({error}); pass a writable --output")
    try:
        raw, records, bad = _read(input, cfg.source_list[0])
        ctx = RunContext("dedup", output / ".thresher", cfg, config_hash(cfg))
        drops = _run_stages(records, stages, cfg, ctx)
    except ThresherError as error:
        fail(str(error))
    with contextlib.suppress(OSError):
        (output / ".thresher").rmdir()  # only when no stage left anything there
    clusters = _clusters(records, bad, drops)
    kept = records.join(clusters.filter("kept").select("index", "cluster_id"), on="index")
    paths = {"clusters": output / "clusters.parquet", "kept": output / "kept.parquet"}
    try:
        clusters.write_parquet(paths["clusters"])
        kept.select("index", pl.exclude("index", "cluster_id"), "cluster_id").write_parquet(
            paths["kept"]
        )
    except OSError as error:
        fail(f"{output}: cannot write the outputs ({error}); pass a writable --output")
    _report_bad_rows(input, fmt, clusters)
    summary = _summary(input, raw.height, clusters, drops, methods, started, paths)
    if as_json:
        emit(summary)
    raise typer.Exit(2 if summary["bad_rows"] else 0)


def _run_config(input, fmt, text_field, id_field, methods, output, keep, thresholds):
    """The run config of a one-source run; a bad threshold fails with the config's message."""
    from pydantic import ValidationError

    from pipeline.config import RunConfig

    def method(name: str) -> dict | None:  # no related links: only duplicates make clusters
        given = {} if thresholds[name] is None else {"threshold": thresholds[name]}
        return {"related_threshold": None, **given} if name in methods else None

    stem = input.with_suffix("").stem if compression_of(input) else input.stem  # sms.csv.xz: sms
    name = re.sub(r"[^a-z0-9_.-]+", "-", stem.lower()).strip("-_.") or "input"
    source = {"name": name, "location": str(input), "format": fmt, "license": "NOASSERTION"}
    source |= {"consent": "unknown", "owner": "unknown"}
    source["fields"] = {"text": text_field, "id": id_field}
    dedup = {"exact": "exact" in methods, "minhash": method("minhash")}
    dedup |= {"semantic": method("semantic"), "keep": KEEP_RULES[keep]}
    config = {"name": "dedup", "workdir": str(output / ".thresher"), "sources": [source]}
    try:
        return RunConfig.model_validate({**config, "dedup": dedup})
    except ValidationError as error:
        problems = []
        for item in error.errors():
            where = ".".join(map(str, item["loc"]))
            given = f"{OPTIONS[where]} {item['input']!r}: " if where in OPTIONS else ""
            problems.append(f"{given}{where}: {item['msg'].removeprefix('Value error, ')}")
        fail("invalid settings:\n  " + "\n  ".join(problems))


def _stage(name: str):
    try:
        from pipeline.registry import STAGES

        return STAGES[METHODS[name]].function
    except ImportError as error:
        fail(f"--method {name} is not available in this installation ({error}); pick another")


def _read(path: Path, source) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(raw rows, good records with `index`, bad rows: index, record_id, location, error)."""
    from pipeline.core import reasons
    from pipeline.core.identity import record_key, xxh3_128_hex
    from pipeline.ingest.readers import read_file
    from pipeline.ingest.stage import to_records

    fields = source.fields
    if source.format != "jsonl":  # the reader's own message speaks of declarations
        _check_fields(path, source.format, [fields.text, fields.id])
    raw = read_file(path, path.name, source).sort("_location")
    raw = raw.with_columns(pl.lit(path.name).alias("_file"))
    readable = raw.filter(pl.col("_error").is_null())
    if source.format == "jsonl" and readable.height:
        for name, option in ((fields.text, "--text-field"), (fields.id, "--id-field")):
            if name is not None and (name not in raw.columns or readable[name].is_null().all()):
                fail(f"{path}: no row has a field {name!r}; pass the right one with {option}")
    good, events, _ = to_records(raw, source)
    indexes = raw.select("_location", pl.int_range(pl.len(), dtype=pl.Int64).alias("index"))
    line = pl.col("location").str.extract(r":([0-9]+)$").cast(pl.Int64).alias("_location")
    good = good.with_columns(line).join(indexes, on="_location").sort("index")
    evidence = pl.col("evidence").str
    bad = events.select(
        pl.coalesce(evidence.json_path_match(f"$.{unit}") for unit in ("line", "row"))
        .cast(pl.Int64)
        .alias("_location"),
        "record_id",
        pl.col("reason").alias("error"),
    ).join(indexes, on="_location")
    repeated = ~pl.col("record_id").is_first_distinct()  # a repeated --id-field value
    repeats = good.filter(repeated).with_columns(pl.lit(reasons.DUPLICATE_SOURCE_ID).alias("error"))
    if repeats.height:  # identified by position, as ingest does
        key = record_key(source.name, pl.col("_file"), pl.col("_location").cast(pl.String))
        ids = xxh3_128_hex(repeats.with_columns(_file=pl.lit(path.name)).select(key).to_series())
        bad = pl.concat([bad, repeats.select(bad.columns).with_columns(ids.alias("record_id"))])
    location = pl.format("{}:{}", pl.lit(path.name), "_location").alias("location")
    bad = bad.with_columns(location).drop("_location")
    return raw, good.filter(~repeated).drop("_location"), bad


def _check_fields(path: Path, fmt: str, wanted: list[str | None]) -> None:
    from pipeline.ingest.files import field_names, missing_field

    names = field_names(path, fmt)
    if names is None:  # the reader names what is wrong with the file
        return
    for name, option in zip(wanted, ["--text-field", "--id-field"], strict=True):
        if name is not None and name not in names:
            fail(missing_field(path, name, names, f"pass the right one with {option}"))


def _run_stages(records: pl.DataFrame, stages: dict, cfg, ctx) -> pl.DataFrame:
    """Run the stages in order over the survivors; return the drops (record_id, duplicate_of
    as a record_id, similarity, method). Timestamps rank rows by index for the keep rule."""
    by_index = pl.from_epoch("index", time_unit="us").dt.replace_time_zone("UTC")
    frame = records.with_columns(by_index.alias("timestamp")).drop("index").lazy()
    drops = [pl.DataFrame(schema={"record_id": pl.String, "duplicate_of": pl.String})]
    for name, stage in stages.items():
        result = stage(frame, cfg.dedup, ctx)
        frame = result.frame.collect().lazy()
        evidence = pl.col("evidence")
        dropped = result.events.filter(pl.col("terminal") & (pl.col("action") == "dropped"))
        drops.append(
            dropped.select(
                "record_id",
                evidence.str.json_path_match("$.duplicate_of").alias("duplicate_of"),
                evidence.str.json_path_match("$.similarity").cast(pl.Float64).alias("similarity"),
                pl.lit(name).alias("method"),
            )
        )
    drops = pl.concat(drops, how="diagonal")
    final = drops.select("record_id", "duplicate_of")
    links = drops.select(
        pl.col("record_id").alias("duplicate_of"), pl.col("duplicate_of").alias("_next")
    )
    for _ in stages:  # each method adds at most one link to a chain
        final = final.join(links, on="duplicate_of", how="left")
        final = final.select(
            "record_id", pl.coalesce("_next", "duplicate_of").alias("duplicate_of")
        )
    return drops.drop("duplicate_of").join(final, on="record_id")


def _clusters(records: pl.DataFrame, bad: pl.DataFrame, drops: pl.DataFrame) -> pl.DataFrame:
    ids = records.select(pl.col("record_id").alias("duplicate_of"), pl.col("index").alias("_of"))
    good = (
        records.select("index", "record_id", "location")
        .join(drops, on="record_id", how="left")
        .join(ids, on="duplicate_of", how="left")
        .with_columns(
            pl.col("duplicate_of").is_null().alias("kept"), pl.col("_of").alias("duplicate_of")
        )
        .with_columns(pl.col("index").min().over(pl.coalesce("_of", "index")).alias("cluster_id"))
    )
    bad = bad.with_columns(pl.lit(False).alias("kept"), pl.col("index").alias("cluster_id"))
    clusters = pl.concat([good, bad], how="diagonal_relaxed").sort("index")
    schema = {"cluster_id": pl.Int64, "duplicate_of": pl.Int64, "similarity": pl.Float64}
    return clusters.select(COLUMNS).cast(schema | {"method": pl.String, "error": pl.String})


def _report_bad_rows(path: Path, fmt: str, clusters: pl.DataFrame) -> None:
    bad = clusters.filter(pl.col("error").is_not_null())
    unit = "line" if fmt == "jsonl" else "row"
    for location, error in bad.head(SHOWN_BAD_ROWS).select("location", "error").iter_rows():
        where = f"{path}: {unit} {location.rsplit(':', 1)[1]}: {error}"
        stderr.print(printable(where), markup=False, highlight=False)  # a file's name
    if bad.height > SHOWN_BAD_ROWS:
        stderr.print(
            f"... and {bad.height - SHOWN_BAD_ROWS} more (see `error` in clusters.parquet)"
        )
    if bad.height:
        stderr.print(f"{bad.height} row(s) cannot be read: fix or remove them and run again")


def _summary(path, rows, clusters, drops, methods, started, paths) -> dict[str, Any]:
    sizes = clusters.filter(pl.col("error").is_null()).group_by("cluster_id").len()["len"]
    per_method = dict(drops.group_by("method").len().iter_rows())
    summary = {
        "input": str(path),
        "rows": rows,
        "bad_rows": clusters["error"].count(),
        "kept": int(clusters["kept"].sum()),
        "dropped": {name: per_method.get(name, 0) for name in methods},
        "clusters": int((sizes > 1).sum()),
        "largest_cluster": int(sizes.max() or 0),
        "seconds": round(time.perf_counter() - started, 3),
        "outputs": {name: str(file) for name, file in paths.items()},
    }
    dropped = ", ".join(f"{name} {n}" for name, n in summary["dropped"].items())
    stderr.print(
        printable(
            f"{path}: {rows} rows ({summary['bad_rows']} bad), {summary['kept']} kept, dropped: "
            f"{dropped}; {summary['clusters']} cluster(s) of duplicates, the largest of "
            f"{summary['largest_cluster']} rows; {summary['seconds']:.2f} s"
        ),
        markup=False,
        highlight=False,
    )
    wrote = printable(f"wrote {paths['clusters']} and {paths['kept']}")
    stderr.print(wrote, markup=False, highlight=False)
    return summary
