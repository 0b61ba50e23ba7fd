"""Nothing changed, nothing done: a rerun whose inputs, config, code, packages and catalog
state are what the latest version was built from does nothing; each of those, changed,
makes the run go on (flows/unchanged.py)."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from importlib import metadata
from pathlib import Path

import yaml
from helpers import SMS_SOURCE, run_json, sms_rows, thresher, write_jsonl, write_project

from data_catalog.catalog import Catalog
from flows import unchanged
from pipeline.config import load_run_config
from pipeline.core import code_version


def _differs(config: Path) -> set[str]:
    """The facts that differ from what the latest version's run recorded; `unknown` when
    the check says changed but no fact differs."""
    cfg = load_run_config(config)
    catalog = Catalog.open(cfg.workdir)
    _, recorded = unchanged.last_built(cfg, catalog)
    summary, now = unchanged.check(cfg, catalog)
    differs = unchanged.differences(recorded, now)
    if summary is None and not differs:
        differs.add("unknown")
    return differs


def test_a_rerun_with_nothing_changed_does_nothing_and_every_input_counts(
    tmp_path, sms_spam, prefect_server, monkeypatch
):
    data = write_jsonl(tmp_path / "data" / "sms-1.jsonl", sms_rows(sms_spam, 0, 300))
    unknown = {
        **SMS_SOURCE,
        "name": "unlicensed",
        "location": "data/other.jsonl",
        "license": "unknown",
    }
    write_jsonl(tmp_path / "data" / "other.jsonl", sms_rows(sms_spam, 200, 203))
    config = write_project(tmp_path, [SMS_SOURCE, unknown])
    workdir = tmp_path / "work"
    first = run_json(config)
    assert first["quarantined"] == 3  # the unknown license: three items for review

    again = thresher("run", "--config", config)
    assert again.exit_code == 0, again.stderr
    assert f"nothing changed since run {first['run_id']}" in again.stdout
    assert len(Catalog.open(workdir).runs()) == 1  # no run started
    with_json = thresher("run", "--config", config, "--json")  # the JSON on stdout, text on stderr
    as_json = json.loads(with_json.stdout)
    assert f"nothing changed since run {first['run_id']}" in with_json.stderr
    assert as_json["unchanged_since"] == first["run_id"]
    assert as_json["dataset_hash"] == first["dataset_hash"]
    assert _differs(config) == set()

    # a file touched but not changed is unchanged; changed content is not, whatever its mtime
    original = data.read_bytes()
    os.utime(data, (1e9, 1e9))
    assert _differs(config) == set()
    stat = data.stat()
    data.write_bytes(original.replace(b"a", b"e", 1))
    os.utime(data, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    assert _differs(config) == {"files"}
    data.write_bytes(original)
    assert _differs(config) == set()

    text = config.read_text()
    edited = yaml.safe_load(text)
    edited["dedup"] = {"minhash": {"threshold": 0.7}}
    config.write_text(yaml.safe_dump(edited))
    assert _differs(config) == {"config_hash", "config"}
    gates = yaml.safe_load(text) | {"gates": {"max_text_chars": 50_000}}  # outside the hash
    config.write_text(yaml.safe_dump(gates))
    assert _differs(config) == {"config"}
    config.write_text(text)

    state = code_version.code_state()
    with monkeypatch.context() as patched:
        patched.setattr(unchanged, "code_state", lambda: replace(state, commit="0" * 40))
        assert _differs(config) == {"code"}
    installed = list(metadata.distributions())
    with monkeypatch.context() as patched:
        patched.setattr(unchanged.metadata, "distributions", lambda: installed[1:])
        unchanged._packages.cache_clear()
        assert _differs(config) == {"packages"}
    unchanged._packages.cache_clear()

    # a missing report (its run killed after the commit) is no change: the rerun writes it
    report = Path(first["paths"]["report"])
    shutil.rmtree(report.parent)
    assert _differs(config) == set()
    again = run_json(config)
    assert again["unchanged_since"] == first["run_id"] and report.is_file()

    # the catalog state a run reads: each change adds to what differs
    items = [
        json.loads(line)
        for line in thresher("review", "list", "-w", workdir, "--json").stdout.splitlines()
    ]
    decided = thresher(
        "review", "approve", items[0]["id"], "--reviewer", "ana", "--note", "ok", "-w", workdir
    )
    assert decided.exit_code == 0, decided.stderr
    assert _differs(config) == {"review_decisions"}
    forgot = thresher("forget", "--source", "unlicensed", "--reason", "asked", "-w", workdir)
    assert forgot.exit_code == 0, forgot.stderr
    assert _differs(config) == {"review_decisions", "deletions"}
    locked = thresher("split", "lock", first["dataset_hash"][:12], "--workdir", workdir)
    assert locked.exit_code == 0, locked.stderr
    assert _differs(config) == {"review_decisions", "deletions", "test_lock"}
    eval_file = write_jsonl(tmp_path / "eval.jsonl", [{"text": "what is the capital of peru"}])
    registered = thresher("eval", "register", "mini", eval_file, "--workdir", workdir)
    assert registered.exit_code == 0, registered.stderr
    assert _differs(config) == {"review_decisions", "deletions", "test_lock", "eval_sets"}

    rerun = run_json(config)  # any change: the pipeline runs as before
    assert "unchanged_since" not in rerun and rerun["run_id"] != first["run_id"]
    assert _differs(config) == set()
    withdrawn = thresher(
        "catalog", "withdraw", rerun["dataset_hash"][:12], "--reason", "x", "-w", workdir
    )
    assert withdrawn.exit_code == 0, withdrawn.stderr
    cfg = load_run_config(config)
    assert unchanged.check(cfg, Catalog.open(cfg.workdir))[0] is None  # not the latest now


def test_the_flow_itself_returns_the_latest_summary_when_nothing_changed(curated_sms):
    """A deployment's scheduled run with nothing new starts no run (and writes nothing)."""
    from flows.curate import curate

    config, summary = curated_sms
    result = curate(str(config))
    assert result["unchanged_since"] == summary["run_id"]
    assert result["dataset_hash"] == summary["dataset_hash"]
    cfg = load_run_config(config)
    assert [run["run_id"] for run in Catalog.open(cfg.workdir).runs()] == [summary["run_id"]]
