"""What every config model shares: the strict base (unknown keys rejected, frozen) and a few
constrained types."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

Similarity = Annotated[float, Field(gt=0.0, le=1.0)]


SLUG = r"^[a-z0-9][a-z0-9_.-]*$"


SPLITS = ("train", "validation", "test")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _switch(value: Any) -> Any:
    """`true` turns a method on with its defaults, `false` turns it off."""
    if value is True:
        return {}
    if value is False:
        return None
    return value
