"""Source declarations: where the data is, how to read it, and on what terms it is held."""

from __future__ import annotations

import codecs
import os
from datetime import date
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from pipeline.config.base import SLUG, Strict
from pipeline.core.licenses import check_expression

FORMATS = ("jsonl", "csv", "parquet", "text", "debian_changelog")


CONSENT_BASES = ("explicit", "contract", "public-release", "legitimate-interest", "none", "unknown")


USES = ("training", "evaluation", "research", "commercial", "redistribution")


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
    max_text_chars: Annotated[int | None, Field(gt=0)] = Field(
        None, description="longer texts are dropped as text_too_long; default ingest's"
    )
    max_glob_paths: Annotated[int, Field(gt=0)] = Field(
        1_000_000,
        description="folder entries its locations' wildcards may examine: past them, listing "
        "the files stops with an error (a huge tree, or links that lead back into it)",
    )
    max_glob_seconds: Annotated[float, Field(gt=0)] = Field(
        60.0, description="seconds listing its files may take before it stops with an error"
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


class IngestConfig(Strict):
    """Bounds on what one record or one file may cost, enforced as the record is read: a
    record over them is dropped with its reason and location; the rest of the file is read."""

    max_text_chars: Annotated[int, Field(gt=0)] = Field(
        1_000_000,
        description="a longer text is dropped as text_too_long (a source may set its own); "
        "above gates.max_text_chars, such texts pass ingest and fail the gate",
    )
    max_record_bytes: Annotated[int, Field(gt=0)] = Field(
        16 << 20,
        description="a JSON line (or text file) of more bytes is dropped as record_too_large "
        "without being held in memory",
    )
    max_expansion_ratio: Annotated[float, Field(gt=1)] | None = Field(
        None,
        description="a compressed file (.gz, .bz2, .xz, .zst) expanding past this many times "
        "its size (and past 64 MiB) stops the run, naming it: a decompression bomb; default "
        "$THRESHER_MAX_EXPANSION_RATIO or 100",
    )

    repair_encoding: bool = Field(
        True,
        description="repair mojibake and C1 control characters with ftfy (an `edited` event, "
        "encoding_repaired) instead of leaving them for the quality stage to drop",
    )

    def for_source(self, source: SourceDeclaration) -> IngestConfig:
        if source.max_text_chars is None:
            return self
        return self.model_copy(update={"max_text_chars": source.max_text_chars})
