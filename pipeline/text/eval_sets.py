"""Protected evaluation sets as folders: `items.parquet` (item_id, text, content_hash) and
the files prepared for given method settings, each named for its settings (see
pipeline/text/eval_index.py). `write_eval_set` returns every file's sha256, which the catalog
keeps; `load_eval_set` refuses a set whose files changed."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.config.contamination import (
    ContaminationMethods,
    MinHashCheck,
    NgramCheck,
)
from pipeline.core.errors import DataError
from pipeline.core.identity import xxh3_128_hex
from pipeline.core.normalize import normalize_text
from pipeline.core.schema import EvalSet
from pipeline.core.storage import file_sha256
from pipeline.text.eval_minhash import CHAR_NGRAM, MINHASH_VERSION, banding, item_minhash
from pipeline.text.word_ngrams import NGRAM_VERSION, item_grams

ITEMS_FILE = "items.parquet"


ITEM_SCHEMA = pl.Schema({"item_id": pl.String, "text": pl.String, "content_hash": pl.String})


_PARQUET = {"compression": "zstd", "compression_level": 3, "statistics": False}


_REGISTER = "register it again with `thresher eval register {name} PATH`"


def eval_items(texts: pl.Series, item_ids: pl.Series | None = None) -> pl.DataFrame:
    """Items from texts: text normalized as ingest does, content_hash as ingest computes it
    (xxh3-128 of the normalized text), item_id the given ids or the row number (as text).
    Ids are not checked for repeats: registering a set does that, with its own message."""
    text = normalize_text(texts.cast(pl.String))
    empty = (text.is_null() | (text == "")).fill_null(True)
    if empty.any():
        rows = empty.arg_true()
        listed = ", ".join(map(str, rows.head(5).to_list()))
        raise DataError(
            f"{rows.len()} evaluation item(s) have no text (rows {listed}, 0-based); remove "
            "them or point at the field that holds the text"
        )
    ids = (
        pl.Series(range(texts.len())).cast(pl.String)
        if item_ids is None
        else item_ids.cast(pl.String)
    )
    if ids.len() != texts.len():
        raise DataError(f"{ids.len()} item ids for {texts.len()} evaluation texts; give one each")
    if ids.null_count():
        raise DataError(
            f"evaluation item ids are missing (row {ids.is_null().arg_true()[0]}, 0-based); "
            "give every item an id"
        )
    return pl.DataFrame(
        {"item_id": ids, "text": text, "content_hash": xxh3_128_hex(text)}, schema=ITEM_SCHEMA
    )


def ngram_file(check: NgramCheck) -> str:
    return f"ngrams-v{NGRAM_VERSION}-n{check.n}-s{check.short_n}.parquet"


def minhash_file(check: MinHashCheck) -> str:
    bands, rows = banding(check)
    settings = {"version": MINHASH_VERSION, "num_perm": check.num_perm, "ngram": check.ngram}
    settings |= {"char_ngram": CHAR_NGRAM, "seed": check.seed, "bands": bands, "rows": rows}
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]
    return f"minhash-{digest}.parquet"


def embedding_file() -> str:
    from pipeline.text.embeddings import vectors_key

    return f"embeddings-{vectors_key()}.npy"


def write_eval_set(
    items: pl.DataFrame,
    folder: Path,
    methods: ContaminationMethods,
    embedding_cache: Path | None,
) -> dict[str, str]:
    """Write the items and the files prepared for `methods` into `folder`; return {file
    name: sha256} for every file written. Embeddings are written only when `methods` turns
    them on (HumanEval's 164 prompts take about 25 s on one core): a later run that turns
    them on embeds the verified items once, into the work folder's embedding cache."""
    items = checked_items(items)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    files: dict[str, bytes] = {ITEMS_FILE: _parquet_bytes(items)}
    if methods.ngram is not None:
        files[ngram_file(methods.ngram)] = _parquet_bytes(item_grams(items["text"], methods.ngram))
    if methods.minhash is not None:
        prepared = item_minhash(items["text"], methods.minhash)
        files[minhash_file(methods.minhash)] = _parquet_bytes(prepared)
    if methods.embedding is not None:
        vectors = embed_items(items, embedding_cache, methods.embedding.batch_size)
        buffer = io.BytesIO()
        np.save(buffer, vectors, allow_pickle=False)
        files[embedding_file()] = buffer.getvalue()
    for name, data in files.items():
        temporary = folder / f".{name}.tmp"
        temporary.write_bytes(data)
        temporary.replace(folder / name)
    return {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}


def load_eval_set(name: str, folder: Path, sha256s: dict[str, str]) -> EvalSet:
    """The evaluation set in `folder`, after checking every listed file's sha256."""
    folder = Path(folder)
    again = _REGISTER.format(name=name)
    if ITEMS_FILE not in sha256s:
        raise DataError(f"evaluation set {name!r}: the catalog lists no {ITEMS_FILE}; {again}")
    for file, expected in sorted(sha256s.items()):
        path = folder / file
        if Path(file).name != file:
            raise DataError(f"evaluation set {name!r}: {file!r} is not a file name; {again}")
        if not path.is_file():
            raise DataError(f"evaluation set {name!r}: {path} is missing; {again}")
        actual = file_sha256(path)
        if actual != expected:
            raise DataError(
                f"evaluation set {name!r}: {path} has changed since it was registered "
                f"(sha256 {actual[:12]}…, registered {expected[:12]}…); {again}"
            )
    try:
        items = checked_items(pl.read_parquet(folder / ITEMS_FILE))
    except (DataError, pl.exceptions.PolarsError) as error:
        raise DataError(
            f"evaluation set {name!r}: {folder / ITEMS_FILE}: {error}; {again}"
        ) from None
    return EvalSet(name=name, folder=folder, items=items)


def checked_items(items: pl.DataFrame) -> pl.DataFrame:
    missing = [column for column in ITEM_SCHEMA if column not in items.columns]
    if missing:
        raise DataError(
            f"evaluation items lack the column(s) {', '.join(missing)}; build them with "
            "pipeline.text.eval_sets.eval_items"
        )
    return items.select(ITEM_SCHEMA.names()).cast(ITEM_SCHEMA)


def _parquet_bytes(frame: pl.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.write_parquet(buffer, **_PARQUET)
    return buffer.getvalue()


def embed_items(frame: pl.DataFrame, cache: Path | None, batch_size: int) -> np.ndarray:
    from pipeline.text.embeddings import embed

    return embed(frame["text"], frame["content_hash"], cache, batch_size).vectors
