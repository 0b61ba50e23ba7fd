"""The run config: typed, strict, explained by file, line, section and field."""

from __future__ import annotations

import pytest
import yaml
from helpers import SMS_SOURCE

from pipeline.config import config_hash, load_run_config
from pipeline.core.errors import ConfigError


def write(path, data) -> str:
    path.write_text(yaml.safe_dump(data, sort_keys=False) if not isinstance(data, str) else data)
    return str(path)


def test_a_sources_file_resolves_relative_to_itself(tmp_path):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cat").mkdir()
    write(tmp_path / "cat" / "sources.yaml", {"sources": [SMS_SOURCE]})
    cfg = load_run_config(
        write(tmp_path / "cfg" / "run.yaml", {"name": "x", "sources": "../cat/sources.yaml"})
    )
    assert cfg.source_list[0].base_dir == str(tmp_path / "cat")
    assert cfg.workdir == str(tmp_path / "cfg" / "work")
    assert cfg.split.fractions == {"train": 0.8, "validation": 0.1, "test": 0.1}


def test_errors_name_file_line_section_source_and_field(tmp_path):
    text = """name: demo
sources:
  - name: sms
    location: x.csv
    format: csvv
    license: CC-BY-4.0
    consent: public-release
    owner: UCI
    colour: red
split:
  fractions: {train: 0.5, validation: 0.1}
publsh: {shard_rows: 10}
"""
    with pytest.raises(ConfigError) as error:
        load_run_config(write(tmp_path / "c.yaml", text))
    message = str(error.value)
    path = tmp_path / "c.yaml"
    assert f"{path}:5: sources[0] (sms).format: Input should be 'jsonl', 'csv'" in message
    assert f"{path}:9: sources[0] (sms).colour: unknown key" in message
    assert f"{path}:11: split.fractions: fractions must add up to 1, they add up to 0.6" in message
    assert f"{path}:12: publsh: unknown key" in message


def test_errors_in_a_sources_file_name_that_file(tmp_path):
    write(
        tmp_path / "s.yaml",
        {"sources": [{**SMS_SOURCE, "consent": "maybe"}, {**SMS_SOURCE, "name": "Bad Name"}]},
    )
    with pytest.raises(
        ConfigError, match=r"s.yaml:\d+: sources\[0\] \(sms\).consent: Input should be 'explicit'"
    ):
        load_run_config(write(tmp_path / "c.yaml", {"name": "x", "sources": "s.yaml"}))


def test_missing_required_fields_and_bad_licenses_are_named(tmp_path):
    source = {k: v for k, v in SMS_SOURCE.items() if k != "owner"} | {"license": "not a license!"}
    with pytest.raises(ConfigError) as error:
        load_run_config(write(tmp_path / "c.yaml", {"name": "x", "sources": [source]}))
    assert "sources[0] (sms).owner: Field required" in str(error.value)
    assert "sources[0] (sms).license: not an SPDX license expression (unexpected '!')" in str(
        error.value
    )


def test_duplicate_source_names_and_missing_files(tmp_path):
    with pytest.raises(ConfigError, match="source names must be unique; repeated: sms"):
        load_run_config(
            write(tmp_path / "c.yaml", {"name": "x", "sources": [SMS_SOURCE, SMS_SOURCE]})
        )
    with pytest.raises(ConfigError, match=r"nope.yaml: no such file"):
        load_run_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_run_config(write(tmp_path / "bad.yaml", "name: [unclosed"))


def test_config_hash_ignores_paths_workdir_and_runner(tmp_path):
    one = load_run_config(
        write(tmp_path / "a.yaml", {"name": "x", "workdir": "w1", "sources": [SMS_SOURCE]})
    )
    moved = {**SMS_SOURCE, "location": "elsewhere/*.jsonl"}
    two = load_run_config(
        write(tmp_path / "b.yaml", {"name": "x", "workdir": "/tmp/w2", "sources": [moved]})
    )
    assert config_hash(one) == config_hash(two)
    three = load_run_config(
        write(tmp_path / "c.yaml", {"name": "x", "sources": [SMS_SOURCE], "split": {"salt": "s"}})
    )
    assert config_hash(three) != config_hash(one)


def test_a_quality_profile_for_an_undeclared_source_is_refused_with_its_line(tmp_path):
    settings = {"name": "x", "sources": [SMS_SOURCE], "quality": {"profiles": {"smss": "prose"}}}
    with pytest.raises(ConfigError, match=r"c.yaml:[0-9]+: quality.profiles.smss: no source"):
        load_run_config(write(tmp_path / "c.yaml", settings))
    with pytest.raises(ConfigError, match=r"quality.profiles.sms"):
        load_run_config(
            write(tmp_path / "d.yaml", {**settings, "quality": {"profiles": {"sms": "poetry"}}})
        )


def test_an_unknown_encoding_is_a_config_error(tmp_path):
    with pytest.raises(
        ConfigError,
        match=r"sources\[0\] \(sms\).encoding: unknown text encoding 'utf-9'",
    ):
        load_run_config(
            write(
                tmp_path / "c.yaml", {"name": "x", "sources": [{**SMS_SOURCE, "encoding": "utf-9"}]}
            )
        )


def test_policy_overrides_merge_per_key_over_the_run_wide_policy(tmp_path):
    policy = {
        "licenses": {"allow": ["permissive"], "quarantine": ["unknown", "attribution"]},
        "personal_data": {"email": "quarantine"},
        "sources": {
            "sms": {
                "licenses": {"allow": ["permissive", "attribution"], "quarantine": []},
                "personal_data": {"phone": "keep"},
            }
        },
    }
    cfg = load_run_config(
        write(tmp_path / "c.yaml", {"name": "x", "sources": [SMS_SOURCE], "policy": policy})
    )
    sms = cfg.policy.for_source("sms")
    assert sms.licenses.allow == ["permissive", "attribution"] and sms.licenses.quarantine == []
    # keys the override leaves out keep the run-wide values, not the defaults
    assert sms.personal_data.email == "quarantine" and sms.personal_data.phone == "keep"
    assert cfg.policy.for_source("other").personal_data.phone == "redact"


def test_an_override_adds_to_the_license_table(tmp_path):
    policy = {
        "licenses": {"classes": {"LicenseRef-a": "permissive"}},
        "sources": {"sms": {"licenses": {"classes": {"LicenseRef-b": "proprietary"}}}},
    }
    cfg = load_run_config(
        write(tmp_path / "c.yaml", {"name": "x", "sources": [SMS_SOURCE], "policy": policy})
    )
    assert cfg.policy.for_source("sms").licenses.classes == {
        "LicenseRef-a": "permissive",
        "LicenseRef-b": "proprietary",
    }


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ({"sources": {"nope": {}}}, r"policy.sources.nope: no source of this name is declared"),
        (
            {"licenses": {"allow": ["unknown"], "quarantine": ["unknown"]}},
            r"both allowed and quarantined: unknown",
        ),
        (
            {"sources": {"sms": {"licenses": {"allow": ["unknown"]}}}},
            r"policy: .*both allowed and quarantined \(for source sms, after its override\): unknown",
        ),
        (
            {"licenses": {"allow": ["free"]}},
            r"c.yaml:[0-9]+: policy.licenses.allow\[0\]: Input should be",
        ),
        (
            {"secrets": {"action": "keep"}},
            r"policy.secrets.action: Input should be 'drop' or 'quarantine'",
        ),
        ({"personal_data": {"passport": "redact"}}, r"policy.personal_data.passport: unknown key"),
    ],
)
def test_policy_errors_are_explained(tmp_path, policy, message):
    with pytest.raises(ConfigError, match=message):
        load_run_config(
            write(tmp_path / "c.yaml", {"name": "x", "sources": [SMS_SOURCE], "policy": policy})
        )


def test_errors_show_the_bad_value_and_license_table_keys_are_checked(tmp_path):
    policy = {"licenses": {"allow": ["sharealike"], "classes": {"Apache 2.0": "permissive"}}}
    with pytest.raises(ConfigError) as error:
        load_run_config(
            write(tmp_path / "c.yaml", {"name": "x", "sources": [SMS_SOURCE], "policy": policy})
        )
    assert "policy.licenses.allow[0]: Input should be" in str(error.value)
    assert "(got 'sharealike')" in str(error.value)
    assert "'Apache 2.0' is not one license id" in str(error.value)


def test_dedup_methods_switch_on_and_off_and_bad_thresholds_are_explained(tmp_path):
    on = load_run_config(
        write(
            tmp_path / "on.yaml",
            {"name": "x", "sources": [SMS_SOURCE], "dedup": {"minhash": False, "semantic": True}},
        )
    )
    assert on.dedup.minhash is None
    assert on.dedup.semantic.threshold == 0.92 and on.dedup.semantic.related_threshold == 0.85
    dedup = {
        "minhash": {"threshold": 0.8, "related_threshold": 0.9},
        "semantic": {"threshold": 1.5},
        "keep": ["newest"],
    }
    with pytest.raises(ConfigError) as error:
        load_run_config(
            write(tmp_path / "bad.yaml", {"name": "x", "sources": [SMS_SOURCE], "dedup": dedup})
        )
    message = str(error.value)
    assert "dedup.minhash: related_threshold (0.9) must be below threshold (0.8)" in message
    assert "dedup.semantic.threshold: Input should be less than or equal to 1" in message
    assert "dedup.keep[0]" in message and "most_permissive_license" in message
    unverified = {"minhash": {"verify": False, "related_threshold": 0.5}}
    with pytest.raises(ConfigError, match="related_threshold needs verify"):
        load_run_config(
            write(tmp_path / "v.yaml", {"name": "x", "sources": [SMS_SOURCE], "dedup": unverified})
        )


def test_split_strategies_take_dates_and_bad_settings_are_explained(tmp_path):
    split = {
        "strategy": "group_time",
        "cutoffs": {"validation": "2023-01-01", "test": "2024-01-01"},
    }
    cfg = load_run_config(
        write(tmp_path / "ok.yaml", {"name": "x", "sources": [SMS_SOURCE], "split": split})
    )
    assert cfg.split.cutoffs["test"].isoformat() == "2024-01-01T00:00:00+00:00"
    assert (cfg.split.anchor, cfg.split.on_conflict) == ("earliest", "drop")
    for split, message in [
        ({"strategy": "time"}, r"split: .*strategy time needs cutoffs"),
        (
            {"strategy": "group", "cutoffs": "quantiles"},
            r"cutoffs need strategy time or group_time",
        ),
        (
            {"strategy": "time", "cutoffs": {"validation": "2024-01-01", "test": "2023-01-01"}},
            r"the validation cutoff must come before the test cutoff",
        ),
        (
            {"strategy": "time", "cutoffs": {"test": "2024-01-01"}},
            r"cutoffs must name exactly the held-out splits with a fraction: validation, test",
        ),
        (
            {"strategy": "time", "cutoffs": "quantiles", "stratify": "label"},
            r"stratify works with strategy group",
        ),
    ]:
        with pytest.raises(ConfigError, match=message):
            load_run_config(
                write(tmp_path / "bad.yaml", {"name": "x", "sources": [SMS_SOURCE], "split": split})
            )


def test_contamination_methods_switch_on_and_off(tmp_path):
    methods = {"exact": False, "ngram": {"n": 8}, "minhash": False, "embedding": True}
    cfg = load_run_config(
        write(
            tmp_path / "c.yaml",
            {
                "name": "x",
                "sources": [SMS_SOURCE],
                "contamination": {"protected": ["humaneval"], "methods": methods},
            },
        )
    )
    checks = cfg.contamination.methods
    assert checks.exact is None and checks.minhash is None
    assert (checks.ngram.n, checks.ngram.short_n, checks.ngram.action) == (8, 5, "drop")
    assert (checks.embedding.threshold, checks.embedding.action) == (0.85, "quarantine")
    assert cfg.contamination.protected == ["humaneval"] and cfg.contamination.against_test
    defaults = load_run_config(write(tmp_path / "d.yaml", {"name": "x", "sources": [SMS_SOURCE]}))
    assert (
        defaults.contamination.protected == "all"
        and defaults.contamination.methods.embedding is None
    )
    with pytest.raises(
        ConfigError, match=r"contamination.methods.ngram: short_n \(9\) must not exceed n \(8\)"
    ):
        load_run_config(
            write(
                tmp_path / "e.yaml",
                {
                    "name": "x",
                    "sources": [SMS_SOURCE],
                    "contamination": {"methods": {"ngram": {"n": 8, "short_n": 9}}},
                },
            )
        )


def test_an_impossible_date_is_named_with_its_line(tmp_path):
    text = (
        "name: x\nsources: []\nsplit:\n  strategy: time\n"
        "  cutoffs: {validation: 2023-02-30, test: 2024-01-01}\n"
    )
    with pytest.raises(ConfigError, match=r"c.yaml:5: not a real date \(day is out of range"):
        load_run_config(write(tmp_path / "c.yaml", text))


BOMB = """name: x
sources: s.yaml
unknown_key:
  a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
""" + "".join(
    f"  {level}: &{level} [{', '.join([f'*{previous}'] * 9)}]\n"
    for previous, level in zip("abcdefgh", "bcdefghi", strict=True)
)


def test_a_yaml_alias_bomb_is_refused_at_once_and_plain_anchors_still_work(tmp_path):
    with pytest.raises(ConfigError, match=r"aliases \(\*name\) expand to 490,329,070 values"):
        load_run_config(write(tmp_path / "bomb.yaml", BOMB))
    source = {**SMS_SOURCE, "location": "*.jsonl"}
    anchored = f"""name: x
sources:
  - &sms {yaml.safe_dump(source, default_flow_style=True).strip()}
  - {{<<: *sms, name: other}}
"""
    cfg = load_run_config(write(tmp_path / "ok.yaml", anchored))
    assert [s.name for s in cfg.source_list] == ["sms", "other"]
    assert cfg.source_list[1].license == SMS_SOURCE["license"]
