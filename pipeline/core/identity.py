"""Stable identities: xxh3-128 hex digests computed over whole columns.

`record_id` = xxh3-128 of (source, the source's id) or of (source, relative path, row);
`source_content_hash` / `content_hash` = xxh3-128 of the normalized text. The digests equal
`xxhash.xxh3_128_hexdigest(value.encode())`, so any tool can recompute them.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import polars_hash as plh
import pyarrow as pa

# Unit separator: cannot appear in a source name and never appears in normal text ids.
KEY_SEPARATOR = "\x1f"


def xxh3_128_hex(values: pl.Series) -> pl.Series:
    """xxh3-128 of each UTF-8 string as 32 lowercase hex digits (nulls stay null)."""
    digests = values.to_frame("v").select(plh.col("v").nchash.xxh3_128()).to_series()
    high = digests.to_frame("d").select((pl.col("d") // (1 << 64)).cast(pl.UInt64)).to_series()
    low = digests.to_frame("d").select((pl.col("d") % (1 << 64)).cast(pl.UInt64)).to_series()
    big_endian = np.empty((len(values), 2), dtype=">u8")
    big_endian[:, 0] = high.fill_null(0).to_numpy()
    big_endian[:, 1] = low.fill_null(0).to_numpy()
    raw = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(16), len(values), [None, pa.py_buffer(big_endian.tobytes())]
    )
    hexed = pl.Series(values.name, pl.from_arrow(raw)).cast(pl.Binary).bin.encode("hex")
    return hexed.zip_with(values.is_not_null(), pl.Series([None], dtype=pl.String))


def record_key(source: str | pl.Expr, *parts: pl.Expr) -> pl.Expr:
    """The string that a record_id hashes: source and key parts joined by KEY_SEPARATOR."""
    source = pl.lit(source) if isinstance(source, str) else source
    return pl.concat_str([source, *parts], separator=KEY_SEPARATOR)


def record_id_of(source: str, source_id: str) -> str:
    """The record_id of the record with id `source_id` in `source` (as ingest computes it)."""
    return xxh3_128_hex(pl.Series([f"{source}{KEY_SEPARATOR}{source_id}"]))[0]
