"""The `contamination:` section: what is checked against the test split and registered
evaluation sets, by which methods, and what a match does."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from pipeline.config.base import SLUG, Similarity, Strict, _switch

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
    min_coverage: Annotated[float, Field(ge=0.0, le=1.0)] = Field(
        0.2,
        description="share of an item's words the n-grams a record shares with it must cover "
        "(Llama 2 calls an item with under 20% of its tokens covered clean); 0: one shared "
        "n-gram is enough (GPT-3's rule)",
    )
    ignore_common_in_training: Annotated[int, Field(ge=1)] | None = Field(
        10,
        description="an n-gram found in more than this many checked records is boilerplate, "
        "not evidence (GPT-3 ignored 13-grams frequent in its training data); null: none is",
    )
    whole_copy: Annotated[float, Field(gt=0.0, le=1.0)] | None = Field(
        0.8,
        description="a record whose shared n-grams cover this share of an item, common ones "
        "included, matches it however many records hold them: a copy is contamination; null: "
        "common n-grams never count",
    )
    ignore_common_in_items: Annotated[int, Field(ge=1)] | None = Field(
        10,
        description="an n-gram held by more than this many items of one protected set (or of "
        "the test split) is boilerplate, not evidence; null: none is",
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
