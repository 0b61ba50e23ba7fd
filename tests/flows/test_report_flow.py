"""Audit reports end to end: every run writes one, its figures are the ledger's, it stands
alone offline, a failed gate leaves no version and a report naming the failure, and
`thresher catalog diff` compares two versions."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest
import yaml
from helpers import run_json, sms_rows, thresher, write_jsonl

from data_catalog.catalog import Catalog, open_version
from pipeline.config.train import TokenizerConfig
from pipeline.core import ledger
from training.tokenization import load_minilm

pytestmark = pytest.mark.usefixtures("prefect_server")


def test_a_run_writes_a_self_contained_report_whose_figures_are_the_ledgers(curated_sms):
    sms_project, summary = curated_sms
    html_path = Path(summary["paths"]["report"])
    folder = html_path.parent
    assert folder == sms_project.parent / "work" / "reports" / "test-set" / summary["dataset_hash"]
    report = json.loads((folder / "report.json").read_text())

    events = pl.scan_parquet(Path(summary["paths"]["version"]) / "ledger.parquet")
    counts = ledger.check_accounting(events, summary["records_in"])
    assert report["outcomes"] == {"records_in": summary["records_in"], "generated": 0, **counts}
    assert report["reasons"]["dropped"] == ledger.counts_by_reason(events, terminal=True)["dropped"]
    funnel = report["funnel"]
    assert funnel[0]["records"] == summary["records_in"]
    assert funnel[-1]["records"] == counts["published"]
    assert sum(row["removed"] for row in funnel) == counts["dropped"] + counts["quarantined"]
    manifest = json.loads((Path(summary["paths"]["manifest"])).read_text())
    assert {name: s["records"] for name, s in report["splits"].items()} == manifest["split_counts"]
    assert all(s["tokens"] > s["records"] for s in report["splits"].values() if s["records"])
    # counted without transformers, the same tokens as the training tokenizer gives
    tokenizer, record = load_minilm(TokenizerConfig())
    assert report["tokenizer"]["digest"] == record.digest
    for name, frame in open_version(sms_project.parent / "work", "test-set").splits.items():
        texts = frame.select("text").collect()["text"].to_list()
        ids = tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]
        assert report["splits"][name]["tokens"] == sum(map(len, ids)), name
    assert [s["name"] for s in report["sources"]] == ["sms", "changelogs"]
    by_source = {s["name"]: s for s in report["sources"]}
    assert by_source["sms"]["license_class"] == "attribution"
    assert by_source["changelogs"]["license_class"] == "share-alike"
    assert sum(s["records_in"] for s in report["sources"]) == summary["records_in"]
    assert [gate["gate"] for gate in report["gates"]] == ["ingested", "governed", "published"]
    assert all(gate["success"] for gate in report["gates"])
    assert report["lineage"]["dataset_hash"] == summary["dataset_hash"]
    assert report["lineage"]["config_hash"] == manifest["config_hash"]
    assert report["diff"] == {"parent": None}
    exact = summary["dedup"]["exact"]["dropped"]
    assert report["dedup"]["dropped_by_method"]["exact"] == exact
    # how the run went, step by step, as its summary says
    steps = {row["step"]: row for row in report["run_steps"]}
    assert list(steps) == list(summary["steps"])[: len(steps)] and "commit" in steps
    for name in ("govern", "quality", "boilerplate"):
        assert steps[name]["parts"] == summary["steps"][name]["parts"] >= 1
        assert steps[name]["largest_task_mb"] > 50
    assert steps["boilerplate"]["key_partitions"] == steps["boilerplate"]["parts"]
    assert steps["publish"]["records_out"] == counts["published"]

    html = html_path.read_text()
    assert "<script" not in html and "<link" not in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)  # nothing to fetch
    assert html.count('src="data:image/png;base64,') >= 3
    assert f"{counts['published']:,}" in html
    assert '<h2 id="lineage">Lineage and timing</h2>' in html and "key partitions" in html
    # all gates passed: one line, no table of a dozen "ok" rows
    assert "All gates passed" in html and "expect_column_values_to_not_be_null" not in html
    assert '<a href="data_docs/index.html">' in html
    # what the text looks like: every published record in one bin of each histogram
    text = report["text"]
    for name, figures in report["splits"].items():
        if figures["records"]:
            histograms = text["by_split"][name]
            assert sum(histograms["chars"]) == sum(histograms["tokens"]) == figures["records"]
    published_by_source = {s["name"]: s["published"] for s in report["sources"]}
    assert {source: sum(h["chars"]) for source, h in text["by_source"].items()} == {
        source: n for source, n in published_by_source.items() if n
    }
    # languages per source, adding up to the run's language counts
    quality = report["quality"]
    assert set(quality["languages_by_source"]) <= {s["name"] for s in report["sources"]}
    assert (
        sum(sum(c.values()) for c in quality["languages_by_source"].values())
        == sum(quality["languages"].values())
        > 0
    )
    # a few records of each reason, with their evidence
    for action in ("dropped", "quarantined"):
        for reason in report["reasons"].get(action, {}):
            assert 1 <= len(report["reason_examples"][f"{reason} ({action})"]) <= 3
    # why each source lost records, summing to its drops and quarantines
    for source in report["sources"]:
        reasons = report["drops_by_source"].get(source["name"], {})
        assert sum(reasons.values()) == source["dropped"] + source["quarantined"]
    assert (folder / "data_docs" / "index.html").exists()
    assert (folder / "croissant.json").exists() and (folder / "datasheet.md").exists()
    assert (
        json.loads((Path(summary["paths"]["version"]) / "gates.json").read_text())[0]["gate"]
        == "ingested"
    )


def test_a_failed_gate_registers_no_version_and_its_report_says_why(sms_project):
    config = yaml.safe_load(sms_project.read_text())
    config["gates"] = {"max_text_chars": 40}
    sms_project.write_text(yaml.safe_dump(config))
    result = thresher("run", "--config", sms_project)
    assert result.exit_code == 2
    assert "the ingested gate failed 1 expectation(s)" in result.stderr
    assert "expect_column_values_to_be_between on text_chars" in result.stderr
    workdir = sms_project.parent / "work"
    catalog = Catalog.open(workdir)
    assert catalog.versions() == []
    [run] = catalog.runs()
    assert run["status"] == "failed" and "GateFailed" in run["error"]
    report = json.loads((workdir / "runs" / run["run_id"] / "report.json").read_text())
    assert report["kind"] == "failed_run" and report["dataset_hash"] is None
    [gate] = report["gates"]
    [check] = [check for check in gate["checks"] if not check["success"]]
    assert check["columns"] == "text_chars" and check["failed"] > 0
    assert all(example["text_chars"] > 40 for example in check["examples"])
    assert report["outcomes"]["published"] == 0
    html = (workdir / "runs" / run["run_id"] / "report.html").read_text()
    assert "This run failed; no version was registered." in html and "text_chars" in html
    shown = thresher("report", run["run_id"], "--workdir", workdir, "--json")
    assert json.loads(shown.stdout)["kind"] == "failed_run"


def test_report_regenerates_and_catalog_diff_compares_two_versions(sms_project, sms_spam):
    first = run_json(sms_project)
    write_jsonl(sms_project.parent / "data" / "sms-2.jsonl", sms_rows(sms_spam, 600, 700))
    second = run_json(sms_project)
    workdir = sms_project.parent / "work"
    diffed = thresher(
        "catalog", "diff", first["dataset_hash"][:12], second["dataset_hash"][:12],
        "--workdir", workdir, "--json",
    )  # fmt: skip
    assert diffed.exit_code == 0, diffed.stderr
    diff = json.loads(diffed.stdout)
    before = set(pl.read_parquet(Path(first["paths"]["shards"]) / "*/*.parquet")["record_id"])
    after = set(pl.read_parquet(Path(second["paths"]["shards"]) / "*/*.parquet")["record_id"])
    assert (diff["added"], diff["removed"]) == (len(after - before), len(before - after))
    assert diff["added"] > 0 and diff["moved"] == 0
    assert diff["unchanged"] == len(before & after)

    report = json.loads((Path(second["paths"]["report"]).parent / "report.json").read_text())
    assert {k: report["diff"][k] for k in ("parent", "added", "removed", "moved")} == {
        "parent": first["dataset_hash"], "added": diff["added"],
        "removed": diff["removed"], "moved": 0,
    }  # fmt: skip
    regenerated = thresher("report", second["dataset_hash"][:10], "--workdir", workdir, "--json")
    assert regenerated.exit_code == 0, regenerated.stderr
    again = json.loads(regenerated.stdout)
    assert again["outcomes"] == report["outcomes"] and again["splits"] == report["splits"]


def test_a_failed_published_gate_publishes_nothing_and_reports_the_staged_records(
    sms_project, monkeypatch
):
    import expectations.checks as checks

    found = checks.split_overlaps

    def leaking(version, split):  # as if a text had landed in two splits
        overlaps = found(version, split)
        planted = pl.when(pl.col("key") == "content_hash").then(1)
        return overlaps.with_columns(
            planted.otherwise("values_in_several_splits").alias("values_in_several_splits")
        )

    monkeypatch.setattr(checks, "split_overlaps", leaking)
    result = thresher("run", "--config", sms_project)
    assert result.exit_code == 2
    assert "the published gate failed 1 expectation(s)" in result.stderr
    assert "values_in_several_splits: 1 of 4 rows (e.g. key=content_hash" in result.stderr
    workdir = sms_project.parent / "work"
    catalog = Catalog.open(workdir)
    assert catalog.versions() == [] and not list(workdir.glob("datasets/*/*"))
    [run] = catalog.runs()
    report = json.loads((workdir / "runs" / run["run_id"] / "report.json").read_text())
    outcomes = report["outcomes"]
    assert outcomes["published"] == 0 and outcomes["unfinished"] > 0
    assert (
        outcomes["records_in"]
        == outcomes["dropped"] + outcomes["quarantined"] + outcomes["unfinished"]
    )
    last = report["funnel"][-1]  # the staged records got as far as contamination
    assert (last["stage"], last["records"]) == ("contamination", outcomes["unfinished"])
    assert [gate["success"] for gate in report["gates"]] == [True, True, False]


def test_the_report_renders_in_headless_chromium_with_every_section(curated_sms, tmp_path):
    """The page a reviewer opens: rendered by Chromium (no network), every section there in
    the order of the questions it answers, and a screenshot that is not blank."""
    import shutil
    import subprocess

    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("needs Debian's chromium (`make test-services` installs it)")
    _, summary = curated_sms
    page = Path(summary["paths"]["report"]).as_uri()
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000"]
    dom = subprocess.run(
        [chromium, *flags, "--dump-dom", page], capture_output=True, text=True, timeout=120
    ).stdout
    sections = re.findall(r'<h2 id="([a-z]+)">', dom)
    assert sections == [
        "version", "records", "governance", "text", "duplicates", "splits", "labels",
        "contamination", "gates", "lineage",
    ]  # fmt: skip
    assert re.findall(r"<nav>.*?</nav>", dom, re.S)[0].count("<a ") == len(sections)
    screenshot = tmp_path / "report.png"
    subprocess.run(
        [chromium, *flags, "--window-size=1200,3000", f"--screenshot={screenshot}", page],
        capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    from PIL import Image

    image = Image.open(screenshot).convert("L")
    assert image.size == (1200, 3000)
    # charts and tables drawn: many dark pixels, far from a blank page
    dark = sum(image.histogram()[:128])
    assert dark > 20_000


def test_the_stage_sections_of_the_report_are_the_registrys_in_its_order(curated_sms, monkeypatch):
    """A stage names its report section in pipeline/registry.py: the page shows those
    sections in registry order, each once, between the run's own (what is in the version,
    where records went; gates, lineage), and lists them in its table of contents."""
    from pipeline import registry
    from pipeline.report.html import TEMPLATES, render

    _, summary = curated_sms
    report = json.loads((Path(summary["paths"]["report"]).parent / "report.json").read_text())
    anchors = [section.anchor for section in registry.REPORT_SECTIONS]
    assert len(set(anchors)) == len(anchors) == 6
    for anchor in anchors:
        assert (TEMPLATES / "sections" / f"{anchor}.html").is_file()

    def shown(page: str) -> list[str]:
        return re.findall(r'<h2 id="([a-z]+)">', page)

    assert shown(render(report)) == ["version", "records", *anchors, "gates", "lineage"]
    backwards = tuple(reversed(registry.REPORT_SECTIONS))
    monkeypatch.setattr(registry, "REPORT_SECTIONS", backwards)
    page = render(report)
    assert shown(page) == ["version", "records", *reversed(anchors), "gates", "lineage"]
    contents = re.findall(r'<a href="#([a-z]+)">', page)
    assert contents[2:8] == list(reversed(anchors))
    # a section with nothing to show (a failed run has no duplicates, splits, labels or
    # contamination) is neither on the page nor in its contents
    monkeypatch.undo()
    failed = report | dict.fromkeys(["dedup", "splits", "data_quality", "contamination"])
    failed = {key: value for key, value in failed.items() if key not in ("text", "quality")}
    page = render(failed | {"kind": "failed_run", "error": "stopped"})
    assert shown(page) == ["version", "records", "governance", "gates", "lineage"]
    assert re.findall(r'<a href="#([a-z]+)">', page) == shown(page)
