"""Nothing changed, nothing done: whether the latest version of a dataset was built from
exactly what a run would read now.

A run records what it was built from in its folder (`inputs.json`): the config hash, the code
(version, commit, and the uncommitted diff of a dirty checkout), the installed packages, every
source file (size, modification time, content hash; for object stores the ETag), and the
catalog state its decisions read: the version it built on, the deletion requests, the review
decisions, the locked test set, the frozen time cutoffs and the protected evaluation sets.
A later run with the same facts, whose version is still the latest and has its report, has
nothing to do. Files whose size and modification time are unchanged keep their recorded
content hash; the others are hashed again, so touching a file without changing it changes
nothing.
"""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import xxhash

from data_catalog import deletions, eval_sets, review_queue, splits
from data_catalog.catalog import Catalog
from pipeline.config import RunConfig, config_hash
from pipeline.core import storage
from pipeline.core.code_version import code_state
from pipeline.ingest.source_files import source_files
from pipeline.ingest.stage import shown_names

INPUTS_FILE = "inputs.json"
NOT_AN_INPUT = {"runner", "alerts", "train"}  # how and where it runs, who hears, what trains
CHECKOUT = Path(__file__).resolve().parent.parent  # the code's git checkout, when it is one


def fingerprint(
    cfg: RunConfig, catalog: Catalog, previous: dict[str, Any] | None = None
) -> dict[str, Any]:
    """What a run of `cfg` would be built from now; `previous` lends the content hashes of
    files whose size and modification time it recorded."""
    latest = catalog.latest(cfg.name)
    lock = splits.active_lock(catalog, cfg.name)
    protected = cfg.contamination.protected
    registered = eval_sets.registered(catalog)
    return {
        "config_hash": config_hash(cfg),
        # what the hash leaves out but a run's outcome reads: gates, review, where versions go
        "config": _digest(
            json.dumps(
                cfg.model_dump(mode="json", exclude=NOT_AN_INPUT), sort_keys=True, default=str
            )
        ),
        "code": _code(),
        "packages": _packages(),
        "files": _files(cfg, (previous or {}).get("files", [])),
        "latest_version": latest.dataset_hash if latest else None,
        "deletions": _digest(deletions.requests_frame(catalog).write_csv()),
        "review_decisions": _digest(review_queue.decisions_frame(catalog).write_csv()),
        "test_lock": lock.dataset_hash if lock else None,
        "frozen_cutoffs": _cutoffs(catalog, cfg.name),
        "eval_sets": [
            [row["name"], row["path"], row["files"]]
            for row in registered
            if protected == "all" or row["name"] in protected
        ],
    }


def record(run_dir: Path, facts: dict[str, Any], catalog: Catalog, cfg: RunConfig) -> None:
    """Keep what a run that published was built from, as the catalog holds it now: its version
    is the latest one, and cutoffs it froze are part of the state a rerun reads."""
    latest = catalog.latest(cfg.name)
    facts = facts | {
        "latest_version": latest.dataset_hash if latest else None,
        "frozen_cutoffs": _cutoffs(catalog, cfg.name),
    }
    (run_dir / INPUTS_FILE).write_text(json.dumps(facts, indent=1, default=str) + "\n")


def _cutoffs(catalog: Catalog, name: str) -> dict[str, str] | None:
    cutoffs = splits.frozen_cutoffs(catalog, name)
    return {split: when.isoformat() for split, when in cutoffs.items()} if cutoffs else None


def last_built(cfg: RunConfig, catalog: Catalog) -> tuple[Path, dict[str, Any]] | None:
    """The folder and recorded facts of the run that built the dataset's latest version."""
    latest = catalog.latest(cfg.name)
    if latest is None:
        return None
    for run in reversed(catalog.runs(cfg.name)):
        if run["status"] != "succeeded" or run["dataset_hash"] != latest.dataset_hash:
            continue
        run_dir = Path(cfg.workdir) / "runs" / run["run_id"]
        try:
            return run_dir, json.loads((run_dir / INPUTS_FILE).read_text())
        except (OSError, ValueError):
            return None
    return None


def check(cfg: RunConfig, catalog: Catalog) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(the summary of the run that built the latest version, when a run now would read
    exactly what it read, else None; what a run now reads, None when that cannot be known: a
    source matching no file, which the run then reports). A missing report is no change: the
    caller writes it (flows/report.repair_missing_reports)."""
    built = last_built(cfg, catalog)
    try:
        facts = fingerprint(cfg, catalog, built and built[1])
    except Exception:  # noqa: BLE001 — unknowable now (a source gone, a store down): run
        return None, None
    if built is None or differences(built[1], facts):
        return None, facts
    try:
        summary = json.loads((built[0] / "summary.json").read_text())
    except (OSError, ValueError):
        return None, facts
    if not storage.location(summary["paths"]["manifest"]).exists():  # its files were removed
        return None, facts
    return summary | {"created": False}, facts


def differences(recorded: dict[str, Any], now: dict[str, Any]) -> set[str]:
    """The facts that differ; files by their names and contents (a touched file is the same)."""

    def contents(files: list[dict[str, Any]]) -> list[tuple]:
        return [(f["source"], f["name"], f["content"]) for f in files]

    differ = {key for key in now if key != "files" and now[key] != recorded.get(key)}
    if contents(now["files"]) != contents(recorded.get("files", [])):
        differ.add("files")
    return differ


def _files(cfg: RunConfig, recorded: list[dict[str, Any]]) -> list[dict[str, Any]]:
    known = {(f["source"], f["name"], f["size"], f["modified"]): f["content"] for f in recorded}
    files = []
    for source in cfg.source_list:
        listed = source_files(source)
        shown = shown_names([name for _, name in listed])  # a name may hold a credential
        for path, real_name in listed:
            name = shown[real_name]
            stat = path.stat()
            if storage.is_local(path):
                size, modified = stat.st_size, stat.st_mtime_ns
            else:  # an object store's ETag changes with the content
                info = path.fs.info(path.path)
                size, modified = info.get("size"), info.get("ETag") or info.get("mtime")
            content = None if modified is None else known.get((source.name, name, size, modified))
            if content is None:  # new, changed, or no validator to trust (memory://)
                content = _content_hash(path)
            files.append(
                {"source": source.name, "name": name, "size": size, "modified": modified,
                 "content": content}
            )  # fmt: skip
    return files


def _content_hash(path) -> str:
    digest = xxhash.xxh3_128()
    with path.open("rb") as handle:
        while chunk := handle.read(8 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _code() -> dict[str, Any]:
    """The code version, and for a checkout with uncommitted edits their content."""
    return {"version": str(code_state()), "edits": _edits()}


@functools.cache
def _edits() -> str | None:
    """A digest of the checkout's uncommitted edits, the diff and any untracked Python file (a
    second edit must not look like the first); None for a clean one. Read once per process,
    like the code it describes."""
    try:
        if not _git("status", "--porcelain").strip():
            return None
        untracked = _git("ls-files", "--others", "--exclude-standard", "--", "*.py").split()
        digest = hashlib.sha256(_git("diff", "HEAD").encode())
        for name in sorted(untracked):
            digest.update(name.encode() + b"\0" + (CHECKOUT / name).read_bytes())
        return digest.hexdigest()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(CHECKOUT), *args], capture_output=True, text=True, timeout=10,
        check=True,
    ).stdout  # fmt: skip


@functools.cache
def _packages() -> str:
    """A digest of the installed distributions and their versions (the environment's lock):
    those this process started with (it runs the code it loaded then)."""
    installed = sorted(
        f"{dist.metadata['Name']}=={dist.version}" for dist in metadata.distributions()
    )
    return _digest("\n".join(installed))


def _digest(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()
