"""The `synthetic:`, `augment:` and `field_leakage:` sections: records of synthetic sources,
checked augmentation of train records, and the single-feature leakage check."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from pipeline.config.base import SPLITS, Similarity, Strict


class SyntheticPolicy(Strict):
    """Records of sources declared `synthetic` (pipeline/augment/synthetic.py)."""

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
    """Label-preserving variants of train records (pipeline/augment/augment.py), each checked by its
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
