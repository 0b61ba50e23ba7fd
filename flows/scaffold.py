"""`thresher init`: a working project to start from."""

from __future__ import annotations

import shutil
from pathlib import Path

from pipeline.core.errors import ConfigError

TEMPLATES = Path(__file__).parent / "templates"


def scaffold(directory: Path) -> list[Path]:
    targets = {
        TEMPLATES / "thresher.yaml": directory / "thresher.yaml",
        TEMPLATES / "sources.yaml": directory / "sources.yaml",
        TEMPLATES / "sample.jsonl": directory / "data" / "sample.jsonl",
    }
    existing = [str(target) for target in targets.values() if target.exists()]
    if existing:
        raise ConfigError(f"{', '.join(existing)} already exist; choose an empty folder")
    for template, target in targets.items():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(template, target)
    return list(targets.values())
