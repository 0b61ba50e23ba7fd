"""Credentials in a run config: none may be stored, and none is shown.

A config is stored whole (beside each version's manifest, in run folders and the catalog,
quoted by reports and cards), except its `alerts` and `review` sections, which never leave
the work folder. A credential in a stored value, such as an owner written as a connection
string, is refused before anything runs; a message that quotes a config value or a file
name has every credential in it masked.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline.config import RunConfig
from pipeline.core.errors import ConfigError
from pipeline.publish.version import NOT_PUBLISHED
from pipeline.text.secrets import find_secrets, masked_secrets


def stored_values(data: Any, at: str = "") -> dict[str, str]:
    """Every string in `data` by its path, e.g. `sources[0].owner`."""
    if isinstance(data, str):
        return {at: data}
    if isinstance(data, dict):
        items = ((f"{at}.{key}" if at else str(key), value) for key, value in data.items())
    elif isinstance(data, list):
        items = ((f"{at}[{index}]", value) for index, value in enumerate(data))
    else:
        return {}
    return {path: text for key, value in items for path, text in stored_values(value, key).items()}


def refuse_stored_credentials(cfg: RunConfig, config_path: Any = "the config") -> None:
    """ConfigError naming each stored config value that holds a credential (masked)."""
    values = stored_values(cfg.model_dump(mode="json", exclude=NOT_PUBLISHED))
    paths, texts = list(values), pl.Series(list(values.values()), dtype=pl.String)
    findings = find_secrets(texts)
    if findings.height == 0:
        return
    shown = masked_secrets(texts)
    problems = [
        f"{paths[index]} holds a credential ({kind}): {shown[index]!r}"
        for index, kind in findings.select("index", "type").unique(maintain_order=True).rows()
    ]
    raise ConfigError(
        f"{config_path}: " + "; ".join(problems) + ". Config values are stored with every "
        "version (manifest, catalog, reports, cards): remove the credential; a source reads "
        "credentials from the environment (e.g. AWS_ACCESS_KEY_ID), alerts from their own "
        "section, which is never stored"
    )
