"""The run config: one typed model per YAML section, one module each, composed into
`RunConfig` (run.py) and loaded from one YAML file (loader.py), unknown keys rejected
everywhere; errors name the file, line, section or source, and field (explain.py)."""

from pipeline.config.augment import (
    AUGMENT_TRANSFORMS,
    AugmentConfig,
    FieldLeakageConfig,
    SyntheticPolicy,
)
from pipeline.config.base import SLUG, SPLITS
from pipeline.config.contamination import (
    ContaminationConfig,
    ContaminationMethods,
    EmbeddingCheck,
    MinHashCheck,
    NgramCheck,
)
from pipeline.config.dedup import BoilerplateConfig, DedupConfig, MinHashConfig, SemanticConfig
from pipeline.config.loader import load_run_config
from pipeline.config.policy import PolicyConfig
from pipeline.config.publish import PublishConfig
from pipeline.config.quality import QUALITY_PROFILES, QualityConfig
from pipeline.config.run import RunConfig, config_hash
from pipeline.config.runner import AlertsConfig, GatesConfig, ReviewConfig, RunnerConfig
from pipeline.config.sources import (
    CONSENT_BASES,
    FieldMapping,
    IngestConfig,
    SourceDeclaration,
)
from pipeline.config.split import SplitConfig

__all__ = [
    "AUGMENT_TRANSFORMS",
    "AlertsConfig",
    "AugmentConfig",
    "BoilerplateConfig",
    "CONSENT_BASES",
    "ContaminationConfig",
    "ContaminationMethods",
    "DedupConfig",
    "EmbeddingCheck",
    "FieldLeakageConfig",
    "FieldMapping",
    "GatesConfig",
    "IngestConfig",
    "MinHashCheck",
    "MinHashConfig",
    "NgramCheck",
    "PolicyConfig",
    "PublishConfig",
    "QUALITY_PROFILES",
    "QualityConfig",
    "ReviewConfig",
    "RunConfig",
    "RunnerConfig",
    "SLUG",
    "SPLITS",
    "SemanticConfig",
    "SourceDeclaration",
    "SplitConfig",
    "SyntheticPolicy",
    "config_hash",
    "load_run_config",
]
