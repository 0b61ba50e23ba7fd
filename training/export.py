"""`thresher export`: a published version, verified, written for other trainers.

The version is opened through the catalog (a withdrawn version refused), and each shard's
bytes are hashed as they are read, once: what is exported is exactly what was verified, and
no shard is read twice to check it. Formats (the exact layouts: training/readers.py and the
README):

- `parquet`: the version's manifest.json and its shards' verified bytes: a version folder
  that verifies on its own;
- `hf`: a Hugging Face `datasets.DatasetDict`, one Dataset per split, via `save_to_disk`;
- `tokens`: packed token shards (nanoGPT's train.bin layout) with document offsets and
  record ids, one per published shard, tokenized shard by shard (training/token_export.py).

Every export names the tokenizer (the config's train tokenizer, or `--tokenizer`) with its
digest, and carries its files in `tokenizer/`: a text export is tokenized by its trainer
exactly as the token export and Thresher's own training would.

Everything is written into a temporary sibling folder renamed to the target at the end,
with `export_manifest.json` listing every file written with its sha256.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from data_catalog import exports
from data_catalog.catalog import Catalog, open_version
from pipeline.config.train import TokenizerConfig
from pipeline.core import progress as shown
from pipeline.core.code_version import code_state
from pipeline.core.errors import DataError
from pipeline.core.storage import file_sha256
from pipeline.publish.reader import PublishedVersion, footer_rows
from pipeline.publish.version import MANIFEST
from training.readers import EXPORT_FORMAT, EXPORT_MANIFEST
from training.token_export import choose_tokenizer, write_token_shards

if TYPE_CHECKING:
    import pyarrow as pa

FORMATS = ("hf", "parquet", "tokens")
MDS_REFUSED = (
    "--format mds is not offered: MosaicML `streaming` (MDS) 0.13.0, the only release on this "
    "package registry, requires numpy<2.2 and xxhash<4, while Thresher pins numpy 2.4.6 and "
    "xxhash>=4.1, so it cannot be installed beside it. Use --format tokens (packed token "
    "shards), or --format parquet (the verified shards) and convert them where streaming installs"
)


@dataclass(frozen=True)
class ExportResult:
    out: Path
    manifest: dict[str, Any]
    digest: str  # sha256 of export_manifest.json: what readers check the export against


def default_out(workdir: str | Path, dataset_hash: str, fmt: str) -> Path:
    return Path(workdir) / "exports" / f"{dataset_hash[:12]}-{fmt}"


def resolve_version(catalog: Catalog, ref: str, name: str | None):
    """The catalog's record of `ref`: a hash, a unique prefix, or `latest` of `name` (of the
    catalog's only dataset when no name is given)."""
    if ref == "latest" and not name:
        names = sorted({v.name for v in catalog.versions()})
        if len(names) != 1:
            raise DataError(
                f"`latest` of which dataset? the catalog at {catalog.workdir} holds "
                f"{', '.join(names) or 'none'}; pass --config (its name) or a dataset hash"
            )
        name = names[0]
    return catalog.version(ref, name)


def export_version(
    workdir: str | Path,
    ref: str,
    fmt: str,
    *,
    name: str | None = None,
    out: str | Path | None = None,
    splits: list[str] | None = None,
    tokenizer: str | None = None,
    tokenizer_config: TokenizerConfig | None = None,
) -> ExportResult:
    """Export version `ref` of the catalog in `workdir` as `fmt` into `out` (default
    <workdir>/exports/<hash[:12]>-<fmt>), which must not exist. `tokenizer`: `minilm`, `bpe`
    or a folder holding tokenizer.json; default `tokenizer_config.kind`."""
    if fmt == "mds":
        raise DataError(MDS_REFUSED)
    if fmt not in FORMATS:
        raise DataError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")
    if (
        tokenizer not in (None, "minilm", "bpe")
        and not (Path(tokenizer) / "tokenizer.json").is_file()
    ):
        raise DataError(
            f"--tokenizer {tokenizer}: not minilm, bpe or a folder holding tokenizer.json "
            "(such as a training run's tokenizer/)"
        )
    catalog = Catalog.open(workdir)
    record = resolve_version(catalog, ref, name)
    out = Path(out) if out else default_out(catalog.workdir, record.dataset_hash, fmt)
    _refuse_existing(out)
    # every shard exported is hashed as it is read (`_verified_bytes`), not once more here
    version = open_version(catalog.workdir, record.name, record.dataset_hash, verify=False)
    wanted = _splits(version, splits, fmt)
    shards = [s for split in wanted for s in version.manifest["shards"] if s["split"] == split]
    manifest_bytes = (version.path / MANIFEST).read_bytes()
    if json.loads(manifest_bytes) != version.manifest:
        raise DataError(
            f"{version.path / MANIFEST} changed while it was being exported; export again"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.parent / f".{out.name}.partial-{os.getpid()}-{secrets.token_hex(3)}"
    partial.mkdir()
    try:
        cfg = tokenizer_config or _config_tokenizer(version)
        encoder, described = choose_tokenizer(
            tokenizer or cfg.kind, cfg, _train_texts(version), partial / "tokenizer"
        )
        shown.start("export", len(shards), "shards")
        if fmt == "parquet":
            written = _write_parquet(version, manifest_bytes, shards, partial)
        elif fmt == "hf":
            written = _write_hf(version, shards, wanted, partial)
        else:
            tables = (
                (shard, _verified_table(version, shard, ["record_id", "text"])) for shard in shards
            )
            written = write_token_shards(tables, wanted, partial, encoder, described)
        written["tokenizer"] = described
        manifest = _export_manifest(fmt, version, manifest_bytes, shards, wanted, written, partial)
        manifest_text = json.dumps(manifest, indent=2, allow_nan=False).encode()
        (partial / EXPORT_MANIFEST).write_bytes(manifest_text)
        digest = hashlib.sha256(manifest_text).hexdigest()
        _refuse_existing(out)
        # recorded before the folder is in place: an export a reader finds is always vouched for
        exports.record(catalog, digest, record.dataset_hash, fmt, out.resolve())
        os.rename(partial, out)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    shown.finish("export", str(out))
    return ExportResult(out, manifest, digest)


def _refuse_existing(out: Path) -> None:
    if out.exists():
        raise DataError(f"{out} exists; pass another --out, or remove it to export again")


def _splits(version: PublishedVersion, asked: list[str] | None, fmt: str) -> list[str]:
    published = list(version.manifest["split_counts"])
    if not asked:
        return published
    unknown = [split for split in asked if split not in published]
    if unknown:
        raise DataError(
            f"version {version.dataset_hash[:12]} has no split {', '.join(unknown)} "
            f"(it has: {', '.join(published)}); fix --splits"
        )
    if fmt == "parquet" and set(asked) != set(published):
        raise DataError(
            "--splits does not apply to --format parquet: the export is the whole version, "
            "verifiable as published; read only the splits you need from it"
        )
    return list(dict.fromkeys(asked))


def _verified_bytes(version: PublishedVersion, shard: dict[str, Any]) -> bytes:
    """The shard's bytes, hashed as read against the manifest: the export uses exactly what
    was verified."""
    location = version.path / shard["path"]
    try:
        data = location.read_bytes()
    except FileNotFoundError:
        problem = "missing"
    else:
        if hashlib.sha256(data).hexdigest() != shard["sha256"]:
            problem = "sha256 mismatch"
        elif (rows := _row_count(data)) != shard["rows"]:
            problem = f"{rows} rows where the manifest says {shard['rows']}"
        else:
            return data
    raise DataError(
        f"{location}: {problem} (version {version.dataset_hash[:12]}'s manifest lists it); "
        "nothing was exported — restore the shard or publish again"
    )


def _row_count(data: bytes) -> int:
    import pyarrow as pa

    return footer_rows(pa.BufferReader(data))


def _verified_table(
    version: PublishedVersion, shard: dict[str, Any], columns: list[str]
) -> pa.Table:
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pq.read_table(pa.BufferReader(_verified_bytes(version, shard)), columns=columns)


def _config_tokenizer(version: PublishedVersion) -> TokenizerConfig:
    """The train tokenizer of the config the version was published with (MiniLM's WordPiece
    when it had no train section)."""
    train = version.manifest.get("config", {}).get("train") or {}
    return TokenizerConfig(**train.get("tokenizer", {}))


def _train_texts(version: PublishedVersion) -> Iterable[str] | None:
    """The train split's texts in shard row order (what a BPE is trained on), read verified."""
    shards = [shard for shard in version.manifest["shards"] if shard["split"] == "train"]
    if not shards:
        return None
    return (
        text
        for shard in shards
        for text in _verified_table(version, shard, ["text"])["text"].to_pylist()
        if text is not None
    )


def _write_parquet(
    version: PublishedVersion, manifest_bytes: bytes, shards: list[dict], folder: Path
) -> dict[str, Any]:
    (folder / MANIFEST).write_bytes(manifest_bytes)
    for shard in shards:
        target = folder / shard["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(_verified_bytes(version, shard))
        shown.advance("export", 1)
    return {"splits": _rows_by_split(version, shards)}


def _write_hf(
    version: PublishedVersion, shards: list[dict], splits: list[str], folder: Path
) -> dict[str, Any]:
    try:
        import datasets
    except ImportError:
        raise DataError(
            "--format hf needs the Hugging Face `datasets` library: pip install datasets"
        ) from None
    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        with tempfile.TemporaryDirectory(dir=folder.parent, prefix=f".{folder.name}-") as work:
            by_split: dict[str, Any] = {}
            for split in splits:
                files = []
                for shard in (s for s in shards if s["split"] == split):
                    copy = Path(work) / "shards" / shard["path"]
                    copy.parent.mkdir(parents=True, exist_ok=True)
                    copy.write_bytes(_verified_bytes(version, shard))
                    files.append(str(copy))
                    shown.advance("export", 1)
                if files:
                    by_split[split] = datasets.Dataset.from_parquet(
                        files, split=split, cache_dir=str(Path(work) / "cache")
                    )
            datasets.DatasetDict(by_split).save_to_disk(str(folder))
    finally:
        if bars:
            datasets.enable_progress_bars()
    return {"splits": _rows_by_split(version, shards, splits)}


def _rows_by_split(
    version: PublishedVersion, shards: list[dict], splits: list[str] | None = None
) -> dict[str, dict[str, int]]:
    counts = {
        split: {"records": 0, "shards": 0} for split in splits or version.manifest["split_counts"]
    }
    for shard in shards:
        counts[shard["split"]]["records"] += shard["rows"]
        counts[shard["split"]]["shards"] += 1
    return counts


def _files(folder: Path) -> Iterator[dict[str, Any]]:
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        yield {
            "path": path.relative_to(folder).as_posix(),
            "sha256": file_sha256(path),
            "bytes": path.stat().st_size,
        }


def _export_manifest(
    fmt: str,
    version: PublishedVersion,
    manifest_bytes: bytes,
    shards: list[dict],
    splits: list[str],
    written: dict[str, Any],
    folder: Path,
) -> dict[str, Any]:
    state = code_state()
    return {
        "format": fmt,
        "export_format": EXPORT_FORMAT,
        "dataset": {
            "name": version.manifest["name"],
            "hash": version.dataset_hash,
            "manifest_sha256": hashlib.sha256(manifest_bytes).hexdigest(),
        },
        "tokenizer": written.get("tokenizer"),
        "source_shards": [
            {k: shard[k] for k in ("path", "split", "rows", "sha256")} for shard in shards
        ],
        "splits": {split: written["splits"][split] for split in splits},
        "token_shards": written.get("token_shards"),
        "files": list(_files(folder)),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "code": {
            "version": state.version,
            "commit": state.commit,
            "dirty": state.dirty,
            "id": str(state),
        },
    }
