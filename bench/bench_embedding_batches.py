"""Embedding batches: one token length per batch (`pipeline.text.embeddings.encode`) against
the padded batches it replaced (texts sorted by characters, cut every `batch_size`, each batch
padded to its longest text: sentence-transformers' own `encode`), side by side in one run.

Real text: the SMS Spam Collection and the demo's Debian changelog entries. Reports texts/s
of each, whether each text's vector is the same embedded alone as in its batch (bit for bit),
and the largest difference between the two methods' vectors.

    .venv/bin/python bench/bench_embedding_batches.py --texts 2000
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import time

import numpy as np
import polars as pl

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def texts(count: int) -> list[str]:
    from flows.demo import DOC_ROOT, changelog_locations, sms_spam_path

    sms = pl.read_csv(sms_spam_path(), infer_schema=False)["text"].to_list()
    entries = []  # paragraphs of the changelogs: about an entry each
    for location in changelog_locations():
        text = gzip.decompress((DOC_ROOT / location).read_bytes()).decode("utf-8", "replace")
        entries += [entry for entry in text.split("\n\n") if entry.strip()]
    mixed = [text for pair in zip(sms, entries, strict=False) for text in pair]
    return mixed[:count]


def padded(chunks: list[str], batch_size: int) -> np.ndarray:
    """The replaced method: by character length, `batch_size` at a time, padded."""
    from pipeline.text.embeddings import DIMENSIONS, load_model

    model = load_model()
    vectors = np.zeros((len(chunks), DIMENSIONS), dtype=np.float32)
    order = np.argsort([len(chunk) for chunk in chunks], kind="stable")
    for start in range(0, len(chunks), batch_size):
        batch = order[start : start + batch_size]
        vectors[batch] = model.encode(
            [chunks[i] for i in batch],
            batch_size=batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
    return vectors


def main() -> None:
    import torch

    from pipeline.text.embeddings import CHUNK_WORDS, encode, load_model

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()
    # texts of one chunk (CHUNK_WORDS words at most): the same work for both methods
    sample = [" ".join(text.split()[:CHUNK_WORDS]) for text in texts(args.texts)]
    load_model()
    results = {"texts": len(sample), "threads": torch.get_num_threads()}
    timed = {}
    for name, method in (
        ("padded", lambda: padded(sample, args.batch_size)),
        ("one_length", lambda: encode(pl.Series(sample), args.batch_size)),
    ):
        started = time.perf_counter()
        timed[name] = method()
        seconds = time.perf_counter() - started
        results[name] = {"seconds": round(seconds, 1), "texts_per_s": round(len(sample) / seconds)}
    alone = encode(pl.Series(sample[:200]), 1)  # each text in a batch of its own
    for name in ("padded", "one_length"):
        results[name]["same_alone_of_200"] = int((timed[name][:200] == alone).all(axis=1).sum())
    results["largest_difference"] = float(np.abs(timed["padded"] - timed["one_length"]).max())
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
