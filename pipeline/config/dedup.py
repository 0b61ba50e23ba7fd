"""The `dedup:` section: exact, MinHash near and semantic dedup, boilerplate segments, the
keep rule and label conflicts."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from pipeline.config.base import Similarity, Strict, _switch

KEEP_RULES = ("earliest_timestamp", "most_permissive_license", "longest_text", "lowest_record_id")


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


class BoilerplateConfig(Strict):
    """Segment-level exact dedup across documents (pipeline/dedup/boilerplate.py): a segment (a
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
