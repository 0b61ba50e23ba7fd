"""`make demo` end to end: real data, the embedded defaults, governance visible in the result."""

from __future__ import annotations

import polars as pl
import pytest

from data_catalog.catalog import open_version
from flows.demo import run_demo

pytestmark = pytest.mark.usefixtures("prefect_server")


def test_the_demo_publishes_sms_and_changelogs_and_keeps_research_only_data_out(tmp_path):
    summary = run_demo(tmp_path / "demo")
    assert summary["created"]
    # TREC is free for research use only: the default policy keeps every question out
    assert summary["reasons"]["dropped"]["license_not_allowed"] == 5382
    assert (
        summary["published"] + summary["dropped"] + summary["quarantined"]
        == (summary["records_in"])
    )
    version = open_version(tmp_path / "demo" / "work", "thresher-demo")
    published = pl.concat([frame.collect() for frame in version.splits.values()])
    assert set(published["source"]) == {"sms-spam", "debian-changelogs"}
    held = {source["name"]: source["records"] for source in version.manifest["sources"]}
    assert held["trec-questions"] == 0  # declared, and listed as contributing nothing
    assert held["sms-spam"] + held["debian-changelogs"] == published.height
    changelogs = published.filter(pl.col("source") == "debian-changelogs")
    # maintainers' addresses group the entries, as pseudonyms
    assert changelogs["group"].str.starts_with("<EMAIL:").all()
    assert not published["text"].str.contains(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+\.[a-z]{2,}").any()
    assert published.filter(pl.col("text").str.contains("<PHONE>")).height > 100
