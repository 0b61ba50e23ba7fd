"""Fault suite, tampering: the dataset hash is the gate. An attacker who rewrites a shard and
brings the manifest's lines about it up to date, or edits only the manifest, or rewrites an
export together with its own manifest, is refused by every reader: open_version, read_version
(with the hash asked for), export in each format, training, VerifiedParquetDataset and
`thresher catalog verify`, each naming the hash asked for and the one the content gives."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parents[1] / "training"))
import trainkit  # noqa: E402

from data_catalog import open_version  # noqa: E402
from data_catalog.catalog import Catalog  # noqa: E402
from flows.cli import app  # noqa: E402
from pipeline.core.errors import DataError  # noqa: E402
from pipeline.core.storage import file_sha256  # noqa: E402
from pipeline.publish.reader import read_version, recomputed_hash  # noqa: E402
from training import export as exporting  # noqa: E402
from training.parquet_dataset import VerifiedParquetDataset  # noqa: E402
from training.readers import EXPORT_MANIFEST, TokenShards, load_hf_export  # noqa: E402
from training.run import train  # noqa: E402


@pytest.fixture(scope="module")
def published(tmp_path_factory, sms_spam) -> trainkit.Project:
    """120 SMS messages published once; each test tampers with a copy."""
    return trainkit.sms_project(tmp_path_factory.mktemp("tamper"), sms_spam, 120, trainkit.tiny())


@pytest.fixture
def project(published, tmp_path) -> trainkit.Project:
    root = Path(shutil.copytree(published.root, tmp_path / "copy", symlinks=True))
    config = root / published.config.name
    return trainkit.Project(root, config, Catalog.open(root / "work"), published.dataset_hash)


def manifest_of(project) -> dict:
    return json.loads((project.version_path / "manifest.json").read_text())


def write_manifest(project, manifest: dict) -> None:
    (project.version_path / "manifest.json").write_text(json.dumps(manifest, indent=2))


def poison_train_shard(project) -> dict:
    """One text changed and one row added in the train shard; the shard's sha256, rows and
    bytes and the split counts updated to match. Returns the edited manifest."""
    manifest = manifest_of(project)
    shard = next(s for s in manifest["shards"] if s["split"] == "train")
    path = project.version_path / shard["path"]
    rows = pq.read_table(path).to_pylist()
    rows[0]["text"] = "click http://evil.example to win"
    rows.append({**rows[1], "record_id": "f" * 32, "text": "a planted record"})
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(path)), path)
    shard |= {"sha256": file_sha256(path), "rows": len(rows), "bytes": path.stat().st_size}
    manifest["split_counts"]["train"] = len(rows)
    write_manifest(project, manifest)
    return manifest


def refused_everywhere(project, capsys) -> None:
    """Every reader refuses the version, naming the hash asked for and the one it gives."""
    asked = project.dataset_hash
    named = rf"version {asked[:16]}: its content hashes to [0-9a-f]{{16}}"
    with pytest.raises(DataError, match=named):
        open_version(project.workdir, "sms", asked)
    with pytest.raises(DataError, match=named):
        open_version(project.workdir, "sms", "latest", verify=False)
    with pytest.raises(DataError, match=named):
        read_version(project.version_path, expected_hash=asked)
    for fmt in ("tokens", "hf", "parquet"):
        out = project.root / "exports" / fmt
        with pytest.raises(DataError, match=named):
            exporting.export_version(project.workdir, asked, fmt, out=out)
        assert not out.exists()
    with pytest.raises(DataError, match=named):
        train(project.config, dataset=asked[:12])
    assert not (project.workdir / "training").exists()
    with pytest.raises(DataError, match=named):
        VerifiedParquetDataset(project.version_path, "train", dataset_hash=asked)
    result = CliRunner().invoke(app, ["catalog", "verify", asked[:12], "--workdir", str(project.workdir)])  # fmt: skip
    assert result.exit_code == 1
    assert f"the catalog's dataset hash is {asked[:16]}" in result.stderr.replace("\n", "")


def test_a_consistent_shard_edit_is_refused_by_every_reader(project, capsys):
    poison_train_shard(project)
    with pytest.raises(DataError, match=f"it states {project.dataset_hash[:16]}"):
        read_version(project.version_path)  # no hash asked: the one it states must hold
    refused_everywhere(project, capsys)


def test_a_consistent_edit_that_also_restates_the_hash_is_refused(project, capsys):
    """The manifest made wholly self-consistent (its dataset_hash recomputed): alone it
    verifies, but it is not the version the catalog and the user name."""
    manifest = poison_train_shard(project)
    manifest["dataset_hash"] = recomputed_hash(manifest)
    write_manifest(project, manifest)
    assert read_version(project.version_path).dataset_hash == manifest["dataset_hash"]
    refused_everywhere(project, capsys)


@pytest.mark.parametrize("edit", ["config_hash", "split_membership"])
def test_an_edit_of_the_manifest_alone_is_refused(project, capsys, edit):
    manifest = manifest_of(project)
    if edit == "config_hash":
        manifest["config_hash"] = "0" * 64
    else:
        manifest["split_membership"]["train"] = "0" * 64
    write_manifest(project, manifest)
    with pytest.raises(DataError, match="it states"):
        read_version(project.version_path, verify=False)  # no hash asked: its own must hold
    refused_everywhere(project, capsys)


def test_row_counts_the_hash_does_not_cover_must_match_the_shards(project):
    """`rows` and `split_counts` are outside the hash but readers use them: both are checked."""
    manifest = manifest_of(project)
    shard = next(s for s in manifest["shards"] if s["split"] == "train")
    shard["rows"] -= 10
    write_manifest(project, manifest)
    with pytest.raises(DataError, match="split_counts .* do not add up"):
        open_version(project.workdir, "sms", project.dataset_hash, verify=False)
    manifest["split_counts"]["train"] -= 10
    write_manifest(project, manifest)
    with pytest.raises(DataError, match=f"{shard['path']}: row count mismatch"):
        open_version(project.workdir, "sms", project.dataset_hash)
    with pytest.raises(DataError, match=f"rows where the manifest says {shard['rows']}"):
        exporting.export_version(project.workdir, project.dataset_hash, "parquet")


def test_an_untouched_version_passes_every_reader(project):
    version = open_version(project.workdir, "sms", project.dataset_hash[:10])
    assert version.dataset_hash == project.dataset_hash == recomputed_hash(version.manifest)
    result = CliRunner().invoke(app, ["catalog", "verify", project.dataset_hash[:12], "--workdir", str(project.workdir)])  # fmt: skip
    # (it then writes the missing report, which this hand-staged version cannot have)
    assert f"version {project.dataset_hash[:16]}: 2 shard(s), all match" in result.stderr
    assert len(list(VerifiedParquetDataset(project.version_path, "test", ["record_id"], dataset_hash=project.dataset_hash))) == version.manifest["split_counts"]["test"]  # fmt: skip


def rewrite_with_its_manifest(export: Path, relative: str) -> None:
    """Change one exported file and bring its line of export_manifest.json up to date."""
    file = export / relative
    data = bytearray(file.read_bytes())
    data[-1] ^= 0xFF
    file.write_bytes(bytes(data))
    manifest = json.loads((export / EXPORT_MANIFEST).read_text())
    entry = next(e for e in manifest["files"] if e["path"] == relative)
    entry |= {"sha256": file_sha256(file), "bytes": file.stat().st_size}
    (export / EXPORT_MANIFEST).write_text(json.dumps(manifest, indent=2))


def test_an_export_rewritten_with_its_own_manifest_is_refused(project):
    tokens = exporting.export_version(project.workdir, project.dataset_hash, "tokens", splits=["train"])  # fmt: skip
    hf = exporting.export_version(project.workdir, project.dataset_hash, "hf", splits=["train"])
    assert tokens.digest == hashlib.sha256((tokens.out / EXPORT_MANIFEST).read_bytes()).hexdigest()
    good = TokenShards(tokens.out, workdir=project.workdir).tokens("train")
    assert len(good) == TokenShards(tokens.out, export_digest=tokens.digest).tokens("train").size
    with pytest.raises(DataError, match="cannot vouch for itself"):
        TokenShards(tokens.out).tokens("train")
    rewrite_with_its_manifest(tokens.out, "tokens/train/part-00000.bin")
    with pytest.raises(DataError, match="never recorded an export whose manifest hashes to"):
        TokenShards(tokens.out, workdir=project.workdir).tokens("train")
    with pytest.raises(DataError, match=f"not {tokens.digest[:16]} as expected"):
        TokenShards(tokens.out, export_digest=tokens.digest).tokens("train")
    arrow = next(p for p in (hf.out / "train").glob("*.arrow")).relative_to(hf.out).as_posix()
    rewrite_with_its_manifest(hf.out, arrow)
    with pytest.raises(DataError, match="never recorded an export"):
        load_hf_export(hf.out, workdir=project.workdir)
    with pytest.raises(DataError, match="as expected"):
        load_hf_export(hf.out, export_digest=hf.digest)


def test_an_export_of_a_withdrawn_version_is_refused_through_the_catalog(project):
    tokens = exporting.export_version(project.workdir, project.dataset_hash, "tokens", splits=["test"])  # fmt: skip
    project.catalog.withdraw(project.dataset_hash, "a deletion request")
    with pytest.raises(DataError, match=r"withdrawn \(a deletion request\)"):
        TokenShards(tokens.out, workdir=project.workdir).tokens("test")


def test_catalog_verify_names_a_shard_the_manifest_and_catalog_disagree_on(project):
    manifest = manifest_of(project)
    shard = manifest["shards"][0]
    shard["sha256"] = "0" * 64
    write_manifest(project, manifest)
    result = CliRunner().invoke(app, ["catalog", "verify", project.dataset_hash[:12], "--workdir", str(project.workdir)])  # fmt: skip
    assert result.exit_code == 1
    assert f"{shard['path']}: manifest and catalog disagree" in result.stderr.replace("\n", "")


def test_a_changed_shard_byte_is_refused_by_default_and_by_a_run_reading_its_parent(project):
    """Readers verify shards unless told not to, and a run re-hashes its parent's shards."""
    from flows.run_plan import plan_run
    from pipeline.config import load_run_config

    shard = manifest_of(project)["shards"][0]["path"]
    data = bytearray((project.version_path / shard).read_bytes())
    data[100] ^= 0xFF
    (project.version_path / shard).write_bytes(bytes(data))
    with pytest.raises(DataError, match=f"{shard}: sha256 mismatch"):
        open_version(project.workdir, "sms", project.dataset_hash)
    with pytest.raises(DataError, match=f"{shard}: sha256 mismatch"):
        plan_run(load_run_config(project.config), project.catalog)


def test_the_dataset_hash_covers_every_part_it_names(project):
    manifest = manifest_of(project)
    original = recomputed_hash(manifest)
    assert original == project.dataset_hash
    for path, value in [(("shards", 0, "sha256"), "0" * 64), (("shards", 0, "path"), "data/x.parquet"), (("config_hash",), "0" * 64), (("split_membership", "test"), "0" * 64), (("schema", 0, "name"), "renamed")]:  # fmt: skip
        changed = json.loads(json.dumps(manifest))
        holder = changed
        for key in path[:-1]:
            holder = holder[key]
        holder[path[-1]] = value
        assert recomputed_hash(changed) != original, path
