"""Benchmark of language identification: `pipeline.text.langid.identify` (py3langid's model,
walked in batches) against py3langid 0.4's own `classify`, one call per text, as the quality
stage called it before.

Both sides run in this process, one after the other, on the same texts: the spine bench's
real-text records (bench/bench_spine.py, cached under bench/out/input/). Each side is timed
wall-clock after a warm-up call that loads the model; the answers must be equal, language and
score, for every text. Run `.venv/bin/python bench/bench_langid.py --records 200000`.
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
from bench_spine import cached_records  # noqa: E402
from py3langid.langid import _load_identifier  # noqa: E402

from pipeline.text import langid  # noqa: E402

CANDIDATES = ["en", "de", "fr", "es", "it", "nl", "pt"]  # the demo's


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    args = parser.parse_args()
    texts = cached_records(args.records)["text"]
    megabytes = texts.str.len_bytes().sum() / 1e6
    classify = langid._identifier().classify
    langid.identify(texts.head(10))  # loads the model and its numpy tables

    started = time.perf_counter()
    batched = langid.identify(texts)
    batched_s = time.perf_counter() - started

    started = time.perf_counter()
    per_text = [classify(text) for text in texts]
    per_text_s = time.perf_counter() - started

    expected = pl.DataFrame(per_text, schema=langid.LANGUAGE_SCHEMA, orient="row")
    assert batched.equals(expected), "the batched walk must give py3langid's answers"
    started = time.perf_counter()
    among = langid.identify(texts, CANDIDATES)
    among_s = time.perf_counter() - started
    restricted = _load_identifier(norm_probs=True)  # a copy of its own to restrict
    restricted.set_languages(CANDIDATES)
    expected = pl.DataFrame(
        [restricted.classify(text) for text in texts], schema=langid.LANGUAGE_SCHEMA, orient="row"
    )
    assert among.equals(expected), "candidates must give py3langid's set_languages answers"
    figures = {
        "records": texts.len(),
        "megabytes": round(megabytes, 1),
        "thresher_s": round(batched_s, 2),
        "py3langid_s": round(per_text_s, 2),
        "thresher_records_per_s": round(texts.len() / batched_s),
        "py3langid_records_per_s": round(texts.len() / per_text_s),
        "speedup": round(per_text_s / batched_s, 1),
        "candidates": CANDIDATES,
        "thresher_candidates_s": round(among_s, 2),
        "thresher_candidates_records_per_s": round(texts.len() / among_s),
        "answers_equal": True,
    }
    print(json.dumps(figures))
    print(
        f"\n| side | seconds | records/s | MB/s |\n|---|---:|---:|---:|\n"
        f"| Thresher `identify` (batched) | {batched_s:.1f} | {texts.len() / batched_s:,.0f} "
        f"| {megabytes / batched_s:.1f} |\n"
        f"| Thresher `identify` among {len(CANDIDATES)} candidates | {among_s:.1f} "
        f"| {texts.len() / among_s:,.0f} | {megabytes / among_s:.1f} |\n"
        f"| py3langid `classify` per text | {per_text_s:.1f} | {texts.len() / per_text_s:,.0f} "
        f"| {megabytes / per_text_s:.1f} |"
    )


if __name__ == "__main__":
    main()
