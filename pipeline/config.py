"""The run config: one typed model per stage, composed, loaded from one YAML file.

Unknown keys are rejected everywhere. Errors name the file, the line, the section or
source, and the field. Relative paths resolve against the file that declared them.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import re
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from pipeline.core.errors import ConfigError
from pipeline.core.licenses import LICENSE_CLASSES, check_expression
from pipeline.text.gopher import GopherThresholds
from pipeline.text.line_rules import LineRules
from training.config import TrainConfig

SLUG = r"^[a-z0-9][a-z0-9_.-]*$"
SPLITS = ("train", "validation", "test")
FORMATS = ("jsonl", "csv", "parquet", "text", "debian_changelog")
CONSENT_BASES = ("explicit", "contract", "public-release", "legitimate-interest", "none", "unknown")
USES = ("training", "evaluation", "research", "commercial", "redistribution")
KEEP_RULES = ("earliest_timestamp", "most_permissive_license", "longest_text", "lowest_record_id")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FieldMapping(Strict):
    """Which input field feeds each canonical record field."""

    text: str = "text"
    id: str | None = None
    group: str | None = None
    timestamp: str | None = None
    timestamp_format: str | None = Field(
        None, description="strftime format; default: ISO 8601, RFC 2822 or epoch seconds"
    )
    label: str | None = None
    license: str | None = Field(
        None, description="per-record license; where it and the source's differ, the stricter wins"
    )
    consent: str | None = Field(
        None, description="per-record consent basis; the weaker of it and the source's counts"
    )
    metadata: list[str] = []


# Fields the built-in readers produce for formats without user-defined columns.
DEFAULT_FIELDS = {
    "text": FieldMapping(text="text", id="path"),
    "debian_changelog": FieldMapping(
        text="changes",
        id="entry_id",
        group="maintainer_email",
        timestamp="date",
        metadata=["package", "version", "distribution", "urgency", "maintainer"],
    ),
}


class SyntheticDeclaration(Strict):
    """A source whose texts a model or a program generated, and how."""

    generator: Annotated[str, Field(min_length=1)] = Field(
        description="what generated them, with its version: a model id, a script and commit"
    )
    parameters: dict[str, Any] = Field(
        {}, description="generation parameters (prompt template, temperature, seed ...)"
    )


class SourceDeclaration(Strict):
    """A declared text source: where it is, how to read it, and on what terms we hold it."""

    name: Annotated[str, Field(pattern=SLUG)]
    location: str | list[str] = Field(
        description="path or glob, or a list of them; relative ones start at `root`"
    )
    root: str | None = Field(
        None, description="folder relative locations start from and files are named from"
    )
    format: Literal[FORMATS]
    encoding: str = "utf-8"
    fields: FieldMapping | None = None
    license: str = Field(
        description="an SPDX id or expression (`MIT`, `(MIT OR GPL-3.0) AND CC-BY-4.0`) or LicenseRef-…"
    )
    consent: Literal[CONSENT_BASES]
    rights_basis: str | None = None
    owner: str
    collected: date | None = None
    allowed_uses: list[Literal[USES]] = []
    removal_contact: str | None = None
    description: str | None = None
    synthetic: SyntheticDeclaration | None = Field(
        None, description="declare the source generated: its records carry synthetic=true"
    )
    known_after_outcome: list[str] = Field(
        [],
        description="input fields known only after the label was decided (a resolution code, "
        "a closing date): never read into records, listed as excluded in the manifest",
    )
    base_dir: str = Field("", description="set by the loader: where relative locations start")

    @field_validator("license")
    @classmethod
    def _spdx_expression(cls, license: str) -> str:
        try:
            check_expression(license)
        except ValueError as error:
            raise ValueError(
                f"not an SPDX license expression ({error}); write an SPDX id such as "
                "CC-BY-4.0, an expression such as 'MIT OR Apache-2.0', or LicenseRef-<name>"
            ) from None
        return license

    @field_validator("encoding")
    @classmethod
    def _known_encoding(cls, encoding: str) -> str:
        try:
            codecs.lookup(encoding)
        except LookupError:
            raise ValueError(
                f"unknown text encoding {encoding!r} (e.g. utf-8, latin-1, utf-16)"
            ) from None
        return encoding

    @model_validator(mode="after")
    def _default_fields(self) -> SourceDeclaration:
        if self.fields is None:
            object.__setattr__(self, "fields", DEFAULT_FIELDS.get(self.format, FieldMapping()))
        fields = self.fields
        canonical = {fields.text, fields.id, fields.group, fields.timestamp, fields.label}
        leaking = sorted(set(self.known_after_outcome) & canonical)
        if leaking:
            raise ValueError(
                f"known_after_outcome names {', '.join(leaking)}, which fields: maps to a record "
                "field (text, id, group, timestamp or label); only metadata fields can be excluded"
            )
        return self

    @property
    def metadata_fields(self) -> list[str]:
        """The metadata fields records carry: the declared ones less those known only after
        the outcome."""
        return [name for name in self.fields.metadata if name not in self.known_after_outcome]

    @property
    def root_dir(self) -> str:
        return os.path.join(self.base_dir, self.root) if self.root else self.base_dir

    @property
    def patterns(self) -> list[str]:
        return [self.location] if isinstance(self.location, str) else list(self.location)


Similarity = Annotated[float, Field(gt=0.0, le=1.0)]


class MinHashConfig(Strict):
    """Near duplicates by MinHash LSH over normalized word (or character) n-grams."""

    threshold: Similarity = Field(0.8, description="Jaccard similarity of a near duplicate")
    num_perm: Annotated[int, Field(ge=16, le=1024)] = 128
    ngram: Annotated[int, Field(ge=1, le=32)] = Field(5, description="words per shingle")
    char_ngram: Annotated[int, Field(ge=1, le=64)] = Field(
        5, description="characters per shingle, for text without spaces"
    )
    verify: bool = Field(True, description="check candidate pairs by exact Jaccard")
    false_positive_weight: Annotated[float, Field(ge=0.0, le=1.0)] = Field(
        0.2,
        description="weight of false positives against false negatives (1 - this) when "
        "choosing bands x rows; low because verify removes false positives",
    )
    related_threshold: Similarity | None = Field(
        None,
        description="also link kept records of different groups this similar; LSH is then "
        "tuned to find pairs from this similarity up (more pairs to verify)",
    )
    seed: Annotated[int, Field(ge=0)] = 1
    batch_records: Annotated[int, Field(ge=1000)] = 50_000

    @model_validator(mode="after")
    def _related_below_threshold(self) -> MinHashConfig:
        _check_related(self.related_threshold, self.threshold)
        if self.related_threshold is not None and not self.verify:
            raise ValueError("related_threshold needs verify: true (exact similarities)")
        return self


class SemanticConfig(Strict):
    """Semantic duplicates by cosine similarity of all-MiniLM-L6-v2 embeddings (faiss)."""

    threshold: Similarity = Field(0.92, description="cosine similarity of a semantic duplicate")
    related_threshold: Similarity | None = Field(
        0.85, description="link kept records of different groups this similar"
    )
    exact_search_max: Annotated[int, Field(ge=1)] = Field(
        20_000, description="up to this many records: exact search; above: k-means partitions"
    )
    partitions: Annotated[int, Field(ge=1)] | None = Field(
        None, description="k-means partitions for large sets (default: about sqrt(records))"
    )
    batch_size: Annotated[int, Field(ge=1)] = 64

    @model_validator(mode="after")
    def _related_below_threshold(self) -> SemanticConfig:
        _check_related(self.related_threshold, self.threshold)
        return self


def _check_related(related: float | None, threshold: float) -> None:
    if related is not None and related >= threshold:
        raise ValueError(
            f"related_threshold ({related}) must be below threshold ({threshold}); "
            "leave it out to link no related records"
        )


def _switch(value: Any) -> Any:
    """`true` turns a method on with its defaults, `false` turns it off."""
    if value is True:
        return {}
    if value is False:
        return None
    return value


QUALITY_PROFILES = ("prose", "short_messages", "code", "none")


class LanguageConfig(Strict):
    allow: list[Annotated[str, Field(pattern=r"^[a-z]{2,3}$")]] | None = Field(
        None, description="ISO 639-1 codes to keep, e.g. [en]; null: any (recorded, not filtered)"
    )
    min_confidence: Annotated[float, Field(ge=0, le=1)] = 0.5
    min_words: Annotated[int, Field(ge=0)] = Field(
        5, description="shorter texts are not judged by their language"
    )


class QualityConfig(Strict):
    """Per source a filter profile: prose (Gopher, C4, FineWeb, encoding, language),
    short_messages (encoding, lorem ipsum, language: never a drop for being short), code
    (encoding), none. Sources not named get `default_profile`."""

    default_profile: Literal[QUALITY_PROFILES] = "short_messages"
    profiles: dict[str, Literal[QUALITY_PROFILES]] = {}
    language: LanguageConfig = LanguageConfig()
    gopher: GopherThresholds = GopherThresholds()
    lines: LineRules = LineRules()


class BoilerplateConfig(Strict):
    """Segment-level exact dedup across documents (pipeline/boilerplate.py): a segment (a
    paragraph, or a line) found in more than `max_documents` distinct documents is removed
    from every document; a document left empty is dropped with reason `only_boilerplate`."""

    segment: Literal["paragraph", "line"] = Field(
        "paragraph", description="paragraph: text between blank lines; line: each line"
    )
    max_documents: Annotated[int, Field(ge=1)] = Field(
        20, description="a segment in more distinct documents than this is boilerplate"
    )
    min_chars: Annotated[int, Field(ge=1)] = Field(
        20, description="shorter segments (greetings, bullets) are never boilerplate"
    )


class DedupConfig(Strict):
    exact: bool = True
    minhash: MinHashConfig | None = MinHashConfig()
    semantic: SemanticConfig | None = Field(
        None, description="off by default: embedding costs about 4 ms per record on a CPU"
    )
    keep: list[Literal[KEEP_RULES]] = [
        "earliest_timestamp",
        "most_permissive_license",
        "longest_text",
        "lowest_record_id",
    ]
    label_conflicts: Literal["review", "majority"] = Field(
        "review",
        description="a duplicate cluster whose members carry different labels: review queues "
        "it (reason label_conflict); majority keeps the most common label (ties: review)",
    )
    boilerplate: BoilerplateConfig | None = BoilerplateConfig()

    @field_validator("minhash", "semantic", "boilerplate", mode="before")
    @classmethod
    def _on_off(cls, value: Any) -> Any:
        return _switch(value)


class SplitConfig(Strict):
    """How records are assigned to train, validation and test (pipeline/split.py).

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


ContaminationAction = Literal["drop", "quarantine"]


class NgramCheck(Strict):
    """Shared word n-grams after lower-casing and removing punctuation and extra spaces."""

    n: Annotated[int, Field(ge=2, le=64)] = Field(13, description="words per n-gram (GPT-3: 13)")
    short_n: Annotated[int, Field(ge=2, le=64)] = Field(
        5, description="n for items shorter than n words; items shorter than this are skipped"
    )
    short_fraction: Annotated[float, Field(gt=0.0, le=1.0)] = Field(
        0.8, description="share of a short item's n-grams a record must hold"
    )
    action: ContaminationAction = "drop"

    @model_validator(mode="after")
    def _short_below_n(self) -> NgramCheck:
        if self.short_n > self.n:
            raise ValueError(f"short_n ({self.short_n}) must not exceed n ({self.n})")
        return self


class MinHashCheck(Strict):
    """Estimated Jaccard similarity of word-shingle sets, confirmed exactly."""

    threshold: Similarity = 0.8
    num_perm: Annotated[int, Field(ge=16, le=1024)] = 128
    ngram: Annotated[int, Field(ge=1, le=32)] = 5
    seed: Annotated[int, Field(ge=0)] = 1
    action: ContaminationAction = "quarantine"


class EmbeddingCheck(Strict):
    """Cosine similarity of all-MiniLM-L6-v2 embeddings: paraphrase and reformatting."""

    threshold: Similarity = 0.85
    batch_size: Annotated[int, Field(ge=1)] = 64
    action: ContaminationAction = "quarantine"


class ContaminationMethods(Strict):
    exact: ContaminationAction | None = "drop"
    ngram: NgramCheck | None = NgramCheck()
    minhash: MinHashCheck | None = MinHashCheck()
    embedding: EmbeddingCheck | None = Field(
        None, description="off by default: embedding costs about 4 ms per record on a CPU"
    )

    @field_validator("exact", mode="before")
    @classmethod
    def _exact_on_off(cls, value: Any) -> Any:
        return {True: "drop", False: None}.get(value, value) if isinstance(value, bool) else value

    @field_validator("ngram", "minhash", "embedding", mode="before")
    @classmethod
    def _on_off(cls, value: Any) -> Any:
        return _switch(value)


class ContaminationConfig(Strict):
    """Training (and validation) records checked against this run's test split and against
    registered evaluation sets (`thresher eval register`); a match is dropped or quarantined
    with reason `contaminated_eval`."""

    protected: Literal["all"] | list[Annotated[str, Field(pattern=SLUG)]] = Field(
        "all", description="registered evaluation sets to protect, or all of them"
    )
    check: list[Literal["train", "validation"]] = ["train", "validation"]
    against_test: bool = Field(True, description="also check against this run's test split")
    methods: ContaminationMethods = ContaminationMethods()


class PublishConfig(Strict):
    shard_rows: Annotated[int, Field(ge=1)] = 100_000
    location: str | None = Field(
        None,
        description="where versions are stored: a folder or an fsspec URL (file://, memory://, "
        "s3://bucket/prefix with s3fs installed); default: <workdir>/datasets",
    )
    compression: Literal["zstd", "snappy", "gzip", "none"] = "zstd"
    compression_level: int | None = 3


FailAction = Literal["drop", "quarantine"]
PersonalDataAction = Literal["keep", "redact", "quarantine", "drop"]


class LicensePolicy(Strict):
    """Classes in `allow` pass, classes in `quarantine` wait for a reviewer, others are dropped."""

    allow: list[Literal[LICENSE_CLASSES]] = ["permissive", "attribution", "share-alike"]
    quarantine: list[Literal[LICENSE_CLASSES]] = ["unknown"]
    classes: dict[str, Literal[LICENSE_CLASSES]] = Field(
        {},
        description="extra or overriding entries of the license table, e.g. LicenseRef-x: permissive",
    )

    @field_validator("classes")
    @classmethod
    def _single_license_ids(cls, classes: dict[str, str]) -> dict[str, str]:
        for key in classes:
            if not re.fullmatch(r"LicenseRef-[A-Za-z0-9.-]+|[A-Za-z0-9.+-]+", key):
                raise ValueError(
                    f"{key!r} is not one license id: write an SPDX id (Apache-2.0) or "
                    "LicenseRef-<name>"
                )
        return classes

    def conflicts(self) -> list[str]:
        return sorted(set(self.allow) & set(self.quarantine))


class ConsentPolicy(Strict):
    require: list[Literal[CONSENT_BASES]] = [
        "explicit",
        "contract",
        "public-release",
        "legitimate-interest",
    ]
    action: FailAction = "quarantine"


class UsePolicy(Strict):
    """The uses this dataset is for; a source that declares allowed_uses must allow each."""

    require: list[Literal[USES]] = ["training"]
    action: FailAction = "drop"


class SecretsPolicy(Strict):
    action: FailAction = "quarantine"


class PersonalDataPolicy(Strict):
    email: PersonalDataAction = "redact"
    phone: PersonalDataAction = "redact"
    ip_address: PersonalDataAction = "keep"
    credit_card: PersonalDataAction = "quarantine"
    iban: PersonalDataAction = "quarantine"


class PolicyOverride(Strict):
    """Per-source changes; only the keys given replace the run-wide policy's."""

    licenses: LicensePolicy | None = None
    consent: ConsentPolicy | None = None
    uses: UsePolicy | None = None
    secrets: SecretsPolicy | None = None
    personal_data: PersonalDataPolicy | None = None


class PolicyConfig(Strict):
    licenses: LicensePolicy = LicensePolicy()
    consent: ConsentPolicy = ConsentPolicy()
    uses: UsePolicy = UsePolicy()
    secrets: SecretsPolicy = SecretsPolicy()
    personal_data: PersonalDataPolicy = PersonalDataPolicy()
    sources: dict[str, PolicyOverride] = Field({}, description="per-source overrides, by name")

    def for_source(self, name: str) -> PolicyConfig:
        """The policy that applies to one source: its override's keys over the run-wide ones
        (license table entries are added to the run-wide table)."""
        override = self.sources.get(name)
        if override is None:
            return self
        update = {}
        for section in override.model_fields_set:
            given = getattr(override, section)
            if given is not None:
                base = getattr(self, section)
                changed = given.model_dump(exclude_unset=True)
                if section == "licenses" and "classes" in changed:
                    changed["classes"] = {**base.classes, **changed["classes"]}
                update[section] = base.model_copy(update=changed)
        return self.model_copy(update=update)

    @model_validator(mode="after")
    def _no_class_both_allowed_and_quarantined(self) -> PolicyConfig:
        for name in [None, *self.sources]:
            policy = self if name is None else self.for_source(name)
            both = policy.licenses.conflicts()
            if both:
                where = "" if name is None else f" (for source {name}, after its override)"
                raise ValueError(
                    f"a license class cannot be both allowed and quarantined{where}: "
                    f"{', '.join(both)}; list each class in one of allow and quarantine"
                )
        return self


class SyntheticPolicy(Strict):
    """Records of sources declared `synthetic` (pipeline/synthetic.py)."""

    held_out: bool = Field(
        False,
        description="allow synthetic records in validation and test; by default they are "
        "moved to train, or dropped (synthetic_held_out) where moving would leak",
    )
    max_share: dict[Literal[SPLITS], Annotated[float, Field(ge=0, le=1)]] = Field(
        {}, description="most a split's records may be synthetic; the excess is dropped"
    )


AUGMENT_TRANSFORMS = (
    "word_dropout",
    "word_swap",
    "word_insert",
    "char_noise",
    "case",
    "punctuation",
)


class AugmentConfig(Strict):
    """Label-preserving variants of train records (pipeline/augment.py), each checked by its
    MiniLM embedding: kept when within `min_cosine` of its origin and closer to its own
    label's centroid than to any other; otherwise dropped (drifted) or queued (uncertain)."""

    seed: int = 13
    fraction: Annotated[float, Field(gt=0, le=1)] = Field(
        0.1, description="share of labelled train records that get variants"
    )
    variants: Annotated[int, Field(ge=1, le=16)] = Field(1, description="variants per record")
    transforms: list[Literal[AUGMENT_TRANSFORMS]] = Field(
        list(AUGMENT_TRANSFORMS),
        description="each variant draws one, seeded: reordering the list changes the variants",
    )
    strength: Annotated[float, Field(gt=0, le=0.5)] = Field(
        0.1, description="share of words a word, case or punctuation transform touches"
    )
    # bench: at 0.1 every char_noise variant of real SMS drifted below min_cosine 0.85
    char_strength: Annotated[float, Field(gt=0, le=0.5)] = Field(
        0.03, description="share of letters char_noise changes"
    )
    min_cosine: Similarity = Field(0.85, description="cosine to the origin a variant must keep")
    batch_size: Annotated[int, Field(ge=1)] = 64

    @field_validator("transforms")
    @classmethod
    def _some_transform(cls, transforms: list[str]) -> list[str]:
        if not transforms:
            raise ValueError(f"name at least one transform: {', '.join(AUGMENT_TRANSFORMS)}")
        return list(dict.fromkeys(transforms))


class FieldLeakageConfig(Strict):
    """The single-feature check: a metadata field whose values alone predict the label on the
    train split (balanced accuracy, two folds) is reported as a leakage warning."""

    max_accuracy: Annotated[float, Field(gt=0, le=1)] = Field(
        0.95, description="balanced accuracy above which a field is reported as leaking"
    )
    min_records: Annotated[int, Field(ge=2)] = Field(
        20, description="labelled train records with the field needed to judge it"
    )


class RunnerConfig(Strict):
    """Where the per-record stages run, part by part: threads here, or a Dask cluster."""

    kind: Literal["local", "dask"] = "local"
    address: str | None = Field(
        None,
        description="scheduler of an existing Dask cluster (tcp://host:8786); without one, "
        "`dask` starts a temporary cluster on this machine",
    )
    workers: Annotated[int, Field(ge=1)] = Field(
        2, description="threads (local) or Dask workers of a temporary cluster"
    )
    # bench/README.md: each part costs ~0.1 s of governance set-up (plus ~0.2 s on Dask), so
    # parts are large; they bound a worker's memory
    part_rows: Annotated[int, Field(ge=1)] = Field(
        500_000, description="records per part handed to a worker"
    )

    @model_validator(mode="after")
    def _address_needs_dask(self) -> RunnerConfig:
        if self.address and self.kind != "dask":
            raise ValueError("runner.address is for kind: dask")
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
        datetime(1970, 1, 1, tzinfo=UTC), description="no record may be older"
    )
    future_days: Annotated[float, Field(ge=0)] = Field(
        1.0, description="no record may be newer than the run's start plus this many days"
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


class RunConfig(Strict):
    name: Annotated[str, Field(pattern=SLUG, description="dataset name")]
    workdir: str = "./work"
    sources: str | list[SourceDeclaration]
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
    train: TrainConfig | None = None  # the training stage's settings (training/config.py)

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


# Sections of DESIGN.md's run config whose stages are not built yet.
PLANNED_SECTIONS: dict[str, str] = {}

# Settings that change where or how a run happens, what checks it or who reviews it, or what is
# trained on it, not what it publishes.
_NOT_IN_CONFIG_HASH = {"workdir", "runner", "alerts", "gates", "review", "train"}
_SOURCE_FIELDS_NOT_HASHED = {"location", "root", "base_dir"}


def config_hash(cfg: RunConfig) -> str:
    """sha256 of the resolved config without paths, the work folder and runner settings."""
    excluded = dict.fromkeys(_NOT_IN_CONFIG_HASH, True) | {"publish": {"location": True}}
    data = cfg.model_dump(mode="json", exclude=excluded)
    data["sources"] = [
        {key: value for key, value in source.items() if key not in _SOURCE_FIELDS_NOT_HASHED}
        for source in data["sources"]
    ]
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def load_run_config(path: str | Path) -> RunConfig:
    """Load, validate and resolve a run config (and its sources file) from YAML."""
    path = Path(path)
    raw, lines = _read_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: a run config is a mapping with at least 'name' and 'sources'")
    base = path.resolve().parent
    sources = raw.get("sources")
    if isinstance(sources, str):
        sources_path = (base / sources).resolve()
        declared = load_sources(sources_path)
        raw = {**raw, "sources": [source.model_dump() for source in declared]}
    elif isinstance(sources, list):
        raw = {**raw, "sources": [_with_base(item, base) for item in sources]}
    try:
        cfg = RunConfig.model_validate(raw)
    except ValidationError as error:
        raise ConfigError(_explain(error, path, raw, lines)) from None
    declared = [source.name for source in cfg.source_list]
    for section, keyed in (("quality", "profiles"), ("policy", "sources")):
        unknown = [name for name in getattr(getattr(cfg, section), keyed) if name not in declared]
        if unknown:
            line = lines.get((section, keyed, unknown[0]))
            raise ConfigError(
                f"invalid config:\n  {path}:{line}: {section}.{keyed}.{unknown[0]}: no source of "
                f"this name is declared (declared: {', '.join(declared)})"
            )
    trained = cfg.train.sources if cfg.train and cfg.train.sources else []
    unknown = [name for name in trained if name not in declared]
    if unknown:
        line = lines.get(("train", "sources", trained.index(unknown[0])))
        raise ConfigError(
            f"invalid config:\n  {path}:{line}: train.sources: {unknown[0]!r} is not a declared "
            f"source (declared: {', '.join(declared)})"
        )
    _check_features(cfg, path, lines)
    _check_urls(cfg, path)
    workdir = (base / cfg.workdir).resolve()
    update: dict = {"workdir": str(workdir)}
    location = cfg.publish.location
    if location and "://" not in location:
        update["publish"] = cfg.publish.model_copy(
            update={"location": str((base / location).resolve())}
        )
    return cfg.model_copy(update=update)


def _check_features(cfg: RunConfig, path: Path, lines: dict[tuple, int]) -> None:
    """train.features must name metadata fields the trained sources publish."""
    if cfg.train is None or not cfg.train.features:
        return
    trained = [s for s in cfg.source_list if not cfg.train.sources or s.name in cfg.train.sources]
    published = {name for source in trained for name in source.metadata_fields}
    for index, feature in enumerate(cfg.train.features):
        if feature in published:
            continue
        excluded = [s.name for s in trained if feature in s.known_after_outcome]
        if excluded:
            why = (
                f"source {', '.join(excluded)} declares it known_after_outcome, so it is never "
                "published: it would leak the label"
            )
        else:
            why = (
                "no trained source publishes a metadata field of this name (published: "
                f"{', '.join(sorted(published)) or 'none'})"
            )
        line = lines.get(("train", "features", index))
        raise ConfigError(
            f"invalid config:\n  {path}:{line}: train.features: {feature!r}: {why}; remove it "
            "from train.features"
        )


def _check_urls(cfg: RunConfig, path: Path) -> None:
    """A URL whose filesystem package is missing fails now, not after the run's stages."""
    from pipeline.core.storage import check_url

    urls = [(f"{path}: publish.location ", cfg.publish.location)] + [
        (f"{path}: source {source.name!r} location ", pattern)
        for source in cfg.source_list
        for pattern in source.patterns
    ]
    for where, url in urls:
        if url and "://" in url and not url.startswith("file://"):
            check_url(url, where)


def load_sources(path: Path) -> list[SourceDeclaration]:
    """Load a sources file: a YAML list of declarations, or a mapping with a `sources` list."""
    raw, lines = _read_yaml(path)
    items, at = (raw.get("sources"), ("sources",)) if isinstance(raw, dict) else (raw, ())
    if not isinstance(items, list):
        raise ConfigError(f"{path}: a sources file holds a list of source declarations")
    declared = []
    for index, item in enumerate(items):
        try:
            declared.append(SourceDeclaration.model_validate(_with_base(item, path.parent)))
        except ValidationError as error:
            raise ConfigError(_explain(error, path, raw, lines, at + (index,))) from None
    return declared


def _with_base(item: Any, base: Path) -> Any:
    return {**item, "base_dir": str(base)} if isinstance(item, dict) else item


def _read_yaml(path: Path) -> tuple[Any, dict[tuple, int]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    try:
        node = yaml.compose(text)
        return yaml.safe_load(text), _line_numbers(node, ())
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from None
    except ValueError as error:  # YAML reads 2023-02-30 as a date, which does not exist
        line = _impossible_date_line(node)
        where = f"{path}:{line}" if line else str(path)
        raise ConfigError(
            f"{where}: not a real date ({error}); write dates as YYYY-MM-DD"
        ) from None


def _impossible_date_line(node: Any) -> int | None:
    if isinstance(node, yaml.ScalarNode):
        if node.tag == "tag:yaml.org,2002:timestamp":
            try:
                date.fromisoformat(node.value[:10])
            except ValueError:
                return node.start_mark.line + 1
        return None
    children = node.value if isinstance(node, yaml.SequenceNode) else []
    if isinstance(node, yaml.MappingNode):
        children = [value for _, value in node.value]
    return next((line for child in children if (line := _impossible_date_line(child))), None)


def _line_numbers(node: Any, at: tuple) -> dict[tuple, int]:
    """Map each key path of a YAML document to its 1-based line number."""
    found = {at: node.start_mark.line + 1} if node is not None else {}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            found[at + (key.value,)] = key.start_mark.line + 1
            found.update(_line_numbers(value, at + (key.value,)))
    elif isinstance(node, yaml.SequenceNode):
        for index, value in enumerate(node.value):
            found.update(_line_numbers(value, at + (index,)))
    return found


def _explain(error: ValidationError, path: Path, root: Any, lines: dict, at: tuple = ()) -> str:
    """One line per problem: `file:line: section.field (source name): message`."""
    problems = []
    for item in error.errors():
        loc = _document_path(root, at + tuple(item["loc"]))
        if loc is None:  # the error of a union branch the document did not take
            continue
        line = next(
            (lines[loc[:end]] for end in range(len(loc), -1, -1) if loc[:end] in lines), None
        )
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "literal_error":
            message += f" (got {item['input']!r})"
        if item["type"] == "extra_forbidden":
            message = "unknown key (check its spelling and section)"
            if len(loc) == 1 and loc[0] in PLANNED_SECTIONS:
                message = (
                    f"not available in this version: it arrives with {PLANNED_SECTIONS[loc[0]]}"
                )
        where = f"{path}:{line}" if line else str(path)
        problems.append(f"{where}: {_describe(root, loc)}: {message}")
    return "invalid config:\n  " + "\n  ".join(dict.fromkeys(problems))


def _document_path(root: Any, loc: tuple) -> tuple | None:
    """Turn a pydantic error location into a path through the YAML document: drop union
    branch tags (`list[SourceDeclaration]`, `str`); None for the error of a branch the
    document did not take (`sources` given as a list, so its `str` branch is moot)."""
    path, node = [], root
    for part in loc:
        present = (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and part < len(node)
        )
        if present:
            path.append(part)
            node = node[part]
        elif part == "str" and isinstance(node, list | dict):
            return None
        elif isinstance(part, str) and ("[" in part or part == "str"):
            continue
        else:  # a missing or unknown key: name it
            path.append(part)
            node = None
    return tuple(path)


def _describe(root: Any, loc: tuple) -> str:
    words, node = [], root
    for part in loc:
        if isinstance(part, int) and isinstance(node, list):
            node = node[part]
            name = node.get("name") if isinstance(node, dict) else None
            words[-1] = f"{words[-1] if words else 'sources'}[{part}]" + (
                f" ({name})" if name else ""
            )
            if not words:
                words.append(f"sources[{part}]")
        else:
            words.append(str(part))
            node = node.get(part) if isinstance(node, dict) else None
    return ".".join(words) or "config"
