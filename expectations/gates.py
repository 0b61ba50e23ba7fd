"""Run the Great Expectations suites in expectations/suites/ as gates.

A run keeps a Great Expectations file project in `<run folder>/gx`: the suites, every
validation result and the Data Docs built from them. A gate validates frames that never
hold record text (only lengths, classes, counts and ids), so a result, an example or a
Data Docs page cannot show a secret. Results are summed over batches; a gate fails when
any expectation fails, and `GateFailed` names the expectation, how many rows failed and a
few of them.
"""

from __future__ import annotations

import functools
import json
import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.core.errors import DataError

SUITES_DIR = Path(__file__).parent / "suites"
GATES = ("ingested", "governed", "published")
EXAMPLES = 5


class GateFailed(DataError):
    def __init__(self, result: GateResult, report: Path | None = None):
        failed = [check for check in result.checks if not check["success"]]
        lines = [f"the {result.gate} gate failed {len(failed)} expectation(s):"]
        for check in failed:
            examples = "; ".join(_example(example) for example in check["examples"])
            outcome = (
                f"could not run: {check['error']}"
                if check.get("error")
                else f"{check['failed']} of {check['checked']} rows"
                + (f" (e.g. {examples})" if examples else "")
            )
            lines.append(
                f"  {check['suite']}: {check['expectation']} on {check['columns']}: {outcome}"
            )
        lines.append(
            "no version was registered; fix the data or the bounds under `gates:` in the run "
            "config" + (f", and see {report}" if report else "")
        )
        super().__init__("\n".join(lines))
        self.result = result


def _example(example: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in example.items())


@dataclass
class GateResult:
    gate: str
    checks: list[dict[str, Any]] = field(default_factory=list)
    batches: int = 0
    skipped: bool = False

    @property
    def success(self) -> bool:
        return all(check["success"] for check in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "gate": self.gate,
            "success": self.success,
            "skipped": self.skipped,
            "batches": self.batches,
            "checks": self.checks,
        }


def load_suite(name: str) -> dict[str, Any]:
    return json.loads((SUITES_DIR / f"{name}.json").read_text())


def suites_of(gate: str) -> list[str]:
    return sorted(
        path.stem
        for path in SUITES_DIR.glob("*.json")
        if json.loads(path.read_text())["meta"]["thresher"]["gate"] == gate
    )


class GateProject:
    """A Great Expectations file project holding one run's suites, results and Data Docs."""

    def __init__(self, folder: Path):
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        logging.getLogger("great_expectations").setLevel(logging.ERROR)
        folder.mkdir(parents=True, exist_ok=True)
        self.context = gx.get_context(mode="file", project_root_dir=str(folder))
        self.context.variables.progress_bars = ProgressBarsConfig(globally=False)
        self.folder = folder

    @classmethod
    @functools.lru_cache(maxsize=2)
    def of(cls, folder: Path) -> GateProject:
        """The project of a run folder, opened once per process: the gates of a run and its
        report share it (opening one reads every file of the project again, about 0.2 s)."""
        return cls(folder)

    def validate(
        self, suite_name: str, batches: Iterable[Any], parameters: dict[str, Any] | None = None
    ) -> tuple[list[dict[str, Any]], int]:
        """Validate pandas frames against one suite; return its checks summed over the batches."""
        definition = self._definition(suite_name)
        index = load_suite(suite_name)["meta"]["thresher"]["index"]
        result_format = {
            "result_format": "SUMMARY",
            "unexpected_index_column_names": index,
            "partial_unexpected_count": EXAMPLES,
        }
        checks: list[dict[str, Any]] = []
        count = 0
        for batch in batches:
            count += 1
            outcome = definition.run(
                batch_parameters={"dataframe": batch},
                expectation_parameters=parameters or {},
                result_format=result_format,
            )
            found = [_check(suite_name, result) for result in outcome.results]
            checks = (
                found if not checks else [_add(a, b) for a, b in zip(checks, found, strict=True)]
            )
        return checks, count

    def _definition(self, suite_name: str):
        import great_expectations as gx
        from great_expectations.expectations.expectation_configuration import (
            ExpectationConfiguration,
        )

        context = self.context
        if suite_name in {made.name for made in context.validation_definitions.all()}:
            return context.validation_definitions.get(suite_name)
        declared = load_suite(suite_name)
        suite = context.suites.add(
            gx.ExpectationSuite(
                name=suite_name,
                expectations=[
                    ExpectationConfiguration(**entry).to_domain_obj()
                    for entry in declared["expectations"]
                ],
                meta=declared["meta"],
            )
        )
        return context.validation_definitions.add(
            gx.ValidationDefinition(name=suite_name, data=self._records(), suite=suite)
        )

    def _records(self):
        """The batch every suite validates: one dataframe asset shared by the suites (each
        asset added rewrites the project's config file, about 50 ms)."""
        context = self.context
        sources = context.data_sources.all()
        if "thresher" in sources:
            return sources["thresher"].get_asset("records").get_batch_definition("records")
        asset = context.data_sources.add_pandas("thresher").add_dataframe_asset("records")
        return asset.add_batch_definition_whole_dataframe("records")

    def build_docs(self) -> Path:
        _share_compiled_templates()
        self.context.build_data_docs()
        return self.folder / "gx" / "uncommitted" / "data_docs" / "local_site"


@functools.cache
def _share_compiled_templates() -> None:
    """GX renders every Data Docs block with a new jinja Environment, which compiles each of
    its templates again: 55 compiles, half of the half second a run's Data Docs took. One
    bytecode cache for the process keeps each template's compiled code (jinja checks it
    against the template's source)."""
    import jinja2
    from great_expectations.render.view import view

    class CompiledTemplates(jinja2.BytecodeCache):
        def __init__(self) -> None:
            self.codes: dict[str, bytes] = {}

        def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            if bucket.key in self.codes:
                bucket.bytecode_from_string(self.codes[bucket.key])

        def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            self.codes[bucket.key] = bucket.bytecode_to_string()

    compiled, init = CompiledTemplates(), view.DefaultJinjaView.__init__

    def init_sharing(self, *args, **kwargs) -> None:
        init(self, *args, **kwargs)
        self.env.bytecode_cache = compiled

    view.DefaultJinjaView.__init__ = init_sharing


def _check(suite: str, result) -> dict[str, Any]:
    config = result.expectation_config
    kwargs = config.kwargs
    columns = [kwargs[key] for key in ("column", "column_A", "column_B") if key in kwargs]
    found = result.result or {}
    examples = [  # the row's index columns first, then the checked values
        {key: _plain(entry[key]) for key in sorted(entry, key=lambda key: key in columns)}
        for entry in (found.get("partial_unexpected_index_list") or [])[:EXAMPLES]
    ]
    error = _exception_message(result.exception_info or {})
    return {
        "suite": suite,
        "expectation": config.type,
        "columns": ", ".join(columns),
        "success": bool(result.success),
        "checked": int(found.get("element_count") or 0),
        "failed": int(found.get("unexpected_count") or 0),
        "examples": examples,
        **({"error": error} if error else {}),
    }


def _exception_message(info: dict[str, Any]) -> str | None:
    """GX nests exception details by metric: {metric id: {"exception_message": ...}}."""
    if info.get("exception_message"):
        return info["exception_message"]
    found = [entry.get("exception_message") for entry in info.values() if isinstance(entry, dict)]
    return "; ".join(message for message in found if message) or None


def _add(total: dict[str, Any], batch: dict[str, Any]) -> dict[str, Any]:
    return {
        **total,
        "success": total["success"] and batch["success"],
        "checked": total["checked"] + batch["checked"],
        "failed": total["failed"] + batch["failed"],
        "examples": (total["examples"] + batch["examples"])[:EXAMPLES],
    }


def _plain(value: Any) -> Any:
    """numpy scalars and timestamps as plain JSON values."""
    if isinstance(value, float) and math.isnan(value):  # pandas' missing value
        return None
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if hasattr(value, "item"):
        return value.item()
    return str(value)
