"""Stable identities: xxh3-128 hex digests computed over whole columns.

`record_id` = xxh3-128 of (source, the source's id) or of (source, relative path, row), the
two kept apart (`declared_id_key`);
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


# Prefixed to a declared id that could spell a position key (it holds KEY_SEPARATOR) or an
# escaped id (it starts with it): a file path never holds NUL, so a position key never starts
# with it, and ids without either character hash as they always did.
ID_ESCAPE = "\x00"


def declared_id_key(source: str | pl.Expr, source_id: pl.Expr) -> pl.Expr:
    """The key of a record identified by its source's id field. Ids and positions live in
    separate namespaces: the id `data/s.jsonl\x1f5` is never the key of line 5 of that file."""
    needs_escape = source_id.str.contains(KEY_SEPARATOR, literal=True) | source_id.str.starts_with(
        ID_ESCAPE
    )
    escaped = pl.when(needs_escape).then(pl.lit(ID_ESCAPE) + source_id).otherwise(source_id)
    return record_key(source, escaped)


def record_id_of(source: str, source_id: str) -> str:
    """The record_id of the record with id `source_id` in `source` (as ingest computes it)."""
    frame = pl.DataFrame({"id": [source_id]}, schema={"id": pl.String})
    return xxh3_128_hex(frame.select(declared_id_key(source, pl.col("id"))).to_series())[0]


def record_node() -> pl.Expr:
    """Each record id as a 128-bit number (`hex_ids`): distinct records, distinct nodes (the
    connected components' node ids of dedup and split), where 64 bits may collide."""
    numbers = lambda ids: hex_ids(ids).str.to_integer(base=16, dtype=pl.UInt128)  # noqa: E731
    return pl.col("record_id").map_batches(numbers, pl.UInt128, is_elementwise=True).alias("node")


def hex_ids(record_ids: pl.Series) -> pl.Series:
    """Record ids as 32 hex digits: ingest's ids are such digests; an id of another form
    (made by hand, as in tests) is replaced by its xxh3-128 digest."""
    hexed = record_ids.str.len_bytes().eq(32) & record_ids.str.contains("^[0-9a-f]+$")
    if not hexed.all():
        record_ids = record_ids.zip_with(hexed, xxh3_128_hex(record_ids))
    return record_ids
