"""The floors of the code, enforced: every import of every module is checked against the
table in README.md ("Architecture"). A layer imports only the layers below it, a stage
package never imports another stage package, and `pipeline` never imports prefect, flows,
training, data_catalog or expectations."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGE_PACKAGES = (
    "ingest", "govern", "quality", "dedup", "split", "contamination", "augment", "publish",
)  # fmt: skip
CONTRACT = ("pipeline.stage", "pipeline.review", "pipeline.leakage")  # beside the registry
VERSION_FORMAT = ("pipeline.publish.version", "pipeline.publish.reader")
FOREIGN = ("prefect", "prefect_dask", "flows", "training", "data_catalog", "expectations")


def floor(module: str) -> str:
    """The floor a module of ours stands on: core, config, text, contract, a stage package
    (`stage:NAME`), report, or the top-level package (data_catalog, expectations, training,
    flows)."""
    parts = module.split(".")
    if parts[0] != "pipeline":
        return parts[0]
    if module in CONTRACT or module == "pipeline":
        return "contract"
    if parts[1] in STAGE_PACKAGES:
        return f"stage:{parts[1]}"
    return parts[1]  # core, config, text, registry, report


# floor -> the floors it may import (its own included)
BELOW = {
    "core": {"core"},
    "config": {"core", "config"},
    "text": {"core", "config", "text"},
    "contract": {"core", "config", "text", "contract"},
    "registry": {"core", "config", "text", "contract", "registry", "stage:*"},
    "report": {"core", "config", "text", "contract", "registry", "report", "stage:*"},
}


def allowed(importer: str, imported: str) -> str | None:
    """None when `importer` may import `imported` (both dotted names of ours), else why not."""
    own, other = floor(importer), floor(imported)
    if own.startswith("stage:"):
        if other == own or other in {"core", "config", "text", "contract"}:
            return None
        if other.startswith("stage:"):
            return "a stage package imports another stage package"
        return f"a stage package imports {other}"
    if own in BELOW:
        if other in BELOW[own] or (other.startswith("stage:") and "stage:*" in BELOW[own]):
            return None
        if other in FOREIGN:
            return f"pipeline imports {other}"
        return f"the {own} floor imports the {other} floor above it"
    if own in ("data_catalog", "expectations", "training"):
        ok = {"core", "config", "text", "contract", "report", own}
        if own == "training":
            ok.add("data_catalog")
        if other in ok or imported in VERSION_FORMAT or imported.startswith(VERSION_FORMAT):
            return None
        if other.startswith("stage:"):
            return f"{own} imports a stage ({imported}): only the version format of publish"
        return f"{own} imports {other}"
    return None  # flows may import anything


def imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, dotted name) of every import of ours in a file, in functions too; `from X
    import name` counts as X.name when that is a module, else X."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                is_module = (root / (full.replace(".", "/") + ".py")).exists() or (
                    root / full.replace(".", "/")
                ).is_dir()
                found.append((node.lineno, full if is_module else node.module))
    ours = ("pipeline", *FOREIGN)
    return [(line, name) for line, name in found if name.split(".")[0] in ours]


def violations(root: Path) -> list[str]:
    problems = []
    for top in ("pipeline", "data_catalog", "expectations", "training"):
        for path in sorted((root / top).rglob("*.py")):
            module = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(
                ".__init__"
            )
            for line, name in imports(path, root):
                why = allowed(module, name)
                if why:
                    problems.append(f"{path.relative_to(root)}:{line}: imports {name}: {why}")
    return problems


def test_every_import_respects_the_floors():
    assert violations(ROOT) == []


def test_a_planted_upward_import_is_named_with_its_file_and_line(tmp_path):
    for folder in ("pipeline/core", "pipeline/dedup", "pipeline/split", "data_catalog"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "pipeline/dedup/near.py").write_text("")
    (tmp_path / "pipeline/core/ledger.py").write_text(
        '"""A core module."""\n\nfrom pipeline.dedup.near import near_dedup\n'
    )
    (tmp_path / "pipeline/split/stage.py").write_text(
        "def split():\n    from pipeline.dedup import near\n"
    )
    (tmp_path / "data_catalog/catalog.py").write_text("import pipeline.split.stage\n")
    (tmp_path / "pipeline/__init__.py").write_text("import prefect\n")
    assert violations(tmp_path) == [
        "pipeline/__init__.py:1: imports prefect: pipeline imports prefect",
        "pipeline/core/ledger.py:3: imports pipeline.dedup.near: "
        "the core floor imports the stage:dedup floor above it",
        "pipeline/split/stage.py:2: imports pipeline.dedup.near: "
        "a stage package imports another stage package",
        "data_catalog/catalog.py:1: imports pipeline.split.stage: "
        "data_catalog imports a stage (pipeline.split.stage): only the version format of publish",
    ]
