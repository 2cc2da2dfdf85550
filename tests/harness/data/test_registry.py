"""The versioned dataset registry and the ``harness datasets`` commands."""

import json

import pytest
from datasets import load_dataset
from typer.testing import CliRunner

from harness.cli import app
from harness.data.registry import (
    DatasetRegistry,
    DatasetRegistryError,
    VersionExistsError,
    bump,
    resolve,
    split_ref,
)

runner = CliRunner()


def test_semver_helpers():
    assert split_ref("upheld@1.2.3") == ("upheld", "1.2.3")
    assert split_ref("upheld") == ("upheld", None) and split_ref("upheld@latest") == ("upheld", None)
    assert split_ref("upheld@v2.0.0") == ("upheld", "2.0.0")
    assert (
        bump("1.2.3", "patch") == "1.2.4"
        and bump("1.2.3", "minor") == "1.3.0"
        and bump("1.2.3", "major") == "2.0.0"
    )
    for bad in ("upheld@1.2", "upheld@x", "@1.0.0", "a b@1.0.0"):
        with pytest.raises(DatasetRegistryError):
            split_ref(bad)


def _write_demo(staging, release):
    from harness.data.builders import build_dataset

    build_dataset("demo", None, staging, show_progress=False, release=release)


def test_register_is_immutable_and_atomic(tmp_path):
    reg = DatasetRegistry(tmp_path / "reg")
    v1 = reg.register("demo", "1.0.0", _write_demo)
    assert v1.path == tmp_path / "reg" / "demo" / "1.0.0" and v1.manifest["release"]["version"] == "1.0.0"
    assert "**Version 1.0.0**" in (v1.path / "README.md").read_text()
    before = sorted(p.name for p in v1.path.rglob("*"))
    mtime = (v1.path / "build_manifest.json").stat().st_mtime_ns
    with pytest.raises(VersionExistsError, match=r"demo@1.0.0 is already registered.*immutable"):
        reg.register("demo", "1.0.0", _write_demo)

    def failing(staging, release):
        _write_demo(staging, release)
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        reg.register("demo", "1.1.0", failing)
    assert reg.versions("demo") == ["1.0.0"]  # nothing half-written, the old version untouched
    assert sorted(p.name for p in v1.path.rglob("*")) == before
    assert (v1.path / "build_manifest.json").stat().st_mtime_ns == mtime
    assert not [p for p in (tmp_path / "reg" / "demo").iterdir() if p.name.startswith(".")]

    reg.register("demo", reg.next_version("demo", "minor"), _write_demo)
    reg.register("demo", "1.0.10", _write_demo)
    assert reg.versions("demo") == ["1.0.0", "1.0.10", "1.1.0"] and reg.latest("demo") == "1.1.0"
    assert resolve("demo@1.0.10", tmp_path / "reg") == tmp_path / "reg" / "demo" / "1.0.10"
    assert reg.resolve("demo").version == "1.1.0"
    with pytest.raises(DatasetRegistryError, match="not registered.*versions: 1.0.0, 1.0.10, 1.1.0"):
        reg.resolve("demo@9.9.9")
    with pytest.raises(DatasetRegistryError, match="no dataset 'nope'"):
        reg.resolve("nope")
    ds = load_dataset(
        str(resolve("demo@1.0.0", tmp_path / "reg")),
        "demo-turn",
        split="test",
        cache_dir=str(tmp_path / "hf"),
    )
    assert ds.num_rows == 160


def test_cli_build_ls_show_diff(tmp_path, monkeypatch):
    monkeypatch.setenv("DIALEVAL_REGISTRY", str(tmp_path / "reg"))
    r = runner.invoke(app, ["datasets", "build", "demo"])
    assert r.exit_code == 0, r.output
    assert "demo@1.0.0" in r.output and "demo-turn" in r.output
    r = runner.invoke(app, ["datasets", "build", "demo"])
    assert r.exit_code == 2 and "already registered" in r.output
    r = runner.invoke(app, ["datasets", "build", "demo", "--bump", "patch", "--language", "en"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "reg" / "demo" / "1.0.1" / "README.md").is_file()
    r = runner.invoke(app, ["datasets", "ls"])
    assert r.exit_code == 0 and "1.0.0 1.0.1" in r.output
    r = runner.invoke(app, ["datasets", "show", "demo@1.0.1"])
    assert r.exit_code == 0, r.output
    assert "demo-turn" in r.output and "relevance" in r.output and "skipped source rows: 0" in r.output
    r = runner.invoke(app, ["datasets", "diff", "demo@1.0.0", "demo@1.0.1"])
    assert r.exit_code == 0, r.output
    assert "options" in r.output and "removed" in r.output
    diff_line = next(line for line in r.output.splitlines() if "demo-turn" in line)
    assert "160" in diff_line and "16" in diff_line and "144" in diff_line  # 10 languages -> en only
    r = runner.invoke(app, ["datasets", "diff", "demo@1.0.0", "demo@1.0.0"])
    assert "identical data" in r.output
    r = runner.invoke(app, ["datasets", "show", "demo@3.0.0"])
    assert r.exit_code == 2 and "not registered" in r.output
    r = runner.invoke(
        app, ["datasets", "build", "demo", "--output", str(tmp_path / "o"), "--version", "2.0.0"]
    )
    assert r.exit_code == 2 and "cannot be combined" in r.output


def test_cli_build_output_directory_and_skip_invalid(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    good = {"item": "t1", "language": "en", "context": ["hi"], "response": "hello", "rating": 3}
    lines = [json.dumps(good), json.dumps({**good, "item": "t2", "response": "  "})]
    (bad / "turn.jsonl").write_text("\n".join(lines) + "\n")
    (bad / "dial.jsonl").write_text(
        json.dumps({"item": "d1", "language": "en", "turns": ["a", "b"], "rating": 2}) + "\n"
    )
    r = runner.invoke(
        app, ["datasets", "build", "demo", "--source", str(bad), "--output", str(tmp_path / "d")]
    )
    assert r.exit_code == 2 and "turn.jsonl" in r.output and "line 2" in r.output

    from tests.dataset_builders.upheld.test_upheld import row, write_set

    src = write_set(
        tmp_path / "up", {1: [row("t-1", 5, 5, 5), row("t-1", 3, 5, 5)], 2: [row("t-1", 4, 5, 5)]}
    )
    r = runner.invoke(
        app, ["datasets", "build", "upheld", "--source", str(src), "--output", str(tmp_path / "u")]
    )
    assert r.exit_code == 2 and "annotator_1.csv, row 2" in r.output and "duplicate item" in r.output
    r = runner.invoke(
        app,
        [
            "datasets",
            "build",
            "upheld",
            "--source",
            str(src),
            "--output",
            str(tmp_path / "u"),
            "--skip-invalid",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "skipped source rows: 1" in r.output
    manifest = json.loads((tmp_path / "u" / "build_manifest.json").read_text())
    assert manifest["skipped"]["count"] == 1 and manifest["options"]["skip_invalid"] is True


@pytest.mark.shared_data
def test_cli_builds_real_upheld_and_xdial_versions(tmp_path, monkeypatch, shared_data):
    if not (shared_data / "upheld").is_dir():
        pytest.skip("../shared/data/upheld not found")
    monkeypatch.setenv("DIALEVAL_REGISTRY", str(tmp_path / "reg"))
    r = runner.invoke(app, ["datasets", "build", "upheld", "--source", str(shared_data / "upheld")])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["datasets", "build", "xdial-eval", "--source", str(shared_data / "xdial-eval")])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["datasets", "build", "upheld", "--source", str(shared_data / "upheld")])
    assert r.exit_code == 2 and "upheld@1.0.0 is already registered" in r.output
    for ref in ("upheld@1.0.0", "xdial-eval@1.0.0"):
        path = resolve(ref)
        for config in json.loads((path / "build_manifest.json").read_text())["configs"]:
            ds = load_dataset(str(path), config, split="test", cache_dir=str(tmp_path / "hf"))
            assert ds.num_rows > 0
    r = runner.invoke(app, ["datasets", "show", "upheld@1.0.0", "--by", "system"])
    assert r.exit_code == 0, r.output
    assert "Table 3a" in r.output and "content_percent" in r.output and "36873" in r.output


def test_run_on_a_registered_version(tmp_path, monkeypatch):
    monkeypatch.setenv("DIALEVAL_REGISTRY", str(tmp_path / "reg"))
    assert runner.invoke(app, ["datasets", "build", "demo"]).exit_code == 0
    judge = tmp_path / "j.jsonl"
    judge.write_text(json.dumps({"default": {"hashed_p_yes": True}}) + "\n")
    r = runner.invoke(
        app,
        [
            "run",
            "--judge",
            f"replay:{judge}",
            "--task",
            "demo-turn",
            "--dataset",
            "demo@1.0.0",
            "--language",
            "en",
            "--quiet",
            "--output",
            str(tmp_path / "out"),
            "--bootstrap",
            "0",
        ],
    )
    assert r.exit_code == 0, r.output
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert "demo@1.0.0" in json.dumps(results) and str(tmp_path / "reg" / "demo" / "1.0.0") in json.dumps(
        results
    )


def test_cli_publish_against_the_stand_in_hub(tmp_path, monkeypatch):
    import huggingface_hub

    from tests.fixtures.servers.hub import HubStandIn

    monkeypatch.setenv("DIALEVAL_REGISTRY", str(tmp_path / "reg"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_TELEMETRY", True)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert runner.invoke(app, ["datasets", "build", "demo", "--language", "en"]).exit_code == 0
    with HubStandIn(token="hf_cli_secret_token_123") as hub:
        args = ["datasets", "publish", "demo@1.0.0", "--repo", "org/demo", "--endpoint", hub.endpoint]
        monkeypatch.delenv("HF_TOKEN", raising=False)
        monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
        r = runner.invoke(app, args)
        assert r.exit_code == 2 and "HF_TOKEN" in r.output
        monkeypatch.setenv("HF_TOKEN", "hf_cli_secret_token_123")
        r = runner.invoke(app, args)
        assert r.exit_code == 0, r.output
        assert "published demo@1.0.0 to org/demo at v1.0.0" in r.output and "hf_cli_secret" not in r.output
        files = hub.files_at("org/demo", "v1.0.0")
        assert {"README.md", "build_manifest.json", "demo-turn/test-00000-of-00001.parquet"} <= set(files)
        r = runner.invoke(app, args)
        assert r.exit_code == 2 and "v1.0.0" in r.output


def test_cli_imports_with_a_mapping_into_the_registry(tmp_path, monkeypatch):
    from tests.dataset_builders.importer.test_importer import DS_TURN, DS_TURN_HEADER, WIDE_MAPPING, write_csv

    monkeypatch.setenv("DIALEVAL_REGISTRY", str(tmp_path / "reg"))
    write_csv(tmp_path / "src" / "eval_turn.csv", DS_TURN_HEADER, [list(r) for r in DS_TURN])
    r = runner.invoke(
        app,
        ["datasets", "build", "import", "--mapping", str(WIDE_MAPPING), "--source", str(tmp_path / "src")],
    )
    assert r.exit_code == 0, r.output
    assert "wide-turn-dial@1.0.0" in r.output
    path = resolve("wide-turn-dial@1.0.0")
    assert load_dataset(
        str(path), "dstc11-turn", split="test", cache_dir=str(tmp_path / "hf")
    ).num_rows == len(DS_TURN)
    r = runner.invoke(app, ["datasets", "build", "import", "--source", str(tmp_path / "src")])
    assert r.exit_code == 2 and "mapping" in r.output
