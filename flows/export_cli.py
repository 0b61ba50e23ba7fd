"""`thresher export`: a published version, verified, as Hugging Face datasets, Parquet or
packed token shards for other trainers (training/export.py writes; training/readers.py reads).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from flows.cli_common import (
    ConfigOption,
    JsonOption,
    WorkdirOption,
    emit,
    fail,
    human,
    open_catalog,
    progress_shown,
)
from pipeline.core.errors import ThresherError


def export(
    ref: Annotated[str, typer.Argument(help="Dataset hash, unique prefix, or latest.")],
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help="hf (datasets save_to_disk), parquet (the verified shards), or tokens "
            "(packed token ids, nanoGPT's train.bin layout).",
        ),
    ],
    tokenizer: Annotated[
        str | None,
        typer.Option(
            "--tokenizer",
            help="minilm, bpe (trained on the train split) or a folder holding "
            "tokenizer.json (a training run's tokenizer/). Default: the config's train tokenizer.",
        ),
    ] = None,
    config: ConfigOption = None,
    workdir: WorkdirOption = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Folder to create (default <workdir>/exports/<hash>-<format>)."
        ),
    ] = None,
    splits: Annotated[
        str | None,
        typer.Option("--splits", help="Comma-separated splits to export (default: all)."),
    ] = None,
    as_json: JsonOption = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")] = False,
) -> None:
    """Export a published version, every shard verified, for other trainers."""
    from training.export import MDS_REFUSED, export_version

    if fmt == "mds":
        fail(MDS_REFUSED)
    name, tokenizer_config = None, None
    if config is not None:
        from pipeline.config import load_run_config
        from pipeline.config.train import TrainConfig

        try:
            run_config = load_run_config(config)
        except ThresherError as error:
            fail(str(error))
        name = run_config.name
        tokenizer_config = (run_config.train or TrainConfig()).tokenizer
    catalog = open_catalog(workdir, config)
    wanted = [s.strip() for s in splits.split(",") if s.strip()] if splits else None
    try:
        with progress_shown(quiet):
            result = export_version(
                catalog.workdir,
                ref,
                fmt,
                name=name,
                out=out,
                splits=wanted,
                tokenizer=tokenizer,
                tokenizer_config=tokenizer_config,
            )
    except ThresherError as error:
        fail(str(error))
    summary = summarize(result.manifest, result.out, result.digest)
    if as_json:
        emit(summary)
    print_summary(summary, human(as_json))


def summarize(manifest: dict[str, Any], out: Path, digest: str) -> dict[str, Any]:
    return {
        "out": str(out),
        "format": manifest["format"],
        "dataset": manifest["dataset"]["name"],
        "dataset_hash": manifest["dataset"]["hash"],
        "splits": manifest["splits"],
        "tokenizer": manifest["tokenizer"],
        "files": len(manifest["files"]),
        "bytes": sum(entry["bytes"] for entry in manifest["files"]),
        "export_manifest": str(out / "export_manifest.json"),
        "export_digest": digest,
    }


def print_summary(summary: dict[str, Any], console: Console) -> None:
    console.print(
        f"[bold]exported[/] {summary['dataset']} {summary['dataset_hash'][:16]} as "
        f"{summary['format']} to {summary['out']}",
        highlight=False,
    )
    for split, counts in summary["splits"].items():
        figures = ", ".join(f"{value:,} {key}" for key, value in counts.items())
        console.print(f"  {split:<11}{figures}", highlight=False)
    tokenizer = summary["tokenizer"]
    dtype = f"{tokenizer['dtype']}, " if "dtype" in tokenizer else ""
    console.print(
        f"  tokenizer  {tokenizer['name']} ({tokenizer['vocab_size']:,} ids, {dtype}separator "
        f"{tokenizer['separator']} = {tokenizer['separator_id']}), digest "
        f"{tokenizer['digest'][:16]}",
        highlight=False,
    )
    console.print(
        f"  {summary['files']} files, {summary['bytes']:,} bytes; listed with their sha256 "
        f"in {summary['export_manifest']}",
        highlight=False,
    )
    console.print(
        f"  export digest {summary['export_digest']} (sha256 of the export manifest, recorded "
        "in the catalog: readers take export_digest= or workdir=)",
        highlight=False,
    )
