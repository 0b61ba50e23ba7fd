"""Benchmark of `thresher export --format tokens` against nanoGPT's data preparation.

Both sides turn the same published version into packed token ids (MiniLM's WordPiece, each
document followed by [SEP], uint16), in the same run, each in its own fresh interpreter (so
peak RSS is per side), timed from the first read to the last write, after imports:

- Thresher: `training.export.export_version(..., "tokens")` as `thresher export` runs it:
  the version opened through the catalog (every shard re-hashed), each shard's bytes hashed
  again as read, `Tokenizer.encode_batch` in batches of 1,000, one .bin/.idx (Megatron)/.records
  file per published shard, every output file hashed into export_manifest.json.
- nanoGPT (`data/openwebtext/prepare.py`, its approach with this tokenizer): the split's
  shards loaded with `datasets.load_dataset("parquet", ...)` (Arrow cache written), then
  `.map(process, batched=True, num_proc=1, remove_columns=...)` where `process` encodes
  with the same `encode_batch` and appends the separator, then each split concatenated
  into a `np.memmap` `<split>.bin` in 1,024 contiguous `dset.shard(...)` batches, as
  prepare.py does. It verifies nothing and records no provenance.

Check: for every split, Thresher's shards concatenated equal nanoGPT's .bin, token for token.

Data: bench/bench_spine.py's generator (real SMS and Debian changelog texts repeated with
variation, seed 20240611), ingested, split and published once as a Thresher version under
bench/out/export-work/ (no Prefect; shards of --shard-rows rows), then reused.

    .venv/bin/python bench/bench_export.py                    # 200,000 records, ~1 min
    .venv/bin/python bench/bench_export.py --records 1000000 --repeat 2

Results: a Markdown table on stdout and bench/out/export-results.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
OUT = BENCH_DIR / "out"
sys.path.insert(0, str(BENCH_DIR))  # bench/ is not a package
sys.path.insert(1, str(ROOT))

import bench_spine  # noqa: E402

SIDES = ("thresher", "nanogpt")


def work_dir(records: int, shard_rows: int) -> Path:
    return OUT / "export-work" / f"n{records}-s{shard_rows}"


def publish_once(records: int, shard_rows: int) -> tuple[Path, str]:
    """The bench's version (built on first use): (its work folder, its dataset hash)."""
    from data_catalog.catalog import Catalog
    from pipeline.config import RunConfig, SourceDeclaration, config_hash
    from pipeline.ingest.stage import ingest
    from pipeline.publish.stage import publish
    from pipeline.split.stage import split
    from pipeline.stage import RunContext

    root = work_dir(records, shard_rows)
    workdir = root / "work"
    if (workdir / "catalog.db").exists():
        latest = Catalog.open(workdir).latest("export-bench")
        if latest:
            return workdir, latest.dataset_hash
    shutil.rmtree(root, ignore_errors=True)
    started = time.perf_counter()
    print(f"publishing {records:,} records (once) …", file=sys.stderr)
    data = root / "data"
    data.mkdir(parents=True)
    frame = bench_spine.cached_records(records)
    for number, start in enumerate(range(0, records, 100_000)):
        frame.slice(start, 100_000).write_ndjson(data / f"part-{number:05d}.jsonl")
    source = SourceDeclaration(
        name="bench",
        location="data/*.jsonl",
        format="jsonl",
        fields={"text": "text", "id": "id", "label": "label", "group": "group"},
        license="CC-BY-4.0",
        consent="public-release",
        owner="bench",
        base_dir=str(root),
    )
    cfg = RunConfig(
        name="export-bench",
        workdir=str(workdir),
        sources=[source],
        publish={"shard_rows": shard_rows},
    )
    ctx = RunContext(run_id="bench", run_dir=root, config=cfg, config_hash=config_hash(cfg))
    published = split(ingest(cfg.source_list, ctx, root / "in").frame, cfg.split, ctx).frame
    staging = workdir / "datasets" / cfg.name / ".staging-bench"
    staging.mkdir(parents=True)
    staged = publish(published, cfg.publish, ctx, staging, extra={"code_version": "bench"})
    version, _ = Catalog.open(workdir).commit(staged, cfg.source_list)
    shutil.rmtree(root / "in", ignore_errors=True)
    print(f"  published in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return workdir, version.dataset_hash


# ---------------------------------------------------------------------------------------------
# The two sides, each in a fresh interpreter


def run_thresher(workdir: Path, dataset_hash: str, out: Path) -> dict:
    from training.export import export_version

    started = time.perf_counter()
    result = export_version(workdir, dataset_hash, "tokens", out=out, tokenizer="minilm")
    seconds = time.perf_counter() - started
    splits = result.manifest["splits"]
    return {
        "seconds": seconds,
        "records": sum(s["records"] for s in splits.values()),
        "tokens": sum(s["tokens"] for s in splits.values()),
    }


def run_nanogpt(workdir: Path, dataset_hash: str, out: Path) -> dict:
    import datasets
    import numpy as np

    from pipeline.text.embeddings import model_path

    datasets.disable_progress_bars()
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_path() / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    separator = tokenizer.token_to_id("[SEP]")
    version = next((workdir / "datasets" / "export-bench").glob(f"{dataset_hash}*"))
    shards = json.loads((version / "manifest.json").read_text())["shards"]
    files = {}
    for shard in shards:
        files.setdefault(shard["split"], []).append(str(version / shard["path"]))

    started = time.perf_counter()
    split_dataset = datasets.load_dataset(
        "parquet", data_files=files, columns=["text"], cache_dir=str(out / "cache")
    )

    def process(batch):
        encoded = tokenizer.encode_batch(batch["text"], add_special_tokens=False)
        ids = [e.ids + [separator] for e in encoded]
        return {"ids": ids, "len": [len(x) for x in ids]}

    loaded = time.perf_counter()
    tokenized = split_dataset.map(process, batched=True, remove_columns=["text"], num_proc=1)
    mapped = time.perf_counter()
    tokens = 0
    for split, dset in tokenized.items():
        arr_len = np.sum(dset["len"], dtype=np.uint64)
        arr = np.memmap(out / f"{split}.bin", dtype=np.uint16, mode="w+", shape=(int(arr_len),))
        total_batches = min(1024, len(dset))
        idx = 0
        for batch_idx in range(total_batches):
            batch = dset.shard(
                num_shards=total_batches, index=batch_idx, contiguous=True
            ).with_format("numpy")
            arr_batch = np.concatenate(batch["ids"])
            arr[idx : idx + len(arr_batch)] = arr_batch
            idx += len(arr_batch)
        arr.flush()
        tokens += int(arr_len)
    ended = time.perf_counter()
    return {
        "seconds": ended - started,
        "records": sum(len(d) for d in tokenized.values()),
        "tokens": tokens,
        "phases_s": {
            "load_dataset": round(loaded - started, 2),
            "map": round(mapped - loaded, 2),
            "memmap_write": round(ended - mapped, 2),
        },
    }


def worker(side: str, workdir: Path, dataset_hash: str, out: Path, result: Path) -> None:
    run = run_thresher if side == "thresher" else run_nanogpt
    bench_spine._reset_peak_rss()  # imports and setup before the timed part count too
    figures = run(workdir, dataset_hash, out)
    figures["peak_rss_mb"] = bench_spine._peak_rss_mb()
    result.write_text(json.dumps(figures))


def measure(side: str, workdir: Path, dataset_hash: str, out: Path) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    result = out.parent / f"{out.name}.json"
    command = [sys.executable, __file__, "--worker", side, "--workdir", str(workdir)]
    command += ["--hash", dataset_hash, "--out", str(out), "--result", str(result)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    if side == "nanogpt":
        out.mkdir(parents=True)
    subprocess.run(command, check=True, env=env)
    figures = json.loads(result.read_text())
    figures["records_per_s"] = round(figures["records"] / figures["seconds"])
    figures["tokens_per_s"] = round(figures["tokens"] / figures["seconds"])
    return figures


def same_tokens(thresher_out: Path, nanogpt_out: Path) -> dict[str, bool]:
    import numpy as np

    manifest = json.loads((thresher_out / "export_manifest.json").read_text())
    same = {}
    for split in manifest["splits"]:
        parts = [
            np.fromfile(thresher_out / s["tokens"], dtype="<u2")
            for s in manifest["token_shards"]
            if s["split"] == split
        ]
        ours = np.concatenate(parts) if parts else np.empty(0, "<u2")
        peer = nanogpt_out / f"{split}.bin"
        theirs = np.fromfile(peer, dtype="<u2") if peer.exists() else np.empty(0, "<u2")
        same[split] = bool(np.array_equal(ours, theirs))
    return same


def markdown(runs: list[dict], records: int, tokens: int) -> str:
    lines = [
        f"{records:,} records, {tokens:,} tokens (MiniLM WordPiece, uint16)",
        "",
        "| side | run | wall s | records/s | tokens/s | peak RSS MB |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        lines.append(
            f"| {run['side']} | {run['run']} | {run['seconds']:.1f} | {run['records_per_s']:,} "
            f"| {run['tokens_per_s']:,} | {run['peak_rss_mb']:,.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--shard-rows", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--worker", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--hash", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.workdir, args.hash, args.out, args.result)
        return
    workdir, dataset_hash = publish_once(args.records, args.shard_rows)
    runs_dir = work_dir(args.records, args.shard_rows) / "runs"
    runs = []
    for number in range(1, args.repeat + 1):
        for side in SIDES:  # interleaved
            figures = measure(side, workdir, dataset_hash, runs_dir / side)
            runs.append({"side": side, "run": number, **figures})
            print(f"{side} run {number}: {figures}", file=sys.stderr)
        identical = same_tokens(runs_dir / "thresher", runs_dir / "nanogpt")
        runs[-1]["identical_tokens"] = identical
        if not all(identical.values()):
            print(f"token arrays differ: {identical}", file=sys.stderr)
            sys.exit(1)
    summary = {
        "records": runs[0]["records"],
        "tokens": runs[0]["tokens"],
        "dataset_hash": dataset_hash,
        "identical_tokens": identical,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "runs": runs,
    }
    (OUT / "export-results.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(markdown(runs, summary["records"], summary["tokens"]))
    print(f"\nidentical token arrays per split: {identical}")


if __name__ == "__main__":
    main()
