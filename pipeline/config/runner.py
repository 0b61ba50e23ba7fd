"""Where and how a run happens, who hears of a failure, the gates' bounds and who reviews:
the `runner:`, `alerts:`, `gates:` and `review:` sections (none is in the config hash)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from pipeline.config.base import Strict
from pipeline.core.storage import POLARS_SCHEMES


class RunnerConfig(Strict):
    """Where the per-record stages run, part by part: processes of this machine, or a Dask
    cluster (flows/runner)."""

    kind: Literal["local", "dask"] = "local"
    address: str | None = Field(
        None,
        description="scheduler of an existing Dask cluster (tcp://host:8786); without one, "
        "`dask` starts a temporary cluster on this machine",
    )
    workers: Annotated[int, Field(ge=1)] = Field(
        2,
        description="processes (local; 1: the run's own process) or Dask workers of a "
        "temporary cluster",
    )
    memory_limit: str | None = Field(
        None,
        pattern=r"^\d+(\.\d+)?\s*(B|kB|MB|GB|TB|KiB|MiB|GiB|TiB)$",
        description="memory of each worker of a temporary Dask cluster (e.g. 6GiB): Dask pauses "
        "a worker at 80% of it and restarts it at 95% (its task is retried); without it, the "
        "machine's memory is shared among the workers",
    )
    part_rows: Annotated[int, Field(ge=1)] = Field(
        500_000,
        description="the most records a part handed to a worker holds (it bounds a worker's "
        "memory); parts are sized from each stage's records and the workers, several per "
        "worker, within it",
    )
    scratch: str | None = Field(
        None,
        description="where the run's intermediate files go (parts, key partitions, exchanges, "
        "decisions, ledger parts, staged shards): a folder or an object-storage URL "
        "(s3://bucket/prefix, gs://, az://), under which each run writes <name>/<run id>/; "
        "without it, the run folder. Workers of a cluster that share no file system with the "
        "run need one on object storage",
    )

    @field_validator("scratch")
    @classmethod
    def _scratch_polars_reads(cls, value: str | None) -> str | None:
        scheme = value.split("://", 1)[0] if value and "://" in value else None
        if scheme is not None and scheme not in POLARS_SCHEMES:
            raise ValueError(
                f"runner.scratch {value!r}: the steps read and write it with polars, which "
                f"serves {', '.join(s + '://' for s in POLARS_SCHEMES)} and local folders"
            )
        return value

    @model_validator(mode="after")
    def _address_needs_dask(self) -> RunnerConfig:
        if self.address and self.kind != "dask":
            raise ValueError("runner.address is for kind: dask")
        if self.memory_limit and (self.kind != "dask" or self.address):
            raise ValueError(
                "runner.memory_limit is for a temporary Dask cluster (kind: dask, no address): "
                "an existing cluster's workers set theirs (`dask worker --memory-limit`)"
            )
        return self


class AlertsConfig(Strict):
    """Who hears about a failed or crashed run: a webhook gets a JSON POST, a command gets the
    same JSON on stdin."""

    webhook: str | None = Field(None, pattern=r"^https?://")
    command: list[str] | None = None
    timeout_s: Annotated[float, Field(gt=0)] = 10.0


class GatesConfig(Strict):
    """Great Expectations gates (expectations/): the bounds their suites are checked against.

    Three gates run on every run: ingested records, governed records and the published
    splits. A failed gate stops the run before the catalog commit.
    """

    enabled: bool = True
    min_text_chars: Annotated[int, Field(ge=0)] = 1
    max_text_chars: Annotated[int, Field(gt=0)] = 1_000_000
    earliest_timestamp: datetime = Field(
        datetime(1970, 1, 1, tzinfo=UTC),
        description="no record may be older: ingest drops one that is (timestamp_out_of_range)",
    )
    future_days: Annotated[float, Field(ge=0)] = Field(
        1.0,
        description="no record may be newer than the run's start plus this many days: ingest "
        "drops one that is (timestamp_out_of_range)",
    )
    split_tolerance: Annotated[float, Field(ge=0, le=1)] = Field(
        0.1,
        description="how far a split's share of the records may stray from its fraction "
        "(plus a binomial allowance for few groups); checked for group splits and quantile "
        "cutoffs, where the fractions are targets",
    )
    batch_rows: Annotated[int, Field(gt=0)] = Field(
        100_000, description="records per Great Expectations batch in per-record checks"
    )

    def timestamp_bounds(self, started: datetime) -> tuple[datetime, datetime]:
        """The oldest and the newest time a record may carry, both allowed, for a run started
        at `started`: the ingested gate checks them, and ingest drops what lies outside."""
        latest = started + timedelta(days=self.future_days)
        return self.earliest_timestamp.astimezone(UTC), latest.astimezone(UTC)

    @field_validator("earliest_timestamp")
    @classmethod
    def _utc(cls, when: datetime) -> datetime:
        return when if when.tzinfo else when.replace(tzinfo=UTC)

    @model_validator(mode="after")
    def _ordered(self) -> GatesConfig:
        if self.min_text_chars > self.max_text_chars:
            raise ValueError("min_text_chars must not be above max_text_chars")
        return self


class ReviewConfig(Strict):
    """The reviewer web page (`thresher review serve`). Decisions need a reviewer token: one
    listed here by its sha256 (`thresher review token NAME` makes one), or the shared token
    in $THRESHER_REVIEW_TOKEN."""

    reviewers: dict[str, Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]] = Field(
        {}, description="reviewer name -> sha256:<hex digest of their token>"
    )
    session_minutes: Annotated[int, Field(gt=0)] = 480
    reveal: list[str] = Field(
        [],
        description="reviewers who may reveal the personal data the policy masks in the queue "
        "(each reveal is logged)",
    )
