"""Loading a run config from YAML: sources files, paths resolved against the file that
declared them, line numbers for every error, and checks that need the whole config."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from pipeline.config.explain import _explain
from pipeline.config.run import RunConfig
from pipeline.config.sources import SourceDeclaration
from pipeline.core.errors import ConfigError


def load_run_config(path: str | Path) -> RunConfig:
    """Load, validate and resolve a run config (and its sources file) from YAML."""
    path = Path(path)
    raw, lines = _read_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: a run config is a mapping with at least 'name' and 'sources'")
    base = path.resolve().parent
    sources = raw.get("sources")
    if isinstance(sources, str):
        sources_path = (base / sources).resolve()
        declared = load_sources(sources_path)
        raw = {**raw, "sources": [source.model_dump() for source in declared]}
    elif isinstance(sources, list):
        raw = {**raw, "sources": [_with_base(item, base) for item in sources]}
    try:
        cfg = RunConfig.model_validate(raw)
    except ValidationError as error:
        raise ConfigError(_explain(error, path, raw, lines)) from None
    declared = [source.name for source in cfg.source_list]
    for section, keyed in (("quality", "profiles"), ("policy", "sources")):
        unknown = [name for name in getattr(getattr(cfg, section), keyed) if name not in declared]
        if unknown:
            line = lines.get((section, keyed, unknown[0]))
            raise ConfigError(
                f"invalid config:\n  {path}:{line}: {section}.{keyed}.{unknown[0]}: no source of "
                f"this name is declared (declared: {', '.join(declared)})"
            )
    trained = cfg.train.sources if cfg.train and cfg.train.sources else []
    unknown = [name for name in trained if name not in declared]
    if unknown:
        line = lines.get(("train", "sources", trained.index(unknown[0])))
        raise ConfigError(
            f"invalid config:\n  {path}:{line}: train.sources: {unknown[0]!r} is not a declared "
            f"source (declared: {', '.join(declared)})"
        )
    _check_features(cfg, path, lines)
    _check_urls(cfg, path)
    workdir = (base / cfg.workdir).resolve()
    update: dict = {"workdir": str(workdir)}
    location = cfg.publish.location
    if location and "://" not in location:
        update["publish"] = cfg.publish.model_copy(
            update={"location": str((base / location).resolve())}
        )
    return cfg.model_copy(update=update)


def _check_features(cfg: RunConfig, path: Path, lines: dict[tuple, int]) -> None:
    """train.features must name metadata fields the trained sources publish."""
    if cfg.train is None or not cfg.train.features:
        return
    trained = [s for s in cfg.source_list if not cfg.train.sources or s.name in cfg.train.sources]
    published = {name for source in trained for name in source.metadata_fields}
    for index, feature in enumerate(cfg.train.features):
        if feature in published:
            continue
        excluded = [s.name for s in trained if feature in s.known_after_outcome]
        if excluded:
            why = (
                f"source {', '.join(excluded)} declares it known_after_outcome, so it is never "
                "published: it would leak the label"
            )
        else:
            why = (
                "no trained source publishes a metadata field of this name (published: "
                f"{', '.join(sorted(published)) or 'none'})"
            )
        line = lines.get(("train", "features", index))
        raise ConfigError(
            f"invalid config:\n  {path}:{line}: train.features: {feature!r}: {why}; remove it "
            "from train.features"
        )


def _check_urls(cfg: RunConfig, path: Path) -> None:
    """A URL whose filesystem package is missing fails now, not after the run's stages."""
    from pipeline.core.storage import check_url

    urls = [(f"{path}: publish.location ", cfg.publish.location)] + [
        (f"{path}: source {source.name!r} location ", pattern)
        for source in cfg.source_list
        for pattern in source.patterns
    ]
    for where, url in urls:
        if url and "://" in url and not url.startswith("file://"):
            check_url(url, where)


def load_sources(path: Path) -> list[SourceDeclaration]:
    """Load a sources file: a YAML list of declarations, or a mapping with a `sources` list."""
    raw, lines = _read_yaml(path)
    items, at = (raw.get("sources"), ("sources",)) if isinstance(raw, dict) else (raw, ())
    if not isinstance(items, list):
        raise ConfigError(f"{path}: a sources file holds a list of source declarations")
    declared = []
    for index, item in enumerate(items):
        try:
            declared.append(SourceDeclaration.model_validate(_with_base(item, path.parent)))
        except ValidationError as error:
            raise ConfigError(_explain(error, path, raw, lines, at + (index,))) from None
    return declared


def _with_base(item: Any, base: Path) -> Any:
    return {**item, "base_dir": str(base)} if isinstance(item, dict) else item


# A config is read whole and every value of it visited: bound both, so that a hostile file
# (a YAML alias bomb, "billion laughs", expands to 10^9 values from a few lines) is refused
# at once instead of exhausting memory.
MAX_CONFIG_BYTES = 16 << 20
MAX_CONFIG_VALUES = 1_000_000  # scalars, lists and mappings, counting each alias expanded


def _read_yaml(path: Path) -> tuple[Any, dict[tuple, int]]:
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigError(
                f"{path}: {path.stat().st_size:,} bytes, more than a config may hold "
                f"({MAX_CONFIG_BYTES:,}); is it the right file?"
            )
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not UTF-8 text ({error}); save it as UTF-8") from None
    try:
        node = yaml.compose(text)
        _check_expanded_size(path, node)
        return yaml.safe_load(text), _line_numbers(node, ())
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from None
    except ValueError as error:  # YAML reads 2023-02-30 as a date, which does not exist
        line = _impossible_date_line(node)
        where = f"{path}:{line}" if line else str(path)
        raise ConfigError(
            f"{where}: not a real date ({error}); write dates as YYYY-MM-DD"
        ) from None


def _check_expanded_size(path: Path, root: Any) -> None:
    """Count the values of the document as if every alias were written out; memoized by
    node, so the count itself costs one visit per distinct node."""
    sizes: dict[int, int] = {}

    def size(node: Any) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        sizes[id(node)] = 1  # a recursive alias counts once rather than loop
        children: list = []
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        sizes[id(node)] = total = 1 + sum(size(child) for child in children)
        return total

    if root is not None and size(root) > MAX_CONFIG_VALUES:
        raise ConfigError(
            f"{path}: its aliases (*name) expand to {size(root):,} values, more than a config "
            f"may hold ({MAX_CONFIG_VALUES:,}): a YAML alias bomb? write the values out, or "
            "use fewer nested aliases"
        )


def _impossible_date_line(node: Any) -> int | None:
    if isinstance(node, yaml.ScalarNode):
        if node.tag == "tag:yaml.org,2002:timestamp":
            try:
                date.fromisoformat(node.value[:10])
            except ValueError:
                return node.start_mark.line + 1
        return None
    children = node.value if isinstance(node, yaml.SequenceNode) else []
    if isinstance(node, yaml.MappingNode):
        children = [value for _, value in node.value]
    return next((line for child in children if (line := _impossible_date_line(child))), None)


def _line_numbers(node: Any, at: tuple) -> dict[tuple, int]:
    """Map each key path of a YAML document to its 1-based line number."""
    found = {at: node.start_mark.line + 1} if node is not None else {}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            found[at + (key.value,)] = key.start_mark.line + 1
            found.update(_line_numbers(value, at + (key.value,)))
    elif isinstance(node, yaml.SequenceNode):
        for index, value in enumerate(node.value):
            found.update(_line_numbers(value, at + (index,)))
    return found
