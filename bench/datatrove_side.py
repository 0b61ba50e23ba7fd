"""The datatrove side of the quality benchmark: Gopher quality, then Gopher repetition.

Run with the SEPARATE datatrove environment's python, never Thresher's:

    bench/out/datatrove-venv/bin/python bench/datatrove_side.py \
        --input FILE.parquet --output decisions.parquet [--limit N]

That environment is made by
`python3.11 -m venv bench/out/datatrove-venv && bench/out/datatrove-venv/bin/pip install
datatrove==0.10.1 regex nltk spacy pyarrow` (datatrove 0.10.1 does not pull pyarrow in; it is
only used here to read and write Parquet). The English word tokenizer datatrove picks is
spaCy's blank "en" one, which needs no download.

Reads a Parquet file with columns `record_id` and `text`, runs `GopherQualityFilter()` and
then `GopherRepetitionFilter()` (default thresholds, language english) on every document the
way a datatrove pipeline does (`filter(doc)` returns True to keep or `(False, reason)`; a
document the quality filter drops never reaches the repetition filter), and writes
`record_id, kept, reason` (reason null when kept) in input order. Only the filtering loop is
timed; the figures are printed as one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", required=True, help="Parquet with record_id, text")
    parser.add_argument("--output", required=True, help="Parquet to write record_id, kept, reason")
    parser.add_argument("--limit", type=int, default=None, help="only the first N records")
    args = parser.parse_args(argv)

    from importlib.metadata import version

    from datatrove.data import Document
    from datatrove.pipeline.filters import GopherQualityFilter, GopherRepetitionFilter
    from datatrove.pipeline.filters.base_filter import get_filter_result
    from datatrove.utils.text import split_into_words
    from datatrove.utils.typeshelper import Languages

    table = pq.read_table(args.input, columns=["record_id", "text"])
    if args.limit is not None:
        table = table.slice(0, args.limit)
    ids = [None if value is None else str(value) for value in table.column("record_id").to_pylist()]
    texts = table.column("text").to_pylist()
    del table

    quality = GopherQualityFilter(language=Languages.english)
    repetition = GopherRepetitionFilter(language=Languages.english)
    # load spaCy's blank English tokenizer before the clock starts (first call builds it)
    split_into_words("warm up the tokenizer before timing", Languages.english)

    kept: list[bool] = []
    reasons: list[str | None] = []
    started = time.perf_counter()
    for record_id, text in zip(ids, texts, strict=True):
        doc = Document(text=text if text is not None else "", id=record_id or "")
        result, reason = get_filter_result(quality.filter(doc))
        if result:
            result, reason = get_filter_result(repetition.filter(doc))
        kept.append(bool(result))
        reasons.append(None if result else reason)
    seconds = time.perf_counter() - started

    out = pa.table(
        {
            "record_id": pa.array(ids, pa.string()),
            "kept": pa.array(kept, pa.bool_()),
            "reason": pa.array(reasons, pa.string()),
        }
    )
    pq.write_table(out, args.output, compression="zstd")

    counts: dict[str, int] = {}
    for reason in reasons:
        if reason is not None:
            counts[reason] = counts.get(reason, 0) + 1
    n = len(texts)
    print(
        json.dumps(
            {
                "datatrove": version("datatrove"),
                "records": n,
                "kept": sum(kept),
                "seconds": round(seconds, 3),
                "docs_per_s": round(n / seconds, 1) if seconds > 0 else None,
                "reasons": dict(sorted(counts.items(), key=lambda item: -item[1])),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
