"""Benchmark of ingest's encoding repair: Thresher's `repair_encoding` (ftfy's encoding fixes on
the texts that hold damage the quality stage would drop) against datatrove's way, ftfy's
`fix_text` on every text (its `FTFYFormatter`), on the quality bench's input.

Input: the quality bench's records (bench/bench_quality.py, built and cached on first use),
normalized as ingest normalizes; they hold the SMS Spam Collection's messages with cp1252
punctuation read as C1 controls. Both sides run in this process, one after the other, timed
wall-clock after ftfy is imported; datatrove's way on the first --sample texts (one Python call
per text), Thresher's on all of them and on the sample. Also timed: ingest's normalization of
the same texts (`normalize_text`), the pass every record already goes through.

Checks: on the texts Thresher repairs, `fix_text` restricted to the same fixes gives the same
text; the texts Thresher leaves alone hold no mojibake or C1 control. Run
`.venv/bin/python bench/bench_encoding.py --records 1000000`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH_DIR.parent), str(BENCH_DIR)]

import polars as pl  # noqa: E402
from bench_quality import input_path  # noqa: E402

from pipeline.core.normalize import normalize_text  # noqa: E402
from pipeline.ingest.encoding import DAMAGE, _fixer_config, repair_encoding  # noqa: E402


def timed(function, *args):
    started = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--sample", type=int, default=100_000, help="texts run through fix_text")
    args = parser.parse_args()
    import ftfy

    raw = pl.read_parquet(input_path(args.records), columns=["text"])["text"]
    texts, normalize_s = timed(normalize_text, raw)
    megabytes = texts.str.len_bytes().sum() / 1e6
    (repaired, steps), repair_s = timed(repair_encoding, texts)
    sample = texts.head(args.sample)
    _, repair_sample_s = timed(repair_encoding, sample)
    _, fix_every_s = timed(lambda values: [ftfy.fix_text(v) for v in values], sample.to_list())

    changed = steps.is_not_null()
    config = _fixer_config()
    again = normalize_text(pl.Series([ftfy.fix_text(t, config) for t in texts.filter(changed)]))
    assert again.equals(repaired.filter(changed).rename(again.name)), "ftfy's own answer"
    left = repaired.filter(~changed).str.contains(DAMAGE).sum()
    figures = {
        "records": texts.len(),
        "megabytes": round(megabytes, 1),
        "candidates": int(texts.str.contains(DAMAGE).sum()),
        "repaired": int(changed.sum()),
        "damage_left_in_unrepaired": int(left),
        "normalize_s": round(normalize_s, 2),
        "repair_s": round(repair_s, 2),
        "sample": sample.len(),
        "repair_sample_s": round(repair_sample_s, 3),
        "fix_text_every_sample_s": round(fix_every_s, 2),
    }
    print(json.dumps(figures))
    per_s = texts.len() / repair_s
    print(
        "\n| side | texts | seconds | texts/s |\n|---|---:|---:|---:|\n"
        f"| ingest's normalization (every text) | {texts.len():,} | {normalize_s:.2f} "
        f"| {texts.len() / normalize_s:,.0f} |\n"
        f"| Thresher `repair_encoding` | {texts.len():,} | {repair_s:.2f} | {per_s:,.0f} |\n"
        f"| Thresher `repair_encoding` | {sample.len():,} | {repair_sample_s:.3f} "
        f"| {sample.len() / repair_sample_s:,.0f} |\n"
        f"| ftfy `fix_text` on every text (datatrove's FTFYFormatter) | {sample.len():,} "
        f"| {fix_every_s:.2f} | {sample.len() / fix_every_s:,.0f} |"
    )


if __name__ == "__main__":
    main()
