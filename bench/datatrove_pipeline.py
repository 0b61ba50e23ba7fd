"""The datatrove side of bench_vs_datatrove.py: a FineWeb-style pipeline, end to end.

Run with the SEPARATE datatrove environment's python, never Thresher's:

    bench/out/datatrove-venv/bin/python bench/datatrove_pipeline.py \
        --input DIR_OF_JSONL --work FRESH_DIR [--tasks 2 --workers 2]

That environment is made by `make bench/out/datatrove-venv/bin/python` (datatrove==0.10.1 with
`xxhash<4`, which its hashing needs, `tokenizers`, which `datatrove.pipeline.dedup` imports,
and spaCy, whose blank English tokenizer needs no download).

Six LocalPipelineExecutor runs, one after the other, each with --tasks tasks on --workers
processes, as datatrove's examples/fineweb.py and examples/minhash_deduplication.py chain them:

1. JsonlReader (the spine bench's jsonl: `id`, `text`) → GopherRepetitionFilter →
   GopherQualityFilter → C4QualityFilter(filter_no_terminal_punct=False) →
   FineWebQualityFilter → JsonlWriter (filtered) → ExactDedupSignature (xxhash64 of the text);
2. ExactFindDedups (tasks = the signature's finder_workers);
3. JsonlReader (filtered) → ExactDedupFilter → JsonlWriter → MinhashDedupSignature;
4. MinhashDedupBuckets (tasks = num_buckets: that stage needs a multiple of them);
5. MinhashDedupCluster (1 task);
6. JsonlReader (exact-deduplicated) → MinhashDedupFilter → ParquetWriter (the output).

MinHash config from examples/fineweb.py: 5-grams, 14 buckets of 8 hashes, 64-bit hashes. Not
done: LanguageFilter (it downloads its fastText model at run time, impossible here), URL
filtering and text extraction (the input is plain text). Filters keep their defaults,
language english. The work folder must be fresh: datatrove skips tasks it finds completed.
Prints one JSON object on stdout: per stage its seconds and the document counts of its steps.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def text_of(doc) -> str:
    """What exact dedup hashes (datatrove reads the return annotation to pick str hashing)."""
    return doc.text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", required=True, type=Path, help="folder of *.jsonl files")
    parser.add_argument("--work", required=True, type=Path, help="fresh folder for all outputs")
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)

    from importlib.metadata import version

    from datatrove.executor.local import LocalPipelineExecutor
    from datatrove.pipeline.dedup import (
        ExactDedupConfig,
        ExactDedupFilter,
        ExactDedupSignature,
        ExactFindDedups,
        MinhashConfig,
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
    )
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter, ParquetWriter
    from datatrove.utils.hashing import HashConfig

    work, tasks = args.work, args.tasks
    if work.exists() and any(work.iterdir()):
        parser.error(f"{work} is not empty (datatrove would skip the tasks it finds done)")
    exact = ExactDedupConfig(content_getter=text_of)
    minhash = MinhashConfig(
        n_grams=5, num_buckets=14, hashes_per_bucket=8, hash_config=HashConfig(precision=64)
    )
    stages = {
        "filter+exact_signature": (
            [
                JsonlReader(str(args.input), glob_pattern="*.jsonl", text_key="text", id_key="id"),
                GopherRepetitionFilter(),
                GopherQualityFilter(),
                C4QualityFilter(filter_no_terminal_punct=False),
                FineWebQualityFilter(),
                JsonlWriter(str(work / "filtered")),
                ExactDedupSignature(str(work / "exact/sigs"), config=exact, finder_workers=tasks),
            ],
            tasks,
        ),
        "exact_find": (
            [ExactFindDedups(str(work / "exact/sigs"), str(work / "exact/dups"), config=exact)],
            tasks,
        ),
        "exact_filter+minhash_signature": (
            [
                JsonlReader(str(work / "filtered")),
                ExactDedupFilter(str(work / "exact/dups"), config=exact),
                JsonlWriter(str(work / "exact_deduped")),
                MinhashDedupSignature(str(work / "minhash/sigs"), config=minhash),
            ],
            tasks,
        ),
        "minhash_buckets": (
            [
                MinhashDedupBuckets(
                    str(work / "minhash/sigs"), str(work / "minhash/buckets"), config=minhash
                )
            ],
            minhash.num_buckets,
        ),
        "minhash_cluster": (
            [
                MinhashDedupCluster(
                    str(work / "minhash/buckets"), str(work / "minhash/remove"), config=minhash
                )
            ],
            1,
        ),
        "minhash_filter": (
            [
                JsonlReader(str(work / "exact_deduped")),
                MinhashDedupFilter(str(work / "minhash/remove")),
                ParquetWriter(str(work / "output")),
            ],
            tasks,
        ),
    }

    report: dict = {"datatrove": version("datatrove"), "tasks": tasks, "workers": args.workers}
    started = time.perf_counter()
    for name, (pipeline, n_tasks) in stages.items():
        lap = time.perf_counter()
        executor = LocalPipelineExecutor(
            pipeline=pipeline,
            tasks=n_tasks,
            workers=min(args.workers, n_tasks),
            logging_dir=str(work / "logs" / name),
        )
        stats = executor.run()
        counts = {
            step.name: {
                key: int(metric.total)
                for key, metric in step.stats.items()
                if key in ("documents", "total", "forwarded", "dropped")
            }
            for step in stats.stats
        }
        report[name] = {"seconds": round(time.perf_counter() - lap, 2), "steps": counts}
    report["seconds"] = round(time.perf_counter() - started, 2)
    # the first step of the first stage is the reader, the last of the last the writer
    report["records_in"] = next(iter(report["filter+exact_signature"]["steps"].values()))[
        "documents"
    ]
    report["records_out"] = list(report["minhash_filter"]["steps"].values())[-1]["total"]
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
