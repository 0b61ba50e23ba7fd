"""The `split:` section: strategy, fractions, time cutoffs, stratification and conflicts."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from pipeline.config.base import SPLITS, Strict


class SplitConfig(Strict):
    """How records are assigned to train, validation and test (pipeline/split/stage.py).

    `group`: components of the group graph (groups joined by duplicate clusters and equal
    content) go whole to one split, by a stable hash. `time`: a record's timestamp against
    the cutoffs (train before `validation`, validation before `test`); duplicate clusters
    still go whole, to the split of their anchor. `group_time`: each component goes to the
    split of its anchor time; its records on the other side of a cutoff are dropped
    (`group_time_conflict`) or moved with it, by `on_conflict`.
    """

    strategy: Literal["group", "time", "group_time"] = "group"
    fractions: dict[Literal[SPLITS], float] = {"train": 0.8, "validation": 0.1, "test": 0.1}
    salt: str = Field("", description="changes every new group's split; keep it fixed")
    cutoffs: dict[Literal["validation", "test"], datetime] | Literal["quantiles"] | None = Field(
        None,
        description="time strategies: the first instant of validation and of test, or "
        "`quantiles` (cut at the fractions of record times, frozen at the first publish)",
    )
    anchor: Literal["earliest", "latest"] = Field(
        "earliest", description="group_time and time: which record's time places a component"
    )
    on_conflict: Literal["drop", "move"] = Field(
        "drop", description="group_time: records on the wrong side of a cutoff"
    )
    stratify: Literal["label"] | None = Field(
        None, description="group: balance each label's share of the splits"
    )

    @field_validator("fractions")
    @classmethod
    def _fractions_sum_to_one(cls, fractions: dict[str, float]) -> dict[str, float]:
        if any(value < 0 for value in fractions.values()):
            raise ValueError("fractions must not be negative")
        if abs(sum(fractions.values()) - 1.0) > 1e-6:
            raise ValueError(
                f"fractions must add up to 1, they add up to {sum(fractions.values())}"
            )
        if "train" not in fractions:
            raise ValueError("fractions need a 'train' entry")
        return {name: fractions[name] for name in SPLITS if name in fractions}

    @field_validator("cutoffs")
    @classmethod
    def _aware_cutoffs(cls, cutoffs: Any) -> Any:
        if isinstance(cutoffs, dict):  # a bare date or naive time is UTC, as timestamps are
            cutoffs = {
                name: when if when.tzinfo else when.replace(tzinfo=UTC)
                for name, when in cutoffs.items()
            }
        return cutoffs

    @model_validator(mode="after")
    def _strategy_settings(self) -> SplitConfig:
        held_out = [name for name in SPLITS[1:] if self.fractions.get(name, 0) > 0]
        if self.strategy == "group":
            if self.cutoffs is not None:
                raise ValueError("cutoffs need strategy time or group_time")
            return self
        if self.stratify is not None:
            raise ValueError("stratify works with strategy group: time decides the other splits")
        if self.cutoffs is None:
            raise ValueError(
                f"strategy {self.strategy} needs cutoffs: {{validation: 2023-01-01, test: "
                "2024-01-01} or `quantiles`"
            )
        if isinstance(self.cutoffs, dict):
            if sorted(self.cutoffs) != sorted(held_out):
                raise ValueError(
                    f"cutoffs must name exactly the held-out splits with a fraction: "
                    f"{', '.join(held_out) or 'none'}"
                )
            ordered = [
                self.cutoffs[name] for name in ("validation", "test") if name in self.cutoffs
            ]
            if ordered != sorted(ordered) or len(set(ordered)) < len(ordered):
                raise ValueError("the validation cutoff must come before the test cutoff")
        return self
