"""`RunConfig`: every section composed into one model, and the config hash, which leaves out
where and how a run happens so that the same inputs and config hash the same anywhere."""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from pipeline.config.augment import AugmentConfig, FieldLeakageConfig, SyntheticPolicy
from pipeline.config.base import SLUG, Strict, _switch
from pipeline.config.contamination import ContaminationConfig
from pipeline.config.dedup import DedupConfig
from pipeline.config.policy import PolicyConfig
from pipeline.config.publish import PublishConfig
from pipeline.config.quality import QualityConfig
from pipeline.config.runner import AlertsConfig, GatesConfig, ReviewConfig, RunnerConfig
from pipeline.config.sources import IngestConfig, SourceDeclaration
from pipeline.config.split import SplitConfig
from pipeline.config.train import TrainConfig
from pipeline.core.errors import ConfigError


class RunConfig(Strict):
    name: Annotated[str, Field(pattern=SLUG, description="dataset name")]
    workdir: str = "./work"
    sources: str | list[SourceDeclaration]
    ingest: IngestConfig = IngestConfig()
    policy: PolicyConfig = PolicyConfig()
    quality: QualityConfig = QualityConfig()
    dedup: DedupConfig = DedupConfig()
    split: SplitConfig = SplitConfig()
    contamination: ContaminationConfig = ContaminationConfig()
    synthetic: SyntheticPolicy = SyntheticPolicy()
    augment: AugmentConfig | None = Field(None, description="off unless given")
    field_leakage: FieldLeakageConfig = FieldLeakageConfig()
    publish: PublishConfig = PublishConfig()
    runner: RunnerConfig = RunnerConfig()
    alerts: AlertsConfig = AlertsConfig()
    gates: GatesConfig = GatesConfig()
    review: ReviewConfig = ReviewConfig()
    train: TrainConfig | None = None  # the training stage's settings (pipeline/config/train.py)

    @property
    def source_list(self) -> list[SourceDeclaration]:
        if isinstance(self.sources, str):
            raise ConfigError("sources were not resolved: load the config with load_run_config")
        return self.sources

    @field_validator("augment", mode="before")
    @classmethod
    def _augment_on_off(cls, value: Any) -> Any:
        return _switch(value)

    @model_validator(mode="after")
    def _unique_source_names(self) -> RunConfig:
        if isinstance(self.sources, list):
            names = [source.name for source in self.sources]
            repeated = sorted({name for name in names if names.count(name) > 1})
            if repeated:
                raise ValueError(f"source names must be unique; repeated: {', '.join(repeated)}")
        return self

    @model_validator(mode="after")
    def _memory_storage_in_one_process(self) -> RunConfig:
        """`memory://` is one process's store: a pool's or a cluster's processes never see it."""
        locations = [self.publish.location or ""]
        if isinstance(self.sources, list):
            for source in self.sources:
                where = source.location
                locations += [where] if isinstance(where, str) else where
        in_memory = [where for where in locations if where.startswith("memory://")]
        if in_memory and (self.runner.kind != "local" or self.runner.workers > 1):
            raise ValueError(
                f"{in_memory[0]} is in this process's memory, which the runner's other "
                "processes cannot read: set runner: {kind: local, workers: 1}, or use a "
                "folder or object storage"
            )
        return self


# Sections of the planned run config whose stages are not built yet (none today).
PLANNED_SECTIONS: dict[str, str] = {}

# Settings that change where or how a run happens, what checks it or who reviews it, or what is
# trained on it, not what it publishes.
_NOT_IN_CONFIG_HASH = {"workdir", "runner", "alerts", "gates", "review", "train"}
_SOURCE_FIELDS_NOT_HASHED = {"location", "root", "base_dir", "max_glob_paths", "max_glob_seconds"}
# Settings added after versions were published are hashed only when they are set: upgrading
# Thresher does not change the hash (and so the version) of a config that does not use them.
_HASHED_WHEN_SET = {"ingest": IngestConfig().model_dump(mode="json")}
_SOURCE_FIELDS_HASHED_WHEN_SET = {"max_text_chars"}
# The gates' timestamp bounds decide what ingest drops (timestamp_out_of_range): hashed when set.
_GATES_HASHED_WHEN_SET = {"earliest_timestamp", "future_days"}


def config_hash(cfg: RunConfig) -> str:
    """sha256 of the resolved config without paths, the work folder and runner settings."""
    excluded = dict.fromkeys(_NOT_IN_CONFIG_HASH, True) | {"publish": {"location": True}}
    data = cfg.model_dump(mode="json", exclude=excluded)
    for key, default in _HASHED_WHEN_SET.items():
        if data[key] == default:
            del data[key]
    bounds = cfg.gates.model_dump(mode="json", include=_GATES_HASHED_WHEN_SET)
    if bounds != GatesConfig().model_dump(mode="json", include=_GATES_HASHED_WHEN_SET):
        data["gates"] = bounds
    data["sources"] = [
        {
            key: value
            for key, value in source.items()
            if key not in _SOURCE_FIELDS_NOT_HASHED
            and not (key in _SOURCE_FIELDS_HASHED_WHEN_SET and value is None)
        }
        for source in data["sources"]
    ]
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
