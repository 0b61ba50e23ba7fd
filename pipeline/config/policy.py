"""The `policy:` section: licenses, consent, uses, secrets and personal data, per source too."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from pipeline.config.base import Strict
from pipeline.config.sources import CONSENT_BASES, USES
from pipeline.core.licenses import LICENSE_CLASSES

PersonalDataAction = Literal["keep", "redact", "quarantine", "drop"]


FailAction = Literal["drop", "quarantine"]


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
