"""The run manifest: what a model was trained on, with what, how, and how it did.

`run_manifest.json` sits in the run folder and is registered in the catalog against the
dataset version. It is written when the run starts (status running) and rewritten when it
ends, so a crashed run still says what it was doing.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from pipeline.core.code_version import code_state
from pipeline.core.storage import file_sha256

MANIFEST_FILE = "run_manifest.json"
PACKAGES_FILE = "packages.txt"


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def json_hash(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


# settings that change what a run costs or may spend, not what it trains
NOT_TRAINING = frozenset({"budget", "probe_steps"})


def config_hash(cfg) -> str:
    """The train config's hash, which a resumed run must match; a seed group's runs differ
    in `seed` alone."""
    return json_hash(cfg.model_dump(mode="json", exclude=set(NOT_TRAINING)))


def package_lock(run_dir: Path) -> dict[str, Any]:
    """Every installed distribution as name==version, written beside the manifest and hashed."""
    pins = sorted(
        {f"{dist.metadata['Name'].lower()}=={dist.version}" for dist in metadata.distributions()}
    )
    text = "\n".join(pins) + "\n"
    (run_dir / PACKAGES_FILE).write_text(text)
    return {
        "digest": hashlib.sha256(text.encode()).hexdigest(),
        "packages": len(pins),
        "file": PACKAGES_FILE,
    }


def environment(world_size: int, backend: str | None, device: torch.device) -> dict[str, Any]:
    gpus = (
        [torch.cuda.get_device_name(index) for index in range(torch.cuda.device_count())]
        if device.type == "cuda"
        else []
    )
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        "device": str(device),
        "gpus": gpus,
        "world_size": world_size,
        "backend": backend,
        "command": sys.argv,
    }


def determinism() -> dict[str, Any]:
    return {
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "torch_threads": torch.get_num_threads(),
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
    }


def code() -> dict[str, Any]:
    state = code_state()
    return {"version": state.version, "commit": state.commit, "dirty": state.dirty}


def files_with_hashes(paths: list[Path], root: Path) -> list[dict[str, str]]:
    return [{"path": str(path.relative_to(root)), "sha256": file_sha256(path)} for path in paths]


def _finite(value: Any) -> Any:
    """NaN and infinities as null: strict JSON, readable by jq and JSON.parse."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def strict_json(value: Any, indent: int | None = None) -> str:
    return json.dumps(_finite(value), indent=indent, default=str, allow_nan=False)


def write(run_dir: Path, manifest: dict[str, Any]) -> Path:
    path = run_dir / MANIFEST_FILE
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(strict_json(manifest, indent=2) + "\n")
    os.replace(temporary, path)
    return path
