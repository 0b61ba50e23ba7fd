"""The `publish:` section: shard size, compression, and where versions are stored."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from pipeline.config.base import Strict


class PublishConfig(Strict):
    shard_rows: Annotated[int, Field(ge=1)] = 100_000
    location: str | None = Field(
        None,
        description="where versions are stored: a folder or an fsspec URL (file://, memory://, "
        "s3://bucket/prefix with s3fs installed); default: <workdir>/datasets",
    )
    compression: Literal["zstd", "snappy", "gzip", "none"] = "zstd"
    compression_level: int | None = 3
